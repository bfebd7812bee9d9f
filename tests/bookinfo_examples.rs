//! The bookinfo example files validate, and store into a backend unchanged.

use std::collections::BTreeMap;
use std::path::Path;

use futures::FutureExt;
use pilot_api::istio;
use pilot_model::{ConfigStore, document};
use pilot_store_memory::MemoryConfigStore;

#[test]
fn every_bookinfo_file_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bookinfo");
    let objects = document::read_dir(&dir, &istio::registry()).unwrap_or_else(|e| panic!("{e}"));
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    for object in &objects {
        *kinds.entry(object.meta.kind.clone()).or_default() += 1;
    }
    assert_eq!(
        kinds,
        [
            ("DestinationPolicy", 1),
            ("EgressRule", 1),
            ("IngressRule", 1),
            ("RouteRule", 9)
        ]
        .into_iter()
        .map(|(k, n)| (k.to_string(), n))
        .collect()
    );
}

#[test]
fn bookinfo_objects_store_and_read_back() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bookinfo");
    let registry = istio::registry();
    let store = MemoryConfigStore::new(registry.clone());
    // Several files define reviews-default; the later file replaces the earlier.
    let mut latest = BTreeMap::new();
    for object in document::read_dir(&dir, &registry).unwrap() {
        latest.insert(object.key(), object);
    }
    for object in latest.values() {
        let stored = store.create(object.clone()).now_or_never().unwrap().unwrap();
        assert_eq!(stored.spec, object.spec);
    }
    let rules = store.list_now("RouteRule", Some("default")).unwrap();
    assert_eq!(rules.len(), 8);
}
