//! The `--credentials-dir` credential source: TLS credentials laid out as
//! Kubernetes mounts `kubernetes.io/tls` Secrets, one directory per
//! Secret under its namespace's:
//!
//! ```text
//! DIR/<namespace>/<name>/tls.crt    the certificate, then its chain (PEM)
//! DIR/<namespace>/<name>/tls.key    its private key (PEM: PKCS#8, PKCS#1 or SEC1)
//! DIR/<namespace>/<name>/ca.crt     optional: CAs that verify peers (MUTUAL)
//! ```
//!
//! The directory is read again every `--credentials-poll-ms`; a change
//! (a file written, a mounted Secret's symlinks swapped, a directory added
//! or removed) reaches the proxies holding the credential. A credential
//! that does not load (a missing file, PEM that holds no certificate or
//! key, a key that is not the certificate's) is logged with its path and
//! why, and left out; one that loaded before keeps its last version (a
//! rotation caught halfway, a new key beside the old certificate, changes
//! nothing) until it loads again or its directory goes. Names that no
//! Secret could have are skipped.
//!
//! `--ca-bundles-dir` holds certificate authority bundles as Kubernetes
//! mounts ConfigMaps (a BackendTLSPolicy's `caCertificateRefs`), read
//! with the same rules but one: a bundle that no longer loads is gone at
//! once (one file: no rotation is caught halfway, and an emptied
//! `ca.crt` must fail the connections that trust it):
//!
//! ```text
//! DIR/<namespace>/<name>/ca.crt     PEM certificates (at least one)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::stream::BoxStream;
use pilot_model::{CredentialSource, TlsCredential};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// What a tree holds by namespace and name.
type Held<T> = BTreeMap<(String, String), Arc<T>>;

/// One tree (`DIR/<namespace>/<name>/`) of things of one kind, as last
/// read.
struct Tree<T> {
    path: PathBuf,
    what: &'static str,
    load: fn(&Path) -> Result<T, String>,
    /// Whether what no longer loads keeps its last version (a Secret's
    /// two files caught halfway through a rotation) rather than going.
    keep_last: bool,
    held: RwLock<Held<T>>,
}

impl<T: PartialEq> Tree<T> {
    fn open(
        flag: &str,
        path: &Path,
        what: &'static str,
        load: fn(&Path) -> Result<T, String>,
        keep_last: bool,
    ) -> std::io::Result<Self> {
        if !path.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{flag} {}: not a directory", path.display()),
            ));
        }
        let (held, _) = read(path, what, load);
        tracing::info!(path = %path.display(), loaded = held.len(), what, "loaded");
        Ok(Tree {
            path: path.to_path_buf(),
            what,
            load,
            keep_last,
            held: RwLock::new(held),
        })
    }

    /// Reads the tree again; true when something changed. With
    /// `keep_last`, what no longer loads keeps its last version until it
    /// loads again or its directory goes.
    fn reload(&self) -> bool {
        let (mut now, failed) = read(&self.path, self.what, self.load);
        let mut held = self.held.write().unwrap_or_else(|p| p.into_inner());
        for key in failed.into_iter().filter(|_| self.keep_last) {
            if let Some(kept) = held.get(&key) {
                now.insert(key, Arc::clone(kept));
            }
        }
        if *held == now {
            return false;
        }
        let (before, after) = (held.len(), now.len());
        *held = now;
        drop(held);
        tracing::info!(path = %self.path.display(), before, after, what = self.what, "changed");
        true
    }

    fn get(&self, namespace: &str, name: &str) -> Option<Arc<T>> {
        let held = self.held.read().unwrap_or_else(|p| p.into_inner());
        held.get(&(namespace.to_string(), name.to_string())).cloned()
    }
}

/// The credentials of `--credentials-dir` and the bundles of
/// `--ca-bundles-dir`, as last read ([`follow`] keeps them current).
pub(crate) struct CredentialsDir {
    credentials: Option<Tree<TlsCredential>>,
    bundles: Option<Tree<Vec<u8>>>,
    changes: pilot_store::ChangeTicks,
}

impl CredentialsDir {
    /// The credentials of `credentials` and the bundles of `bundles` as
    /// they are now.
    pub(crate) fn open(credentials: Option<&Path>, bundles: Option<&Path>) -> std::io::Result<Arc<Self>> {
        Ok(Arc::new(CredentialsDir {
            credentials: credentials
                .map(|path| Tree::open("--credentials-dir", path, "credentials", load, true))
                .transpose()?,
            bundles: bundles
                .map(|path| Tree::open("--ca-bundles-dir", path, "CA bundles", load_bundle, false))
                .transpose()?,
            changes: Default::default(),
        }))
    }

