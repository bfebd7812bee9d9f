//! [`ApiServer`]: what the REST API runs over and how it is configured
//! ([`ApiOptions`], [`WatchObserver`]), made into a router
//! (`router.rs`); and `ApiState`, what every handler shares, cloned into
//! each request.

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use pilot_model::{ConfigStore, ConfigWatch, DynConfig, KindRegistry};
use serde_json::Value;

/// The REST API over one store, to be made into an [`axum::Router`]
/// ([`into_router`](Self::into_router)).
///
/// By default it reads and writes the store itself, shows every object
/// the store holds, takes bodies up to 1 MiB, keeps watches open until
/// their clients leave, and documents no authentication. See the crate
/// documentation for an example.
pub struct ApiServer {
    backend: Arc<dyn ConfigWatch>,
    cache: Option<Arc<dyn ConfigStore>>,
    admits: Arc<Admits>,
    shutdown: Option<Shutdown>,
    watches: Option<Arc<dyn WatchObserver>>,
    options: ApiOptions,
}

/// Whether a stored object may be shown (validation on read).
pub(crate) type Admits = dyn Fn(&DynConfig) -> bool + Send + Sync;

/// The shutdown signal every watch waits on.
pub(crate) type Shutdown = Shared<BoxFuture<'static, ()>>;

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("cache", &self.cache.is_some())
            .field("shutdown", &self.shutdown.is_some())
            .field("watch_observer", &self.watches.is_some())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// The API over `store`, serving the kinds of its registry
    /// ([`ConfigStore::registry`], read at each request: a kind registered
    /// later is served from then on). Lists and watches always read
    /// `store`, and so do the checks a write makes against what is stored
    /// (`dryRun`, preconditions), so a list's `resourceVersion` is one
    /// its watch resumes after.
    pub fn new(store: Arc<dyn ConfigWatch>) -> Self {
        ApiServer {
            backend: store,
            cache: None,
            admits: Arc::new(|_: &DynConfig| true),
            shutdown: None,
            watches: None,
            options: ApiOptions::default(),
        }
    }

    /// Sends writes, and reads of one object, through `cache`: a cache in
    /// front of the same store (pilot-store's `Controller`, whose writes
    /// return once its cache shows them), so that what a client wrote is
    /// what the cache's other readers (the ADS server) see when the write
    /// answers.
    pub fn cache(mut self, cache: Arc<dyn ConfigStore>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Validation on read: an object of a list or watch for which `check`
    /// is false is not shown (a watch reports a shown object that starts
    /// failing as `DELETED`), as a cache that quarantines such objects
    /// would serve them. pilot-discovery passes its Controller's verdict
    /// (`Controller::admits`). By default every object is shown.
    pub fn admits(mut self, check: impl Fn(&DynConfig) -> bool + Send + Sync + 'static) -> Self {
        self.admits = Arc::new(check);
        self
    }

    /// Ends every open watch once `signal` completes (the response's
    /// stream ends, so a graceful shutdown of the listener is not held up
    /// by watches). By default watches end only when their client leaves
    /// or their `timeoutSeconds` pass.
    pub fn shutdown(mut self, signal: impl Future<Output = ()> + Send + 'static) -> Self {
        self.shutdown = Some(signal.boxed().shared());
        self
    }

    /// Tells `observer` when each watch opens and ends (pilot-discovery
    /// counts them in `/metrics`).
    pub fn watch_observer(mut self, observer: Arc<dyn WatchObserver>) -> Self {
        self.watches = Some(observer);
        self
    }

    /// Limits, and what the API's messages and documents say about the
    /// server serving it.
    pub fn options(mut self, options: ApiOptions) -> Self {
        self.options = options;
        self
    }

    /// The router serving the API, with its state. It answers paths it does
    /// not serve with a `NotFound` `Status` (its fallback: merge routers
    /// without one into it) and methods a path does not take with
    /// `MethodNotAllowed`.
    pub fn into_router(self) -> Router {
        let registry = self.backend.registry().clone();
        let state = ApiState {
            store: self
                .cache
                .unwrap_or_else(|| Arc::clone(&self.backend) as Arc<dyn ConfigStore>),
            backend: self.backend,
            registry,
            admits: self.admits,
            shutdown: self
                .shutdown
                .unwrap_or_else(|| futures::future::pending().boxed().shared()),
            watches: self.watches,
            watch_caches: Default::default(),
            options: Arc::new(self.options),
        };
        crate::router::router(state)
    }
}

/// Told when a REST watch opens and when it ends.
pub trait WatchObserver: Send + Sync {
    /// A watch's response started.
    fn opened(&self);

