//! The backend conformance suite against the journaled store: freshly
//! opened, and reopened from a directory that already holds writes.

use std::sync::Arc;

use async_trait::async_trait;
use pilot_model::{
    ConfigKey, ConfigMeta, ConfigStore, ConfigWatch, DynConfig, KindRegistry, KindSchema, Revision, Snapshot,
    StoreError, WatchStream,
};
use pilot_store_memory::journal::{self, JournalOptions, JournaledStore};

/// The store under test and its directory, removed after the store.
struct InDir {
    store: JournaledStore,
    _dir: tempfile::TempDir,
}

/// Small segments, so the suite's writes also run through compactions.
fn options() -> JournalOptions {
    JournalOptions {
        compact_after: 7,
        ..JournalOptions::default()
    }
}

fn fresh(registry: KindRegistry) -> InDir {
    let dir = tempfile::tempdir().unwrap();
    InDir {
        store: journal::open(dir.path(), registry, options()).unwrap(),
        _dir: dir,
    }
}

/// A directory that held writes of another kind (created, some deleted),
/// reopened.
async fn reopened(registry: KindRegistry) -> InDir {
    let dir = tempfile::tempdir().unwrap();
    if !registry.contains("Scratch") {
        registry
            .register_schema(KindSchema::new(
                "Scratch",
                "scratches",
                "example.com",
                "v1",
                |_, _| {},
            ))
            .unwrap();
    }
    {
        let store = journal::open(dir.path(), registry.clone(), options()).unwrap();
        for i in 0..4 {
            let note = DynConfig {
                meta: ConfigMeta::new("Scratch", "default", format!("s{i}")),
                spec: serde_json::json!({"i": i}),
            };
            let stored = store.create(note).await.unwrap();
            if i % 2 == 0 {
                store.delete(&stored.key(), None).await.unwrap();
            }
        }
    }
    let store = journal::open(dir.path(), registry, options()).unwrap();
    assert_eq!(store.revision(), 6);
    assert_eq!(store.list_now("Scratch", None).unwrap().len(), 2);
    InDir { store, _dir: dir }
}

mod fresh {
    use super::*;

    pilot_store::conformance_suite!(|registry: KindRegistry| async move {
        Arc::new(fresh(registry)) as Arc<dyn ConfigWatch>
    });
}

mod reopened {
    use super::*;

    pilot_store::conformance_suite!(|registry: KindRegistry| async move {
        Arc::new(reopened(registry).await) as Arc<dyn ConfigWatch>
    });
}

#[async_trait]
impl ConfigStore for InDir {
    fn registry(&self) -> &KindRegistry {
        self.store.registry()
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.store.get(key).await
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.store.list(kind, namespace).await
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.store.create(config).await
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.store.update(config).await
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        self.store.delete(key, resource_version).await
    }
}

#[async_trait]
impl ConfigWatch for InDir {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        self.store.snapshot(kind).await
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.store.watch(kind, after).await
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        self.store.current_revision().await
    }
}
