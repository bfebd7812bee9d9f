//! One state-of-the-world ADS stream.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{Any, value};
use tokio::sync::mpsc;

use super::generated::Generated;
use super::{Inner, MeshSnapshot, Nack, ProxyStatus, TypeStatus};
use crate::util::any;
use crate::{Proxy, Resources};

type Responses = mpsc::Sender<Result<DiscoveryResponse, tonic::Status>>;

/// A type's subscription and what was last sent for it.
#[derive(Default)]
struct Subscription {
    /// `None`: every resource (wildcard).
    names: Option<BTreeSet<String>>,
    nonce: String,
    digest: Option<u64>,
}

/// The xDS types this server serves, in push order.
pub(super) const ORDER: [(&str, &str); 4] = [
    ("CDS", "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
    (
        "EDS",
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    ),
    ("LDS", "type.googleapis.com/envoy.config.listener.v3.Listener"),
    (
        "RDS",
        "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    ),
];

struct Connection {
    server: Arc<Inner>,
    id: u64,
    proxy: Proxy,
    responses: Responses,
    subscriptions: BTreeMap<&'static str, Subscription>,
    snapshot: Option<Arc<MeshSnapshot>>,
    generated: Option<Arc<Generated>>,
    nonce: u64,
}

pub(crate) async fn run(
    server: Arc<Inner>,
    id: u64,
    mut requests: tonic::Streaming<DiscoveryRequest>,
    responses: Responses,
) {
    let first = match requests.message().await {
        Ok(Some(first)) => first,
        _ => return,
    };
    let proxy = match proxy_from(first.node.as_ref()) {
        Ok(proxy) => proxy,
        Err(status) => {
            let _ = responses.send(Err(status)).await;
            return;
        }
    };
    let mut snapshots = server.snapshots.subscribe();
    let mut closing = server.closing.subscribe();
    register(&server, id, &proxy, false);
    let mut connection = Connection {
        server: Arc::clone(&server),
        id,
        proxy,
        responses,
        subscriptions: BTreeMap::new(),
        snapshot: None,
        generated: None,
        nonce: 0,
    };
    let current = snapshots.borrow_and_update().clone();
    if let Some(snapshot) = current {
        connection.refresh(snapshot).await;
    }
    let mut open = !*closing.borrow_and_update() && connection.request(first).await;
    while open {
        tokio::select! {
            _ = closing.changed() => open = false,
            request = requests.message() => {
                open = match request {
                    Ok(Some(request)) => connection.request(request).await,
                    _ => false,
                };
            }
            changed = snapshots.changed() => {
                let snapshot = snapshots.borrow_and_update().clone();
                open = changed.is_ok() && match snapshot {
                    Some(snapshot) => {
                        connection.refresh(snapshot).await;
                        connection.push().await
                    }
                    None => true,
                };
            }
        }
    }
    tracing::info!(node = %connection.proxy.node_id(), "proxy disconnected");
    server
        .status
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&id);
}

impl Connection {
    /// The proxy's configuration for a new snapshot (shared with the other
    /// proxies of its class).
    async fn refresh(&mut self, snapshot: Arc<MeshSnapshot>) {
        let generated = snapshot
            .generated
            .get(&self.proxy, &*self.server.registry, &snapshot.mesh)
            .await;
        self.generated = Some(generated);
        self.snapshot = Some(snapshot);
    }

    /// Handles one request: ACK, NACK or (re)subscription. False when the
    /// stream is gone.
    async fn request(&mut self, request: DiscoveryRequest) -> bool {
        let Some((short, _)) = ORDER.iter().find(|(_, url)| *url == request.type_url) else {
            tracing::debug!(
                type_url = request.type_url,
                "ignoring a request for a type this server does not serve"
            );
            return true;
        };
        let short: &'static str = short;
        let names: Option<BTreeSet<String>> =
            if request.resource_names.is_empty() && matches!(short, "CDS" | "LDS") {
                None
            } else {
                Some(request.resource_names.iter().cloned().collect())
            };
        let subscription = self.subscriptions.entry(short).or_default();
        if !request.response_nonce.is_empty() {
            if request.response_nonce != subscription.nonce {
                // An answer to an older response; the newer one is on its way.
                return true;
            }
            match &request.error_detail {
                Some(error) => {
                    tracing::warn!(node = %self.proxy.node_id(), r#type = short, message = error.message, "NACK");
                    let version = self.status(short, |s| s.sent.clone()).unwrap_or_default();
                    self.status(short, |s| {
                        s.nack = Some(Nack {
                            version,
                            message: error.message.clone(),
                        })
                    });
                }
                None => {
                    tracing::debug!(node = %self.proxy.node_id(), r#type = short, version = request.version_info, "ACK");
                    self.status(short, |s| s.acked = Some(request.version_info.clone()));
                }
            }
            let subscription = self.subscriptions.entry(short).or_default();
            if subscription.names == names {
                return true;
            }
        }
        self.subscriptions.entry(short).or_default().names = names;
        self.send(short, true).await
    }

    /// Sends every subscribed type whose content changed, in push order.
    async fn push(&mut self) -> bool {
        let mut force_eds = false;
        let mut force_rds = false;
        for (short, _) in ORDER {
            if !self.subscriptions.contains_key(short) {
                continue;
            }
            let force = (short == "EDS" && force_eds) || (short == "RDS" && force_rds);
            let before = self.subscriptions[short].digest;
            if !self.send(short, force).await {
                return false;
            }
            let changed = self.subscriptions[short].digest != before;
            force_eds |= short == "CDS" && changed;
            force_rds |= short == "LDS" && changed;
        }
        true
    }

    /// Sends one type if it changed (or always, with `force`).
    async fn send(&mut self, short: &'static str, force: bool) -> bool {
        let Some(snapshot) = &self.snapshot else {
            // Not synced yet: the first push will answer.
            return true;
        };
        let version = snapshot.version.to_string();
        let url = ORDER
            .iter()
            .find(|(s, _)| *s == short)
            .map(|(_, u)| *u)
            .unwrap_or_default();
        let Some(generated) = &self.generated else {
            return true;
        };
        let subscription = self.subscriptions.entry(short).or_default();
        let wanted = |name: &str| {
            subscription
                .names
                .as_ref()
                .is_none_or(|names| names.contains(name))
        };
        let encoded = &generated.types[short];
        let digest = encoded.digest(wanted);
        if !force && subscription.digest == Some(digest) {
            return true;
        }
        let resources: Vec<Any> = encoded
            .resources
            .iter()
            .filter(|(name, _, _)| wanted(name))
            .map(|(_, any, _)| any.clone())
            .collect();
        self.nonce += 1;
        let nonce = self.nonce.to_string();
        subscription.digest = Some(digest);
        subscription.nonce = nonce.clone();
        let response = DiscoveryResponse {
            version_info: version.clone(),
            resources,
            type_url: url.to_string(),
            nonce,
            ..Default::default()
        };
        self.status(short, |s| s.sent = Some(version));
        self.responses.send(Ok(response)).await.is_ok()
    }

    fn status<T>(&self, short: &'static str, f: impl FnOnce(&mut TypeStatus) -> T) -> T {
        update_status(&self.server, self.id, short, f)
    }
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

/// Every resource of a type, by name, encoded.
pub(super) fn named(resources: &Resources, short: &str) -> Vec<(String, Any)> {
    match short {
        "CDS" => resources
            .clusters
            .iter()
            .map(|c| (c.name.clone(), any(c)))
            .collect(),
        "EDS" => resources
            .endpoints
            .iter()
            .map(|e| (e.cluster_name.clone(), any(e)))
            .collect(),
        "LDS" => resources
            .listeners
            .iter()
            .map(|l| (l.name.clone(), any(l)))
            .collect(),
        _ => resources
            .routes
            .iter()
            .map(|r| (r.name.clone(), any(r)))
            .collect(),
    }
}

/// Registers a newly connected proxy's (empty) feedback.
pub(super) fn register(server: &Inner, id: u64, proxy: &Proxy, incremental: bool) {
    server.status.lock().unwrap_or_else(|p| p.into_inner()).insert(
        id,
        ProxyStatus {
            node_id: proxy.node_id(),
            incremental,
            types: BTreeMap::new(),
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
