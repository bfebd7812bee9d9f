//! The storage contracts: [`ConfigStore`] for callers, [`ConfigWatch`] for the
//! machinery that caches a store and follows its changes.

use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;

use crate::{ConfigKey, ConfigStatus, DynConfig, KindRegistry, StoreError};

/// A position in a store's history. Revisions increase with every write to
/// the store (across all kinds); a watch resumes strictly after one.
pub type Revision = u64;

/// Configuration objects keyed by kind, namespace and name.
///
/// Every write validates against the kind's schema first: an invalid object
/// is never stored, and a failed write leaves the store as it was. Objects
/// are handed out as `Arc`s so caches can share them without copying.
///
/// The trait is object safe; pilot passes stores around as
/// `Arc<dyn ConfigStore>`.
#[async_trait]
pub trait ConfigStore: Send + Sync {
    /// The kinds this store accepts.
    fn registry(&self) -> &KindRegistry;

    /// The object with `key`, or `None`. An unregistered kind is
    /// [`StoreError::UnknownKind`].
    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError>;

    /// The objects of `kind`, in one namespace or (with `None`) in all,
    /// ordered by namespace and then name.
    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError>;

    /// Stores a new object and returns it as stored, with its resource
    /// version and creation time. Fails with [`StoreError::AlreadyExists`] if
    /// the key is taken.
    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError>;

    /// Replaces an object. `config.meta.resource_version` must be the stored
    /// version, or the update fails with [`StoreError::Conflict`] and nothing
    /// changes.
    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError>;

    /// Deletes an object; with `resource_version`, only if it is still that
    /// version ([`StoreError::Conflict`] otherwise).
    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError>;

    /// True when the store keeps objects' status
    /// ([`update_status`](Self::update_status)); false by default.
    fn keeps_status(&self) -> bool {
        false
    }

    /// Writes the object's distribution status (see [`ConfigStatus`]),
    /// computed for the object at `observed_version`.
    ///
    /// A status write is not a user's write: it never changes the
    /// resource version a user's `update` or conditional `delete` must
    /// carry (so it never makes one fail with a conflict), and a
    /// Controller does not hand it to subscribers as a change (no push).
    /// It never fights a user's write either: when the object is no longer
    /// at `observed_version` it fails with [`StoreError::Conflict`] and
    /// writes nothing (the writer recomputes for the new version instead
    /// of retrying); a missing object is [`StoreError::NotFound`].
    ///
    /// Stores that keep no status ([`keeps_status`](Self::keeps_status)
    /// false) answer [`StoreError::Unavailable`] (the default).
    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        let _ = (observed_version, status);
        Err(StoreError::unavailable(format!(
            "this store keeps no status (writing the status of {key})"
        )))
    }
}

/// A consistent view of one kind at one revision.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The revision the items were read at; watch after it to follow on.
    pub revision: Revision,
    /// Every object of the kind at that revision, ordered by namespace and
    /// name.
    pub items: Vec<Arc<DynConfig>>,
    /// Keys of the kind whose stored value is not an object of the kind
    /// (written around the store: not JSON, another object's body). A
    /// backend that always decodes what it stores leaves this empty.
    pub undecodable: Vec<Undecodable>,
}

impl Snapshot {
    /// A snapshot of `items` at `revision`, with nothing undecodable.
    pub fn new(revision: Revision, items: Vec<Arc<DynConfig>>) -> Self {
        Snapshot {
            revision,
            items,
            undecodable: Vec::new(),
        }
    }
}

/// A key whose stored value is not an object of its kind: its readers
/// treat the key as holding no object, and report it (a Controller
/// quarantines it) until a valid value or a delete replaces it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecodable {
    /// The key the value is stored under.
    pub key: ConfigKey,
    /// The revision of the write that stored it.
    pub revision: Revision,
    /// Why it is not an object, for operators.
    pub reason: String,
}

/// One change seen by a backend watch.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// An object was created or replaced at `revision`.
    Put {
        /// The revision of the write.
        revision: Revision,
        /// The object as stored.
        config: Arc<DynConfig>,
    },
    /// An object was deleted at `revision`.
    Delete {
        /// The revision of the delete.
        revision: Revision,
        /// The deleted object's key.
        key: ConfigKey,
    },
    /// A value that is not an object of the kind was stored under a key
    /// at its revision: whatever the key held is gone, and nothing
    /// replaces it until a valid write.
    Undecodable(Undecodable),
    /// Nothing more of this kind up to `revision` (a progress notification,
    /// or a Kubernetes bookmark).
    Progress {
        /// The revision the watch has caught up with.
        revision: Revision,
    },
}

impl WatchEvent {
    /// The revision this event brings the watcher to.
    pub fn revision(&self) -> Revision {
        match self {
            WatchEvent::Put { revision, .. }
            | WatchEvent::Delete { revision, .. }
            | WatchEvent::Progress { revision } => *revision,
            WatchEvent::Undecodable(undecodable) => undecodable.revision,
        }
    }
}

/// The stream of a backend watch. It yields events in revision order. An
/// `Err(StoreError::Compacted)` means events were lost and the caller must
/// relist; any other error (or the end of the stream) means the connection
/// broke and the caller may watch again after the last revision it saw.
pub type WatchStream = BoxStream<'static, Result<WatchEvent, StoreError>>;

/// The backend-facing half of a store: a consistent snapshot, and a watch
/// that resumes after a revision or says it cannot.
///
/// The cached `Controller` in `pilot-store` runs over any `ConfigWatch`.
#[async_trait]
pub trait ConfigWatch: ConfigStore {
    /// Every object of `kind` at one revision.
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError>;

    /// The changes to `kind` strictly after `after`, as they happen. Fails
    /// (now or in the stream) with [`StoreError::Compacted`] when that
    /// history is gone.
    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError>;

    /// The store's current revision. Every kind's watch reaches it promptly,
    /// through an event or a [`WatchEvent::Progress`]; callers use it to wait
    /// until a cache has seen their own writes.
    async fn current_revision(&self) -> Result<Revision, StoreError>;
}
