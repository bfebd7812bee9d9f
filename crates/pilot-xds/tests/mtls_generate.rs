//! Mutual TLS generation, loaded by the real Envoy: inbound listeners by
//! PeerAuthentication (mesh, namespace and workload levels, port-level
//! exceptions), outbound clusters by auto mTLS and DestinationRule
//! `ISTIO_MUTUAL`, with the destination's SPIFFE identities.

use std::net::IpAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use pilot_api::networking::DestinationRule;
use pilot_api::security::PeerAuthentication;
use pilot_model::{Config, Labels, Port, Protocol, Service, ServiceInstance};
use pilot_routing::RoutingConfigs;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::envoy_binary;
use pilot_xds::envoy_types;
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};
use prost::Message;
use serde_json::json;

const REVIEWS: &str = "reviews.default.svc.cluster.local";
const RATINGS: &str = "ratings.default.svc.cluster.local";

fn labels(pairs: &[(&str, &str)]) -> Labels {
    Labels(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

/// reviews (account `reviews`, one instance with a sidecar, one without)
/// and ratings (in the mesh), both HTTP on 9080.
fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for (host, account, instances) in [
        (
            REVIEWS,
            "reviews",
            vec![
                (
                    "10.1.1.1",
                    labels(&[("app", "reviews"), ("security.istio.io/tlsMode", "istio")]),
                ),
                ("10.1.1.2", labels(&[("app", "reviews")])),
            ],
        ),
        (
            RATINGS,
            "ratings",
            vec![(
                "10.1.2.1",
                labels(&[("app", "ratings"), ("security.istio.io/tlsMode", "istio")]),
            )],
        ),
    ] {
        let mut service = Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]);
        service.service_accounts = vec![account.to_string()];
        let service = registry.add_service(service);
        for (address, labels) in instances {
            let address: IpAddr = address.parse().unwrap();
            let port = service.ports[0].clone();
            let instance = ServiceInstance::new(
                Arc::clone(&service),
                pilot_model::NetworkEndpoint::new(address, 9080, port),
                labels,
            )
            .with_service_account(account.to_string());
            registry.add_instance(instance).unwrap();
        }
    }
    registry
}

/// The captured sidecar of the reviews instance with a sidecar, its agent
/// serving it certificates over SDS.
fn reviews_proxy() -> Proxy {
    let metadata = [
        ("LABELS".to_string(), r#"{"app":"reviews"}"#.to_string()),
        ("SDS".to_string(), "true".to_string()),
    ]
    .into();
    Proxy::from_node_id("sidecar~10.1.1.1~reviews-v1.default~default.svc.cluster.local")
        .unwrap()
        .with_metadata(&metadata)
        .unwrap()
}

fn peer(namespace: &str, name: &str, spec: serde_json::Value) -> Config<PeerAuthentication> {
    Config::new(namespace, name, serde_json::from_value(spec).unwrap())
}

fn mesh(policies: Vec<Config<PeerAuthentication>>) -> MeshConfig {
    MeshConfig::new(peers(policies).compile())
}

fn peers(policies: Vec<Config<PeerAuthentication>>) -> RoutingConfigs {
    let mut configs = RoutingConfigs::default();
    configs.peer_authentications = policies.into_iter().map(std::sync::Arc::new).collect();
    configs
}

fn inbound(resources: &Resources) -> &Listener {
    resources
        .listeners
        .iter()
        .find(|l| l.name == "10.1.1.1_9080")
        .expect("the inbound listener")
}

/// The inbound listener's chains: (transport protocol matched, TLS).
fn chains(listener: &Listener) -> Vec<(String, bool)> {
    listener
        .filter_chains
        .iter()
        .map(|c| {
            (
                c.filter_chain_match
                    .as_ref()
                    .map(|m| m.transport_protocol.clone())
                    .unwrap_or_default(),
                c.transport_socket.is_some(),
            )
        })
        .collect()
}

fn checked(mesh: &MeshConfig) -> Resources {
    checked_for(&reviews_proxy(), mesh)
}

fn checked_for(proxy: &Proxy, mesh: &MeshConfig) -> Resources {
    let resources = generate(proxy, &registry(), mesh);
    resources.check().unwrap();
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

#[test]
fn inbound_chains_follow_peer_authentication_precedence() {
    // None: PERMISSIVE, TLS and plaintext told apart by the inspector.
    let resources = checked(&mesh(Vec::new()));
    let listener = inbound(&resources);
    assert_eq!(
        chains(listener),
        [("tls".to_string(), true), ("raw_buffer".to_string(), false)]
    );
    assert_eq!(
        listener.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );

    // The mesh says STRICT: one chain, TLS, a client certificate required.
    let strict = peer("istio-system", "mesh", json!({"mtls": {"mode": "STRICT"}}));
    let resources = checked(&mesh(vec![strict.clone()]));
    let listener = inbound(&resources);
    assert_eq!(chains(listener), [(String::new(), true)]);
    let dump = format!("{:?}", listener.filter_chains[0].transport_socket);
    assert!(dump.contains("DownstreamTlsContext"), "{dump}");
    assert!(listener.listener_filters.is_empty());

    // The namespace's DISABLE wins over the mesh's STRICT.
    let disable = peer("default", "ns", json!({"mtls": {"mode": "DISABLE"}}));
    let resources = checked(&mesh(vec![strict.clone(), disable.clone()]));
    assert_eq!(chains(inbound(&resources)), [(String::new(), false)]);

    // A workload's policy wins over both, its port level over its own mode.
    let workload = peer(
        "default",
        "reviews",
        json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "STRICT"},
               "portLevelMtls": {"9080": {"mode": "PERMISSIVE"}}}),
    );
    let resources = checked(&mesh(vec![strict.clone(), disable.clone(), workload]));
    assert_eq!(chains(inbound(&resources)).len(), 2);
    let other = peer(
        "default",
        "ratings",
        json!({"selector": {"matchLabels": {"app": "ratings"}}, "mtls": {"mode": "STRICT"}}),
    );
    let resources = checked(&mesh(vec![disable, other]));
    assert_eq!(
        chains(inbound(&resources)),
        [(String::new(), false)],
        "a policy of another workload"
    );

    // A proxy without SDS certificates cannot serve TLS: plaintext, even
    // under STRICT, and its clusters originate none.
    let mut without = reviews_proxy();
    without.sds = false;
    let resources = checked_for(&without, &mesh(vec![strict]));
    assert_eq!(chains(inbound(&resources)), [(String::new(), false)]);
    assert!(
        resources
            .clusters
            .iter()
            .all(|c| c.transport_socket.is_none() && c.transport_socket_matches.is_empty())
    );
}

