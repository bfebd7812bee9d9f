//! The per-stream session, shared by both protocols: the proxy's identity,
//! the snapshot it is served from, nonces and ACK/NACK recording, the push
//! order with the re-sends Envoy needs, and how a stream ends. The protocol
//! layers (`sotw.rs`, `delta.rs`) keep only their subscriptions and decide
//! what a response of theirs carries.
//!
//! One rule for both protocols:
//! - An ACK is a request carrying the nonce of the type's latest response
//!   and no `error_detail`: the version of that response is recorded as
//!   ACKed (what the proxy applied). With `error_detail` it is a NACK: the
//!   version and message are recorded, and the proxy is not sent the same
//!   thing again (only a later change, or a new subscription, answers).
//!   A request with an older nonce records nothing (a newer response is on
//!   its way).
//! - Make before break. A push sends, in the order CDS, EDS, LDS, SRDS,
//!   RDS, what changed; after CDS changed, the load assignments of the
//!   changed clusters are sent again, new ones before the proxy subscribes
//!   to them (a new or changed cluster warms, waiting for its assignment,
//!   before any route names it); after LDS changed, the scopes and route
//!   configurations are sent again (a changed listener's connection
//!   manager subscribes afresh). Removals go the other way: a removed cluster (for delta,
//!   also a load assignment or route configuration) is withheld until the
//!   proxy has ACKed the listeners, scopes and routes of the push that removed it,
//!   then sent (`withheld.rs`).
//! - Blast radius. A NACK is blamed on the objects the refused content
//!   brought: those the first response of the type refused since the
//!   proxy's last ACK of it was generated from and the ACKed one was not
//!   (`push/inputs.rs`). They are recorded against the proxy's node id
//!   (`feedback/rejections.rs`), a push follows, and from then on the
//!   proxy's configuration is generated without them, so the other
//!   objects' changes reach it. Leaving an object out is a push like any
//!   other: its routes go first and its clusters' removal is withheld as
//!   above. A NACK that blames no object (no ACK of the type on this
//!   stream to compare with, or no object change in the refused content)
//!   leaves nothing out: the proxy keeps refusing until the content
//!   changes.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;

use futures::FutureExt;
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value;
use pilot_xds::Proxy;

use super::auth::Caller;
use super::secrets::{Asked, SECRET_URL, Secrets};
use super::transport::{Outgoing, RequestError, Requests, Responses, frame};
use super::withheld::{Point, Withheld};
use crate::feedback::EndReason;
use crate::push::{Inputs, LeftOut, MeshSnapshot, ProxyConfig};
use crate::state::ServerState;
use crate::xds_type::XdsType;

mod parking;

/// What to send again of a type regardless of what the proxy holds, or
/// what a response changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) enum Resend {
    /// Nothing.
    #[default]
    Nothing,
    /// Every subscribed resource.
    All,
    /// These resources (a set shared by the streams it is the same for).
    Names(Arc<BTreeSet<String>>),
}

impl Resend {
    pub(super) fn any(&self) -> bool {
        match self {
            Resend::Nothing => false,
            Resend::All => true,
            Resend::Names(names) => !names.is_empty(),
        }
    }
}

/// The stream is gone (its response body was dropped).
#[derive(Debug)]
pub(super) struct Gone;

/// How a request relates to the type's latest response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// No nonce: a new subscription (the type's first request, or a
    /// reconnecting proxy's).
    Initial,
    /// The latest response's nonce: an ACK or a NACK.
    Latest,
    /// An older response's nonce.
    Stale,
}

/// A stream protocol: the subscription bookkeeping of state of the world
/// or incremental xDS.
pub(super) trait Protocol: Sized + Send {
    /// What the proxy sends.
    type Request: super::transport::Request;
    /// True for the delta protocol (reported in the proxy's status).
    const INCREMENTAL: bool;

    /// A new stream's (empty) subscriptions.
    fn new() -> Self;

    /// The node a request carries (the first one must).
    fn node(request: &Self::Request) -> Option<&Node>;

    /// The type URL, the nonce answered (empty for none) and the NACK's
    /// message of a request.
    fn header(request: &Self::Request) -> (&str, &str, Option<&str>);

    /// True when the request subscribes to listeners by name: Envoys ask
    /// for every listener, gRPC clients and servers for named ones.
    fn names_listeners(request: &Self::Request) -> bool;

