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
    let failed = replay("corpus", true);
    assert!(
        failed.is_empty(),
        "inputs fail their check:\n{}",
        failed.join("\n")
    );
}

/// The crashes found whose fix belongs elsewhere (`fuzz/pending/<target>/`,
/// see `fuzz/pending/README.md`) still crash. Once one passes, its fix has
/// landed: move the input into the corpus.
#[test]
#[ignore = "replays crashes waiting for their fix: `--run-ignored only` shows which are fixed"]
fn pending_crashes_are_fixed() {
    let failed = replay("pending", false);
    assert!(failed.is_empty(), "still crash:\n{}", failed.join("\n"));
}

/// Runs every file of `fuzz/<dir>/<target>/` through its target's check:
/// the files whose check panics, with the panic's message.
fn replay(dir: &str, every_target_has_inputs: bool) -> Vec<String> {
    let mut failed = Vec::new();
    for target in TARGETS {
        let inputs = files(&fuzz_dir().join(dir).join(target.name));
        assert!(
            !every_target_has_inputs || !inputs.is_empty(),
            "fuzz/{dir}/{}/ has no input",
            target.name
        );
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
        }
    }
    failed
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
    assert_eq!(
        bins, names,
        "the [[bin]]s of fuzz/Cargo.toml and pilot_fuzz_targets::TARGETS"
    );
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
