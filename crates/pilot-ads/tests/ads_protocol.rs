//! The protocol rules both ADS flavours share, run once for state of the
//! world and once for delta against the real server on loopback: the
//! version recorded as ACKed is the one the ACKed nonce was sent with (not
//! what the client claims), a NACK is recorded and not answered with the
//! same thing again, and after a change of clusters (listeners) the load
//! assignments (route configurations) are sent again. An endpoint change
//! sends, in both protocols, only the load assignment that changed.

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
use pilot_model::{ConfigStore, Labels, Port, Protocol, Service, document, istio};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use prost::Message;
use tokio::sync::mpsc;

const PATIENCE: Duration = Duration::from_secs(20);
const NODE: &str = "sidecar~10.9.0.1~app.default~default.svc.cluster.local";
const REVIEWS: &str = "reviews.default.svc.cluster.local";
const REVIEWS_CLUSTER: &str = "outbound|9080||reviews.default.svc.cluster.local";
const RATINGS: &str = "ratings.default.svc.cluster.local";
const RATINGS_CLUSTER: &str = "outbound|9080||ratings.default.svc.cluster.local";
const DETAILS: &str = "details.default.svc.cluster.local";
const DETAILS_CLUSTER: &str = "outbound|9080||details.default.svc.cluster.local";

/// One response, whatever the protocol.
#[derive(Debug)]
struct Response {
    t: XdsType,
    version: String,
    nonce: String,
    /// (name, encoded resource)
    resources: Vec<(String, Vec<u8>)>,
}

/// A client of either protocol, keeping what Envoy keeps: per type, the
/// subscribed names and the last response.
struct Client {
    delta: bool,
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

fn node() -> Option<Node> {
    Some(Node {
        id: NODE.into(),
        ..Default::default()
    })
}

impl Client {
    async fn open(port: u16, delta: bool) -> Self {
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

    async fn next(&mut self) -> Response {
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
        }
    }