    /// Applies the subscription changes of a request for `t`; what to send
    /// in answer (`None`: nothing).
    fn subscribe(
        &mut self,
        session: &Session,
        t: XdsType,
        answer: Answer,
        request: Self::Request,
    ) -> Option<Resend>;

    /// True once the proxy has subscribed to `t`.
    fn subscribed(&self, t: XdsType) -> bool;

    /// The names a request for Secrets asks for (`secrets.rs`).
    fn secret_names(request: &Self::Request) -> Asked;

    /// Serves a ztunnel's stream to its end (`ambient.rs`), or refuses it
    /// (ztunnel is served over delta xDS only).
    fn serve_ztunnel(
        server: Arc<ServerState>,
        id: u64,
        deadline: Option<tokio::time::Instant>,
        proxy: Proxy,
        first: Self::Request,
        requests: Requests<Self::Request>,
        responses: Responses,
    ) -> impl Future<Output = ()> + Send;

    /// Sends `t` if the proxy lacks something of the session's current
    /// configuration or `resend` names something; returns what changed
    /// for the proxy (the names, or `All` when the protocol does not
    /// tell them apart).
    fn respond(
        &mut self,
        session: &mut Session,
        t: XdsType,
        resend: &Resend,
    ) -> impl Future<Output = Result<Resend, Gone>> + Send;
}

/// A type's latest response on a stream: its nonce (0 before the first
/// response) and version, as numbers.
#[derive(Default)]
struct Sent {
    nonce: u64,
    version: u64,
}

impl Sent {
    /// The nonce as a number (0 before the first response).
    fn number(&self) -> u64 {
        self.nonce
    }

    /// True when `nonce` is this response's, as it was sent.
    fn answered_by(&self, nonce: &str) -> bool {
        self.nonce != 0 && !nonce.starts_with(['0', '+']) && nonce.parse() == Ok(self.nonce)
    }
}

/// What a type's responses on a stream were generated from.
#[derive(Default)]
struct TypeInputs {
    /// The latest response's.
    sent: Option<Inputs>,
    /// What the proxy holds of the type was generated from: the latest
    /// response it ACKed, or a later push that changed nothing of the
    /// type for it while it had ACKed everything (so an object a later
    /// push brought to another type only is not blamed for this one).
    acked: Option<Inputs>,
    /// The first response sent since the proxy last ACKed one (what a
    /// NACK is blamed against).
    pending: Option<Inputs>,
}

/// One stream's state, whatever its protocol.
pub(super) struct Session {
    server: Arc<ServerState>,
    id: u64,
    proxy: Proxy,
    /// The proxy's node id.
    node: String,
    /// The objects left out of the current configuration: the proxy
    /// rejected them.
    left_out: LeftOut,
    /// Per type, what its responses were generated from.
    inputs: [TypeInputs; XdsType::ALL.len()],
    responses: Responses,
    snapshot: Option<Arc<MeshSnapshot>>,
    generated: Option<ProxyConfig>,
    sent: [Sent; XdsType::ALL.len()],
    /// Per type, the nonce (as a number) of the latest response the proxy
    /// ACKed: it has applied that response and every one before it.
    applied: [u64; XdsType::ALL.len()],
    /// Removals not sent yet: the routes and listeners the proxy applied
    /// may still name them (`withheld.rs`).
    pub(super) withheld: Withheld,
    nonce: u64,
    /// Its place among the streams parked on their class
    /// (`parking.rs`), while parked.
    parked: Option<crate::push::Ticket>,
    /// The Secrets it asked for and was sent (`secrets.rs`), once it asks
    /// for one.
    pub(super) secrets: Option<Box<Secrets>>,
}

impl Session {
    /// The proxy's configuration at the current snapshot (none before the
    /// first push).
    pub(super) fn config(&self) -> Option<&ProxyConfig> {
        self.generated.as_ref()
    }

    /// The server the stream belongs to.
    pub(super) fn server(&self) -> &ServerState {
        &self.server
    }

    /// The server the stream belongs to, shared.
    pub(super) fn server_handle(&self) -> Arc<ServerState> {
        Arc::clone(&self.server)
    }

    /// The proxy the stream serves.
    pub(super) fn proxy(&self) -> &Proxy {
        &self.proxy
    }

    /// The proxy's node id.
    pub(super) fn node_id(&self) -> &str {
        &self.node
    }

