//! The file-backed store passes the same conformance suites as pilot's own
//! backends: the store's, and the status suite (it keeps each object's
//! distribution status).

use std::sync::Arc;

use pilot_embedder_example::FileConfigStore;
use pilot_model::{ConfigStore, ConfigWatch, DynConfig, KindRegistry};
use pilot_store::testing::{mock, registry};

pilot_store::conformance_suite!(|registry: KindRegistry| async move {
    Arc::new(FileConfigStore::temporary(registry).unwrap()) as Arc<dyn ConfigWatch>
});

// It keeps each object's distribution status in its file.
mod status {
    use super::*;

    pilot_store::status_conformance_suite!(|registry: KindRegistry| async move {
        Arc::new(FileConfigStore::temporary(registry).unwrap()) as Arc<dyn ConfigWatch>
    });
}

#[tokio::test]
async fn objects_survive_a_reopen_and_revisions_continue() {
    let dir = tempfile::tempdir().unwrap();
    let first = FileConfigStore::open(dir.path(), registry()).unwrap();
    let a = first.create(mock("default", "a", "1")).await.unwrap();
    drop(first);
    let second = FileConfigStore::open(dir.path(), registry()).unwrap();
    let got = second.get(&a.key()).await.unwrap().unwrap();
    assert_eq!(*got, *a);
    let b = second.create(mock("default", "b", "1")).await.unwrap();
    let revision = |c: &DynConfig| {
        c.meta
            .resource_version
            .as_deref()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert!(
        revision(&b) > revision(&a),
        "revisions continue after the stored ones"
    );
}