    /// Subscribes to `names` of `t` (empty: every resource of CDS, LDS).
    async fn subscribe(&mut self, t: XdsType, names: Vec<String>) {
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
    async fn answer(&mut self, response: &Response, error: Option<&str>) {
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

    async fn send_sotw(&self, request: DiscoveryRequest) {
        self.sotw.as_ref().unwrap().0.send(request).await.unwrap();
    }

    async fn send_delta(&self, request: DeltaDiscoveryRequest) {
        self.incremental.as_ref().unwrap().0.send(request).await.unwrap();
    }
}

/// The name of an encoded resource of type `t`.
fn resource_name(t: XdsType, value: &[u8]) -> String {
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
async fn wait_status(server: &XdsServer, t: XdsType, check: impl Fn(&TypeStatus) -> bool) -> TypeStatus {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let found = server
            .status()
            .into_iter()
            .find(|p| p.node_id == NODE)
            .and_then(|p| p.types.get(t.short()).cloned());
        if let Some(status) = found.filter(|s| check(s)) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{t}: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn apply(store: &MemoryConfigStore, yaml: &str) {
    for object in document::parse("test.yaml", yaml, &istio::registry()).unwrap() {
        store.create(object).await.unwrap();
    }
}

/// A server on a free loopback port over `registry` and an empty store.
async fn start(registry: &Arc<MemoryServiceRegistry>) -> (XdsServer, MemoryConfigStore, u16) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let server = XdsServer::new(
        controller,
        Arc::clone(registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        Default::default(),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], port).into(), std::future::pending())
            .await
    });
    (server, store, port)
}

/// The endpoints' addresses of an encoded load assignment.
fn addresses(assignment: &[u8]) -> Vec<String> {
    use envoy_types::pb::envoy::config::core::v3::address::Address;
    use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
    let assignment = ClusterLoadAssignment::decode(assignment).unwrap();
    let mut found: Vec<String> = assignment
        .endpoints
        .iter()
        .flat_map(|l| &l.lb_endpoints)
        .filter_map(|e| match &e.host_identifier {
            Some(HostIdentifier::Endpoint(endpoint)) => match &endpoint.address.as_ref()?.address {
                Some(Address::SocketAddress(socket)) => Some(socket.address.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    found.sort();
    found
}

/// An endpoint added to one of two subscribed services: the EDS response
/// holds that service's assignment only (state of the world too: the
/// client keeps the other). A new service, then a subscription naming it
/// besides the two: the response holds the new assignment only.
async fn endpoint_change(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (host, ip) in [(REVIEWS, "10.1.1.1"), (RATINGS, "10.2.2.1")] {
        registry.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
        registry
            .add_endpoints(host, ip.parse().unwrap(), Labels::new())
            .unwrap();
    }
    let (server, _store, port) = start(&registry).await;
    let mut client = Client::open(port, delta).await;
    let cds = client.next().await;
    assert_eq!(cds.t, XdsType::Cluster);
    client.answer(&cds, None).await;
    client
        .subscribe(
            XdsType::Endpoint,
            vec![RATINGS_CLUSTER.into(), REVIEWS_CLUSTER.into()],
        )
        .await;
    let eds = client.next().await;
    assert_eq!(eds.t, XdsType::Endpoint);
    let mut names: Vec<&str> = eds.resources.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(names, [RATINGS_CLUSTER, REVIEWS_CLUSTER], "{eds:?}");
    client.answer(&eds, None).await;
    wait_status(&server, XdsType::Endpoint, |s| s.synced()).await;

    // One endpoint added to ratings.
    registry
        .add_endpoints(RATINGS, "10.2.2.2".parse().unwrap(), Labels::new())
        .unwrap();
    let changed = client.next().await;
    assert_eq!(changed.t, XdsType::Endpoint, "{changed:?}");
    assert_eq!(
        changed.resources.len(),
        1,
        "only the changed assignment: {changed:?}"
    );
    assert_eq!(changed.resources[0].0, RATINGS_CLUSTER);
    assert_eq!(addresses(&changed.resources[0].1), ["10.2.2.1", "10.2.2.2"]);
    assert_ne!(changed.version, eds.version);
    client.answer(&changed, None).await;
    let status = wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&changed.version)
    })
    .await;
    assert!(status.synced(), "{status:?}");

    // A new service: CDS names its cluster; the proxy subscribes to it
    // besides the two it has, and is sent the new one only.
    registry.add_service(Service::new(
        DETAILS,
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    registry
        .add_endpoints(DETAILS, "10.3.3.1".parse().unwrap(), Labels::new())
        .unwrap();
    let cds = client.next().await;
    assert_eq!(cds.t, XdsType::Cluster, "{cds:?}");
    assert!(
        cds.resources.iter().any(|(name, _)| name == DETAILS_CLUSTER),
        "{cds:?}"
    );
    client.answer(&cds, None).await;
    if delta {
        client
            .subscribe(XdsType::Endpoint, vec![DETAILS_CLUSTER.into()])
            .await;
    } else {
        client
            .subscribe(
                XdsType::Endpoint,
                vec![
                    DETAILS_CLUSTER.into(),
                    RATINGS_CLUSTER.into(),
                    REVIEWS_CLUSTER.into(),
                ],
            )
            .await;
    }
    let added = client.next().await;
    assert_eq!(added.t, XdsType::Endpoint, "{added:?}");
    let names: Vec<&str> = added.resources.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, [DETAILS_CLUSTER], "only the new assignment: {added:?}");
    assert_eq!(addresses(&added.resources[0].1), ["10.3.3.1"]);
    client.answer(&added, None).await;
    wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&added.version)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_endpoint_change_sends_only_the_changed_assignment() {
    endpoint_change(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_endpoint_change_sends_only_the_changed_assignment() {
    endpoint_change(true).await;
}

async fn protocol_rules(delta: bool) {
    let registry = Arc::new(MemoryServiceRegistry::new());
    registry.add_service(Service::new(
        REVIEWS,
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    registry
        .add_endpoints(REVIEWS, "10.1.1.1".parse().unwrap(), Labels::new())
        .unwrap();
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let server = XdsServer::new(
        controller,
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        Default::default(),
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], port).into(), std::future::pending())
            .await
    });
    let mut client = Client::open(port, delta).await;

    // Subscribe to everything as Envoy does, ACKing each response.
    let cds = client.next().await;
    assert_eq!(cds.t, XdsType::Cluster);
    client.answer(&cds, None).await;
    // The version recorded is the one sent with the ACKed nonce.
    let status = wait_status(&server, XdsType::Cluster, |s| s.acked.is_some()).await;
    assert_eq!(status.acked.as_deref(), Some(cds.version.as_str()), "{status:?}");
    assert!(status.synced());
    client
        .subscribe(XdsType::Endpoint, vec![REVIEWS_CLUSTER.into()])
        .await;
    let eds = client.next().await;
    assert_eq!(eds.t, XdsType::Endpoint);
    assert_eq!(eds.resources.len(), 1, "{eds:?}");
    client.answer(&eds, None).await;
    client.subscribe(XdsType::Listener, vec![]).await;
    let lds = client.next().await;
    assert_eq!(lds.t, XdsType::Listener);
    client.answer(&lds, None).await;
    client.subscribe(XdsType::Route, vec!["9080".into()]).await;
    let rds = client.next().await;
    assert_eq!(rds.t, XdsType::Route);
    client.answer(&rds, None).await;
    wait_status(&server, XdsType::Route, |s| s.synced()).await;

    // A rule changing routes only: RDS alone is sent, and NACKed.
    apply(
        &store,
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: reviews-timeout, namespace: default}\n\
         spec:\n  destination: {name: reviews}\n  httpReqTimeout: {simpleTimeout: {timeout: 3s}}\n",
    )
    .await;
    let rejected = client.next().await;
    assert_eq!(rejected.t, XdsType::Route, "{rejected:?}");
    assert_ne!(rejected.version, rds.version);
    client.answer(&rejected, Some("route rejected by the test")).await;
    let status = wait_status(&server, XdsType::Route, |s| s.nack.is_some()).await;
    let nack = status.nack.clone().unwrap();
    assert_eq!(nack.version, rejected.version);
    assert_eq!(nack.message, "route rejected by the test");
    assert_eq!(
        status.acked.as_deref(),
        Some(rds.version.as_str()),
        "the ACKed version stays"
    );

    // A policy changing the reviews cluster: CDS, then its load assignment
    // again although the assignment did not change. The NACKed routes are
    // not sent again (the next response after the NACK is this push's).
    apply(
        &store,
        "apiVersion: config.istio.io/v1alpha2\nkind: DestinationPolicy\nmetadata: {name: reviews-lb, namespace: default}\n\
         spec:\n  destination: {name: reviews}\n  loadBalancing: {name: LEAST_CONN}\n",
    )
    .await;
    let cds = client.next().await;
    assert_eq!(cds.t, XdsType::Cluster, "the NACK was answered: {cds:?}");
    assert!(
        cds.resources.iter().any(|(name, _)| name == REVIEWS_CLUSTER),
        "{cds:?}"
    );
    client.answer(&cds, None).await;
    let eds2 = client.next().await;
    assert_eq!(eds2.t, XdsType::Endpoint, "{eds2:?}");
    assert_eq!(eds2.version, cds.version);
    assert_eq!(eds2.resources, eds.resources, "the same assignment, sent again");
    client.answer(&eds2, None).await;
    wait_status(&server, XdsType::Endpoint, |s| {
        s.acked.as_deref() == Some(&eds2.version)
    })
    .await;

    // A new service on a new port: a new listener, so the route
    // configuration is sent again although it did not change.
    registry.add_service(Service::new(
        "details.default.svc.cluster.local",
        vec![Port::new("http", 8080, Protocol::Http)],
    ));
    let cds = client.next().await;
    assert_eq!(cds.t, XdsType::Cluster, "{cds:?}");
    client.answer(&cds, None).await;
    // Both protocols re-send only the changed clusters' assignments after
    // a CDS change: here a new one the proxy has not subscribed to, so
    // no EDS response at all.
    let next = client.next().await;
    assert_eq!(next.t, XdsType::Listener, "{next:?}");
    client.answer(&next, None).await;
    let routes = client.next().await;
    assert_eq!(routes.t, XdsType::Route, "{routes:?}");
    assert_eq!(routes.version, cds.version);
    assert_eq!(
        routes.resources, rejected.resources,
        "the same route configuration, sent again"
    );
    client.answer(&routes, None).await;
    let status = wait_status(&server, XdsType::Route, |s| s.synced()).await;
    assert_eq!(status.acked.as_deref(), Some(routes.version.as_str()));
    for t in XdsType::ALL {
        let status = wait_status(&server, t, |s| s.acked.is_some()).await;
        assert!(
            status
                .acked
                .as_deref()
                .is_some_and(|v| !v.starts_with("client-made")),
            "{status:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_follows_the_protocol_rules() {
    protocol_rules(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_follows_the_protocol_rules() {
    protocol_rules(true).await;
}
