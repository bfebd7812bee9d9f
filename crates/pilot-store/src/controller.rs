//! The cached [`Controller`]: lists and watches a backend, keeps a local
//! cache, and fans typed events out to subscribers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{
    Config, ConfigKey, ConfigKind, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, Event, FieldError,
    KindRegistry, Revision, Snapshot, StoreError, WatchEvent,
};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use crate::handlers::{Handler, Handlers};
use crate::{Backoff, ConfigEvent, ConfigIndex, Notification, Quarantine};

/// How a [`Controller`] runs.
#[derive(Debug, Clone)]
pub struct ControllerOptions {
    /// The kinds to cache; `None` means every kind registered when the
    /// Controller is built.
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
}

/// A cache of a [`ConfigWatch`] backend that streams typed events.
///
/// - [`Controller::run`] lists every kind, then watches it; the cache serves
///   `get` and `list`; writes go to the backend and return once the cache
///   shows them (read-your-writes), so the Controller is itself a
///   [`ConfigStore`].
/// - Subscribers get [`Notification`]s per kind, as streams
///   ([`Controller::subscribe`], [`Controller::subscribe_typed`]) or as
///   handlers ([`Controller::add_handler`]) that run one event at a time, in
///   registration order. A subscriber sees an event only after the cache
///   reflects it.
/// - When a watch cannot resume (history compacted), the Controller lists
///   again and emits the adds, updates and deletes the gap hid.
/// - A slow subscriber never blocks the cache or other subscribers: past
///   [`ControllerOptions::event_buffer`] it receives
///   [`Notification::Lagged`] and can resync from the cache.
///
/// Dropping the last handle stops its tasks.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use pilot_model::{ConfigMeta, ConfigStore, DynConfig, Event, KindRegistry, KindSchema};
/// use pilot_store::{Controller, Notification};
/// use pilot_store_memory::MemoryConfigStore;
///
/// let registry = KindRegistry::new();
/// registry.register_schema(KindSchema::new("Note", "notes", "example.com", "v1", |_, _| {})).unwrap();
/// let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry)));
/// let mut notes = controller.subscribe("Note");
/// controller.run();
/// controller.wait_synced().await;
///
/// let note = DynConfig { meta: ConfigMeta::new("Note", "default", "n1"), spec: serde_json::json!({}) };
/// controller.create(note).await.unwrap();
/// let Some(Notification::Event(Event::Added(added))) = notes.next().await else { panic!() };
/// assert_eq!(added.meta.name, "n1");
/// assert_eq!(controller.list_cached("Note", None).len(), 1);
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

    /// The cached object with `key`.
    pub fn get_cached(&self, key: &ConfigKey) -> Option<Arc<DynConfig>> {
        self.shared.cache.get(key)
    }

    /// The cached objects of `kind`, in `namespace` or all, ordered by
    /// namespace and name.
    pub fn list_cached(&self, kind: &str, namespace: Option<&str>) -> Vec<Arc<DynConfig>> {
        self.shared.cache.list(kind, namespace)
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

    /// Notifications about `kind` from now on.
    pub fn subscribe(&self, kind: &str) -> BoxStream<'static, Notification<Arc<DynConfig>>> {
        let kind = kind.to_string();
        self.subscribe_all()
            .filter(move |n| {
                let keep = match n {
                    Notification::Event(event) => event.object().meta.kind == kind,
                    Notification::Lagged { .. } => true,
                };
                futures::future::ready(keep)
            })
            .boxed()
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
    pub fn subscribe_typed<K: ConfigKind>(&self) -> BoxStream<'static, Notification<Config<K>>> {
        self.subscribe(K::KIND)
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
            .boxed()
    }

    /// Registers a handler for `kind`. Handlers run on one queue, one
    /// notification at a time, in registration order; a handler may write
    /// through the Controller and will read its own writes from the cache.
    pub fn add_handler(&self, kind: &str, handler: impl Handler) {
        self.shared.handlers.add(kind, handler);
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
    pub async fn sync_with_backend(&self, kind: &str) -> Result<(), StoreError> {
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
}

impl Drop for Controller {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}

impl Shared {
    /// Lists `kind`, then follows its watch, relisting whenever the watch
    /// cannot resume. Runs until the Controller is dropped.
    async fn follow(self: Arc<Self>, kind: String) {
        let mut backoff = Backoff::new(self.options.retry_min, self.options.retry_max);
        loop {
            let snapshot = match self.backend.snapshot(&kind).await {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    tracing::warn!(%kind, error = %error.details(), "list failed; retrying");
                    backoff.wait().await;
                    continue;
                }
            };
            backoff.reset();
            let mut revision = snapshot.revision;
            self.apply_snapshot(&kind, snapshot, revision);
            loop {
                let mut stream = match self.backend.watch(&kind, revision).await {
                    Ok(stream) => stream,
                    Err(StoreError::Compacted { .. }) => break,
                    Err(error) => {
                        tracing::warn!(%kind, revision, error = %error.details(), "watch failed; retrying");
                        backoff.wait().await;
                        continue;
                    }
                };
                let mut compacted = false;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) => {
                            revision = event.revision();
                            self.apply(&kind, event);
                            backoff.reset();
                        }
                        Err(StoreError::Compacted { requested, oldest }) => {
                            tracing::info!(%kind, requested, oldest, "watch history compacted; relisting");
                            compacted = true;
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%kind, revision, error = %error.details(), "watch broke; resuming");
                            break;
                        }
                    }
                }
                if compacted {
                    break;
                }
                backoff.wait().await;
            }
        }
    }

    /// Makes the cache equal `items` and emits the differences: deletes of
    /// what is gone, then adds and updates.
    fn apply_snapshot(&self, kind: &str, snapshot: Snapshot, revision: Revision) {
        let items = self.admit_listed(kind, snapshot);
        let listed: HashSet<ConfigKey> = items.iter().map(|c| c.key()).collect();
        for old in self.cache.list(kind, None) {
            if !listed.contains(&old.key()) {
                self.cache.remove(&old.key());
                self.publish(Event::Deleted(old));
            }
        }
        for config in items {
            match self.cache.get(&config.key()) {
                Some(old) if old.meta.resource_version == config.meta.resource_version => {}
                Some(old) => {
                    self.cache.insert(Arc::clone(&config));
                    self.publish(Event::Updated { old, new: config });
                }
                None => {
                    self.cache.insert(Arc::clone(&config));
                    self.publish(Event::Added(config));
                }
            }
        }
        self.mark_applied(kind, revision, true);
    }

    fn apply(&self, kind: &str, event: WatchEvent) {
        let revision = event.revision();
        let delivered = !matches!(event, WatchEvent::Progress { .. });
        match event {
            WatchEvent::Put { config, .. } if !self.quarantine.admit(&config) => {
                // The key's stored object is now one that may not be
                // served: what the cache had of it goes.
                if let Some(old) = self.cache.remove(&config.key()) {
                    self.publish(Event::Deleted(old));
                }
            }
            WatchEvent::Put { config, .. } => match self.cache.insert(Arc::clone(&config)) {
                // A status write is not a change of configuration: the
                // cache shows it, subscribers (the push) do not see it.
                Some(old) if status_only(&old, &config) => {}
                Some(old) => self.publish(Event::Updated { old, new: config }),
                None => self.publish(Event::Added(config)),
            },
            WatchEvent::Undecodable(undecodable) => {
                self.quarantine.hold_undecodable(&undecodable);
                if let Some(old) = self.cache.remove(&undecodable.key) {
                    self.publish(Event::Deleted(old));
                }
            }
            WatchEvent::Delete { key, .. } => {
                self.quarantine.release(&key);
                if let Some(old) = self.cache.remove(&key) {
                    self.publish(Event::Deleted(old));
                }
            }
            WatchEvent::Progress { .. } => {}
        }
        self.mark_applied(kind, revision, delivered);
    }

    /// Validation on read for a list: the items that may enter the cache;
    /// the others are quarantined, and quarantined keys the list no longer
    /// holds are released.
    fn admit_listed(&self, kind: &str, snapshot: Snapshot) -> Vec<Arc<DynConfig>> {
        let listed: HashSet<ConfigKey> = snapshot
            .items
            .iter()
            .map(|c| c.key())
            .chain(snapshot.undecodable.iter().map(|u| u.key.clone()))
            .collect();
        self.quarantine.retain_listed(kind, &listed);
        for undecodable in &snapshot.undecodable {
            self.quarantine.hold_undecodable(undecodable);
        }
        snapshot
            .items
            .into_iter()
            .filter(|c| self.quarantine.admit(c))
            .collect()
    }

    fn publish(&self, event: ConfigEvent) {
        // With no subscriber the event is not needed; the cache has it.
        let _ = self.events.send(event);
    }

    /// The cache of `kind` has applied everything up to `revision`: by an
    /// event or a list (`delivered`), or by a progress notification.
    fn mark_applied(&self, kind: &str, revision: Revision, delivered: bool) {
        let Some(applied) = self.applied.get(kind) else {
            return;
        };
        let mut first = false;
        applied.send_modify(|caught| {
            first = caught.applied.is_none();
            caught.applied = Some(revision);
            if delivered {
                caught.delivered = caught.delivered.max(revision);
            }
        });
        if first {
            self.synced.send_modify(|count| *count += 1);
        }
    }
}

