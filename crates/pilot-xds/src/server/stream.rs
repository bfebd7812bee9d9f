//! Driving one ADS stream, whatever its protocol: the first request names
//! the proxy, then requests and pushes are handled as they come until the
//! stream ends or the server closes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value;
use tokio::sync::mpsc;

use super::grpc::{Outgoing, Requests};
use super::{Inner, MeshSnapshot, ProxyStatus, TypeStatus};
use crate::Proxy;

/// A stream protocol: state of the world or incremental.
pub(super) trait Protocol: Sized + Send {
    /// What the proxy sends.
    type Request: prost::Message + Default + Send + 'static;
    /// True for the delta protocol (reported in the proxy's status).
    const INCREMENTAL: bool;

    /// The node a request carries (the first one must).
    fn node(request: &Self::Request) -> Option<&Node>;

    /// True when the request subscribes to listeners by name: Envoys ask
    /// for every listener, gRPC clients and servers for named ones.
    fn names_listeners(request: &Self::Request) -> bool;

    /// The state of a new stream for `proxy`.
    fn new(server: Arc<Inner>, id: u64, proxy: Proxy, responses: mpsc::Sender<Outgoing>) -> Self;

    /// The proxy on this stream.
    fn proxy(&self) -> &Proxy;

    /// Takes a new snapshot's configuration for the proxy.
    fn refresh(&mut self, snapshot: Arc<MeshSnapshot>) -> impl Future<Output = ()> + Send;

    /// Handles one request; false when the stream is gone.
    fn request(&mut self, request: Self::Request) -> impl Future<Output = bool> + Send;

    /// Sends what a new snapshot changed; false when the stream is gone.
    fn push(&mut self) -> impl Future<Output = bool> + Send;

    /// Ends the stream with `status`.
    fn end(&mut self, status: tonic::Status) -> impl Future<Output = ()> + Send;
}

/// Runs one stream to its end, then forgets the proxy.
pub(super) async fn drive<P: Protocol>(
    server: Arc<Inner>,
    id: u64,
    caller: Option<super::Caller>,
    mut requests: Requests<P::Request>,
    responses: mpsc::Sender<Outgoing>,
) {
    let refuse = |status: tonic::Status| {
        let responses = responses.clone();
        let server = Arc::clone(&server);
        async move {
            tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
            server.refused.count(&status);
            let _ = responses.send(Outgoing::End(status)).await;
        }
    };
    let first = match requests.message().await {
        Ok(Some(first)) => first,
        Ok(None) => return,
        Err(status) => return refuse(status).await,
    };
    let mut proxy = match proxy_from(P::node(&first)) {
        Ok(proxy) => proxy,
        Err(status) => return refuse(status).await,
    };
    if let Some(caller) = &caller
        && let Err(reason) = caller.permits(&proxy)
    {
        return refuse(tonic::Status::permission_denied(reason)).await;
    }
    // Without a GENERATOR in its metadata, a node whose first request
    // names listeners is a gRPC library (an Envoy asks for all of them).
    let declared = P::node(&first)
        .and_then(|node| node.metadata.as_ref())
        .is_some_and(|m| m.fields.contains_key("GENERATOR"));
    if !declared && P::names_listeners(&first) {
        proxy.generator = crate::Generator::Grpc;
    }
    let mut snapshots = server.snapshots.subscribe();
    let mut closing = server.closing.subscribe();
    register(&server, id, &proxy, P::INCREMENTAL);
    let mut stream = P::new(Arc::clone(&server), id, proxy, responses);
    let current = snapshots.borrow_and_update().clone();
    if let Some(snapshot) = current {
        let version = snapshot.version;
        stream.refresh(snapshot).await;
        super::status::record_push(&server, id, version);
    }
    let mut open = !*closing.borrow_and_update() && stream.request(first).await;
    while open {
        tokio::select! {
            _ = closing.changed() => open = false,
            request = requests.message() => {
                open = match request {
                    Ok(Some(request)) => stream.request(request).await,
                    Ok(None) => false,
                    Err(status) => {
                        // A malformed request ends the stream with its
                        // error, not OK.
                        tracing::warn!(node = %stream.proxy().node_id(), reason = status.message(), "bad ADS request");
                        stream.end(status).await;
                        false
                    }
                };
            }
            changed = snapshots.changed() => {
                let snapshot = snapshots.borrow_and_update().clone();
                open = changed.is_ok() && match snapshot {
                    Some(snapshot) => {
                        let version = snapshot.version;
                        stream.refresh(snapshot).await;
                        let open = stream.push().await;
                        super::status::record_push(&server, id, version);
                        open
                    }
                    None => true,
                };
            }
        }
    }
    unregister(&server, id, stream.proxy());
}

