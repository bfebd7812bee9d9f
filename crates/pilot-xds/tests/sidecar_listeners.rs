//! A Sidecar's listeners generated: egress listeners with a port carry
//! their hosts on that port only (bound at their address for
//! `captureMode: NONE`, captured otherwise), the port-less listener the
//! rest; ingress listeners receive on their port and forward to their
//! default endpoint (loopback, the proxy's address, a Unix socket), with
//! the workload's mutual TLS and the inbound connection pool's limits.
//! Every output is checked and loaded by the real Envoy (validate mode).

mod support;

use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::address;
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_api::security::PeerAuthentication;
use pilot_model::{Config, Labels, NetworkEndpoint, RegistrySnapshot, ServiceDiscovery, ServiceInstance};
use pilot_routing::RoutingConfigs;
use pilot_test_support::envoy_binary;
use pilot_xds::envoy_types;
use pilot_xds::serving::{generate_scoped_inbound, generate_scoped_outbound, scope_of};
use pilot_xds::{MeshConfig, Proxy, ProxyScope, Resources, testing};
use prost::Message;
use support::sidecar::{A1, A2, B1, configs, registry};

const EGRESS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - port: {number: 8080, protocol: HTTP, name: http-local}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: [./a1.a.svc.cluster.local]
  - port: {number: 3306, protocol: TCP, name: mysql}
    hosts: [b/b1.b.svc.cluster.local]
  - hosts: [./a2.a.svc.cluster.local]
"#;

fn proxy(capture: bool) -> Proxy {
    let proxy = Proxy::from_node_id("sidecar~10.9.0.1~x.a~a.svc.cluster.local").unwrap();
    if capture {
        return proxy;
    }
    proxy
        .with_metadata(&[("INTERCEPTION_MODE".to_string(), "NONE".to_string())].into())
        .unwrap()
}

fn scope(configs: &RoutingConfigs, registry: &RegistrySnapshot, labels: &Labels) -> ProxyScope {
    let mesh = MeshConfig::new(configs.compile());
    scope_of(
        "a",
        mesh.model().sidecar_for("a", labels),
        registry,
        &mesh,
        mesh.model(),
    )
}

fn outbound(capture: bool) -> Resources {
    let (registry, _) = registry(&[A1, A2, B1]);
    let configs = configs(EGRESS);
    let mesh = MeshConfig::new(configs.compile());
    let scope = scope(&configs, &registry, &Labels::new());
    let proxy = proxy(capture);
    let resources = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), &scope, &[]);
    resources.check().unwrap();
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

fn listener<'a>(resources: &'a Resources, name: &str) -> &'a Listener {
    resources
        .listeners
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("listener {name} in {:?}", names(resources)))
}

fn names(resources: &Resources) -> Vec<&str> {
    resources.listeners.iter().map(|l| l.name.as_str()).collect()
}

/// Whether Envoy binds the listener's port itself.
fn binds(listener: &Listener) -> bool {
    listener.bind_to_port.as_ref().is_none_or(|b| b.value)
}

/// The RDS name of an HTTP listener.
fn rds(listener: &Listener) -> String {
    let Some(filter::ConfigType::TypedConfig(config)) = &listener.filter_chains[0].filters[0].config_type
    else {
        panic!("typed config");
    };
    let manager = HttpConnectionManager::decode(config.value.as_slice()).unwrap();
    match manager.route_specifier {
        Some(http_connection_manager::RouteSpecifier::Rds(rds)) => rds.route_config_name,
        other => panic!("not RDS: {other:?}"),
    }
}

/// The domains-bearing virtual host names of a route configuration.
fn virtual_hosts(resources: &Resources, name: &str) -> Vec<String> {
    resources
        .routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("route configuration {name}"))
        .virtual_hosts
        .iter()
        .map(|v| v.name.clone())
        .collect()
}

#[test]
fn an_egress_listener_with_a_port_carries_its_hosts_there_only() {
    let resources = outbound(true);
    // captureMode NONE on a capturing proxy: a real listener at its bind,
    // with a route configuration of its own holding a1 only.
    let local = listener(&resources, "127.0.0.1_8080");
    assert!(binds(local));
    assert_eq!(rds(local), "127.0.0.1:8080");
    let hosts = virtual_hosts(&resources, "127.0.0.1:8080");
    assert!(
        hosts.iter().all(|v| v.starts_with(A1)) && !hosts.is_empty(),
        "{hosts:?}"
    );
    // The TCP listener with a port, captured (no bind: reached by
    // original destination).
    let mysql = listener(&resources, "0.0.0.0_3306");
    assert!(!binds(mysql));
    // The port-less listener: a2 on 80, and not a1 (imported only on
    // 8080); no captured 8080 listener at all.
    let http = listener(&resources, "0.0.0.0_80");
    assert!(!binds(http));
    let hosts = virtual_hosts(&resources, &rds(http));
    assert!(
        hosts.iter().any(|v| v.starts_with(A2)) && !hosts.iter().any(|v| v.starts_with(A1)),
        "{hosts:?}"
    );
    assert!(!names(&resources).contains(&"0.0.0.0_8080"));
    assert!(names(&resources).contains(&"virtualOutbound"));
    // Every host in scope keeps its clusters.
    for host in [A1, A2, B1] {
        assert!(
            resources
                .clusters
                .iter()
                .any(|c| c.name.ends_with(&format!("|{host}"))),
            "{host}"
        );
    }
}