/// True when `new` differs from `old` in its status (and, where the
/// backend moves it on status writes as Kubernetes does, its resource
/// version) only.
fn status_only(old: &DynConfig, new: &DynConfig) -> bool {
    old.spec == new.spec
        && old.meta.labels == new.meta.labels
        && old.meta.annotations == new.meta.annotations
        && old.meta.group == new.meta.group
        && old.meta.version == new.meta.version
        && old.meta.status != new.meta.status
}

#[async_trait]
impl ConfigStore for Controller {
    fn registry(&self) -> &KindRegistry {
        self.shared.backend.registry()
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        if !self.watches(&key.kind) {
            return self.shared.backend.get(key).await;
        }
        Ok(self.shared.cache.get(key))
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        if !self.watches(kind) {
            return self.shared.backend.list(kind, namespace).await;
        }
        Ok(self.shared.cache.list(kind, namespace))
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let stored = self.shared.backend.create(config).await?;
        self.await_stored(&stored).await;
        Ok(stored)
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let stored = self.shared.backend.update(config).await?;
        self.await_stored(&stored).await;
        Ok(stored)
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        if !self.watches(&key.kind) {
            return self.shared.backend.delete(key, resource_version).await;
        }
        // The delete's revision is not returned, so its event is what
        // shows it: subscribed before the write, so it cannot be missed.
        let mut events = self.shared.events.subscribe();
        self.shared.backend.delete(key, resource_version).await?;
        let cache = &self.shared.cache;
        let deleted = async {
            // Absent now: the delete (or an earlier one) is what a read
            // shows. Present: it was recreated after the delete, or the
            // delete's event is still to come; wait for that event.
            while cache.get(key).is_some() {
                match events.recv().await {
                    Ok(Event::Deleted(gone)) if gone.key() == *key => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        if tokio::time::timeout(self.shared.options.write_sync_timeout, deleted)
            .await
            .is_err()
        {
            tracing::warn!(kind = %key.kind, "the cache did not show a delete through it in time");
        }
        Ok(())
    }

    fn keeps_status(&self) -> bool {
        self.shared.backend.keeps_status()
    }

    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.shared
            .backend
            .update_status(key, observed_version, status.clone())
            .await?;
        // Shown once the cached object carries this status, or has moved
        // past the version the status was about (or is gone).
        let cache = &self.shared.cache;
        self.await_cache(&key.kind, "a status write", |_| match cache.get(key) {
            Some(cached) => {
                cached.meta.status.as_ref() == Some(&status)
                    || cached.meta.resource_version.as_deref() != Some(observed_version)
            }
            None => true,
        })
        .await;
        Ok(())
    }
}
