//! Other projects' documents pilot is tested against (Istio's samples and
//! validation corpora, the Gateway API's examples): they live beside the
//! checkout at `../shared/corpora/`, never in the repository, which holds
//! only what pilot's authors wrote. `PILOT_CORPORA` names another
//! directory holding the same folders.
//!
//! A missing corpus fails the test under `CI=true` (naming the path looked
//! for); elsewhere the test says loudly on stderr that it skipped, and
//! returns.

use std::path::{Path, PathBuf};

/// The variable naming the corpora's directory instead of
/// `../shared/corpora/` beside the checkout.
pub const CORPORA_VAR: &str = "PILOT_CORPORA";

/// The corpora's directory: `$PILOT_CORPORA`, or `shared/corpora` beside
/// the workspace's directory.
pub fn corpora_dir() -> PathBuf {
    match std::env::var_os(CORPORA_VAR) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora"),
    }
}

/// The folder `relative` of the corpora (`istio-samples/bookinfo-v1`), or
/// `None` when it is missing and the test is to be skipped: under
/// `CI=true` a missing corpus panics with the path it looked for.
///
/// ```no_run
/// let Some(dir) = pilot_test_support::corpus("istio-samples/bookinfo-v1") else { return };
/// assert!(dir.join("SOURCE").is_file());
/// ```
pub fn corpus(relative: &str) -> Option<PathBuf> {
    let dir = corpora_dir().join(relative);
    if dir.is_dir() {
        return Some(dir);
    }
    let message = format!(
        "the corpus {relative} is not at {} (it is provided at ../shared/corpora/ beside the checkout; \
         {CORPORA_VAR} names another directory)",
        dir.display()
    );
    if std::env::var("CI").is_ok_and(|ci| ci == "true") {
        panic!("{message}");
    }
    eprintln!("SKIPPED, NOT PASSED: {message}");
    None
}

/// The files of the corpus folder `dir` whose names end with one of
/// `extensions` (`.yaml`), by name.
pub fn corpus_files(dir: &Path, extensions: &[&str]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| {
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            extensions.iter().any(|extension| name.ends_with(extension))
        })
        .collect();
    files.sort();
    files
}
