//! Golden files: for each bookinfo scenario, the configuration the real
//! Envoy loaded from the generated resources, as its `/config_dump` JSON.
//! Reviewed by eye once, then kept; a change in generation shows up as a
//! readable diff. Regenerate with `UPDATE_GOLDEN=1 cargo nextest run -p
//! pilot-xds --test golden` and review the diff before committing.

mod support;

use std::path::PathBuf;

use pilot_test_support::envoy_binary;
use pilot_xds::{generate, testing};

#[test]
fn generated_configuration_matches_the_golden_files() {
    let registry = support::registry();
    let mesh = support::mesh();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut mismatches = Vec::new();
    for (name, proxy) in support::proxies() {
        let resources = generate(&proxy, &registry, &mesh);
        let dump = testing::config_dump(&envoy_binary(), &proxy.node_id(), &resources)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let text = serde_json::to_string_pretty(&dump).unwrap() + "\n";
        let path = dir.join(format!("{name}.json"));
        if update {
            std::fs::write(&path, &text).unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; run with UPDATE_GOLDEN=1 to create it", path.display()));
        if golden != text {
            let actual = path.with_extension("actual.json");
            std::fs::write(&actual, &text).unwrap();
            mismatches.push(format!(
                "{name}: differs from {} (see {})",
                path.display(),
                actual.display()
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
