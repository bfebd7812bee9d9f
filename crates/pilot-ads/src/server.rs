//! The ADS server: one push pipeline publishing snapshots, the streams
//! that serve them, and the feedback they record. Cloning a handle gives
//! another handle on the same server.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use pilot_model::{ProxyDistribution, ServiceDiscovery};
use pilot_store::Controller;

use crate::feedback::{ProxyStatus, RefusedStreams, StreamEnds};
use crate::options::XdsOptions;
use crate::push::{PushSubscription, PushTimings, pipeline};
use crate::state::ServerState;
use crate::stream::{self, ServeOptions};
use crate::xds_type::TYPES;

/// The ADS server. Cloning gives another handle on the same server.
#[derive(Clone)]
pub struct XdsServer {
    inner: Arc<ServerState>,
}

impl XdsServer {
    /// A server for the configuration cached by `controller` (which must be
    /// running) and the services of `registry`. Call inside a Tokio runtime.
    pub fn new(
        controller: Arc<Controller>,
        registry: Arc<dyn ServiceDiscovery>,
        options: XdsOptions,
    ) -> Self {
        let inner = Arc::new(ServerState::new(options.clone()));
        let task = tokio::spawn(pipeline::run(
            Arc::downgrade(&inner),
            controller,
            registry,
            options,
        ));
        inner.hold_pipeline(task);
        XdsServer { inner }
    }

    /// Serves the TLS credentials of `source` as SDS `Secret`s over ADS:
    /// the certificates a Gateway API listener's `certificateRefs`, an
    /// Istio Gateway server's `credentialName` or a DestinationRule's
    /// `credentialName` name (`kubernetes://[<namespace>/]<name>`, and
    /// `<name>-cacert` for its `ca.crt`). A proxy reads its own
    /// namespace's; a router proxy also another namespace's that a
    /// ReferenceGrant there lets Gateways of its namespace refer to. A
    /// change of a credential reaches the proxies holding it at once. An
    /// edge server terminating TLS with a certificate its proxy cannot be
    /// sent (the source does not hold it, the proxy may not read it, or
    /// there is no source) is left out of the proxy's listeners until it
    /// can be, so that Envoy does not hold them waiting for it. Set once:
    /// a second source is ignored, with a warning.
    #[must_use]
    pub fn with_credentials(self, source: Arc<dyn pilot_model::CredentialSource>) -> Self {
        let mut changes = source.changes();
        if self.inner.credentials.set(source).is_err() {
            tracing::warn!("the ADS server already serves credentials from a source: the new one is ignored");
            return self;
        }
        let state = Arc::downgrade(&self.inner);
        let task = tokio::spawn(async move {
            use futures::StreamExt;
            while changes.next().await.is_some() {
                let Some(state) = state.upgrade() else { return };
                state.credential_changes.send_modify(|tick| *tick += 1);
            }
        });
        self.inner.hold_pipeline(task);
        self
    }

    /// Serves ADS on `address` with the default [`ServeOptions`] until
    /// `shutdown` completes: HTTP/2 keepalives (a dead proxy's stream is
    /// noticed and its task ended) and TCP keepalive. On shutdown every
    /// stream is ended cleanly, so the proxies reconnect elsewhere and the
    /// call returns.
    pub async fn serve(
        &self,
        address: std::net::SocketAddr,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), tonic::transport::Error> {
        stream::serve_address(&self.inner, address, shutdown).await
    }

    /// Serves ADS on `listener` as `options` say until `shutdown`
    /// completes, then ends every stream cleanly and returns once the
    /// connections have closed.
    pub async fn serve_with(
        &self,
        listener: tokio::net::TcpListener,
        options: ServeOptions,
        shutdown: impl std::future::Future<Output = ()>,
    ) -> Result<(), tonic::transport::Error> {
        stream::serve_listener(&self.inner, listener, options, shutdown).await
    }

    /// Connections closed at once since the server started because
    /// [`ServeOptions::max_connections`] were open, every one of them
    /// admitted (or over [`ServeOptions::max_pending_per_address`]).
    pub fn connections_refused(&self) -> u64 {
        self.inner.connections_refused.load(Ordering::Relaxed)
    }

    /// Connections closed since the server started to make room for a new
    /// one, every one of [`ServeOptions::max_connections`] being taken:
    /// each the oldest connection then open without an admitted stream.
    pub fn connections_evicted(&self) -> u64 {
        self.inner.connections_evicted.load(Ordering::Relaxed)
    }

    /// The streams refused since the server started, by reason.
    pub fn refused_streams(&self) -> RefusedStreams {
        self.inner.refused.snapshot()
    }

    /// Ends every stream (each proxy then reconnects, to this server or
    /// another). Streams opened afterwards end at once.
    pub fn close(&self) {
        self.inner.close();
    }

    /// The feedback of every connected proxy.
    pub fn status(&self) -> Vec<ProxyStatus> {
        self.inner.feedback.proxies()
    }

    /// A number that moves whenever [`status`](Self::status) or
    /// [`distribution`](Self::distribution) may have changed (a proxy came,
    /// went, was sent something or answered; a push was published): equal
    /// numbers, equal records.
    pub fn feedback_changes(&self) -> (u64, Option<u64>) {
        (self.inner.feedback.changes(), self.version())
    }

    /// What every connected proxy has, in store revisions: the records an
    /// object's distribution status is computed from
    /// ([`pilot_model::distribution_status`]).
    pub fn distribution(&self) -> Vec<ProxyDistribution> {
        let proxies = self.status();
        let revisions = self.inner.revisions.lock().unwrap_or_else(|p| p.into_inner());
        proxies.iter().map(|p| p.distribution(&revisions)).collect()
    }

    /// Every push from now on (for metrics): see [`PushSubscription`].
    pub fn subscribe_pushes(&self) -> PushSubscription {
        PushSubscription::new(self.inner.pushes.subscribe())
    }

    /// Where pushes' time went since the server started: debounce, build,
    /// queue, per type and convergence histograms (what pilot-discovery
    /// exports as Istio's push metrics).
    pub fn push_timings(&self) -> PushTimings {
        self.inner.timings.read()
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

    /// `proxy`'s scope at the latest push: the hosts it is sent and why
    /// each, and the Sidecar (or default) that decided it; `None` before
    /// the first push. The proxy's workload labels are its own and its
    /// instances' in the registry.
    pub fn scope(&self, proxy: &pilot_xds::Proxy) -> Option<pilot_xds::ProxyScope> {
        use pilot_model::ServiceDiscovery;
        let snapshot = self.inner.snapshots.borrow().clone()?;
        let own = snapshot.registry.host_instances(&[proxy.ip]);
        let scopes = &snapshot.generated.scopes;
        Some(
            match scopes.scope(proxy, &own, &snapshot.registry, &snapshot.rules) {
                Some(scope) => (*scope).clone(),
                // Nothing restricts anyone: every host.
                None => pilot_xds::serving::scope_of(
                    &crate::push::proxy_namespace(proxy),
                    None,
                    &*snapshot.registry,
                    &snapshot.rules.mesh,
                    snapshot.rules.model(),
                ),
            },
        )
    }

    /// Which proxies each routing object concerns at the latest push (by
    /// their scopes): the proxies its distribution status counts.
    pub fn audience(&self) -> crate::Audience {
        crate::Audience::new(self.inner.snapshots.borrow().clone())
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