/// Updates one type's feedback for connection `id`.
pub(super) fn update_status<T>(
    server: &Inner,
    id: u64,
    short: &'static str,
    f: impl FnOnce(&mut TypeStatus) -> T,
) -> T {
    let mut all = server.status.lock().unwrap_or_else(|p| p.into_inner());
    let entry = all.entry(id).or_default();
    f(entry.types.entry(short).or_default())
}

/// Registers a newly connected proxy's (empty) feedback.
pub(super) fn register(server: &Inner, id: u64, proxy: &Proxy, incremental: bool) {
    server.status.lock().unwrap_or_else(|p| p.into_inner()).insert(
        id,
        ProxyStatus {
            node_id: proxy.node_id(),
            incremental,
            types: BTreeMap::new(),
            push: None,
        },
    );
    tracing::info!(node = %proxy.node_id(), "proxy connected");
}

/// Forgets a disconnected proxy.
pub(super) fn unregister(server: &Inner, id: u64, proxy: &Proxy) {
    tracing::info!(node = %proxy.node_id(), "proxy disconnected");
    server
        .status
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
}

/// The proxy of a stream's first request, or the gRPC error to end the
/// stream with.
pub(super) fn proxy_from(node: Option<&Node>) -> Result<Proxy, tonic::Status> {
    let node = node.ok_or_else(|| tonic::Status::invalid_argument("the first request carries no node"))?;
    proxy_of(node).map_err(|e| tonic::Status::invalid_argument(e.to_string()))
}

/// The proxy a node describes: its id, plus `LABELS` and
/// `INTERCEPTION_MODE` from its metadata.
pub(super) fn proxy_of(node: &Node) -> Result<Proxy, crate::XdsError> {
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

/// Subscriptions' name sets, shared: the sidecars of a mesh mostly
/// subscribe to the same names (the same clusters' load assignments), so
/// each distinct set is held once however many proxies ask for it.
#[derive(Default)]
pub(crate) struct NameSets {
    /// The sets by hash, and the size at which dead entries are swept.
    sets: Mutex<(Buckets, usize)>,
}

type Buckets = HashMap<u64, Vec<Weak<BTreeSet<String>>>>;

impl NameSets {
    /// The shared copy of `names`.
    pub(crate) fn intern(&self, names: BTreeSet<String>) -> Arc<BTreeSet<String>> {
        let mut hasher = DefaultHasher::new();
        names.hash(&mut hasher);
        let hash = hasher.finish();
        let mut guard = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        let (sets, sweep_at) = &mut *guard;
        let bucket = sets.entry(hash).or_default();
        bucket.retain(|set| set.strong_count() > 0);
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|set| **set == names) {
            return found;
        }
        let set = Arc::new(names);
        bucket.push(Arc::downgrade(&set));
        // Forget the sets nobody holds any more, now and then.
        if sets.len() > *sweep_at {
            sets.retain(|_, bucket| {
                bucket.retain(|set| set.strong_count() > 0);
                !bucket.is_empty()
            });
            *sweep_at = (sets.len() * 2).max(64);
        }
        set
    }
}
