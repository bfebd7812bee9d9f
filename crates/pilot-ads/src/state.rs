//! [`ServerState`]: what the push pipeline and every stream of one server
//! share. The pipeline publishes snapshots into it; the streams serve them
//! and record their feedback and counters in it. It depends on the push's
//! data and the feedback only; the public handle
//! ([`XdsServer`](crate::XdsServer)) and the streams sit on top of it.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::feedback::{Feedback, PushRevisions, RefusalCounters, Rejections};
use crate::options::XdsOptions;
use crate::push::{Diffs, MeshSnapshot, NameSets, Parking, PushInfo, Timings};

/// One server's shared state. Dropping the last reference (the last
/// handle and stream gone) stops the push pipeline.
pub(crate) struct ServerState {
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
    /// Connections without an admitted stream closed to make room for a
    /// new one, every slot being taken.
    pub(crate) connections_evicted: AtomicU64,
    /// Streams refused (credentials, node ids, malformed requests).
    pub(crate) refused: RefusalCounters,
    /// The objects each proxy rejected, left out of its configuration
    /// (shared with the push pipeline, which pushes when one is recorded).
    pub(crate) rejections: Arc<Rejections>,
    /// The streams parked on their class: a push wakes only those whose
    /// class it does not keep.
    pub(crate) parking: Parking,
    /// Where pushes' time went (`push/timings.rs`).
    pub(crate) timings: Timings,
    /// What ztunnels are served, generated once per push for them all
    /// (`push/ambient.rs`).
    pub(crate) ambient: crate::push::ambient::AmbientCache,
    /// Where the Secrets proxies ask for come from
    /// ([`XdsServer::with_credentials`](crate::XdsServer::with_credentials));
    /// unset, none is served.
    pub(crate) credentials: OnceLock<Arc<dyn pilot_model::CredentialSource>>,
    /// Ticks after each change of the credentials: the streams holding
    /// Secrets look again (`stream/secrets.rs`).
    pub(crate) credential_changes: watch::Sender<u64>,
    /// The push pipeline's task, and the task following the credentials,
    /// aborted when the state is dropped.
    pipeline: Mutex<Vec<JoinHandle<()>>>,
}

impl ServerState {
    /// A server's state before its first push, with no pipeline yet.
    pub(crate) fn new(options: XdsOptions) -> Self {
        ServerState {
            snapshots: watch::channel(None).0,
            feedback: Default::default(),
            revisions: Mutex::new(PushRevisions::default()),
            options,
            closing: watch::channel(false).0,
            next_connection: AtomicU64::new(0),
            names: Default::default(),
            diffs: Default::default(),
            pushes: tokio::sync::broadcast::channel(64).0,
            connections_refused: AtomicU64::new(0),
            connections_evicted: AtomicU64::new(0),
            refused: Default::default(),
            rejections: Default::default(),
            parking: Default::default(),
            timings: Default::default(),
            ambient: Default::default(),
            credentials: OnceLock::new(),
            credential_changes: watch::channel(0).0,
            pipeline: Mutex::new(Vec::new()),
        }
    }

    /// Keeps a task of the server's (the push pipeline, the credentials'
    /// follower), to abort it when the state is dropped.
    pub(crate) fn hold_pipeline(&self, task: JoinHandle<()>) {
        self.pipeline.lock().unwrap_or_else(|p| p.into_inner()).push(task);
    }

    /// Ends every stream; streams opened afterwards end at once.
    pub(crate) fn close(&self) {
        self.closing.send_replace(true);
    }
}

impl Drop for ServerState {
    fn drop(&mut self) {
        for task in self
            .pipeline
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
        {
            task.abort();
        }
    }
}
