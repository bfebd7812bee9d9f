//! The CA's files in `--ca-dir`, Istio's `cacerts` layout: `ca-cert.pem`,
//! `ca-key.pem`, and optionally `cert-chain.pem` and `root-cert.pem`.
//!
//! A self-signed root is created only if absent: the new files are written
//! in a private temporary directory and hard-linked into place, the key
//! first. A link that finds the key already there lost the race to
//! another replica (or an earlier start), which then reads the winner's
//! files; a reader that finds the key without the certificate waits for
//! the winner to link it.
//!
//! A renewed root (only for the store's directory, `--data-dir`; pilot
//! never rewrites an operator's `--ca-dir`) replaces the files under the
//! lock file `.renew.lock`, made with `O_EXCL`, and only if `ca-cert.pem`
//! is still the one the renewal started from; each file is renamed into
//! place, and a reader that catches the files half replaced reads again.

use std::path::Path;
use std::time::{Duration, Instant};

use pilot_ca::CaMaterial;

const CERT: &str = "ca-cert.pem";
const KEY: &str = "ca-key.pem";
const CHAIN: &str = "cert-chain.pem";
const ROOT: &str = "root-cert.pem";

/// How long a replica waits for another one's half-linked root.
const WAIT_FOR_WINNER: Duration = Duration::from_secs(10);

