//! A Sidecar's ingress `tls` and `connectionPool`, and its egress
//! listeners on a Unix domain socket, generated: an ingress listener with
//! `tls` terminates TLS with its certificate files in place of the mesh's
//! mutual TLS (one chain, whatever the PeerAuthentication), HTTP after an
//! HTTPS port; its `connectionPool` limits its own cluster in place of
//! `inboundConnectionPool`; an egress listener bound to `unix:///path`
//! is a pipe listener there, routing to its hosts on all their HTTP
//! ports (or forwarding TCP to its one host port). Every output is
//! loaded by the real Envoy (validate mode).

mod support;

use std::time::Duration;

use pilot_api::security::PeerAuthentication;
use pilot_model::{Config, Labels};
use pilot_test_support::envoy_binary;
use pilot_xds::envoy_types::pb::envoy::config::core::v3::address;
use pilot_xds::envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use pilot_xds::envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_xds::envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_xds::envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use pilot_xds::envoy_types::pb::google::protobuf::Any;
use pilot_xds::serving::{generate_scoped_inbound, generate_scoped_outbound, scope_of};
use pilot_xds::{MeshConfig, Proxy, Resources, testing};
use prost::Message;
use support::sidecar::{A1, B1, configs, registry};

fn proxy() -> Proxy {
    Proxy::from_node_id("sidecar~10.9.0.1~x.a~a.svc.cluster.local")
        .unwrap()
        .with_metadata(&[("SDS".to_string(), "true".to_string())].into())
        .unwrap()
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

fn typed(listener: &Listener) -> &Any {
    let Some(filter::ConfigType::TypedConfig(config)) = &listener.filter_chains[0].filters[0].config_type
    else {
        panic!("typed config");
    };
    config
}

/// The HTTP connection manager of a listener's first chain, if it is one.
fn manager(listener: &Listener) -> Option<HttpConnectionManager> {
    HttpConnectionManager::decode(typed(listener).value.as_slice())
        .ok()
        .filter(|_| typed(listener).type_url.ends_with("HttpConnectionManager"))
}

/// A certificate and key (a self-signed CA's, enough for Envoy to load)
/// written under `dir`: (certificate path, key path).
fn certificate_files(dir: &std::path::Path) -> (String, String) {
    let material = pilot_ca::generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, &material.cert_pem).unwrap();
    std::fs::write(&key, &material.key_pem).unwrap();
    (cert.display().to_string(), key.display().to_string())
}

/// The inbound side of a capturing sidecar under a Sidecar with an
/// HTTPS ingress listener (`mode`) on 9443, a plain HTTP one on 9080,
/// and a TCP one on 9090 with its own pool, under `policies`.
fn inbound(mode: &str, policies: Vec<Config<PeerAuthentication>>) -> (Resources, String) {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = certificate_files(dir.path());
    let configs = configs(&format!(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  ingress:
  - port: {{number: 9443, protocol: HTTPS, name: https}}
    defaultEndpoint: 127.0.0.1:8443
    tls: {{mode: {mode}, serverCertificate: {cert}, privateKey: {key}, caCertificates: {cert}}}
  - port: {{number: 9080, protocol: HTTP, name: http}}
    defaultEndpoint: 127.0.0.1:8080
  - port: {{number: 9090, protocol: TCP, name: tcp}}
    defaultEndpoint: 127.0.0.1:7070
    connectionPool: {{tcp: {{maxConnections: 5}}}}
  inboundConnectionPool: {{tcp: {{maxConnections: 10}}}}
"#
    ));
    let (registry, _) = registry(&[A1, B1]);
    let mut configs = configs;
    configs.peer_authentications = policies.into_iter().map(std::sync::Arc::new).collect();
    let mesh = MeshConfig::new(configs.compile());
    let scope = scope_of(
        "a",
        mesh.model().sidecar_for("a", &Labels::new()),
        &registry,
        &mesh,
        mesh.model(),
    );
    let proxy = proxy();
    let resources = generate_scoped_inbound(&proxy, &[], &mesh, Some(&scope));
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    (resources, cert)
}

fn strict() -> Vec<Config<PeerAuthentication>> {
    let strict: PeerAuthentication =
        serde_json::from_value(serde_json::json!({"mtls": {"mode": "STRICT"}})).unwrap();
    vec![Config::new("a", "default", strict)]
}

/// The downstream TLS context of a listener's only chain.
fn tls_context(listener: &Listener) -> DownstreamTlsContext {
    assert_eq!(listener.filter_chains.len(), 1, "one chain on {}", listener.name);
    let socket = listener.filter_chains[0]
        .transport_socket
        .as_ref()
        .unwrap_or_else(|| panic!("{} terminates TLS", listener.name));
    let Some(pilot_xds::envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(
        config,
    )) = &socket.config_type
    else {
        panic!("typed config");
    };
    DownstreamTlsContext::decode(config.value.as_slice()).unwrap()
}

