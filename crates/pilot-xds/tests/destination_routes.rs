//! Routing by Service address (the Gateway API's ClusterIP matching) as
//! generated, asserted on the protobufs and loaded by the real Envoy: a
//! captured sidecar's listener of a port where a Service with an address
//! has an HTTPRoute gets a filter chain per Service address; a sidecar
//! without capture, and a port without such a route, keep one chain that
//! routes by Host; a Sidecar resource's port-less listener routes by
//! address as the default one does. The traffic runs in
//! `crates/pilot-agent/tests/capture_cluster_ip.rs`.

use std::net::IpAddr;

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, document};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::envoy_binary;
use pilot_xds::serving::{generate_scoped_outbound, scope_of};
use pilot_xds::{DESTINATION_HEADER, MeshConfig, Proxy, Resources, generate, testing};
use prost::Message;

const V1: &str = "echo-v1.mesh.svc.cluster.local";
const V2: &str = "echo-v2.mesh.svc.cluster.local";
const PLAIN: &str = "plain.mesh.svc.cluster.local";

/// echo-v1 (10.96.0.1), echo-v2 (10.96.0.2) on 80, and `plain`
/// (10.96.0.3) on 8080, each with one endpoint.
fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for (i, (host, port)) in [(V1, 80), (V2, 80), (PLAIN, 8080)].into_iter().enumerate() {
        let mut service = Service::new(host, vec![Port::new("http", port, Protocol::Http)]);
        service.address = Some(format!("10.96.0.{}", i + 1).parse::<IpAddr>().unwrap());
        registry.add_service(service);
        registry
            .add_endpoints(
                host,
                format!("10.0.{i}.1").parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    registry
}

/// An HTTPRoute on echo-v2 setting a response header.
fn mesh() -> MeshConfig {
    mesh_with("")
}

/// [`mesh`] with the objects of `more` too.
fn mesh_with(more: &str) -> MeshConfig {
    let text = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: on-v2, namespace: mesh}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo-v2}}]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: x-route, value: v2}}]}}}}]
    backendRefs: [{{name: echo-v2, port: 80}}]
{more}"#
    );
    let objects = document::parse("route.yaml", &text, &pilot_api::default_registry()).unwrap();
    MeshConfig::from_configs(&objects).unwrap()
}

fn proxy(capture: bool) -> Proxy {
    let proxy = Proxy::from_node_id("sidecar~10.9.0.1~client.mesh~mesh.svc.cluster.local").unwrap();
    if capture {
        return proxy;
    }
    proxy
        .with_metadata(&[("INTERCEPTION_MODE".to_string(), "NONE".to_string())].into())
        .unwrap()
}

fn resources(capture: bool) -> Resources {
    let resources = generate(&proxy(capture), &registry(), &mesh());
    resources.check().unwrap();
    resources
}

fn listener<'a>(resources: &'a Resources, name: &str) -> &'a Listener {
    resources
        .listeners
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no listener {name}"))
}

fn route_config<'a>(resources: &'a Resources, name: &str) -> &'a RouteConfiguration {
    resources
        .routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route configuration {name}"))
}

fn manager(chain: &FilterChain) -> HttpConnectionManager {
    let Some(filter::ConfigType::TypedConfig(any)) = &chain.filters[0].config_type else {
        panic!("no connection manager")
    };
    HttpConnectionManager::decode(any.value.as_slice()).unwrap()
}

/// A chain's destination address and the route configuration it names.
fn chain_summary(chain: &FilterChain) -> (Option<String>, String, usize) {
    let address = chain
        .filter_chain_match
        .as_ref()
        .map(|m| m.prefix_ranges[0].address_prefix.clone());
    let manager = manager(chain);
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = &manager.route_specifier else {
        panic!("not RDS")
    };
    (
        address,
        rds.route_config_name.clone(),
        manager.early_header_mutation_extensions.len(),
    )
}