#[test]
fn without_capture_every_listener_binds_and_a_default_address_keeps_the_port_name() {
    let resources = outbound(false);
    let local = listener(&resources, "127.0.0.1_8080");
    assert!(binds(local));
    assert_eq!(rds(local), "127.0.0.1:8080");
    let mysql = listener(&resources, "127.0.0.1_3306");
    assert!(binds(mysql));
    let http = listener(&resources, "127.0.0.1_80");
    assert_eq!(rds(http), "80");
    assert!(!names(&resources).contains(&"virtualOutbound"));

    // An egress listener on the port-less listener's port and address
    // takes it: a2 is no longer reachable on 80, a1 is.
    let (registry, _) = registry(&[A1, A2, B1]);
    let configs = configs(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - port: {number: 80, protocol: HTTP}
    hosts: [./a1.a.svc.cluster.local]
  - hosts: ["./*"]
"#,
    );
    let mesh = MeshConfig::new(configs.compile());
    let scope = scope(&configs, &registry, &Labels::new());
    let proxy = proxy(false);
    let resources = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), &scope, &[]);
    resources.check().unwrap();
    let http = listener(&resources, "127.0.0.1_80");
    assert_eq!(rds(http), "80");
    let hosts = virtual_hosts(&resources, "80");
    assert!(
        hosts.iter().any(|v| v.starts_with(A1)) && !hosts.iter().any(|v| v.starts_with(A2)),
        "{hosts:?}"
    );
    assert_eq!(resources.routes.iter().filter(|r| r.name == "80").count(), 1);
    // a1's other port stays with the port-less listener.
    assert!(names(&resources).contains(&"127.0.0.1_8080"));
}

const INGRESS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  ingress:
  - port: {number: 9080, protocol: HTTP, name: http}
    defaultEndpoint: 127.0.0.1:8080
  - port: {number: 9090, protocol: TCP, name: tcp}
    bind: 127.0.0.1
    captureMode: NONE
    defaultEndpoint: unix:///var/run/app.sock
  - port: {number: 9091, protocol: TCP, name: tcp-ip}
    defaultEndpoint: 0.0.0.0:7070
  inboundConnectionPool: {tcp: {maxConnections: 10}}
"#;

/// The inbound side of a capturing sidecar at 10.9.0.1 with SDS
/// certificates, running a2 on 9080, under `policies`.
fn inbound(policies: Vec<Config<PeerAuthentication>>) -> Resources {
    let (registry, memory) = registry(&[A1, A2, B1]);
    let mut configs = configs(INGRESS);
    configs.peer_authentications = policies.into_iter().map(Arc::new).collect();
    let mesh = MeshConfig::new(configs.compile());
    let scope = scope(&configs, &registry, &Labels::new());
    let proxy = proxy(true)
        .with_metadata(&[("SDS".to_string(), "true".to_string())].into())
        .unwrap();
    let service = memory.get_service(A2).unwrap();
    let own = [ServiceInstance::new(
        Arc::clone(&service),
        NetworkEndpoint::new(proxy.ip, 9080, service.ports[0].clone()),
        Labels::from_pairs([("app", "a2")]),
    )];
    let resources = generate_scoped_inbound(&proxy, &own, &mesh, Some(&scope));
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

fn endpoint_of(cluster: &Cluster) -> address::Address {
    let endpoint = &cluster.load_assignment.as_ref().unwrap().endpoints[0].lb_endpoints[0];
    let Some(lb_endpoint::HostIdentifier::Endpoint(endpoint)) = &endpoint.host_identifier else {
        panic!("an endpoint");
    };
    endpoint.address.clone().unwrap().address.unwrap()
}

#[test]
fn ingress_listeners_forward_to_their_default_endpoint() {
    let resources = inbound(Vec::new());
    assert_eq!(
        names(&resources),
        ["0.0.0.0_9080", "127.0.0.1_9090", "0.0.0.0_9091"]
    );
    assert!(!binds(listener(&resources, "0.0.0.0_9080")));
    assert!(binds(listener(&resources, "127.0.0.1_9090")));
    let cluster = |name: &str| {
        resources
            .clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("cluster {name}"))
    };
    // The own instance on 9080 names the cluster; its target is the
    // default endpoint, not the instance's port.
    let socket = |a: address::Address| match a {
        address::Address::SocketAddress(s) => (s.address, s.port_specifier),
        other => panic!("{other:?}"),
    };
    let (ip, port) = socket(endpoint_of(cluster(&format!("inbound|80||{A2}"))));
    assert_eq!(ip, "127.0.0.1");
    assert_eq!(format!("{port:?}"), "Some(PortValue(8080))");
    match endpoint_of(cluster("inbound|9090||")) {
        address::Address::Pipe(pipe) => assert_eq!(pipe.path, "/var/run/app.sock"),
        other => panic!("{other:?}"),
    }
    let (ip, port) = socket(endpoint_of(cluster("inbound|9091||")));
    assert_eq!(ip, "10.9.0.1");
    assert_eq!(format!("{port:?}"), "Some(PortValue(7070))");
    // The inbound connection pool limits every inbound cluster.
    for c in &resources.clusters {
        let limits = &c.circuit_breakers.as_ref().unwrap().thresholds[0];
        assert_eq!(limits.max_connections.as_ref().unwrap().value, 10);
    }
}

#[test]
fn mutual_tls_applies_on_ingress_listeners() {
    let strict: PeerAuthentication =
        serde_json::from_value(serde_json::json!({"mtls": {"mode": "STRICT"}})).unwrap();
    let resources = inbound(vec![Config::new("a", "default", strict)]);
    for l in &resources.listeners {
        assert!(
            l.filter_chains.iter().all(|c| c.transport_socket.is_some()),
            "{} requires mutual TLS",
            l.name
        );
    }
    // PERMISSIVE (no policy): TLS and plaintext chains.
    let resources = inbound(Vec::new());
    assert_eq!(listener(&resources, "0.0.0.0_9080").filter_chains.len(), 2);
}