#[test]
fn ingress_tls_terminates_with_its_files_in_place_of_mesh_mutual_tls() {
    for policies in [Vec::new(), strict()] {
        let (resources, cert) = inbound("SIMPLE", policies.clone());
        let https = listener(&resources, "0.0.0.0_9443");
        let context = tls_context(https);
        assert_eq!(context.require_client_certificate, None);
        let chain = context.common_tls_context.unwrap().tls_certificates[0]
            .certificate_chain
            .clone()
            .unwrap();
        assert_eq!(
            format!("{:?}", chain.specifier),
            format!("Some(Filename({cert:?}))")
        );
        // HTTP after termination: the connection manager, not TCP.
        assert!(manager(https).is_some(), "HTTPS is HTTP once terminated");
        // The other ports keep the mesh's mutual TLS: two chains
        // (PERMISSIVE) or TLS on every chain (STRICT).
        let http = listener(&resources, "0.0.0.0_9080");
        if policies.is_empty() {
            assert_eq!(http.filter_chains.len(), 2);
        } else {
            assert!(http.filter_chains.iter().all(|c| c.transport_socket.is_some()));
        }
    }
    let (resources, _) = inbound("MUTUAL", strict());
    let context = tls_context(listener(&resources, "0.0.0.0_9443"));
    assert_eq!(context.require_client_certificate.map(|b| b.value), Some(true));
    assert!(
        context
            .common_tls_context
            .unwrap()
            .validation_context_type
            .is_some()
    );
}

#[test]
fn an_ingress_connection_pool_limits_its_own_cluster_only() {
    let (resources, _) = inbound("SIMPLE", Vec::new());
    let limit = |name: &str| {
        let cluster = resources
            .clusters
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("cluster {name}"));
        cluster.circuit_breakers.as_ref().unwrap().thresholds[0]
            .max_connections
            .as_ref()
            .unwrap()
            .value
    };
    assert_eq!(limit("inbound|9090||"), 5, "the listener's own pool");
    assert_eq!(limit("inbound|9080||"), 10, "the Sidecar's pool");
    assert_eq!(limit("inbound|9443||"), 10, "the Sidecar's pool");
}

fn outbound(sidecar: &str) -> Resources {
    let (registry, _) = registry(&[A1, B1]);
    let configs = configs(sidecar);
    let mesh = MeshConfig::new(configs.compile());
    let scope = scope_of(
        "a",
        mesh.model().sidecar_for("a", &Labels::new()),
        &registry,
        &mesh,
        mesh.model(),
    );
    let proxy = proxy();
    let resources = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), &scope, &[]);
    resources.check().unwrap();
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

fn pipe(listener: &Listener) -> String {
    match listener.address.as_ref().and_then(|a| a.address.clone()) {
        Some(address::Address::Pipe(pipe)) => pipe.path,
        other => panic!("{} is not on a pipe: {other:?}", listener.name),
    }
}

#[test]
fn a_unix_socket_egress_listener_routes_to_its_hosts_on_every_http_port() {
    let resources = outbound(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - port: {number: 0, protocol: HTTP, name: http-uds}
    bind: unix:///var/run/a1.sock
    hosts: [./a1.a.svc.cluster.local]
  - port: {number: 0, protocol: TCP, name: tcp-uds}
    bind: unix:///var/run/b1.sock
    captureMode: NONE
    hosts: [b/b1.b.svc.cluster.local]
"#,
    );
    // Without a port-less listener, only the sockets listen (and the
    // capturing proxy's virtual listener).
    assert_eq!(
        names(&resources),
        [
            "unix:///var/run/a1.sock",
            "unix:///var/run/b1.sock",
            "virtualOutbound"
        ]
    );
    let http = listener(&resources, "unix:///var/run/a1.sock");
    assert_eq!(pipe(http), "/var/run/a1.sock");
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = manager(http).unwrap().route_specifier
    else {
        panic!("RDS");
    };
    assert_eq!(rds.route_config_name, "unix:///var/run/a1.sock");
    let config = resources
        .routes
        .iter()
        .find(|r| r.name == "unix:///var/run/a1.sock")
        .expect("the socket's route configuration");
    let hosts: Vec<&str> = config.virtual_hosts.iter().map(|v| v.name.as_str()).collect();
    assert!(hosts.contains(&"a1.a.svc.cluster.local:80"), "{hosts:?}");
    assert!(
        !hosts.iter().any(|h| h.starts_with(B1)),
        "b1 is not imported there: {hosts:?}"
    );
    // TCP to its one host port.
    let tcp = listener(&resources, "unix:///var/run/b1.sock");
    assert_eq!(pipe(tcp), "/var/run/b1.sock");
    let proxy = TcpProxy::decode(typed(tcp).value.as_slice()).unwrap();
    assert_eq!(
        proxy.cluster_specifier,
        Some(tcp_proxy::ClusterSpecifier::Cluster(format!(
            "outbound|3306||{B1}"
        )))
    );
}

#[test]
fn a_unix_socket_beside_the_port_less_listener_leaves_it_its_hosts() {
    let resources = outbound(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - port: {number: 0, protocol: HTTP}
    bind: unix:///var/run/a1.sock
    hosts: [./a1.a.svc.cluster.local]
  - hosts: [b/b1.b.svc.cluster.local]
"#,
    );
    let names = names(&resources);
    assert!(names.contains(&"unix:///var/run/a1.sock"), "{names:?}");
    assert!(names.contains(&"0.0.0.0_3306"), "b1 on its port: {names:?}");
    assert!(
        !names.contains(&"0.0.0.0_80") && !names.contains(&"0.0.0.0_8080"),
        "a1 only on its socket: {names:?}"
    );
}