    /// Reads the directories again; true when something changed. A
    /// credential there that no longer loads (caught halfway through a
    /// rotation, or broken) keeps its last version until it loads again
    /// or its directory goes; a bundle that no longer loads is gone.
    pub(crate) fn reload(&self) -> bool {
        let credentials = self.credentials.as_ref().is_some_and(Tree::reload);
        let bundles = self.bundles.as_ref().is_some_and(Tree::reload);
        let changed = credentials || bundles;
        if changed {
            self.changes.announce();
        }
        changed
    }
}

impl CredentialSource for CredentialsDir {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<TlsCredential>> {
        self.credentials.as_ref()?.get(namespace, name)
    }

    fn ca_bundle(&self, namespace: &str, name: &str) -> Option<Arc<Vec<u8>>> {
        self.bundles.as_ref()?.get(namespace, name)
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        self.changes.stream()
    }
}

/// Reads `source` again every `every` until `shutdown`.
pub(crate) async fn follow(
    source: Arc<CredentialsDir>,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = crate::shutdown::closed(&mut shutdown) => return,
        }
        let source = Arc::clone(&source);
        // File reads off the runtime's workers.
        if tokio::task::spawn_blocking(move || source.reload())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Everything of `root` that loads, and the keys of what there does not.
fn read<T>(
    root: &Path,
    what: &str,
    load: fn(&Path) -> Result<T, String>,
) -> (Held<T>, Vec<(String, String)>) {
    let mut out = Held::new();
    let mut failed = Vec::new();
    for (namespace, namespace_dir) in subdirectories(root) {
        for (name, dir) in subdirectories(&namespace_dir) {
            match load(&dir) {
                Ok(loaded) => {
                    out.insert((namespace.clone(), name), Arc::new(loaded));
                }
                Err(reason) => {
                    tracing::warn!(path = %dir.display(), reason, what, "not loaded");
                    failed.push((namespace.clone(), name));
                }
            }
        }
    }
    (out, failed)
}

/// The directories in `dir` whose names a namespace or Secret could have
/// (the `..data` and timestamped directories of a mounted Secret are not).
fn subdirectories(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let path = entry.path();
            (path.is_dir() && pilot_model::dns1123_subdomain(&name).is_ok()).then_some((name, path))
        })
        .collect();
    out.sort();
    out
}

/// The credential of one Secret's directory, checked: a certificate chain,
/// its private key (which must be the first certificate's), and the CA
/// bundle when there is one.
fn load(dir: &Path) -> Result<TlsCredential, String> {
    let file = |name: &str| std::fs::read(dir.join(name)).map_err(|e| format!("{name}: {e}"));
    let credential = TlsCredential {
        certificate_chain: file("tls.crt")?,
        private_key: file("tls.key")?,
        ca_certificates: match std::fs::read(dir.join("ca.crt")) {
            Ok(ca) => Some(ca),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("ca.crt: {e}")),
        },
    };
    check(&credential)?;
    Ok(credential)
}

/// The bundle of one ConfigMap's directory: `ca.crt`, holding at least
/// one PEM certificate and nothing that fails to parse as one.
fn load_bundle(dir: &Path) -> Result<Vec<u8>, String> {
    let pem = std::fs::read(dir.join("ca.crt")).map_err(|e| format!("ca.crt: {e}"))?;
    certificates(&pem, "ca.crt")?;
    Ok(pem)
}

/// The PEM certificates of the file `file` (`pem`): at least one, and
/// nothing that fails to parse as one.
fn certificates(pem: &[u8], file: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{file}: {e}"))?;
    if chain.is_empty() {
        return Err(format!("{file}: no PEM certificate"));
    }
    Ok(chain)
}