fn cluster<'a>(resources: &'a Resources, name: &str) -> &'a Cluster {
    resources
        .clusters
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("{name}"))
}

fn tls_context(socket: &envoy_types::pb::envoy::config::core::v3::TransportSocket) -> UpstreamTlsContext {
    use envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType;
    let Some(ConfigType::TypedConfig(any)) = &socket.config_type else {
        panic!("no config")
    };
    UpstreamTlsContext::decode(any.value.as_slice()).unwrap()
}

#[test]
fn outbound_clusters_originate_mutual_tls_where_the_destination_accepts_it() {
    let resources = checked(&mesh(Vec::new()));
    let reviews = cluster(&resources, &format!("outbound|9080||{REVIEWS}"));
    // Auto mTLS: mutual TLS to the endpoints with a sidecar, plaintext to
    // the others.
    assert_eq!(reviews.transport_socket_matches.len(), 2, "{reviews:?}");
    let context = tls_context(
        reviews.transport_socket_matches[0]
            .transport_socket
            .as_ref()
            .unwrap(),
    );
    let dump = format!("{context:?}");
    assert!(
        dump.contains("spiffe://cluster.local/ns/default/sa/reviews"),
        "{dump}"
    );
    assert!(dump.contains("ROOTCA") && dump.contains("\"default\""), "{dump}");
    let assignment = resources
        .endpoints
        .iter()
        .find(|e| e.cluster_name == reviews.name)
        .unwrap();
    let marked: Vec<bool> = assignment.endpoints[0]
        .lb_endpoints
        .iter()
        .map(|e| e.metadata.is_some())
        .collect();
    assert_eq!(
        marked,
        [true, false],
        "only the instance with a sidecar: {assignment:?}"
    );

    // The trust domain configured is the one expected.
    let resources = checked(&mesh(Vec::new()).with_trust_domain("example.org"));
    let reviews = cluster(&resources, &format!("outbound|9080||{REVIEWS}"));
    let dump = format!(
        "{:?}",
        tls_context(
            reviews.transport_socket_matches[0]
                .transport_socket
                .as_ref()
                .unwrap()
        )
    );
    assert!(
        dump.contains("spiffe://example.org/ns/default/sa/reviews"),
        "{dump}"
    );

    // The destination's namespace says DISABLE: plaintext.
    let disable = peer("default", "ns", json!({"mtls": {"mode": "DISABLE"}}));
    let resources = checked(&mesh(vec![disable.clone()]));
    let reviews = cluster(&resources, &format!("outbound|9080||{REVIEWS}"));
    assert!(reviews.transport_socket_matches.is_empty() && reviews.transport_socket.is_none());

    // ISTIO_MUTUAL: every connection, whatever the PeerAuthentication.
    let mut with_rule = peers(vec![disable]);
    let rule: DestinationRule = serde_json::from_value(json!({
        "host": "ratings",
        "trafficPolicy": {"tls": {"mode": "ISTIO_MUTUAL"}},
    }))
    .unwrap();
    with_rule
        .destination_rules
        .push(std::sync::Arc::new(Config::new("default", "ratings", rule)));
    let resources = checked(&MeshConfig::new(with_rule.compile()));
    let ratings = cluster(&resources, &format!("outbound|9080||{RATINGS}"));
    let socket = ratings
        .transport_socket
        .as_ref()
        .expect("ISTIO_MUTUAL sets the cluster's socket");
    assert!(format!("{:?}", tls_context(socket)).contains("spiffe://cluster.local/ns/default/sa/ratings"));
}
