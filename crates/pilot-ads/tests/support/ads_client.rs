//! A raw ADS client of either protocol for the tests that check what the
//! server sends and in which order, and a server to run it against.

use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use pilot_ads::{TypeStatus, XdsServer, XdsType};
use pilot_api::istio;
use pilot_model::{ConfigStore, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use prost::Message;
use tokio::sync::mpsc;

pub const PATIENCE: Duration = Duration::from_secs(20);
pub const NODE: &str = "sidecar~10.9.0.1~app.default~default.svc.cluster.local";
pub const REVIEWS: &str = "reviews.default.svc.cluster.local";
pub const REVIEWS_CLUSTER: &str = "outbound|9080||reviews.default.svc.cluster.local";
pub const RATINGS: &str = "ratings.default.svc.cluster.local";
pub const RATINGS_CLUSTER: &str = "outbound|9080||ratings.default.svc.cluster.local";
pub const DETAILS: &str = "details.default.svc.cluster.local";
pub const DETAILS_CLUSTER: &str = "outbound|9080||details.default.svc.cluster.local";

/// One response, whatever the protocol.
#[derive(Debug)]
pub struct Response {
    pub t: XdsType,
    pub version: String,
    pub nonce: String,
    /// (name, encoded resource)
    pub resources: Vec<(String, Vec<u8>)>,
    /// The names a delta response removes.
    pub removed: Vec<String>,
}

/// A client of either protocol, keeping what Envoy keeps: per type, the
/// subscribed names and the last response.
pub struct Client {
    pub delta: bool,
    sotw: Option<(
        mpsc::Sender<DiscoveryRequest>,
        tonic::Streaming<DiscoveryResponse>,
    )>,
    incremental: Option<(
        mpsc::Sender<DeltaDiscoveryRequest>,
        tonic::Streaming<DeltaDiscoveryResponse>,
    )>,
    names: [Vec<String>; 4],
}

pub fn node() -> Option<Node> {
    Some(Node {
        id: NODE.into(),
        ..Default::default()
    })
}

impl Client {
    pub async fn open(port: u16, delta: bool) -> Self {
        let mut grpc = None;
        for _ in 0..100 {
            if let Ok(client) =
                AggregatedDiscoveryServiceClient::connect(format!("http://127.0.0.1:{port}")).await
            {
                grpc = Some(client);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut grpc = grpc.expect("the server started");
        let mut client = Client {
            delta,
            sotw: None,
            incremental: None,
            names: Default::default(),
        };
        if delta {
            let (tx, rx) = mpsc::channel(8);
            tx.send(DeltaDiscoveryRequest {
                node: node(),
                type_url: XdsType::Cluster.url().into(),
                ..Default::default()
            })
            .await
            .unwrap();
            let requests =
                futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
            let responses = grpc
                .delta_aggregated_resources(requests)
                .await
                .unwrap()
                .into_inner();
            client.incremental = Some((tx, responses));
        } else {
            let (tx, rx) = mpsc::channel(8);
            tx.send(DiscoveryRequest {
                node: node(),
                type_url: XdsType::Cluster.url().into(),
                ..Default::default()
            })
            .await
            .unwrap();
            let requests =
                futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
            let responses = grpc
                .stream_aggregated_resources(requests)
                .await
                .unwrap()
                .into_inner();
            client.sotw = Some((tx, responses));
        }
        client
    }

    pub async fn next(&mut self) -> Response {
        if let Some((_, responses)) = &mut self.sotw {
            let r = tokio::time::timeout(PATIENCE, responses.message())
                .await
                .expect("a response in time")
                .unwrap()
                .expect("the stream is open");
            let t = XdsType::from_url(&r.type_url).unwrap();
            let resources = r
                .resources
                .iter()
                .map(|any| (resource_name(t, &any.value), any.value.clone()))
                .collect();
            return Response {
                t,
                version: r.version_info,
                nonce: r.nonce,
                resources,
                removed: Vec::new(),
            };
        }
        let (_, responses) = self.incremental.as_mut().unwrap();
        let r = tokio::time::timeout(PATIENCE, responses.message())
            .await
            .expect("a response in time")
            .unwrap()
            .expect("the stream is open");
        Response {
            t: XdsType::from_url(&r.type_url).unwrap(),
            version: r.system_version_info,
            nonce: r.nonce,
            resources: r
                .resources
                .into_iter()
                .map(|resource| (resource.name, resource.resource.unwrap().value))
                .collect(),
            removed: r.removed_resources,
        }
    }

    /// Subscribes to `names` of `t` (empty: every resource of CDS, LDS).
    pub async fn subscribe(&mut self, t: XdsType, names: Vec<String>) {
        self.names[t.index()] = names.clone();
        if self.delta {
            self.send_delta(DeltaDiscoveryRequest {
                type_url: t.url().into(),
                resource_names_subscribe: names,
                ..Default::default()
            })
            .await;
        } else {
            self.send_sotw(DiscoveryRequest {
                type_url: t.url().into(),
                resource_names: names,
                ..Default::default()
            })
            .await;
        }
    }

    /// ACKs (`error` None) or NACKs `response`. A state-of-the-world ACK
    /// carries a `version_info` of the client's own making: the server
    /// must record the version it sent with the nonce, not this.
    pub async fn answer(&mut self, response: &Response, error: Option<&str>) {
        let error_detail = error.map(|message| RpcStatus {
            code: 3,
            message: message.into(),
            ..Default::default()
        });
        if self.delta {
            self.send_delta(DeltaDiscoveryRequest {
                type_url: response.t.url().into(),
                response_nonce: response.nonce.clone(),
                error_detail,
                ..Default::default()
            })
            .await;
        } else {
            self.send_sotw(DiscoveryRequest {
                type_url: response.t.url().into(),
                resource_names: self.names[response.t.index()].clone(),
                version_info: format!("client-made-{}", response.version),
                response_nonce: response.nonce.clone(),
                error_detail,
                ..Default::default()
            })
            .await;
        }
    }

    pub async fn send_sotw(&self, request: DiscoveryRequest) {
        self.sotw.as_ref().unwrap().0.send(request).await.unwrap();
    }

    pub async fn send_delta(&self, request: DeltaDiscoveryRequest) {
        self.incremental.as_ref().unwrap().0.send(request).await.unwrap();
    }
}

/// The name of an encoded resource of type `t`.
pub fn resource_name(t: XdsType, value: &[u8]) -> String {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    match t {
        XdsType::Cluster => Cluster::decode(value).unwrap().name,
        XdsType::Endpoint => ClusterLoadAssignment::decode(value).unwrap().cluster_name,
        XdsType::Listener => Listener::decode(value).unwrap().name,
        XdsType::Route => RouteConfiguration::decode(value).unwrap().name,
    }
}

/// Waits until the proxy's status of `t` satisfies `check`.
pub async fn wait_status(server: &XdsServer, t: XdsType, check: impl Fn(&TypeStatus) -> bool) -> TypeStatus {
    let proxy = super::sotw::wait_proxy(server, NODE, |p| p.types.get(t.short()).is_some_and(&check)).await;
    proxy.types[t.short()].clone()
}

pub async fn apply(store: &MemoryConfigStore, yaml: &str) {
    for object in document::parse("test.yaml", yaml, &istio::registry()).unwrap() {
        store.create(object).await.unwrap();
    }
}

/// A server on a free loopback port over `registry` and an empty store.
pub async fn start(registry: &Arc<MemoryServiceRegistry>) -> (XdsServer, MemoryConfigStore, u16) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let (server, port) = super::server::serve(controller, Arc::clone(registry) as _);
    (server, store, port)
}
