//! A `ConfigStore` of the user's own: one JSON file per object under a
//! directory, `<root>/<kind>/<namespace>/<name>.json`, in the same document
//! form `pilotctl` reads, with the object's distribution status beside its
//! spec (written by pilot's status loop). Watches come from pilot's
//! `WatchLog`, which any adapter without a native watch can use.
//!
//! File I/O here is synchronous and runs under the log's write lock, which
//! keeps the example short and every write atomic with respect to the
//! others; a production adapter would move it to a blocking thread pool.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pilot_model::async_trait;
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, KindRegistry, Revision, Snapshot,
    StoreError, WatchStream, now_seconds,
};
use pilot_store::{DEFAULT_HISTORY, WatchLog};

/// Configuration objects as files under one directory.
pub struct FileConfigStore {
    root: PathBuf,
    registry: KindRegistry,
    log: WatchLog,
    /// For [`FileConfigStore::temporary`]: removes the directory on drop.
    _temporary: Option<tempfile::TempDir>,
}

impl FileConfigStore {
    /// Opens (or starts) a store under `root`. Revisions continue after the
    /// highest resource version found on disk.
    pub fn open(root: impl Into<PathBuf>, registry: KindRegistry) -> Result<Self, StoreError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(|e| io_error(&root, e))?;
        let mut highest = 0;
        for kind in registry.kinds() {
            for config in read_kind(&root, &kind, None)? {
                let version = config
                    .meta
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse().ok());
                highest = highest.max(version.unwrap_or(0));
            }
        }
        Ok(FileConfigStore {
            root,
            registry,
            log: WatchLog::starting_at(DEFAULT_HISTORY, highest),
            _temporary: None,
        })
    }

    /// A store in a new temporary directory, removed when the store is
    /// dropped.
    pub fn temporary(registry: KindRegistry) -> Result<Self, StoreError> {
        let dir = tempfile::Builder::new()
            .prefix("pilot-file-store-")
            .tempdir()
            .map_err(StoreError::unavailable)?;
        let mut store = Self::open(dir.path(), registry)?;
        store._temporary = Some(dir);
        Ok(store)
    }

    fn path(&self, key: &ConfigKey) -> PathBuf {
        self.root
            .join(&key.kind)
            .join(&key.namespace)
            .join(format!("{}.json", key.name))
    }

    fn read(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        read_file(&self.path(key), &key.kind)
    }

    fn known(&self, kind: &str) -> Result<(), StoreError> {
        self.registry.schema(kind).map(|_| ())
    }

    /// Writes `config` at the next revision, which becomes its resource
    /// version; the caller holds the log lock.
    fn write(
        &self,
        log: &mut pilot_store::LogWriter<'_>,
        mut config: DynConfig,
    ) -> Result<Arc<DynConfig>, StoreError> {
        config.meta.resource_version = Some(log.next_revision().to_string());
        self.write_file(&config)?;
        let config = Arc::new(config);
        log.put(Arc::clone(&config));
        Ok(config)
    }

    /// Writes `config`'s file as it is.
    fn write_file(&self, config: &DynConfig) -> Result<(), StoreError> {
        let path = self.path(&config.key());
        let body = serde_json::to_vec_pretty(config).map_err(StoreError::unavailable)?;
        let dir = path.parent().expect("object paths have a parent");
        fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        // Write a temporary file, then rename: a crash never leaves half an object.
        let temp = path.with_extension("json.tmp");
        let mut file = fs::File::create(&temp).map_err(|e| io_error(&temp, e))?;
        file.write_all(&body).map_err(|e| io_error(&temp, e))?;
        file.sync_all().map_err(|e| io_error(&temp, e))?;
        fs::rename(&temp, &path).map_err(|e| io_error(&path, e))
    }
}