/// Whether `credential` is one Envoy can terminate TLS with: `tls.crt`
/// holds certificates, `tls.key` a private key of a type it signs with,
/// matching the first certificate; `ca.crt`, when there, certificates.
pub(crate) fn check(credential: &TlsCredential) -> Result<(), String> {
    let chain = certificates(&credential.certificate_chain, "tls.crt")?;
    let key = PrivateKeyDer::from_pem_slice(&credential.private_key).map_err(|e| format!("tls.key: {e}"))?;
    rustls::sign::CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
        .map_err(|e| format!("tls.key and tls.crt: {e}"))?;
    if let Some(ca) = &credential.ca_certificates {
        certificates(ca, "ca.crt")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// A self-signed certificate for `host` and its key, PEM.
    fn issued(host: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = rcgen::CertificateParams::new(vec![host.to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (certificate.pem(), key.serialize_pem())
    }

    /// Waits for the next change `changes` announces.
    async fn announced(changes: &mut BoxStream<'static, ()>) {
        tokio::time::timeout(Duration::from_secs(60), changes.next())
            .await
            .expect("no change announced")
            .unwrap();
    }

    fn write(root: &Path, namespace: &str, name: &str, files: &[(&str, &str)]) {
        let dir = root.join(namespace).join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
    }

    #[tokio::test]
    async fn credentials_load_change_and_what_does_not_load_is_left_out() {
        let root = tempfile::tempdir().unwrap();
        let (cert, key) = issued("shop.example.com");
        let (other_cert, other_key) = issued("other.example.com");
        write(
            root.path(),
            "web",
            "shop",
            &[("tls.crt", &cert), ("tls.key", &key), ("ca.crt", &cert)],
        );
        // The key of another certificate.
        write(
            root.path(),
            "web",
            "mismatched",
            &[("tls.crt", &cert), ("tls.key", &other_key)],
        );
        write(root.path(), "web", "keyless", &[("tls.crt", &cert)]);
        write(
            root.path(),
            "web",
            "garbage",
            &[("tls.crt", "not pem"), ("tls.key", &key)],
        );
        write(
            root.path(),
            "web",
            "..data",
            &[("tls.crt", &cert), ("tls.key", &key)],
        );

        let source = CredentialsDir::open(Some(root.path()), None).unwrap();
        let shop = source.get("web", "shop").expect("a whole credential loads");
        assert_eq!(shop.certificate_chain, cert.as_bytes());
        assert_eq!(shop.ca_certificates.as_deref(), Some(cert.as_bytes()));
        for left_out in ["mismatched", "keyless", "garbage", "..data"] {
            assert!(source.get("web", left_out).is_none(), "{left_out} loaded");
        }
        assert!(!source.reload(), "nothing changed");

        let mut changes = source.changes();
        write(
            root.path(),
            "web",
            "shop",
            &[("tls.crt", &other_cert), ("tls.key", &other_key)],
        );
        assert!(source.reload());
        announced(&mut changes).await;
        assert_eq!(
            source.get("web", "shop").unwrap().certificate_chain,
            other_cert.as_bytes()
        );

        // Halfway through a rotation (a new key, the old certificate):
        // the last version is kept.
        write(root.path(), "web", "shop", &[("tls.key", &key)]);
        assert!(!source.reload());
        assert_eq!(
            source.get("web", "shop").unwrap().certificate_chain,
            other_cert.as_bytes()
        );

        std::fs::remove_dir_all(root.path().join("web/shop")).unwrap();
        assert!(source.reload());
        assert!(source.get("web", "shop").is_none(), "a removed Secret is gone");
        assert!(CredentialsDir::open(Some(&root.path().join("missing")), None).is_err());
    }

    #[tokio::test]
    async fn ca_bundles_load_change_and_an_empty_one_is_left_out() {
        let root = tempfile::tempdir().unwrap();
        let (cert, _) = issued("ca.example.com");
        let (other, _) = issued("other-ca.example.com");
        write(root.path(), "web", "ca", &[("ca.crt", &cert)]);
        write(root.path(), "web", "empty", &[("ca.crt", "")]);
        write(root.path(), "web", "garbage", &[("ca.crt", "not pem")]);
        let source = CredentialsDir::open(None, Some(root.path())).unwrap();
        assert_eq!(source.ca_bundle("web", "ca").unwrap().as_slice(), cert.as_bytes());
        assert!(source.get("web", "ca").is_none(), "a bundle is no Secret");
        for left_out in ["empty", "garbage"] {
            assert!(source.ca_bundle("web", left_out).is_none(), "{left_out} loaded");
        }
        let mut changes = source.changes();
        write(root.path(), "web", "ca", &[("ca.crt", &format!("{cert}{other}"))]);
        assert!(source.reload());
        announced(&mut changes).await;
        assert_eq!(
            source.ca_bundle("web", "ca").unwrap().as_slice(),
            format!("{cert}{other}").as_bytes()
        );
        // Emptied (one file, no rotation to be caught halfway): gone, as
        // the Gateway API asks of a ConfigMap whose ca.crt is emptied;
        // written again, back.
        write(root.path(), "web", "ca", &[("ca.crt", "")]);
        assert!(source.reload());
        assert!(source.ca_bundle("web", "ca").is_none());
        write(root.path(), "web", "ca", &[("ca.crt", &cert)]);
        assert!(source.reload());
        assert!(source.ca_bundle("web", "ca").is_some());
    }
}
