//! Every fuzz target's corpus (`fuzz/corpus/<target>/`), replayed through
//! the check the target runs, and `fuzz/` kept in step with
//! [`pilot_fuzz_targets::TARGETS`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use pilot_fuzz_targets::TARGETS;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    files
}

/// Every input of every corpus gives no panic: no crash found by the
/// fuzzer comes back, and each target's property holds on the inputs
/// written by hand.
#[test]
fn every_corpus_input_passes_its_targets_check() {
    let mut failed = Vec::new();
    let mut replayed = 0;
    for target in TARGETS {
        let inputs = files(&fuzz_dir().join("corpus").join(target.name));
        assert!(!inputs.is_empty(), "fuzz/corpus/{}/ has no input", target.name);
        for input in inputs {
            let bytes = std::fs::read(&input).unwrap_or_else(|e| panic!("{}: {e}", input.display()));
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| (target.run)(&bytes))) {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failed.push(format!("{}: {message}", input.display()));
            }
            replayed += 1;
        }
    }
    assert!(failed.is_empty(), "{} of {replayed} inputs fail:\n{}", failed.len(), failed.join("\n"));
}

/// Each `[[bin]]` of `fuzz/Cargo.toml` is a target of [`TARGETS`] whose
/// source is the one-line call of its check, and each target of
/// [`TARGETS`] is a `[[bin]]`: a target cannot be fuzzed without its
/// corpus being replayed, or the other way round.
#[test]
fn fuzz_targets_and_the_replayed_checks_are_the_same() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    let mut bins = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin && let Some(name) = line.strip_prefix("name = ") {
            bins.push(name.trim_matches('"').to_string());
        }
    }
    let mut names: Vec<String> = TARGETS.iter().map(|t| t.name.to_string()).collect();
    bins.sort();
    names.sort();
    assert_eq!(bins, names, "the [[bin]]s of fuzz/Cargo.toml and pilot_fuzz_targets::TARGETS");
    for name in &names {
        let path = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let source = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let call = format!("pilot_fuzz_targets::{name}(data)");
        assert!(
            source.contains(&call),
            "{} does not call {call}: the fuzzer and the replay would check different things",
            path.display()
        );
    }
}