/// The CA in `dir`, or a new self-signed root for `trust_domain` kept
/// there if `dir` has none.
pub(super) fn load_or_create(
    dir: &Path,
    trust_domain: &str,
    root_ttl: Duration,
) -> Result<CaMaterial, String> {
    if !dir.join(KEY).exists() {
        match create(dir, trust_domain, root_ttl)? {
            Some(material) => {
                tracing::info!(dir = %dir.display(), "made a self-signed CA root and kept it");
                return Ok(material);
            }
            None => {
                tracing::info!(dir = %dir.display(), "another replica made the CA root first; reading it")
            }
        }
    }
    let deadline = Instant::now() + WAIT_FOR_WINNER;
    while !dir.join(CERT).exists() {
        if Instant::now() > deadline {
            return Err(format!(
                "{} has {KEY} but no {CERT}: give both (an operator's CA) or neither (a self-signed root is made)",
                dir.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    load(dir)
}

/// The lock file of a renewal.
const LOCK: &str = ".renew.lock";
/// A lock file older than this was left by a renewal that died.
const STALE_LOCK: Duration = Duration::from_secs(60);

/// Reads the files of `dir`, again (a few times) while they do not fit
/// together, as while a renewal renames them into place.
fn load(dir: &Path) -> Result<CaMaterial, String> {
    let mut attempt = 0;
    loop {
        match load_once(dir) {
            Ok(material) => return Ok(material),
            Err(e) if attempt >= 3 => return Err(e),
            Err(_) => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The files of `dir`, and its signing certificate (the version a
/// renewal compares).
pub(super) fn load_versioned(dir: &Path) -> Result<(CaMaterial, String), String> {
    let material = load(dir)?;
    let cert = material.cert_pem.clone();
    Ok((material, cert))
}

/// Replaces the files of `dir` with `files` if its signing certificate is
/// still `expected`; `false` when it changed or another renewal holds the
/// lock.
pub(super) fn replace(
    dir: &Path,
    expected: &str,
    files: &std::collections::BTreeMap<String, String>,
) -> Result<bool, String> {
    let failed = |what: &str, e: std::io::Error| format!("{what} in {}: {e}", dir.display());
    let lock = dir.join(LOCK);
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&lock) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let stale = std::fs::metadata(&lock)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|at| at.elapsed().ok())
                .is_some_and(|age| age > STALE_LOCK);
            if stale {
                tracing::warn!(lock = %lock.display(), "removing a CA renewal lock left by a renewal that died");
                let _ = std::fs::remove_file(&lock);
            }
            return Ok(false);
        }
        Err(e) => return Err(failed(&format!("cannot make {LOCK}"), e)),
    }
    let result = (|| {
        if load_once(dir)?.cert_pem != expected {
            return Ok(false);
        }
        let staging = tempfile::Builder::new()
            .prefix(".ca-renew-")
            .tempdir_in(dir)
            .map_err(|e| failed("cannot make a temporary directory", e))?;
        for (name, text) in files {
            write_private(&staging.path().join(name), text)
                .map_err(|e| failed(&format!("cannot write {name}"), e))?;
        }
        if !files.contains_key(CHAIN) {
            match std::fs::remove_file(dir.join(CHAIN)) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(failed(&format!("cannot remove {CHAIN}"), e)),
            }
        }
        // The certificate last: a reader that sees it sees the rest.
        let mut names: Vec<&String> = files.keys().filter(|name| name.as_str() != CERT).collect();
        names.extend(files.keys().filter(|name| name.as_str() == CERT));
        for name in names {
            std::fs::rename(staging.path().join(name), dir.join(name))
                .map_err(|e| failed(&format!("cannot replace {name}"), e))?;
        }
        Ok(true)
    })();
    let _ = std::fs::remove_file(&lock);
    result
}

/// Reads the files of `dir` once.
fn load_once(dir: &Path) -> Result<CaMaterial, String> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let optional = |name: &str| {
        let path = dir.join(name);
        path.exists().then(|| read(name)).transpose()
    };
    let chain = optional(CHAIN)?;
    let root = optional(ROOT)?;
    CaMaterial::from_pem(&read(CERT)?, &read(KEY)?, chain.as_deref(), root.as_deref())
        .map_err(|e| format!("the CA in {}: {e}", dir.display()))
}

/// Makes a root and links it into `dir`; `None` when another process
/// linked its key first.
fn create(dir: &Path, trust_domain: &str, root_ttl: Duration) -> Result<Option<CaMaterial>, String> {
    let failed = |what: &str, e: std::io::Error| format!("{what} in {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(|e| failed("cannot create the CA directory", e))?;
    let material = pilot_ca::generate_root(trust_domain, root_ttl)
        .map_err(|e| format!("generating the CA root: {e}"))?;
    let staging = tempfile::Builder::new()
        .prefix(".ca-new-")
        .tempdir_in(dir)
        .map_err(|e| failed("cannot make a temporary directory", e))?;
    for (name, text) in [
        (KEY, &material.key_pem),
        (CERT, &material.cert_pem),
        (ROOT, &material.root_pem),
    ] {
        write_private(&staging.path().join(name), text)
            .map_err(|e| failed(&format!("cannot write {name}"), e))?;
    }
    match std::fs::hard_link(staging.path().join(KEY), dir.join(KEY)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
        Err(e) => return Err(failed(&format!("cannot link {KEY}"), e)),
    }
    for name in [CERT, ROOT] {
        std::fs::hard_link(staging.path().join(name), dir.join(name))
            .map_err(|e| failed(&format!("cannot link {name}"), e))?;
    }
    Ok(Some(material))
}

/// Writes `text` to a new file only its owner may read.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);

    #[test]
    fn the_first_start_makes_the_root_and_later_ones_and_racers_read_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cacerts");
        let racers: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || load_or_create(&path, "cluster.local", YEAR).unwrap())
            })
            .collect();
        let roots: Vec<String> = racers.into_iter().map(|r| r.join().unwrap().root_pem).collect();
        assert!(
            roots.iter().all(|root| *root == roots[0]),
            "every racer signs with one root"
        );
        let again = load_or_create(&path, "cluster.local", YEAR).unwrap();
        assert_eq!(again.root_pem, roots[0], "a restart keeps the root");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path.join(KEY)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "the key is private: {mode:o}");
    }

    #[test]
    fn a_key_without_its_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let material = pilot_ca::generate_root("cluster.local", YEAR).unwrap();
        std::fs::write(dir.path().join(KEY), &material.key_pem).unwrap();
        let error = load_or_create(dir.path(), "cluster.local", YEAR).unwrap_err();
        assert!(error.contains("has ca-key.pem but no ca-cert.pem"), "{error}");
    }
}
