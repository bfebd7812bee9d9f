//! Stream lifecycle with in-process gRPC clients: a bad node id is refused,
//! nothing is sent before the cache and the registry sync, an ACK is
//! recorded, a disconnected proxy leaves nothing behind, and a connect
//! storm waits in the accept queue.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use pilot_ads::{XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::SlowRegistry;
use pilot_test_support::ads::{self, CDS, LDS, SotwStream};

mod support;

/// A registry that is still loading until set synced (as a remote
/// registry is before its first list).
type Loading = SlowRegistry<MemoryServiceRegistry>;

async fn server() -> (XdsServer, u16, Arc<Controller>) {
    let registry = Arc::new(Loading::new(MemoryServiceRegistry::new(), true));
    registry.registry.add_service(Service::new(
        "reviews.default.svc.cluster.local",
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    server_on(registry).await
}

async fn server_on(registry: Arc<dyn ServiceDiscovery>) -> (XdsServer, u16, Arc<Controller>) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    let (server, port) = support::server::serve(Arc::clone(&controller), registry);
    (server, port, controller)
}

fn cds_request(node_id: &str, version: &str, nonce: &str) -> DiscoveryRequest {
    ads::request(Some(node_id), CDS, version, nonce)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_are_refused_acknowledged_and_cleaned_up() {
    let (server, port, controller) = server().await;

    // A node id that is not type~ip~id~domain ends the stream with the reason.
    let mut stream = SotwStream::open(port, &cds_request("not-a-node-id", "", "")).await;
    let refused = stream.message().await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(refused.message().contains("not-a-node-id"), "{refused:?}");

    // Before the Controller runs (and syncs), nothing is sent.
    let node = "sidecar~10.0.0.7~app.default~default.svc.cluster.local";
    let mut stream = SotwStream::open(port, &cds_request(node, "", "")).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stream.message())
            .await
            .is_err(),
        "a response before the cache synced"
    );
    controller.run();
    let response = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(response.type_url, CDS);
    assert!(!response.resources.is_empty());

    // The ACK is recorded.
    stream
        .send(&cds_request(node, &response.version_info, &response.nonce))
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !server
        .status()
        .iter()
        .any(|p| p.node_id == node && p.types.get("CDS").is_some_and(|s| s.synced()))
    {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Disconnecting removes the proxy: its task has ended.
    drop(stream);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !server.status().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind: {:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_sent_before_the_registry_syncs() {
    let registry = Arc::new(Loading::new(MemoryServiceRegistry::new(), false));
    let (server, port, controller) = server_on(Arc::clone(&registry) as _).await;
    controller.run();
    controller.wait_synced().await;
    let node = "sidecar~10.0.0.7~app.default~default.svc.cluster.local";
    let mut stream = SotwStream::open(port, &cds_request(node, "", "")).await;
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stream.message())
            .await
            .is_err(),
        "a response before the registry synced"
    );
    assert_eq!(server.version(), None, "published before the registry synced");
    // The registry loads its services, then says it is synced.
    registry.registry.add_service(Service::new(
        "reviews.default.svc.cluster.local",
        vec![Port::new("http", 9080, Protocol::Http)],
    ));
    registry.set_synced(true);
    let response = tokio::time::timeout(Duration::from_secs(10), stream.message())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(response.type_url, CDS);
    let names: Vec<String> = response
        .resources
        .iter()
        .map(|any| {
            use prost::Message;
            envoy_types::pb::envoy::config::cluster::v3::Cluster::decode(any.value.as_slice())
                .unwrap()
                .name
        })
        .collect();
    assert!(
        names
            .iter()
            .any(|n| n.contains("reviews.default.svc.cluster.local")),
        "the first push lacks the registry's service: {names:?}"
    );
}

/// The names of every resource of a response.
fn names_of(
    response: &envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse,
) -> BTreeSet<String> {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use prost::Message;
    response
        .resources
        .iter()
        .map(|any| match response.type_url.as_str() {
            CDS => Cluster::decode(any.value.as_slice()).unwrap().name,
            _ => Listener::decode(any.value.as_slice()).unwrap().name,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecars_of_one_deployment_each_get_their_own_inbound_side() {
    // Two captured sidecars of reviews v1 (one instance each, on their own
    // IPs): their outbound configuration is generated once and shared,
    // their inbound side is their own.
    let registry = Arc::new(Loading::new(MemoryServiceRegistry::new(), true));
    for host in ["reviews", "ratings"] {
        registry.registry.add_service(Service::new(
            format!("{host}.default.svc.cluster.local"),
            vec![Port::new("http", 9080, Protocol::Http)],
        ));
    }
    let v1 = Labels::from_pairs([("version", "v1")]);
    for ip in ["10.0.0.1", "10.0.0.2"] {
        registry
            .registry
            .add_endpoints(
                "reviews.default.svc.cluster.local",
                ip.parse().unwrap(),
                v1.clone(),
            )
            .unwrap();
    }
    let (_server, port, controller) = server_on(Arc::clone(&registry) as _).await;
    controller.run();
    for ip in ["10.0.0.1", "10.0.0.2"] {
        let node = format!("sidecar~{ip}~reviews-v1.default~default.svc.cluster.local");
        let proxy = pilot_xds::Proxy::from_node_id(&node).unwrap();
        let expected = pilot_xds::generate(&proxy, &*registry, &pilot_xds::MeshConfig::default());
        let mut request = cds_request(&node, "", "");
        let mut stream = SotwStream::open(port, &request).await;
        request.type_url = LDS.into();
        stream.send(&request).await.unwrap();
        let mut seen = BTreeMap::new();
        while seen.len() < 2 {
            let response = tokio::time::timeout(Duration::from_secs(10), stream.message())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            seen.insert(response.type_url.clone(), names_of(&response));
        }
        let clusters: BTreeSet<String> = expected.clusters.iter().map(|c| c.name.clone()).collect();
        let listeners: BTreeSet<String> = expected.listeners.iter().map(|l| l.name.clone()).collect();
        assert_eq!(seen[CDS], clusters, "{ip}");
        assert_eq!(seen[LDS], listeners, "{ip}");
        assert!(seen[LDS].contains(&format!("{ip}_9080")), "{ip}: {:?}", seen[LDS]);
        let other = if ip == "10.0.0.1" { "10.0.0.2" } else { "10.0.0.1" };
        assert!(
            !seen[LDS].contains(&format!("{other}_9080")),
            "{ip}: {:?}",
            seen[LDS]
        );
        assert!(
            seen[CDS].iter().any(|c| c.starts_with("inbound|9080")),
            "{ip}: {:?}",
            seen[CDS]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_changes_push_when_the_registry_has_no_changes_to_give() {
    // An empty aggregate's change stream ends at once; that must not stop
    // the pushes that configuration changes cause.
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = Arc::new(pilot_model::AggregateDiscovery::default());
    let server = XdsServer::new(Arc::clone(&controller), registry, XdsOptions::default());
    server.wait_version(1).await;
    let rule = pilot_model::Config::new(
        "default",
        "reviews-default",
        istio::RouteRule {
            destination: Some(istio::IstioService {
                name: "reviews".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    use pilot_model::ConfigStore;
    store.create(rule.to_dyn().unwrap()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), server.wait_version(2))
        .await
        .expect("the write was never pushed");
}

/// Proxies reconnecting all at once (a replica restarted) wait in the
/// listener's accept queue, not in their kernels' SYN retries: 300
/// connections opened while nothing accepts all complete, and all are then
/// accepted. With the standard library's queue of 128 the 130th SYN is
/// dropped and retried only after 1, 3, 7, ... s; this test then fails at
/// its guard (a hang, not a timing: loopback handshakes take microseconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_storm_waits_in_the_accept_queue() {
    const PROXIES: usize = 300;
    let listener = pilot_ads::listen(([127, 0, 0, 1], 0).into()).expect("listen");
    let address = listener.local_addr().unwrap();
    let guard = Duration::from_secs(20);
    let connecting = (0..PROXIES).map(|_| tokio::net::TcpStream::connect(address));
    let clients = tokio::time::timeout(guard, futures::future::join_all(connecting))
        .await
        .expect("every connection completes its handshake while nothing accepts");
    let clients: Vec<_> = clients.into_iter().collect::<Result<_, _>>().expect("connected");
    let mut accepted = Vec::new();
    while accepted.len() < PROXIES {
        let (stream, peer) = tokio::time::timeout(guard, listener.accept())
            .await
            .unwrap_or_else(|_| panic!("only {} of {PROXIES} connections were queued", accepted.len()))
            .expect("accept");
        accepted.push((stream, peer));
    }
    let peers: BTreeSet<_> = accepted.iter().map(|(_, peer)| *peer).collect();
    let locals: BTreeSet<_> = clients.iter().map(|c| c.local_addr().unwrap()).collect();
    assert_eq!(peers, locals, "the queue held exactly the connections opened");
}