#[async_trait]
impl ConfigStore for FileConfigStore {
    fn registry(&self) -> &KindRegistry {
        &self.registry
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.known(&key.kind)?;
        self.read(key)
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.known(kind)?;
        read_kind(&self.root, kind, namespace)
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.registry.prepare(config)?;
        let mut log = self.log.write();
        if self.read(&config.key())?.is_some() {
            return Err(StoreError::AlreadyExists { key: config.key() });
        }
        config.meta.creation_timestamp = Some(now_seconds());
        // Status is written by `update_status` only.
        config.meta.status = None;
        self.write(&mut log, config)
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.registry.prepare(config)?;
        let key = config.key();
        let mut log = self.log.write();
        let current = self
            .read(&key)?
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        if config.meta.resource_version != current.meta.resource_version {
            return Err(StoreError::Conflict {
                key,
                expected: config.meta.resource_version,
                actual: current.meta.resource_version.clone().unwrap_or_default(),
            });
        }
        // What the kind's transition rules forbid an update to change
        // (a GatewayClass's controllerName).
        self.registry.check_update(&current, &config)?;
        config.meta.creation_timestamp = current.meta.creation_timestamp;
        // A user's write keeps the status, whose observed version says it
        // is about the old spec.
        config.meta.status = current.meta.status.clone();
        self.write(&mut log, config)
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        self.known(&key.kind)?;
        let mut log = self.log.write();
        let current = self
            .read(key)?
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let actual = current.meta.resource_version.as_deref().unwrap_or_default();
        if let Some(expected) = resource_version.filter(|v| *v != actual) {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: Some(expected.to_string()),
                actual: actual.to_string(),
            });
        }
        let path = self.path(key);
        fs::remove_file(&path).map_err(|e| io_error(&path, e))?;
        log.delete(key.clone());
        Ok(())
    }

    fn keeps_status(&self) -> bool {
        true
    }

    /// The status goes in the object's file, which keeps its resource
    /// version (a status write is not a user's write); watchers see the
    /// object again, which a Controller takes as a status-only change.
    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.known(&key.kind)?;
        let mut log = self.log.write();
        let current = self
            .read(key)?
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        let actual = current.meta.resource_version.clone().unwrap_or_default();
        if actual != observed_version {
            return Err(StoreError::Conflict {
                key: key.clone(),
                expected: Some(observed_version.to_string()),
                actual,
            });
        }
        let mut config = (*current).clone();
        config.meta.status = Some(status);
        self.write_file(&config)?;
        log.put(Arc::new(config));
        Ok(())
    }
}

#[async_trait]
impl ConfigWatch for FileConfigStore {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        self.known(kind)?;
        let log = self.log.write();
        let items = read_kind(&self.root, kind, None)?;
        Ok(Snapshot::new(log.revision(), items))
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.known(kind)?;
        self.log.watch(kind, after)
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.log.revision())
    }
}

/// Every object of `kind` (in `namespace`, or all), ordered by namespace
/// and name.
fn read_kind(root: &Path, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
    let kind_dir = root.join(kind);
    let namespaces = match namespace {
        Some(ns) => vec![kind_dir.join(ns)],
        None => sorted_entries(&kind_dir)?,
    };
    let mut items = Vec::new();
    for dir in namespaces {
        for file in sorted_entries(&dir)? {
            if file.extension().is_some_and(|e| e == "json")
                && let Some(config) = read_file(&file, kind)?
            {
                items.push(config);
            }
        }
    }
    Ok(items)
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_error(dir, e)),
    };
    let mut paths = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| io_error(dir, e))?;
    paths.sort();
    Ok(paths)
}

/// The object in `path`, a file of the kind whose id is `kind`. The file
/// is a document, which writes the kind's name (`Gateway`); the object is
/// named by the kind's id (`Gateway.gateway.networking.k8s.io` for a kind
/// registered qualified), as every store names it.
fn read_file(path: &Path, kind: &str) -> Result<Option<Arc<DynConfig>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => serde_json::from_slice::<DynConfig>(&bytes)
            .map(|mut config| {
                if pilot_model::kind_name(kind) == config.meta.kind {
                    config.meta.kind = kind.to_string();
                }
                Some(Arc::new(config))
            })
            .map_err(|e| StoreError::unavailable(format!("{} holds a bad object: {e}", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_error(path, e)),
    }
}

fn io_error(path: &Path, error: io::Error) -> StoreError {
    StoreError::unavailable(format!("{}: {error}", path.display()))
}
