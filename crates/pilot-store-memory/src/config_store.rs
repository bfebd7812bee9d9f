//! [`MemoryConfigStore`]: the in-memory [`ConfigStore`] with watch history.

use std::sync::Arc;

use async_trait::async_trait;
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, KindRegistry, Revision, Snapshot,
    StoreError, WatchStream, now_seconds,
};
use pilot_store::{ConfigIndex, DEFAULT_HISTORY, WatchLog};

/// A concurrent in-memory configuration store.
///
/// Reads (`get`, `list`) take no global lock: they go to a sharded map and a
/// per-kind ordered index. Writes validate first, then take one write lock
/// to check the current version, store the object at the next revision and
/// record it in a bounded history ([`WatchLog`]) from which watches resume.
/// Resource versions are the decimal revision of the object's last write
/// (a status write keeps it: see [`ConfigStore::update_status`]).
///
/// Cloning the store gives another handle to the same objects.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use pilot_model::{ConfigMeta, ConfigStore, DynConfig, KindRegistry, KindSchema, StoreError};
/// use pilot_store_memory::MemoryConfigStore;
///
/// let registry = KindRegistry::new();
/// registry.register_schema(KindSchema::new("Note", "notes", "example.com", "v1", |_, _| {})).unwrap();
/// let store = MemoryConfigStore::new(registry);
///
/// let note = DynConfig { meta: ConfigMeta::new("Note", "default", "n1"), spec: serde_json::json!({"text": "hi"}) };
/// let stored = store.create(note.clone()).await.unwrap();
/// assert_eq!(stored.meta.resource_version.as_deref(), Some("1"));
/// assert!(matches!(store.create(note).await, Err(StoreError::AlreadyExists { .. })));
///
/// let mut changed = (*stored).clone();
/// changed.spec["text"] = "bye".into();
/// store.update(changed).await.unwrap();
/// assert_eq!(store.get(&stored.key()).await.unwrap().unwrap().spec["text"], "bye");
/// # });
/// ```
#[derive(Clone)]
pub struct MemoryConfigStore {
    inner: Arc<Inner>,
}

struct Inner {
    registry: KindRegistry,
    index: ConfigIndex,
    log: WatchLog,
    write_ahead: Option<Arc<dyn WriteAhead>>,
}

/// A write the store is about to apply, as handed to a [`WriteAhead`].
#[derive(Debug, Clone, Copy)]
pub enum PendingWrite<'a> {
    /// `config` (with its new resource version and creation time) is about
    /// to be stored at `revision`.
    Put {
        /// The revision of the write.
        revision: Revision,
        /// The object exactly as it will be stored (the same allocation the
        /// store keeps, so a write-ahead may hold on to it without a copy).
        config: &'a Arc<DynConfig>,
    },
    /// `key` is about to be deleted at `revision`.
    Delete {
        /// The revision of the write.
        revision: Revision,
        /// The key deleted.
        key: &'a ConfigKey,
    },
}

/// Makes a store's writes durable: called for every write that passed
/// validation and the version check, under the store's write lock, before
/// the write is applied. If it fails, the write fails with its error and
/// the store is unchanged, so an implementation must leave its own files as
/// they were when it fails. Writes reach it one at a time, in revision
/// order.
pub trait WriteAhead: Send + Sync + 'static {
    /// Records `write` durably, or says why it could not.
    fn record(&self, write: PendingWrite<'_>) -> Result<(), StoreError>;
}

impl MemoryConfigStore {
    /// An empty store for the kinds in `registry`, keeping
    /// [`DEFAULT_HISTORY`] writes for watches to resume from.
    pub fn new(registry: KindRegistry) -> Self {
        Self::with_history(registry, DEFAULT_HISTORY)
    }

    /// An empty store that keeps `history` writes for watches to resume
    /// from; a watch further behind is told to relist.
    pub fn with_history(registry: KindRegistry, history: usize) -> Self {
        MemoryConfigStore {
            inner: Arc::new(Inner {
                registry,
                index: ConfigIndex::new(),
                log: WatchLog::new(history),
                write_ahead: None,
            }),
        }
    }

    /// A store that starts at `revision` with `objects` exactly as given
    /// (resource versions and creation times kept, no validation: they were
    /// validated when first written), and hands every later write to
    /// `write_ahead` before applying it. This is how a store is rebuilt
    /// from what a [`WriteAhead`] recorded (the objects are shared, not
    /// copied). Watches can resume only after `revision`.
    pub fn restore(
        registry: KindRegistry,
        history: usize,
        objects: impl IntoIterator<Item = Arc<DynConfig>>,
        revision: Revision,
        write_ahead: Arc<dyn WriteAhead>,
    ) -> Self {
        let index = ConfigIndex::new();
        for object in objects {
            index.insert(object);
        }
        MemoryConfigStore {
            inner: Arc::new(Inner {
                registry,
                index,
                log: WatchLog::starting_at(history, revision),
                write_ahead: Some(write_ahead),
            }),
        }
    }

