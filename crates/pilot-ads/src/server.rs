//! The ADS server: one push pipeline publishing snapshots, the streams
//! that serve them, and the feedback they record. Cloning a handle gives
//! another handle on the same server.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pilot_model::{ProxyDistribution, ServiceDiscovery};
use pilot_store::Controller;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::feedback::{Feedback, ProxyStatus, PushRevisions, StreamEnds};
use crate::push::{Diffs, MeshSnapshot, NameSets, PushInfo, pipeline};
use crate::stream::{AdsService, Authenticate, RefusalCounters, RefusedStreams};
use crate::xds_type::TYPES;

/// How the server batches and sends.
#[derive(Debug, Clone)]
pub struct XdsOptions {
    /// A push waits until no change has arrived for this long...
    pub debounce_quiet: Duration,
    /// ...but no longer than this after the first change.
    pub debounce_max: Duration,
    /// Responses queued per stream before the stream's task waits.
    pub send_queue: usize,
    /// Share Envoy clusters, load assignments, listeners and encoded
    /// virtual hosts between proxy classes, keep virtual hosts whose rules
    /// did not change from the previous push, and rebuild, after endpoint
    /// changes only, just the load assignments that changed (the default). False makes every class generate everything
    /// itself on every push, as before sharing existed; it is kept so the
    /// `ads` bench can measure both in one run.
    pub incremental: bool,
    /// State-of-the-world streams are sent, of load assignments and route
    /// configurations, only those whose version differs from what the
    /// stream was last sent (the default). False sends every subscribed
    /// one whenever any changed, as before; kept so the `ads` bench can
    /// measure both in one run.
    pub sotw_changed_only: bool,
}

impl Default for XdsOptions {
    fn default() -> Self {
        XdsOptions {
            debounce_quiet: Duration::from_millis(10),
            debounce_max: Duration::from_millis(50),
            send_queue: 16,
            incremental: true,
            sotw_changed_only: true,
        }
    }
}

/// The ADS server. Cloning gives another handle on the same server.
#[derive(Clone)]
pub struct XdsServer {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) snapshots: watch::Sender<Option<Arc<MeshSnapshot>>>,
    /// Every connected proxy's feedback, and the server's counters.
    pub(crate) feedback: Feedback,
    /// The store revision of each recent push.
    pub(crate) revisions: Mutex<PushRevisions>,
    pub(crate) options: XdsOptions,
    /// Set when the server shuts down: every stream ends.
    pub(crate) closing: watch::Sender<bool>,
    pub(crate) next_connection: AtomicU64,
    /// Every push, for whoever watches (metrics).
    pub(crate) pushes: tokio::sync::broadcast::Sender<PushInfo>,
    /// Subscriptions' name sets, shared between streams.
    pub(crate) names: NameSets,
    /// What changed between two pushes' encodings, shared between the
    /// streams (of both protocols) that move from one to the other.
    pub(crate) diffs: Diffs,
    /// Connections closed at once, over the cap.
    pub(crate) connections_refused: AtomicU64,
    /// Streams refused (credentials, node ids, malformed requests).
    pub(crate) refused: RefusalCounters,
    pipeline: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.pipeline.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

impl XdsServer {
    /// A server for the configuration cached by `controller` (which must be
    /// running) and the services of `registry`. Call inside a Tokio runtime.
    pub fn new(
        controller: Arc<Controller>,
        registry: Arc<dyn ServiceDiscovery>,
        options: XdsOptions,
    ) -> Self {
        let inner = Arc::new(Inner {
            snapshots: watch::channel(None).0,
            feedback: Default::default(),
            revisions: Mutex::new(PushRevisions::default()),
            options: options.clone(),
            closing: watch::channel(false).0,
            next_connection: AtomicU64::new(0),
            names: Default::default(),
            diffs: Default::default(),
            pushes: tokio::sync::broadcast::channel(64).0,
            connections_refused: AtomicU64::new(0),
            refused: Default::default(),
            pipeline: Mutex::new(None),
        });
        let task = tokio::spawn(pipeline::run(
            Arc::downgrade(&inner),
            controller,
            registry,
            options,
        ));
        *inner.pipeline.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        XdsServer { inner }
    }

    /// The ADS service to add to a `tonic::transport::Server` (beside
    /// other services, or on a server configured differently from
    /// [`serve`](Self::serve)).
    pub fn service(&self) -> AdsService {
        AdsService {
            server: self.clone(),
            auth: None,
            max_age: None,
        }
    }

    /// [`service`](Self::service), with every stream authenticated by
    /// `auth` first: a stream it refuses ends at once with its status, and
    /// a caller may only claim the node ids its [`Caller::scope`] allows
    /// (`PERMISSION_DENIED` otherwise).
    pub fn authenticated_service(&self, auth: std::sync::Arc<dyn Authenticate>) -> AdsService {
        AdsService {
            server: self.clone(),
            auth: Some(auth),
            max_age: None,
        }
    }

    /// The streams refused since the server started, by reason.
    pub fn refused_streams(&self) -> RefusedStreams {
        self.inner.refused.snapshot()
    }

    /// Ends every stream (each proxy then reconnects, to this server or
    /// another). Streams opened afterwards end at once.
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    /// The feedback of every connected proxy.
    pub fn status(&self) -> Vec<ProxyStatus> {
        self.inner.feedback.proxies()
    }

    /// What every connected proxy has, in store revisions: the records an
    /// object's distribution status is computed from
    /// ([`pilot_model::distribution_status`]).
    pub fn distribution(&self) -> Vec<ProxyDistribution> {
        let proxies = self.status();
        let revisions = self.inner.revisions.lock().unwrap_or_else(|p| p.into_inner());
        proxies.iter().map(|p| p.distribution(&revisions)).collect()
    }

    /// Every push from now on (for metrics). The channel holds 64 pushes; a
    /// receiver further behind gets `RecvError::Lagged` and goes on.
    pub fn subscribe_pushes(&self) -> tokio::sync::broadcast::Receiver<PushInfo> {
        self.inner.pushes.subscribe()
    }

    /// The NACKs proxies have sent since the server started, over every
    /// type and stream.
    pub fn nacks_total(&self) -> u64 {
        self.inner.feedback.nacks_total()
    }

    /// The NACKs received since the server started, by type (`CDS`,
    /// `EDS`, `LDS`, `RDS`), over every stream.
    pub fn nacks_by_type(&self) -> [(&'static str, u64); TYPES.len()] {
        self.inner.feedback.nacks_by_type()
    }

    /// The responses sent (handed to a stream's send queue) since the
    /// server started, by type, over every stream, state of the world and
    /// incremental.
    pub fn sent_by_type(&self) -> [(&'static str, u64); TYPES.len()] {
        self.inner.feedback.sent_by_type()
    }

    /// The streams that ended since the server started, by reason (a
    /// stream ended on purpose or by a failure is counted here and logged
    /// with its node, so none goes silently).
    pub fn stream_ends(&self) -> StreamEnds {
        self.inner.feedback.stream_ends()
    }

    /// The version of the last push, once the first has happened.
    pub fn version(&self) -> Option<u64> {
        self.inner.snapshots.borrow().as_ref().map(|s| s.version)
    }

    /// Waits until a push at `version` or later has been published.
    pub async fn wait_version(&self, version: u64) {
        let mut snapshots = self.inner.snapshots.subscribe();
        let _ = snapshots
            .wait_for(|s| s.as_ref().is_some_and(|s| s.version >= version))
            .await;
    }
}
