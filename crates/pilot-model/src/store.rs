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
///
/// # Rules
///
/// Every implementation keeps these; `pilot_store::testing`'s
/// `conformance_suite!` (feature `testing` of `pilot-store`) checks each of
/// them and, when one is broken, names it with what it expected and what
/// the store answered.
///
/// - **Unknown kinds.** Every method given a kind its
///   [`registry`](Self::registry) does not hold (`get`, `list`, `create`,
///   `update`, `delete`, `update_status`, and [`ConfigWatch`]'s `snapshot`
///   and `watch`) fails with [`StoreError::UnknownKind`], never `Ok(None)`
///   or `Ok([])`.
/// - **Validation.** `create` and `update` pass the object through
///   [`KindRegistry::prepare`]: an invalid one fails with
///   [`StoreError::Invalid`] naming the key and carrying every field error
///   with its path (`spec.key`, `spec.pairs[0].key`, `metadata.name`,
///   `metadata.namespace`), and nothing is stored. A stored object carries
///   its kind's group and version.
/// - **Kind ids.** Keys, `list`, `snapshot` and `watch` name a kind by its
///   id ([`KindSchema::id`](crate::KindSchema::id)), and every object
///   handed out is named by it in [`ConfigMeta::kind`](crate::ConfigMeta):
///   a store that keeps objects as documents (which write the kind's name,
///   `Gateway`, and the group in `apiVersion`) names what it reads back by
///   the id it was asked for ([`KindRegistry::identify`]), so two groups'
///   kinds of one name live side by side.
/// - **Resource versions.** Every write gives the object a resource version
///   no other write of the store gave, whatever the key.
/// - **Create** returns the object as stored: the spec as given, a resource
///   version, a `creation_timestamp`, no status (a status on the input is
///   not written). A taken key fails with [`StoreError::AlreadyExists`]
///   naming the key and leaves the first object (spec and version) as it
///   was; the same name in another namespace is another object.
/// - **Update** must carry the current resource version: without one it
///   fails with [`StoreError::Conflict`] `{ expected: None, actual }`,
///   with a stale one with `{ expected: Some(sent), actual }` (`actual`
///   being the stored version), and nothing changes; a key that holds no
///   object is [`StoreError::NotFound`] naming the key. A successful update
///   returns a new resource version and keeps `creation_timestamp`; it does
///   not write the status the object carries.
/// - **Delete** of a key that holds no object is [`StoreError::NotFound`]
///   naming the key. With a resource version, one the object no longer has
///   fails with [`StoreError::Conflict`] naming both versions and keeps the
///   object; without one it deletes unconditionally. A deleted name can be
///   created again.
/// - **Get** of a key that holds no object (including a name that exists
///   only in another namespace) is `Ok(None)`.
/// - **List** returns the kind's objects in one namespace, or in all with
///   `None`, ordered by namespace and then name; a namespace with none is
///   `Ok([])`; never another kind's objects.
/// - **Status** (stores whose [`keeps_status`](Self::keeps_status) is true): see
///   [`update_status`](Self::update_status); `get`, `list` and `snapshot`
///   return the object with its status.
///
/// Random sequences of these operations must also answer as a plain map
/// would (the suite's `model_based` property).
#[async_trait]
pub trait ConfigStore: Send + Sync {
    /// The kinds this store accepts.
    fn registry(&self) -> &KindRegistry;

    /// The object with `key`, or `None` (also for a name that exists only
    /// in another namespace). An unregistered kind is
    /// [`StoreError::UnknownKind`].
    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError>;

    /// The objects of `kind`, in one namespace or (with `None`) in all,
    /// ordered by namespace and then name; `Ok([])` for a namespace with
    /// none. An unregistered kind is [`StoreError::UnknownKind`].
    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError>;

    /// Stores a new object and returns it as stored, with a resource
    /// version no other write got, its creation time, its kind's group and
    /// version, and no status. Fails with [`StoreError::AlreadyExists`] if
    /// the key is taken, [`StoreError::Invalid`] (with every field error)
    /// if the object is invalid, [`StoreError::UnknownKind`] if its kind is
    /// not registered; a failed create stores nothing.
    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError>;

    /// Replaces an object. `config.meta.resource_version` must be the stored
    /// version, or the update fails with [`StoreError::Conflict`] naming the
    /// version sent (`None` if none) and the stored one, and nothing
    /// changes. The stored object gets a new resource version and keeps its
    /// `creation_timestamp` (and its status: a user's update does not write
    /// one). [`StoreError::NotFound`] if the key holds no object,
    /// [`StoreError::Invalid`] or [`StoreError::UnknownKind`] as for
    /// [`create`](Self::create), and [`StoreError::Invalid`] too for a
    /// change its kind's transition rules forbid, checked against the
    /// version replaced ([`KindRegistry::check_update`](crate::KindRegistry::check_update)).
    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError>;

    /// Deletes an object; with `resource_version`, only if it is still that
    /// version ([`StoreError::Conflict`] naming both versions otherwise, and
    /// the object stays). [`StoreError::NotFound`] if the key holds no
    /// object, [`StoreError::UnknownKind`] for an unregistered kind.
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
    /// false) answer [`StoreError::Unavailable`] (the default); stores that
    /// keep it answer [`StoreError::UnknownKind`] for an unregistered kind,
    /// and a second write for the same version replaces the first. `get`,
    /// `list` and `snapshot` return the object with its status, and a
    /// status kept across a user's update still names the version it was
    /// about.
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
///
/// # Rules
///
/// Besides [`ConfigStore`]'s, checked by the same suite (the `watch_*`
/// properties, and the `cache_*` ones that run a Controller over the
/// store):
///
/// - **Snapshot** holds every object of the kind written before it, and
///   nothing deleted, ordered by namespace and name, at a revision no lower
///   than any write it holds.
/// - **Watch** after revision `r` delivers exactly the writes of its kind
///   with revisions above `r` (a put for a create or an update, a delete
///   for a delete), in order, with increasing revisions, and nothing of
///   other kinds; resuming after any event's revision delivers exactly the
///   events after it. It stays open while the store runs, and an object
///   the store wrote itself always decodes (no
///   [`WatchEvent::Undecodable`]). History that is gone is
///   [`StoreError::Compacted`], never a silent gap.
/// - **Current revision** is at least the revision of the last write, and
///   every kind's watch reaches it promptly (an event or a
///   [`WatchEvent::Progress`]): a Controller's writes wait on it to read
///   their own writes.
/// - `snapshot` and `watch` of an unregistered kind fail with
///   [`StoreError::UnknownKind`].
#[async_trait]
pub trait ConfigWatch: ConfigStore {
    /// Every object of `kind` at one revision, ordered by namespace and
    /// name. An unregistered kind is [`StoreError::UnknownKind`].
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError>;

    /// The changes to `kind` strictly after `after`, as they happen, in
    /// revision order. Fails (now or in the stream) with
    /// [`StoreError::Compacted`] when that history is gone; an unregistered
    /// kind is [`StoreError::UnknownKind`].
    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError>;

    /// The store's current revision. Every kind's watch reaches it promptly,
    /// through an event or a [`WatchEvent::Progress`]; callers use it to wait
    /// until a cache has seen their own writes.
    async fn current_revision(&self) -> Result<Revision, StoreError>;
}