    /// The object with `key`, without going through `async`: the read path
    /// of [`ConfigStore::get`].
    pub fn get_now(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        match self.inner.index.get(key) {
            Some(config) => Ok(Some(config)),
            None => self.known_kind(&key.kind).map(|()| None),
        }
    }

    /// The objects of `kind`, without going through `async`: the read path
    /// of [`ConfigStore::list`].
    pub fn list_now(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.known_kind(kind)?;
        Ok(self.inner.index.list(kind, namespace))
    }

    /// Forgets watch history up to `revision`, as etcd's compaction does.
    /// Watches that have not caught up fail with [`StoreError::Compacted`].
    pub fn compact(&self, revision: Revision) {
        self.inner.log.compact(revision);
    }

    /// The revision of the last write.
    pub fn revision(&self) -> Revision {
        self.inner.log.revision()
    }

    fn record(&self, revision: Revision, config: &Arc<DynConfig>) -> Result<(), StoreError> {
        match &self.inner.write_ahead {
            Some(write_ahead) => write_ahead.record(PendingWrite::Put { revision, config }),
            None => Ok(()),
        }
    }

    fn known_kind(&self, kind: &str) -> Result<(), StoreError> {
        if self.inner.registry.contains(kind) {
            Ok(())
        } else {
            Err(StoreError::UnknownKind {
                kind: kind.to_string(),
            })
        }
    }
}

#[async_trait]
impl ConfigStore for MemoryConfigStore {
    fn registry(&self) -> &KindRegistry {
        &self.inner.registry
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.get_now(key)
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.list_now(kind, namespace)
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.inner.registry.prepare(config)?;
        let key = config.key();
        let mut log = self.inner.log.write();
        if self.inner.index.contains(&key) {
            return Err(StoreError::AlreadyExists { key });
        }
        config.meta.resource_version = Some(log.next_revision().to_string());
        config.meta.creation_timestamp = Some(now_seconds());
        // Status is written by `update_status` only.
        config.meta.status = None;
        let config = Arc::new(config);
        self.record(log.next_revision(), &config)?;
        self.inner.index.insert(Arc::clone(&config));
        log.put(Arc::clone(&config));
        Ok(config)
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.inner.registry.prepare(config)?;
        let key = config.key();
        let mut log = self.inner.log.write();
        let current = self
            .inner
            .index
            .get(&key)
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(&key, config.meta.resource_version.as_deref(), &current, true)?;
        self.inner.registry.check_update(&current, &config)?;
        config.meta.resource_version = Some(log.next_revision().to_string());
        config.meta.creation_timestamp = current.meta.creation_timestamp;
        // A user's write keeps the status (as Kubernetes does); its
        // observed version now tells readers it is about the old spec.
        config.meta.status = current.meta.status.clone();
        let config = Arc::new(config);
        self.record(log.next_revision(), &config)?;
        self.inner.index.insert(Arc::clone(&config));
        log.put(Arc::clone(&config));
        Ok(config)
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        self.known_kind(&key.kind)?;
        let mut log = self.inner.log.write();
        let current = self
            .inner
            .index
            .get(key)
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(key, resource_version, &current, false)?;
        if let Some(write_ahead) = &self.inner.write_ahead {
            write_ahead.record(PendingWrite::Delete {
                revision: log.next_revision(),
                key,
            })?;
        }
        self.inner.index.remove(key);
        log.delete(key.clone());
        Ok(())
    }

    fn keeps_status(&self) -> bool {
        true
    }

    /// Stores the status beside the object: a write at the next revision
    /// (so watches and the journal of `--data-dir` carry it) that keeps
    /// the object's resource version.
    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.known_kind(&key.kind)?;
        let mut log = self.inner.log.write();
        let current = self
            .inner
            .index
            .get(key)
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(key, Some(observed_version), &current, true)?;
        let mut config = (*current).clone();
        config.meta.status = Some(status);
        let config = Arc::new(config);
        self.record(log.next_revision(), &config)?;
        self.inner.index.insert(Arc::clone(&config));
        log.put(config);
        Ok(())
    }
}

#[async_trait]
impl ConfigWatch for MemoryConfigStore {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        self.known_kind(kind)?;
        // Holding the write lock makes items and revision agree.
        let log = self.inner.log.write();
        let items = self.inner.index.list(kind, None);
        Ok(Snapshot::new(log.revision(), items))
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.known_kind(kind)?;
        self.inner.log.watch(kind, after)
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.inner.log.revision())
    }
}

/// Fails with a conflict unless `given` is the current version. An update
/// must carry a version; a delete may omit it to delete unconditionally.
fn check_version(
    key: &ConfigKey,
    given: Option<&str>,
    current: &DynConfig,
    required: bool,
) -> Result<(), StoreError> {
    let actual = current.meta.resource_version.as_deref().unwrap_or_default();
    match given {
        Some(given) if given == actual => Ok(()),
        None if !required => Ok(()),
        given => Err(StoreError::Conflict {
            key: key.clone(),
            expected: given.map(str::to_string),
            actual: actual.to_string(),
        }),
    }
}
