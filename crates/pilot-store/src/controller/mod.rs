//! The cached [`Controller`]: lists and watches a backend, keeps a local
//! cache, and fans typed events out to subscribers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{Config, ConfigKey, ConfigKind, ConfigWatch, DynConfig, FieldError, Revision, StoreError};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

mod follow;
mod store;

use crate::handlers::{Handler, Handlers};
use crate::{ConfigEvent, ConfigIndex, Notification, Quarantine};

/// How a [`Controller`] runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ControllerOptions {
    /// The kinds to cache; `None` means every kind registered when the
    /// Controller is built. The set is fixed then: see [`Controller`] for
    /// what happens to other kinds.
    pub kinds: Option<Vec<String>>,
    /// How many notifications a subscriber may fall behind before it gets
    /// [`Notification::Lagged`].
    pub event_buffer: usize,
    /// How long a write through the Controller waits for the cache to show
    /// it (read-your-writes). The write has succeeded either way.
    pub write_sync_timeout: Duration,
    /// First delay before retrying a failed list or watch.
    pub retry_min: Duration,
    /// Longest delay between retries.
    pub retry_max: Duration,
    /// Objects larger than this, as JSON, are quarantined like invalid
    /// ones: a server whose API refuses larger bodies sets its limit here,
    /// so an object written around the API is held to it too. `None`: no
    /// limit.
    pub max_object_bytes: Option<usize>,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            kinds: None,
            event_buffer: 4096,
            write_sync_timeout: Duration::from_secs(5),
            retry_min: Duration::from_millis(50),
            retry_max: Duration::from_secs(5),
            max_object_bytes: None,
        }
    }
}

/// Where the cache of one kind stands.
#[derive(Debug, Clone, Copy, Default)]
struct Caught {
    /// Every write of the kind up to this revision is in the cache, by the
    /// events and lists applied and the backend's progress notifications;
    /// `None` before the first list.
    applied: Option<Revision>,
    /// The newest revision of an event or a list the cache applied. A
    /// progress notification does not move it: etcd before 3.4.25 and
    /// 3.5.8 could send a requested one ahead of an event of the same
    /// revision (etcd #15220), so a write is known to be in the cache once
    /// this reaches the write's own revision, whatever the notifications
    /// said.
    delivered: Revision,
    /// The newest revision a create or update through this Controller
    /// stored. While `delivered` is behind it (the cache did not show the
    /// write within [`ControllerOptions::write_sync_timeout`]), reads of
    /// one object go to the backend, so a client always reads its writes.
    written: Revision,
}