    /// A watch that [`opened`](Self::opened) ended: its stream finished,
    /// timed out, failed, was dropped by its client or by shutdown.
    fn closed(&self);
}

/// Limits, and what the API says about the server that serves it. Built
/// from [`Default`], with the fields to change set.
///
/// ```
/// let mut options = pilot_apiserver::ApiOptions::default();
/// options.max_body_bytes = 64 * 1024;
/// options.max_body_bytes_setting = Some("--max-body-bytes".into());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ApiOptions {
    /// The largest request body, in bytes: a larger one is refused (413,
    /// `RequestEntityTooLarge`). Default 1 MiB.
    pub max_body_bytes: usize,
    /// What an operator sets to change [`max_body_bytes`](Self::max_body_bytes)
    /// (a flag such as `--max-body-bytes`), named in the 413 message and in
    /// `/openapi.json`. Default none.
    pub max_body_bytes_setting: Option<String>,
    /// What sets the deadline a layer around the router puts on request
    /// bodies, named in `/openapi.json`. A body that fails to read with an
    /// error whose chain holds a [`std::io::Error`] of kind
    /// [`TimedOut`](std::io::ErrorKind::TimedOut) is answered 408
    /// (`Timeout`) with that error's message. Default none.
    pub body_deadline_setting: Option<String>,
    /// The program serving the API, as the OpenAPI documents and the
    /// `Table` columns name it ("served by ...", "written by ...").
    /// Default `pilot`.
    pub server_name: String,
    /// `info.title` of `/openapi.json`. Default `pilot configuration API`.
    pub title: String,
    /// `info.description` of `/openapi.json`.
    pub description: String,
    /// Whether requests need a bearer token. The API checks none itself:
    /// the layer that does goes around the router. This declares the
    /// `bearer` scheme in `/openapi.json`, required (with 401, and 403 for
    /// writes) on every operation but those documented as `open`. Default
    /// false.
    pub bearer_auth: bool,
    /// The routes served beside the API, documented in `/openapi.json`:
    /// each a path and its OpenAPI 3 path item. An operation may say who
    /// may call it with `"x-access"`: `"open"` (no token, e.g. probes),
    /// `"read"` (the default) or `"write"`; the document turns that into
    /// its `security` and 401/403 responses (see
    /// [`bearer_auth`](Self::bearer_auth)). A response may refer to
    /// `#/components/schemas/Status`, the `Status` body. Default none.
    pub documented_routes: Vec<(String, Value)>,
    /// The most recent events of a kind its watch cache keeps for the
    /// REST watchers (`watch_cache.rs`): one store watch per kind serves
    /// every watcher, and a watcher that falls more than this many events
    /// behind is ended with `410 Expired` (it lists and watches again).
    /// 0 gives each watcher a store watch of its own, as before the cache.
    /// Default 1,024.
    pub watch_cache_events: usize,
    /// The shortest time between two writes of one cached watcher: under
    /// a burst of events (one writer creating objects one after another),
    /// a watcher writes what came meanwhile as one chunk instead of a
    /// wake-up and a socket write per event, which 500 watchers could not
    /// afford. An event after a quiet interval is written at once. Zero
    /// writes each event as soon as the watcher sees it. Default 100 ms
    /// (istiod's push debounce).
    pub watch_write_interval: std::time::Duration,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            max_body_bytes: 1024 * 1024,
            max_body_bytes_setting: None,
            body_deadline_setting: None,
            server_name: "pilot".to_string(),
            title: "pilot configuration API".to_string(),
            description: "Kubernetes-style REST API of pilot's configuration objects.".to_string(),
            bearer_auth: false,
            documented_routes: Vec::new(),
            watch_cache_events: 1024,
            watch_write_interval: std::time::Duration::from_millis(100),
        }
    }
}

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct ApiState {
    /// Writes and reads of one object: the cache, or the store.
    pub(crate) store: Arc<dyn ConfigStore>,
    /// The store itself, for lists, watches and the checks of writes.
    pub(crate) backend: Arc<dyn ConfigWatch>,
    /// The kinds served.
    pub(crate) registry: KindRegistry,
    /// Whether a stored object may be shown.
    pub(crate) admits: Arc<Admits>,
    /// Completes on shutdown; watches end.
    pub(crate) shutdown: Shutdown,
    /// Told of watches opening and ending.
    pub(crate) watches: Option<Arc<dyn WatchObserver>>,
    /// Every kind's shared store watch for the REST watchers
    /// (`watch_cache.rs`).
    pub(crate) watch_caches: Arc<crate::watch_cache::WatchCaches>,
    /// Limits and wording.
    pub(crate) options: Arc<ApiOptions>,
}