    /// The snapshot the stream is served from (none before the first push).
    pub(super) fn snapshot(&self) -> Option<&Arc<MeshSnapshot>> {
        self.snapshot.as_ref()
    }

    /// True once the proxy asked for a Secret.
    fn has_secrets(&self) -> bool {
        self.secrets.is_some()
    }

    /// A new nonce for a response.
    pub(super) fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        self.nonce
    }

    /// Sends a framed response as it is (Secrets: `secrets.rs`).
    pub(super) async fn send_raw(&mut self, message: Outgoing) -> Result<(), Gone> {
        self.responses.send(message).await.map_err(|_| Gone)
    }

    /// True once a response of `t` went out on this stream.
    pub(super) fn has_sent(&self, t: XdsType) -> bool {
        self.sent[t.index()].nonce != 0
    }

    /// Sends one response of `t` at the current snapshot's version: `head`
    /// builds the message's own fields from the version and a new nonce,
    /// `resources` are its encoded resources.
    pub(super) async fn send<M: prost::Message>(
        &mut self,
        t: XdsType,
        resources: Vec<bytes::Bytes>,
        head: impl FnOnce(String, String) -> M,
    ) -> Result<(), Gone> {
        let Some(snapshot) = &self.snapshot else {
            return Ok(());
        };
        let version = snapshot.version;
        self.nonce += 1;
        let nonce = self.nonce;
        let inputs = Inputs {
            objects: Arc::clone(&snapshot.objects),
            left_out: Arc::clone(&self.left_out),
        };
        let of_type = &mut self.inputs[t.index()];
        if of_type.pending.is_none() {
            of_type.pending = Some(inputs.clone());
        }
        of_type.sent = Some(inputs);
        let message = frame(&head(version.to_string(), nonce.to_string()), resources);
        self.server.feedback.sent(self.id, t, version);
        self.sent[t.index()] = Sent { nonce, version };
        self.responses.send(message).await.map_err(|_| Gone)
    }

    /// Records what a request answers, and says how it relates to the
    /// type's latest response.
    fn answer(&mut self, t: XdsType, nonce: &str, error: Option<&str>) -> Answer {
        if nonce.is_empty() {
            return Answer::Initial;
        }
        // An ACK of an older response still says the proxy applied it.
        if error.is_none()
            && let Ok(number) = nonce.parse::<u64>()
            && number <= self.nonce
        {
            let applied = &mut self.applied[t.index()];
            *applied = (*applied).max(number);
        }
        let sent = &self.sent[t.index()];
        if !sent.answered_by(nonce) {
            return Answer::Stale;
        }
        let feedback = &self.server.feedback;
        match error {
            Some(message) => {
                tracing::warn!(node = %self.proxy.node_id(), r#type = %t, version = sent.version, message, "NACK");
                feedback.nacked(self.id, t, sent.version, message);
                self.blame(t, message);
            }
            None => {
                tracing::debug!(node = %self.proxy.node_id(), r#type = %t, version = sent.version, "ACK");
                feedback.acked(self.id, t, sent.version);
                let of_type = &mut self.inputs[t.index()];
                of_type.acked = of_type.sent.clone();
                of_type.pending = None;
            }
        }
        Answer::Latest
    }

    /// Leaves out of the proxy's configuration the objects the content it
    /// refused in a response of `t` brought, if the NACK blames any.
    fn blame(&self, t: XdsType, message: &str) {
        let of_type = &self.inputs[t.index()];
        let (Some(applied), Some(refused)) =
            (&of_type.acked, of_type.pending.as_ref().or(of_type.sent.as_ref()))
        else {
            tracing::info!(node = self.node, r#type = %t, "the NACK names no object to leave out: the proxy ACKed no response of this type on this stream");
            return;
        };
        let mut blamed = refused.brought_since(applied);
        // A blamed object changed or deleted since is sent as it is now.
        if let Some(snapshot) = &self.snapshot {
            blamed.retain(|object| snapshot.objects.holds(object));
        }
        if blamed.is_empty() {
            tracing::info!(node = self.node, r#type = %t, "the NACK names no object to leave out: the refused content brought no object change");
            return;
        }
        self.server.rejections.record(&self.node, blamed, t, message);
    }

    /// Takes a new snapshot's configuration for the proxy (shared with the
    /// other proxies of its class); false when it is the one the stream
    /// holds (`crate::push::kept`): nothing to send.
    async fn refresh(&mut self, snapshot: Arc<MeshSnapshot>) -> bool {
        let (left_out, withheld) = snapshot.rejected.get(&self.node).cloned().unwrap_or_default();
        if !(withheld.is_empty() && self.left_out.is_empty()) {
            self.server.feedback.withheld(self.id, withheld);
        }
        if crate::push::kept(&snapshot, self.generated.as_ref(), &self.left_out, &left_out) {
            self.snapshot = Some(snapshot);
            return false;
        }
        self.generated = Some(snapshot.config(&self.proxy, &left_out).await);
        self.left_out = left_out;
        self.snapshot = Some(snapshot);
        true
    }

    /// Handles one request.
    async fn request<P: Protocol>(&mut self, layer: &mut P, request: P::Request) -> Result<(), Gone> {
        self.catch_up();
        let (url, nonce, error) = P::header(&request);
        if url == SECRET_URL {
            return self
                .secret_request(P::INCREMENTAL, nonce, error, P::secret_names(&request))
                .await;
        }
        let Some(t) = XdsType::from_url(url) else {
            tracing::debug!(
                type_url = url,
                "ignoring a request for a type this server does not serve"
            );
            return Ok(());
        };
        let answer = self.answer(t, nonce, error);
        if let Some(resend) = layer.subscribe(self, t, answer, request) {
            self.respond(layer, t, &resend).await?;
        }
        self.release(layer).await
    }

    /// The protocol's [`Protocol::respond`], timed when it sends
    /// (`push/timings.rs`: making and handing over one type's response).
    async fn respond<P: Protocol>(
        &mut self,
        layer: &mut P,
        t: XdsType,
        resend: &Resend,
    ) -> Result<Resend, Gone> {
        let sent = self.sent[t.index()].number();
        let started = tokio::time::Instant::now();
        let changed = layer.respond(self, t, resend).await?;
        if self.sent[t.index()].number() != sent {
            self.server.timings.push[t.index()].record(started.elapsed());
        }
        Ok(changed)
    }

    /// Sends the withheld removals the proxy's applied routes and
    /// listeners no longer refer to: clusters first, then load
    /// assignments and route configurations.
    async fn release<P: Protocol>(&mut self, layer: &mut P) -> Result<(), Gone> {
        let point = |of: &dyn Fn(XdsType) -> u64| Point {
            listeners: of(XdsType::Listener),
            scopes: of(XdsType::ScopedRoute),
            routes: of(XdsType::Route),
        };
        self.withheld.seal(point(&|t| self.sent[t.index()].number()));
        let released = self.withheld.release(point(&|t| self.applied[t.index()]));
        for t in released {
            if layer.subscribed(t) {
                self.respond(layer, t, &Resend::Nothing).await?;
            }
        }
        Ok(())
    }

    /// Sends what the current snapshot changed, in push order, with the
    /// re-sends that follow a change of clusters or listeners.
    async fn push<P: Protocol>(&mut self, layer: &mut P) -> Result<(), Gone> {
        let before = self.sent.each_ref().map(Sent::number);
        self.push_types(layer).await?;
        self.settle(before);
        self.release(layer).await?;
        // A ReferenceGrant may have come or gone.
        self.send_secrets(P::INCREMENTAL, false).await
    }

    /// After a push: a type it changed nothing of (sent nothing since
    /// `before`), on a proxy that ACKed all of it, holds what this push's
    /// inputs give.
    fn settle(&mut self, before: [u64; XdsType::ALL.len()]) {
        for t in XdsType::ALL {
            let of_type = &mut self.inputs[t.index()];
            if self.sent[t.index()].number() == before[t.index()]
                && of_type.pending.is_none()
                && of_type.acked.is_some()
                && let Some(snapshot) = &self.snapshot
            {
                of_type.acked = Some(Inputs {
                    objects: Arc::clone(&snapshot.objects),
                    left_out: Arc::clone(&self.left_out),
                });
            }
        }
    }

    /// [`Session::push`]'s responses, in push order.
    async fn push_types<P: Protocol>(&mut self, layer: &mut P) -> Result<(), Gone> {
        let mut assignments = Resend::Nothing;
        let mut scopes = Resend::Nothing;
        let mut routes = Resend::Nothing;
        for t in XdsType::ALL {
            if !layer.subscribed(t) {
                continue;
            }
            let resend = match t {
                XdsType::Endpoint => std::mem::take(&mut assignments),
                XdsType::ScopedRoute => std::mem::take(&mut scopes),
                XdsType::Route => std::mem::take(&mut routes),
                _ => Resend::Nothing,
            };
            let changed = self.respond(layer, t, &resend).await?;
            match t {
                XdsType::Cluster => assignments = changed,
                XdsType::Listener if changed.any() => {
                    scopes = Resend::All;
                    routes = Resend::All;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// What bounds a stream besides its protocol.
pub(super) struct StreamLimits {
    /// Who opened it (with an authenticating service).
    pub(super) caller: Option<Caller>,
    /// When it is told to reconnect (the maximum connection age).
    pub(super) deadline: Option<tokio::time::Instant>,
}

/// Runs one stream to its end, then forgets the proxy. The task lives as
/// long as the proxy stays connected, so what it holds all that time is
/// kept small: the opening (the first request and its node) runs boxed
/// and is freed once answered, and so do the steps (a request, a push):
/// inline, the task would hold room for the largest of them all the time
/// (6 KB per stream, against about 1.5 KB). A plain function, not an
/// `async fn`: an `async fn`'s arguments stay in its state after they are
/// moved into the opening.
pub(super) fn drive<P: Protocol>(
    server: Arc<ServerState>,
    id: u64,
    limits: StreamLimits,
    requests: Requests<P::Request>,
    responses: Responses,
) -> impl Future<Output = ()> + Send {
    let opening = Box::pin(open::<P>(server, id, limits, requests, responses));
    async move {
        // Not `if let`: its scrutinee would stay in the state beside
        // `stream`.
        let Some(mut stream) = opening.await else {
            return;
        };
        let reason = stream.run().await;
        stream.end(reason);
    }
}

/// The future `make` makes, boxed. Made in the `async fn` awaiting it,
/// a step's future would take room in that function's state (for as long
/// as the stream lives) even when boxed at once.
fn boxed<F: Future>(make: impl FnOnce() -> F) -> std::pin::Pin<Box<F>> {
    Box::pin(make())
}

/// An open stream: what its task holds while the proxy stays connected.
struct Running<P: Protocol> {
    session: Session,
    layer: P,
    requests: Requests<P::Request>,
    snapshots: tokio::sync::watch::Receiver<Option<Arc<MeshSnapshot>>>,
    closing: tokio::sync::watch::Receiver<bool>,
    /// Ticks after each change of the server's credentials.
    credentials: tokio::sync::watch::Receiver<u64>,
    /// When it is told to reconnect (the maximum connection age).
    deadline: Option<tokio::time::Instant>,
}

/// Opens a stream: its first request (with the node), the proxy it
/// describes, the snapshot current, the first request answered. `None`
/// when the stream ended there.
async fn open<P: Protocol>(
    server: Arc<ServerState>,
    id: u64,
    limits: StreamLimits,
    mut requests: Requests<P::Request>,
    responses: Responses,
) -> Option<Running<P>> {
    let refuse = |status: tonic::Status, mut responses: Responses| {
        let server = Arc::clone(&server);
        async move {
            tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
            server.refused.count(&status);
            let _ = responses.send(Outgoing::End(Box::new(status))).await;
        }
    };
    let first = match requests.message().await {
        Ok(Some(first)) => first,
        Ok(None) => return None,
        Err(RequestError::Malformed(status)) => {
            refuse(status, responses).await;
            return None;
        }
        Err(RequestError::Transport(status)) => {
            tracing::info!(
                reason = status.message(),
                "ADS stream failed before its first request"
            );
            return None;
        }
    };
    let mut proxy = match proxy_from(P::node(&first)) {
        Ok(proxy) => proxy,
        Err(status) => {
            refuse(status, responses).await;
            return None;
        }
    };
    if let Some(caller) = &limits.caller
        && let Err(reason) = caller.permits(&proxy)
    {
        refuse(tonic::Status::permission_denied(reason), responses).await;
        return None;
    }
    if proxy.proxy_type == pilot_xds::ProxyType::Ztunnel {
        P::serve_ztunnel(server, id, limits.deadline, proxy, first, requests, responses).await;
        return None;
    }
    // Without a GENERATOR in its metadata, a node whose first request
    // names listeners is a gRPC library (an Envoy asks for all of them).
    let declared = P::node(&first)
        .and_then(|node| node.metadata.as_ref())
        .is_some_and(|m| m.fields.contains_key("GENERATOR"));
    if !declared && P::names_listeners(&first) {
        proxy.generator = pilot_xds::Generator::Grpc;
    }
    let mut snapshots = server.snapshots.subscribe();
    let mut closing = server.closing.subscribe();
    let credentials = server.credential_changes.subscribe();
    server.feedback.register(id, proxy.node_id(), P::INCREMENTAL);
    let mut session = Session {
        server: Arc::clone(&server),
        id,
        node: proxy.node_id(),
        proxy,
        left_out: Default::default(),
        inputs: Default::default(),
        responses,
        snapshot: None,
        generated: None,
        sent: Default::default(),
        applied: [0; XdsType::ALL.len()],
        withheld: Withheld::default(),
        nonce: 0,
        parked: None,
        secrets: None,
    };
    let current = snapshots.borrow_and_update().clone();
    if let Some(snapshot) = current {
        let version = snapshot.version;
        session.refresh(snapshot).await;
        server.feedback.taken(id, version);
    }
    let closed = *closing.borrow_and_update();
    let mut stream = Running {
        session,
        layer: P::new(),
        requests,
        snapshots,
        closing,
        credentials,
        deadline: limits.deadline,
    };
    if closed {
        stream.end(EndReason::ServerClosed);
        return None;
    }
    if stream.session.request(&mut stream.layer, first).await.is_err() {
        stream.end(EndReason::ResponseDropped);
        return None;
    }
    Some(stream)
}

impl<P: Protocol> Running<P> {
    /// Serves the stream until it ends; why it ended.
    async fn run(&mut self) -> EndReason {
        let server = self.session.server_handle();
        let id = self.session.id;
        // Boxed, and only with a maximum age: a timer is most of a
        // hundred bytes.
        let mut deadline = self.deadline.map(|d| Box::pin(tokio::time::sleep_until(d)));
        loop {
            let session = &mut self.session;
            session.park(&self.snapshots);
            let woken = session.woken();
            let expired = async {
                match deadline.as_mut() {
                    Some(deadline) => deadline.as_mut().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = self.closing.changed() => return EndReason::ServerClosed,
                changed = self.credentials.changed(), if session.has_secrets() => {
                    if changed.is_err() {
                        return EndReason::ServerClosed;
                    }
                    if boxed(|| session.send_secrets(P::INCREMENTAL, false)).await.is_err() {
                        return EndReason::ResponseDropped;
                    }
                }
                () = woken => session.unpark(),
                // A response waited for the write timeout with nothing
                // taken: the connection is being dropped (`stall.rs`).
                () = session.responses.stalled() => {
                    tracing::info!(node = %session.proxy.node_id(), "ADS stream stalled: the proxy took nothing for the write timeout");
                    return EndReason::WriteTimeout;
                }
                () = expired => {
                    // Whatever was queued goes first; then the proxy is
                    // told to come back (to this server or another).
                    tracing::debug!(node = %session.proxy.node_id(), "maximum connection age reached");
                    let status = tonic::Status::unavailable("maximum connection age reached: reconnect");
                    let _ = boxed(|| session.responses.send(Outgoing::End(Box::new(status)))).await;
                    return EndReason::MaxAge;
                }
                // Boxed as it comes: the branch's output stays in the
                // state while it is handled, and a request with its node
                // is most of a kilobyte.
                request = self.requests.message().map(|r| r.map(|r| r.map(Box::new))) => match request {
                    Ok(Some(request)) => {
                        if boxed(|| session.request(&mut self.layer, *request)).await.is_err() {
                            return EndReason::ResponseDropped;
                        }
                    }
                    Ok(None) => return EndReason::ProxyClosed,
                    Err(RequestError::Malformed(status)) => {
                        // A malformed request ends the stream with its
                        // error, not OK.
                        tracing::warn!(node = %session.proxy.node_id(), reason = status.message(), "bad ADS request");
                        server.refused.count(&status);
                        let _ = boxed(|| session.responses.send(Outgoing::End(Box::new(status)))).await;
                        return EndReason::BadRequest;
                    }
                    Err(RequestError::Transport(status)) => {
                        tracing::info!(node = %session.proxy.node_id(), reason = status.message(), "ADS stream failed");
                        return EndReason::TransportError;
                    }
                },
                changed = self.snapshots.changed(), if !session.is_parked() => {
                    if changed.is_err() {
                        return EndReason::ServerClosed;
                    }
                    let snapshot = self.snapshots.borrow_and_update().clone();
                    if let Some(snapshot) = snapshot {
                        let version = snapshot.version;
                        let clock = snapshot.published;
                        server.timings.queue.record(clock.published.elapsed());
                        // A stream whose configuration the push keeps
                        // has nothing to send.
                        let pushed = if boxed(|| session.refresh(snapshot)).await {
                            let pushed = boxed(|| session.push(&mut self.layer)).await;
                            if let (Ok(()), Some(changed)) = (&pushed, clock.changed) {
                                server.timings.convergence.record(changed.elapsed());
                            }
                            pushed
                        } else {
                            session.settle(session.sent.each_ref().map(Sent::number));
                            Ok(())
                        };
                        if pushed.is_err() {
                            return EndReason::ResponseDropped;
                        }
                        server.feedback.taken(id, version);
                    }
                }
            }
        }
    }

    /// Forgets the proxy: the stream ended for `reason`.
    fn end(&self, reason: EndReason) {
        let session = &self.session;
        if reason == EndReason::ResponseDropped {
            tracing::info!(node = %session.proxy.node_id(), "ADS stream's connection went away with a response waiting");
        }
        session.server.feedback.unregister(session.id, reason);
    }
}

/// The proxy of a stream's first request, or the gRPC error to end the
/// stream with.
fn proxy_from(node: Option<&Node>) -> Result<Proxy, tonic::Status> {
    let node = node.ok_or_else(|| tonic::Status::invalid_argument("the first request carries no node"))?;
    proxy_of(node).map_err(|e| tonic::Status::invalid_argument(e.to_string()))
}

/// The proxy a node describes: its id, plus `LABELS` and
/// `INTERCEPTION_MODE` from its metadata.
fn proxy_of(node: &Node) -> Result<Proxy, pilot_xds::XdsError> {
    let proxy = Proxy::from_node_id(&node.id)?;
    let mut metadata = BTreeMap::new();
    if let Some(fields) = node.metadata.as_ref().map(|m| &m.fields) {
        for (key, value) in fields {
            match &value.kind {
                Some(value::Kind::StringValue(text)) => {
                    metadata.insert(key.clone(), text.clone());
                }
                Some(value::Kind::StructValue(object)) if key == "LABELS" => {
                    let labels: BTreeMap<String, String> = object
                        .fields
                        .iter()
                        .filter_map(|(k, v)| match &v.kind {
                            Some(value::Kind::StringValue(s)) => Some((k.clone(), s.clone())),
                            _ => None,
                        })
                        .collect();
                    metadata.insert(key.clone(), serde_json::to_string(&labels).unwrap_or_default());
                }
                _ => {}
            }
        }
    }
    proxy.with_metadata(&metadata)
}

#[cfg(test)]
mod tests {
    use super::super::delta::Delta;
    use super::super::sotw::Sotw;
    use super::super::transport::{Requests, Responses};
    use super::*;

    /// The bytes a stream's task takes for as long as its proxy stays
    /// connected, whatever step it waits in (its steps run boxed, only
    /// while they run).
    fn task_size<P: Protocol + 'static>() -> usize {
        let server = Arc::new(ServerState::new(crate::XdsOptions::default()));
        let (requests, responses) = (Requests::<P::Request>::detached(), Responses::detached());
        let limits = StreamLimits {
            caller: None,
            deadline: None,
        };
        std::mem::size_of_val(&drive::<P>(server, 0, limits, requests, responses))
    }

    #[test]
    fn a_stream_task_holds_no_room_for_its_largest_step() {
        let (sotw, delta) = (task_size::<Sotw>(), task_size::<Delta>());
        eprintln!(
            "stream task: state of the world {sotw} B, delta {delta} B; session {} B, subscriptions {} / {} B",
            std::mem::size_of::<Session>(),
            std::mem::size_of::<Sotw>(),
            std::mem::size_of::<Delta>()
        );
        // Its steps and opening inline, it took 6.4 KB; its steps boxed
        // in place, 5.4 KB (their futures still had room in the task).
        assert!(sotw < 3000 && delta < 3000, "sotw {sotw} B, delta {delta} B");
    }
}