/// A cache of a [`ConfigWatch`] backend that streams typed events.
///
/// - [`Controller::run`] lists every kind, then watches it; the cache serves
///   `get` and `list`; writes go to the backend and return once the cache
///   shows them (read-your-writes), so the Controller is itself a
///   [`ConfigStore`](pilot_model::ConfigStore).
/// - Subscribers get [`Notification`]s per kind, as streams
///   ([`Controller::subscribe`], [`Controller::subscribe_typed`]) or as
///   handlers ([`Controller::add_handler`]) that run one event at a time, in
///   registration order. A subscriber sees an event only after the cache
///   reflects it and [`Controller::applied_revision`] counts it.
/// - When a watch cannot resume (history compacted), the Controller lists
///   again and emits the adds, updates and deletes the gap hid.
/// - A slow subscriber never blocks the cache or other subscribers: past
///   [`ControllerOptions::event_buffer`] it receives
///   [`Notification::Lagged`] and can resync from the cache.
///
/// # Which kinds
///
/// A Controller watches a fixed set of kinds, decided when it is built:
/// every kind registered with the backend's [`KindRegistry`](pilot_model::KindRegistry) at that
/// moment, or [`ControllerOptions::kinds`]. A kind registered later is not
/// watched, and the Controller says so rather than half-serve it: writes
/// (`create`, `update`, `delete`, `update_status`), the cache
/// ([`list_cached`](Controller::list_cached),
/// [`get_cached`](Controller::get_cached)), subscriptions
/// ([`subscribe`](Controller::subscribe),
/// [`subscribe_typed`](Controller::subscribe_typed),
/// [`add_handler`](Controller::add_handler)) and
/// [`sync_with_backend`](Controller::sync_with_backend) of such a kind fail
/// with [`StoreError::NotWatched`], naming the kind and the kinds watched.
/// Register every kind first, then build the Controller. Reads through
/// [`ConfigStore`](pilot_model::ConfigStore) (`get`, `list`) of a registered kind it does not watch
/// are answered by the backend itself; a kind the registry does not know
/// is [`StoreError::UnknownKind`] everywhere, as for any store.
///
/// Dropping the last handle stops its tasks.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use pilot_model::{ConfigMeta, ConfigStore, DynConfig, Event, KindRegistry, KindSchema, StoreError};
/// use pilot_store::{Controller, Notification};
/// use pilot_store_memory::MemoryConfigStore;
///
/// let registry = KindRegistry::new();
/// registry.register_schema(KindSchema::new("Note", "notes", "example.com", "v1", |_, _| {})).unwrap();
/// let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry.clone())));
/// let mut notes = controller.subscribe("Note").unwrap();
/// controller.run();
/// controller.wait_synced().await;
///
/// let note = DynConfig { meta: ConfigMeta::new("Note", "default", "n1"), spec: serde_json::json!({}) };
/// controller.create(note).await.unwrap();
/// let Some(Notification::Event(Event::Added(added))) = notes.next().await else { panic!() };
/// assert_eq!(added.meta.name, "n1");
/// assert_eq!(controller.list_cached("Note", None).unwrap().len(), 1);
///
/// // A kind registered after the Controller was built is refused, by name.
/// registry.register_schema(KindSchema::new("Late", "lates", "example.com", "v1", |_, _| {})).unwrap();
/// let late = DynConfig { meta: ConfigMeta::new("Late", "default", "l1"), spec: serde_json::json!({}) };
/// let refused = controller.create(late).await.unwrap_err();
/// assert!(matches!(refused, StoreError::NotWatched { ref kind, .. } if kind == "Late"));
/// # });
/// ```
pub struct Controller {
    shared: Arc<Shared>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    started: AtomicBool,
}

struct Shared {
    backend: Arc<dyn ConfigWatch>,
    cache: ConfigIndex,
    /// Delivered objects that fail validation (never in `cache`).
    quarantine: Quarantine,
    kinds: Vec<String>,
    /// Per kind: where its cache stands.
    applied: HashMap<String, watch::Sender<Caught>>,
    synced: watch::Sender<usize>,
    events: broadcast::Sender<ConfigEvent>,
    handlers: Handlers,
    options: ControllerOptions,
}

impl Controller {
    /// A Controller over `backend` for every kind registered with it.
    pub fn new(backend: Arc<dyn ConfigWatch>) -> Self {
        Self::with_options(backend, ControllerOptions::default())
    }

    /// A Controller over `backend` with `options`.
    pub fn with_options(backend: Arc<dyn ConfigWatch>, options: ControllerOptions) -> Self {
        let kinds = options
            .kinds
            .clone()
            .unwrap_or_else(|| backend.registry().kinds());
        let applied = kinds
            .iter()
            .map(|k| (k.clone(), watch::channel(Caught::default()).0))
            .collect();
        let (events, _) = broadcast::channel(options.event_buffer.max(1));
        Controller {
            shared: Arc::new(Shared {
                quarantine: Quarantine::new(backend.registry().clone())
                    .with_max_object_bytes(options.max_object_bytes),
                backend,
                cache: ConfigIndex::new(),
                kinds,
                applied,
                synced: watch::channel(0).0,
                events,
                handlers: Handlers::default(),
                options,
            }),
            tasks: Mutex::new(Vec::new()),
            started: AtomicBool::new(false),
        }
    }

