//! The workspace's binaries for tests of another package: cargo builds a
//! package's own binaries before its tests (`CARGO_BIN_EXE_<name>`), but
//! not another package's. These are found beside the test executable (in
//! the target directory's profile folder) and built there with cargo, once
//! and under a lock, when missing or older than their sources.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::SystemTime;

/// A binary of the workspace: its package, its name, and the crates whose
/// `src/` it is built from (to tell whether it is older than its sources).
#[derive(Debug, Clone, Copy)]
pub struct Binary {
    /// The package (`cargo build -p`).
    pub package: &'static str,
    /// The binary (`--bin`).
    pub name: &'static str,
    /// The workspace crates (under `crates/`) it is built from.
    pub sources: &'static [&'static str],
}

/// `pilot-discovery`.
pub const PILOT_DISCOVERY: Binary = Binary {
    package: "pilot-server",
    name: "pilot-discovery",
    sources: &[
        "pilot-server",
        "pilot-apiserver",
        "pilot-distribution",
        "pilot-model",
        "pilot-proxy-api",
        "pilot-re2",
        "pilot-api",
        "pilot-routing",
        "pilot-store",
        "pilot-store-memory",
        "pilot-store-etcd",
        "pilot-store-k8s",
        "pilot-xds",
        "pilot-ads",
        "pilot-ca",
        "pilot-inject",
        "pilot-analyze",
    ],
};

/// `pilotctl`.
pub const PILOTCTL: Binary = Binary {
    package: "pilot-cli",
    name: "pilotctl",
    sources: &[
        "pilot-cli",
        "pilot-model",
        "pilot-inject",
        "pilot-analyze",
        "pilot-api",
        "pilot-re2",
        "pilot-routing",
    ],
};

/// `pilot-agent`.
pub const PILOT_AGENT: Binary = Binary {
    package: "pilot-agent",
    name: "pilot-agent",
    sources: &["pilot-agent", "pilot-model"],
};

/// The path of `binary`, built first if needed.
///
/// With `PILOT_TEST_BIN_DIR` set, the binary there (a copy of the binaries
/// taken right after building them, for a target directory other checkouts
/// also build into), as is. Otherwise the one beside the running test
/// executable; if it is missing or older than a file of its crates'
/// `src/` or `Cargo.toml`, `cargo build -p PACKAGE --bin NAME` into the
/// same target directory, once per test process and under a file lock
/// across processes (nextest runs every test in its own process).
pub fn binary(binary: Binary) -> PathBuf {
    if let Some(dir) = std::env::var_os("PILOT_TEST_BIN_DIR") {
        return PathBuf::from(dir).join(binary.name);
    }
    static BUILT: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());
    let profile_dir = profile_dir();
    let path = profile_dir.join(binary.name);
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let crates = crate::workspace().join("crates");
    if built.contains(&binary.name) || !stale(&path, binary, &crates) {
        return path;
    }
    let lock_path = profile_dir.join(format!(".{}.test-build.lock", binary.name));
    let lock = std::fs::File::create(&lock_path).expect("the build lock file");
    lock.lock().expect("the build lock");
    // Another test process may have built it while this one waited.
    if stale(&path, binary, &crates) {
        let target_dir = profile_dir.parent().expect("a target directory");
        let mut command = cargo();
        command
            .args(["build", "-p", binary.package, "--bin", binary.name])
            .arg("--target-dir")
            .arg(target_dir)
            .current_dir(crate::workspace());
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            command.arg("--release");
        }
        let status = command.status().expect("cargo runs");
        assert!(
            status.success(),
            "cargo build -p {} --bin {} failed",
            binary.package,
            binary.name
        );
    }
    let _ = lock.unlock();
    built.push(binary.name);
    path
}

/// `cargo` (the one running the tests, else the one on `PATH`) without the
/// variables cargo sets for a test process (`CARGO_PKG_NAME`,
/// `CARGO_MANIFEST_DIR`, ...). Build scripts track some of them
/// (`cargo:rerun-if-env-changed`: ring's and others'), and cargo compares
/// them with its own environment: a build run with a test's values would
/// rebuild those crates and everything above them, and so would the next
/// build from a shell.
pub fn cargo() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_tests = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_BIN_",
            "CARGO_CRATE_",
            "CARGO_PRIMARY_",
            "CARGO_RUSTC_",
            "CARGO_TARGET_TMPDIR",
            "OUT_DIR",
            "NEXTEST",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix));
        if set_for_tests {
            command.env_remove(name.as_ref());
        }
    }
    command
}

/// The target directory's profile folder (`target/debug`) the running test
/// executable (`target/debug/deps/NAME-HASH`) is in.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let dir = exe.parent().expect("the executable's folder");
    if dir.file_name().is_some_and(|d| d == "deps") {
        dir.parent().expect("the profile folder").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// True if `path` is missing or older than its sources under `crates`.
fn stale(path: &Path, binary: Binary, crates: &Path) -> bool {
    let Some(built) = modified(path) else {
        return true;
    };
    binary.sources.iter().any(|name| {
        let root = crates.join(name);
        modified(&root.join("Cargo.toml")).is_some_and(|m| m > built) || newer_than(&root.join("src"), built)
    })
}

fn newer_than(dir: &Path, time: SystemTime) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            newer_than(&path, time)
        } else {
            modified(&path).is_some_and(|m| m > time)
        }
    })
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_is_stale_when_missing_or_older_than_a_source_file() {
        let dir = tempfile::tempdir().unwrap();
        let crates = dir.path().join("crates");
        let source = crates.join("pilot-model/src/deep/lib.rs");
        std::fs::create_dir_all(source.parent().unwrap()).unwrap();
        let binary = dir.path().join("pilotctl");
        let of = Binary {
            package: "pilot-cli",
            name: "pilotctl",
            sources: &["pilot-cli", "pilot-model"],
        };
        assert!(stale(&binary, of, &crates), "missing");
        let old = SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::write(&source, "").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&source)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::write(&binary, "").unwrap();
        assert!(!stale(&binary, of, &crates), "built after its sources");
        std::fs::write(&source, "changed").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&binary)
            .unwrap()
            .set_modified(old - std::time::Duration::from_secs(60))
            .unwrap();
        assert!(stale(&binary, of, &crates), "a source is newer");
    }

    #[test]
    fn pilot_discovery_is_rebuilt_when_a_crate_it_depends_on_changes() {
        let manifest = std::fs::read_to_string(crate::workspace().join("crates/pilot-server/Cargo.toml"))
            .expect("pilot-server's Cargo.toml");
        let dependencies = manifest
            .split("\n[dependencies]\n")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .expect("a [dependencies] section");
        for line in dependencies.lines() {
            let Some(name) = line
                .split(['.', ' ', '='])
                .next()
                .filter(|n| n.starts_with("pilot-"))
            else {
                continue;
            };
            assert!(
                PILOT_DISCOVERY.sources.contains(&name),
                "pilot-discovery depends on {name}, which PILOT_DISCOVERY.sources leaves out"
            );
        }
    }
}
