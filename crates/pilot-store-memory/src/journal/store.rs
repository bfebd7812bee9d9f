//! [`JournaledStore`]: the handle [`open`](super::open) returns.

use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, FieldError, KindRegistry, Revision,
    Snapshot, StoreError, WatchStream,
};

use super::writer::Journal;
use crate::MemoryConfigStore;

/// A stored object that no longer passed validation when the directory was
/// opened: not in the store, kept in `quarantine.jsonl`.
#[derive(Debug, Clone)]
pub struct Quarantined {
    /// The object's key.
    pub key: ConfigKey,
    /// Every validation error, with its field path.
    pub errors: Vec<FieldError>,
    /// The whole error as one message.
    pub reason: String,
    /// The object as it was stored.
    pub object: Arc<DynConfig>,
}

/// A [`MemoryConfigStore`] whose writes are journaled in a data directory.
/// It is a [`ConfigStore`] and [`ConfigWatch`] like the memory store (and
/// derefs to it); a write is acknowledged only once its journal record is
/// fsynced. Cloning gives another handle; the directory is released (and
/// a running compaction waited for) when the last handle is dropped.
#[derive(Clone)]
pub struct JournaledStore {
    store: MemoryConfigStore,
    journal: Arc<Journal>,
    dir: Arc<PathBuf>,
    quarantined: Arc<Vec<Quarantined>>,
}

/// How compaction has gone, from [`JournaledStore::wait_for_compaction`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionStatus {
    /// Compactions completed since the directory was opened.
    pub completed: u64,
    /// The last compaction's error, if it failed (the journal then keeps
    /// its segments, and the next compaction tries again).
    pub last_error: Option<String>,
}

impl JournaledStore {
    pub(super) fn new(
        store: MemoryConfigStore,
        journal: Arc<Journal>,
        dir: PathBuf,
        quarantined: Vec<Quarantined>,
    ) -> Self {
        JournaledStore {
            store,
            journal,
            dir: Arc::new(dir),
            quarantined: Arc::new(quarantined),
        }
    }

    #[cfg(test)]
    pub(super) fn journal(&self) -> &Journal {
        &self.journal
    }

    /// The memory store (another handle to the same objects, journaled).
    pub fn store(&self) -> &MemoryConfigStore {
        &self.store
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The objects quarantined when the directory was opened: each with its
    /// key and every validation error.
    pub fn quarantined(&self) -> &[Quarantined] {
        &self.quarantined
    }

    /// Starts folding the journal into a new snapshot now (in the
    /// background; writes go on), unless a compaction runs already. True
    /// if one was started.
    pub fn compact_now(&self) -> bool {
        self.journal.compact_now()
    }

    /// True while a compaction runs.
    pub fn compacting(&self) -> bool {
        self.journal.progress().running()
    }

    /// Blocks until no compaction runs (call it off the async runtime, e.g.
    /// in `spawn_blocking`: a compaction of a large store takes seconds).
    pub fn wait_for_compaction(&self) -> CompactionStatus {
        let (completed, last_error) = self.journal.progress().wait_idle();
        CompactionStatus {
            completed,
            last_error,
        }
    }
}

impl Deref for JournaledStore {
    type Target = MemoryConfigStore;

    fn deref(&self) -> &MemoryConfigStore {
        &self.store
    }
}

#[async_trait]
impl ConfigStore for JournaledStore {
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

    fn keeps_status(&self) -> bool {
        self.store.keeps_status()
    }

    /// Journaled like any write (a record of the object with its status,
    /// same resource version), so status survives a restart.
    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.store.update_status(key, observed_version, status).await
    }
}

#[async_trait]
impl ConfigWatch for JournaledStore {
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