    /// Starts listing and watching every kind, and the handler queue. Call
    /// it once, inside a Tokio runtime, after registering the subscribers
    /// that must see the initial list; later calls do nothing.
    pub fn run(&self) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        let receiver = self.shared.events.subscribe();
        tasks.push(tokio::spawn(self.shared.handlers.clone().dispatch(receiver)));
        for kind in &self.shared.kinds {
            tasks.push(tokio::spawn(Arc::clone(&self.shared).follow(kind.clone())));
        }
    }

    /// The kinds this Controller caches.
    pub fn kinds(&self) -> &[String] {
        &self.shared.kinds
    }

    /// True once every kind has been listed.
    pub fn has_synced(&self) -> bool {
        *self.shared.synced.borrow() == self.shared.kinds.len()
    }

    /// Waits until every kind has been listed.
    pub async fn wait_synced(&self) {
        let total = self.shared.kinds.len();
        let mut synced = self.shared.synced.subscribe();
        // The sender lives in `shared`, which outlives this borrow.
        let _ = synced.wait_for(|count| *count == total).await;
    }

    /// Whether the cache of `kind` may lack a write made through this
    /// Controller (it did not show it in time): reads of one object then
    /// go to the backend.
    pub(crate) fn behind_own_writes(&self, kind: &str) -> bool {
        self.shared.applied.get(kind).is_some_and(|applied| {
            let caught = applied.borrow();
            caught.delivered < caught.written
        })
    }

    /// The cached object with `key`; [`StoreError::NotWatched`] for a kind
    /// this Controller does not watch (see [`Controller`]).
    pub fn get_cached(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.watched(&key.kind)?;
        Ok(self.shared.cache.get(key))
    }

    /// The cached objects of `kind`, in `namespace` or all, ordered by
    /// namespace and name; [`StoreError::NotWatched`] for a kind this
    /// Controller does not watch (see [`Controller`]).
    pub fn list_cached(
        &self,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.watched(kind)?;
        Ok(self.shared.cache.list(kind, namespace))
    }

    /// The objects the backend delivered that fail validation, held out of
    /// the cache.
    pub fn quarantine(&self) -> &Quarantine {
        &self.shared.quarantine
    }

    /// Whether `config`, as a backend delivered it, passes validation: the
    /// cache's or the quarantine's verdict for the same key and resource
    /// version, else a fresh check. For readers of the backend itself (a
    /// REST list or watch) that must serve what the cache would.
    pub fn admits(&self, config: &DynConfig) -> Result<(), Vec<FieldError>> {
        let key = config.key();
        let version = &config.meta.resource_version;
        if version.is_some() {
            if self
                .shared
                .cache
                .get(&key)
                .is_some_and(|cached| &cached.meta.resource_version == version)
            {
                return Ok(());
            }
            if let Some(held) = self.shared.quarantine.get(&key)
                && &held.resource_version == version
            {
                return Err(held.errors);
            }
        }
        self.shared.quarantine.check(config)
    }

    /// Notifications about `kind` from now on; [`StoreError::NotWatched`]
    /// for a kind this Controller does not watch (see [`Controller`]).
    pub fn subscribe(
        &self,
        kind: &str,
    ) -> Result<BoxStream<'static, Notification<Arc<DynConfig>>>, StoreError> {
        self.watched(kind)?;
        let kind = kind.to_string();
        Ok(self
            .subscribe_all()
            .filter(move |n| {
                let keep = match n {
                    Notification::Event(event) => event.object().meta.kind == kind,
                    Notification::Lagged { .. } => true,
                };
                futures::future::ready(keep)
            })
            .boxed())
    }

    /// Notifications about every kind from now on, in the order the cache
    /// applied them.
    pub fn subscribe_all(&self) -> BoxStream<'static, Notification<Arc<DynConfig>>> {
        let receiver = self.shared.events.subscribe();
        futures::stream::unfold(receiver, |mut receiver| async move {
            let notification = match receiver.recv().await {
                Ok(event) => Notification::Event(event),
                Err(broadcast::error::RecvError::Lagged(missed)) => Notification::Lagged { missed },
                Err(broadcast::error::RecvError::Closed) => return None,
            };
            Some((notification, receiver))
        })
        .boxed()
    }

    /// Typed notifications about kind `K`. An object whose spec does not
    /// decode as `K` (written around validation) is logged and skipped.
    /// [`StoreError::NotWatched`] when this Controller does not watch `K`
    /// (see [`Controller`]).
    pub fn subscribe_typed<K: ConfigKind>(
        &self,
    ) -> Result<BoxStream<'static, Notification<Config<K>>>, StoreError> {
        Ok(self
            .subscribe(&K::id())?
            .filter_map(|n| async move {
                match n {
                    Notification::Lagged { missed } => Some(Notification::Lagged { missed }),
                    Notification::Event(event) => match event.try_map(|c| Config::<K>::from_dyn(&c)) {
                        Ok(event) => Some(Notification::Event(event)),
                        Err(error) => {
                            tracing::warn!(%error, "skipping an object that does not decode as its kind");
                            None
                        }
                    },
                }
            })
            .boxed())
    }

    /// Registers a handler for `kind`. Handlers run on one queue, one
    /// notification at a time, in registration order; a handler may write
    /// through the Controller and will read its own writes from the cache.
    /// [`StoreError::NotWatched`] for a kind this Controller does not watch
    /// (see [`Controller`]).
    pub fn add_handler(&self, kind: &str, handler: impl Handler) -> Result<(), StoreError> {
        self.watched(kind)?;
        self.shared.handlers.add(kind, handler);
        Ok(())
    }

    /// The revision the cache of `kind` has caught up with: every write
    /// to `kind` up to it is in the cache. `None` before the kind's first
    /// list, or for a kind this Controller does not follow.
    pub fn applied_revision(&self, kind: &str) -> Option<Revision> {
        self.shared
            .applied
            .get(kind)
            .and_then(|applied| applied.borrow().applied)
    }

    /// Waits until the cache shows every write the backend had completed
    /// when this was called (bounded by
    /// [`ControllerOptions::write_sync_timeout`]), as far as the backend's
    /// progress notifications tell: on etcd before 3.4.25 and 3.5.8 one
    /// can run ahead of the events (etcd #15220). The Controller's own
    /// writes do not rely on it: each waits for its own object.
    /// [`StoreError::NotWatched`] for a kind this Controller does not watch
    /// (see [`Controller`]).
    pub async fn sync_with_backend(&self, kind: &str) -> Result<(), StoreError> {
        self.watched(kind)?;
        let Some(applied) = self.shared.applied.get(kind) else {
            return Ok(());
        };
        let target = self.shared.backend.current_revision().await?;
        let mut applied = applied.subscribe();
        let caught_up = applied.wait_for(|c| c.applied.is_some_and(|r| r >= target));
        if tokio::time::timeout(self.shared.options.write_sync_timeout, caught_up)
            .await
            .is_err()
        {
            tracing::warn!(kind, target, "cache did not catch up with the backend in time");
        }
        Ok(())
    }

    /// After a successful write: wait (up to
    /// [`ControllerOptions::write_sync_timeout`]) until `done` holds of the
    /// cache, checked after each event the cache applies. The write has
    /// happened whatever this finds, so a timeout is logged, not returned.
    async fn await_cache(&self, kind: &str, what: &str, done: impl Fn(&Caught) -> bool) {
        let Some(applied) = self.shared.applied.get(kind) else {
            return;
        };
        let mut applied = applied.subscribe();
        let caught_up = applied.wait_for(|c| done(c));
        if tokio::time::timeout(self.shared.options.write_sync_timeout, caught_up)
            .await
            .is_err()
        {
            tracing::warn!(kind, what, "the cache did not show a write through it in time");
        }
    }

    /// After a create or update that stored `stored`: the cache has
    /// applied an event (or a list) at the write's revision or later, so
    /// it shows the write or what came after it. A version that is not a
    /// revision falls back to [`Controller::sync_with_backend`].
    async fn await_stored(&self, stored: &DynConfig) {
        let kind = &stored.meta.kind;
        match stored
            .meta
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<Revision>().ok())
        {
            Some(revision) => {
                if let Some(applied) = self.shared.applied.get(kind) {
                    applied.send_if_modified(|c| {
                        let newer = revision > c.written;
                        c.written = c.written.max(revision);
                        newer
                    });
                }
                self.await_cache(kind, "a create or update", |c| c.delivered >= revision)
                    .await
            }
            None => {
                if let Err(error) = self.sync_with_backend(kind).await {
                    tracing::warn!(kind, %error, "could not confirm that the cache shows a write");
                }
            }
        }
    }

    fn watches(&self, kind: &str) -> bool {
        self.shared.applied.contains_key(kind)
    }

    /// Ok for a kind this Controller watches; [`StoreError::UnknownKind`]
    /// for one the registry does not know, [`StoreError::NotWatched`] for
    /// one it knows but this Controller does not watch.
    fn watched(&self, kind: &str) -> Result<(), StoreError> {
        if self.watches(kind) {
            return Ok(());
        }
        if !self.shared.backend.registry().contains(kind) {
            return Err(StoreError::UnknownKind {
                kind: kind.to_string(),
            });
        }
        Err(StoreError::NotWatched {
            kind: kind.to_string(),
            watched: self.shared.kinds.clone(),
        })
    }
}

impl Drop for Controller {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}
