//! Plain TCP services on one port without a VIP share one listener on a
//! capturing sidecar (`0.0.0.0_<port>`) and cannot be told apart there:
//! as Istio, the oldest service has the port, whatever the order of
//! their hostnames, and Envoy loads the result.

use std::time::{Duration, SystemTime};

use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_model::{Port, Protocol, Service};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::envoy_types;
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};
use prost::Message;

/// Two MySQL-like TCP services on 3306 without addresses (the first by
/// hostname created `first_age` seconds after the epoch, the other
/// `second_age`; none: unknown) and an HTTP one.
fn registry(first_age: Option<u64>, second_age: Option<u64>) -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for (host, age) in [("aaa.example.com", first_age), ("zzz.example.com", second_age)] {
        let mut service = Service::new(host, vec![Port::new("tcp-mysql", 3306, Protocol::Tcp)]);
        service.created = age.map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s));
        registry.add_service(service);
    }
    registry
}

/// The cluster the capturing sidecar's listener on 3306 proxies to.
fn owner(registry: &MemoryServiceRegistry) -> (String, Resources) {
    let proxy = Proxy::from_node_id("sidecar~10.9.0.2~client.default~default.svc.cluster.local").unwrap();
    let resources = generate(&proxy, registry, &MeshConfig::default());
    resources.check().unwrap();
    let listeners: Vec<_> = resources
        .listeners
        .iter()
        .filter(|l| l.name.ends_with("_3306"))
        .collect();
    assert_eq!(listeners.len(), 1, "one listener for the port: {listeners:?}");
    assert_eq!(listeners[0].name, "0.0.0.0_3306");
    assert_eq!(listeners[0].filter_chains.len(), 1);
    let chain = &listeners[0].filter_chains[0];
    let Some(filter::ConfigType::TypedConfig(any)) = &chain.filters[0].config_type else {
        panic!("no tcp_proxy")
    };
    let cluster = match TcpProxy::decode(any.value.as_slice()).unwrap().cluster_specifier {
        Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
        other => panic!("{other:?}"),
    };
    (cluster, resources)
}

#[test]
fn the_oldest_plain_tcp_service_has_a_shared_port() {
    // The older one wins, whichever hostname sorts first.
    let (cluster, resources) = owner(&registry(Some(200), Some(100)));
    assert_eq!(cluster, "outbound|3306||zzz.example.com");
    testing::validate(
        &pilot_test_support::envoy_binary(),
        "sidecar~10.9.0.2~client.default~default.svc.cluster.local",
        &resources,
    )
    .unwrap();
    assert_eq!(
        owner(&registry(Some(100), Some(200))).0,
        "outbound|3306||aaa.example.com"
    );
    // Of equal or unknown ages, the first by hostname; a service of known
    // age before one of unknown age.
    assert_eq!(
        owner(&registry(Some(5), Some(5))).0,
        "outbound|3306||aaa.example.com"
    );
    assert_eq!(owner(&registry(None, None)).0, "outbound|3306||aaa.example.com");
    assert_eq!(
        owner(&registry(None, Some(5))).0,
        "outbound|3306||zzz.example.com"
    );
    // Both keep their clusters: the port conflicts, not the services.
    for host in ["aaa", "zzz"] {
        let name = format!("outbound|3306||{host}.example.com");
        assert!(resources.clusters.iter().any(|c| c.name == name), "{name}");
    }
}