#[test]
fn a_captured_port_with_a_services_route_has_a_chain_per_service_address() {
    let resources = resources(true);
    let chains: Vec<_> = listener(&resources, "0.0.0.0_80")
        .filter_chains
        .iter()
        .map(chain_summary)
        .collect();
    assert_eq!(
        chains,
        [
            (Some("10.96.0.1".into()), "80".into(), 1),
            (Some("10.96.0.2".into()), format!("80/{V2}"), 0),
            (None, "80".into(), 1),
        ]
    );
    // echo-v2's own configuration: a virtual host `*` with its route.
    let own = route_config(&resources, &format!("80/{V2}"));
    assert_eq!(own.virtual_hosts.len(), 1);
    assert_eq!(own.virtual_hosts[0].domains, ["*"]);
    assert!(
        own.virtual_hosts[0].routes[0]
            .response_headers_to_add
            .iter()
            .any(|h| h.header.as_ref().is_some_and(|h| h.key == "x-route")),
        "{own:?}"
    );
    // The port's own: echo-v2's Host goes to the destination's cluster;
    // echo-v1's Host routes as without capture.
    let by_destination = route_config(&resources, "80");
    assert_eq!(by_destination.request_headers_to_remove, [DESTINATION_HEADER]);
    let host = |name: &str| {
        by_destination
            .virtual_hosts
            .iter()
            .find(|v| v.name == format!("{name}:80"))
            .unwrap_or_else(|| panic!("no virtual host {name}"))
    };
    let Some(route::Action::Route(action)) = &host(V2).routes[0].action else {
        panic!("{:?}", host(V2))
    };
    assert_eq!(
        action.cluster_specifier,
        Some(route_action::ClusterSpecifier::ClusterHeader(
            DESTINATION_HEADER.into()
        ))
    );
    let uncaptured = self::resources(false);
    assert_eq!(
        host(V1).routes,
        route_config(&uncaptured, "80")
            .virtual_hosts
            .iter()
            .find(|v| v.name == format!("{V1}:80"))
            .unwrap()
            .routes
    );
    // A port without such a route: one chain, by Host.
    let plain = listener(&resources, "0.0.0.0_8080");
    assert_eq!(plain.filter_chains.len(), 1);
    assert_eq!(chain_summary(&plain.filter_chains[0]), (None, "8080".into(), 0));
    // And Envoy takes it.
    testing::validate(&envoy_binary(), &proxy(true).node_id(), &resources).unwrap();
}

#[test]
fn without_capture_the_port_routes_by_host() {
    let resources = resources(false);
    let http = listener(&resources, "127.0.0.1_80");
    assert_eq!(http.filter_chains.len(), 1);
    assert_eq!(chain_summary(&http.filter_chains[0]), (None, "80".into(), 0));
    assert!(
        resources.routes.iter().all(|r| !r.name.contains('/')),
        "{:?}",
        resources.routes.iter().map(|r| &r.name).collect::<Vec<_>>()
    );
}

#[test]
fn under_a_sidecar_resource_the_catch_all_listener_routes_by_address_too() {
    // A Sidecar with an egress listener of its own (8080, plain) and one
    // without a port carrying every Service of its namespace: the
    // port-less listener's ports come from the same plan.
    let sidecar = r#"---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: mesh}
spec:
  egress:
  - port: {number: 8080, protocol: HTTP, name: http-alt}
    hosts: [./plain.mesh.svc.cluster.local]
  - hosts: ["./*"]
"#;
    let mesh = mesh_with(sidecar);
    let registry = RegistrySnapshot::capture(&registry(), 1);
    let proxy = proxy(true);
    let scope = scope_of(
        "mesh",
        mesh.model().sidecar_for("mesh", &Labels::new()),
        &registry,
        &mesh,
        mesh.model(),
    );
    let resources = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), &scope, &[]);
    resources.check().unwrap();
    let chains: Vec<_> = listener(&resources, "0.0.0.0_80")
        .filter_chains
        .iter()
        .map(chain_summary)
        .collect();
    assert_eq!(chains.len(), 3, "{chains:?}");
    route_config(&resources, &format!("80/{V2}"));
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
}
