//! What proxyless gRPC clients and servers are sent (node metadata
//! `GENERATOR: grpc`), asserted on the protobufs: names by `host:port`,
//! only what gRPC accepts, and server-side listeners. The real gRPC runs in
//! `crates/pilot-system-tests/tests/grpc_proxyless.rs`.

mod support;

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::cluster;
use envoy_types::pb::envoy::config::core::v3::{address, socket_address};
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_xds::{GRPC_SERVER_LISTENER_PREFIX, Generator, Proxy, Resources, generate};
use prost::Message;
use support::RATINGS;

const GREETER: &str = "greeter.default.svc.cluster.local";

fn grpc_proxy(node_id: &str) -> Proxy {
    let metadata: BTreeMap<String, String> = [("GENERATOR".to_string(), "grpc".to_string())].into();
    let proxy = Proxy::from_node_id(node_id)
        .unwrap()
        .with_metadata(&metadata)
        .unwrap();
    assert_eq!(proxy.generator, Generator::Grpc);
    proxy
}

fn resources(node_id: &str) -> Resources {
    let resources = generate(&grpc_proxy(node_id), &support::registry(), &support::mesh());
    resources.check().unwrap();
    resources
}

fn client() -> Resources {
    resources("sidecar~10.9.0.1~client.default~default.svc.cluster.local")
}

fn api_manager(listener: &Listener) -> HttpConnectionManager {
    let any = listener
        .api_listener
        .as_ref()
        .and_then(|a| a.api_listener.as_ref())
        .unwrap_or_else(|| panic!("{} has no API listener", listener.name));
    HttpConnectionManager::decode(any.value.as_slice()).unwrap()
}

fn route_config<'a>(resources: &'a Resources, name: &str) -> &'a RouteConfiguration {
    resources
        .routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route configuration {name}"))
}

#[test]
fn client_listeners_are_named_host_port_with_rds() {
    let resources = client();
    let names: Vec<&str> = resources.listeners.iter().map(|l| l.name.as_str()).collect();
    for name in [
        "greeter.default.svc.cluster.local:50051",
        "greeter.default:50051",
        "greeter.default.svc:50051",
        "greeter:50051",
        "reviews:9080",
    ] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    // Names without a port, wrong ports and external services get nothing.
    for name in [GREETER, "greeter:9080", "httpbin:8000", "nosuch:50051"] {
        assert!(!names.contains(&name), "{name} should not be generated");
    }
    for listener in &resources.listeners {
        assert!(
            listener.address.is_none() && listener.filter_chains.is_empty(),
            "{}",
            listener.name
        );
        let manager = api_manager(listener);
        let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = &manager.route_specifier else {
            panic!("{} has no RDS", listener.name);
        };
        let port = listener.name.rsplit(':').next().unwrap();
        assert!(rds.route_config_name.ends_with(&format!(":{port}")), "{rds:?}");
        assert_eq!(
            manager.http_filters.last().map(|f| f.name.as_str()),
            Some("envoy.filters.http.router")
        );
    }
    let greeter = resources
        .listeners
        .iter()
        .find(|l| l.name == "greeter:50051")
        .unwrap();
    let Some(http_connection_manager::RouteSpecifier::Rds(rds)) = api_manager(greeter).route_specifier else {
        unreachable!()
    };
    assert_eq!(rds.route_config_name, format!("{GREETER}:50051"));
    let config = route_config(&resources, &rds.route_config_name);
    assert!(
        config.virtual_hosts[0]
            .domains
            .contains(&"greeter:50051".to_string())
    );
}

#[test]
fn short_names_resolve_only_in_the_clients_namespace() {
    let resources = resources("sidecar~10.9.0.2~client.other~other.svc.cluster.local");
    let names: Vec<&str> = resources.listeners.iter().map(|l| l.name.as_str()).collect();
    assert!(names.contains(&"greeter.default:50051"), "{names:?}");
    assert!(!names.contains(&"greeter:50051"), "{names:?}");
}

#[test]
fn only_hosts_with_fault_rules_get_the_fault_filter() {
    let resources = client();
    let filters = |name: &str| -> Vec<String> {
        let listener = resources.listeners.iter().find(|l| l.name == name).unwrap();
        api_manager(listener)
            .http_filters
            .into_iter()
            .map(|f| f.name)
            .collect()
    };
    assert_eq!(
        filters("ratings:9080"),
        ["envoy.filters.http.fault", "envoy.filters.http.router"]
    );
    assert_eq!(filters("greeter:50051"), ["envoy.filters.http.router"]);
    let ratings = route_config(&resources, &format!("{RATINGS}:9080"));
    assert!(
        ratings.virtual_hosts[0]
            .routes
            .iter()
            .any(|r| r.typed_per_filter_config.contains_key("envoy.filters.http.fault")),
        "{ratings:?}"
    );
}

#[test]
fn routes_keep_only_what_grpc_reads() {
    let resources = client();
    for config in &resources.routes {
        for route in config.virtual_hosts.iter().flat_map(|h| &h.routes) {
            assert!(route.request_headers_to_add.is_empty(), "{route:?}");
            assert!(
                route
                    .typed_per_filter_config
                    .keys()
                    .all(|k| k == "envoy.filters.http.fault"),
                "{route:?}"
            );
            if let Some(route::Action::Route(action)) = &route.action {
                assert!(action.timeout.is_none(), "{action:?}");
                assert!(action.prefix_rewrite.is_empty() && action.host_rewrite_specifier.is_none());
                assert!(action.request_mirror_policies.is_empty() && action.upgrade_configs.is_empty());
            }
        }
    }
    // productpage's rule: 10s timeout -> max_stream_duration (gRFC A31),
    // 3 retries on UNAVAILABLE (A44), v1 subset.
    let productpage = route_config(&resources, "productpage.default.svc.cluster.local:9080");
    let route = productpage.virtual_hosts[0]
        .routes
        .iter()
        .find(|r| r.name == "default/productpage-cors-mirror")
        .unwrap();
    let Some(route::Action::Route(action)) = &route.action else {
        panic!("{route:?}")
    };
    let duration = action
        .max_stream_duration
        .as_ref()
        .unwrap()
        .max_stream_duration
        .unwrap();
    assert_eq!(duration.seconds, 10);
    let retry = action.retry_policy.as_ref().unwrap();
    assert_eq!(retry.retry_on, "unavailable");
    assert_eq!(retry.num_retries.as_ref().unwrap().value, 3);
    assert_eq!(
        action.cluster_specifier,
        Some(route_action::ClusterSpecifier::Cluster(
            "outbound|9080|version=v1|productpage.default.svc.cluster.local".into()
        ))
    );
    // The header match survives.
    assert!(!route.r#match.as_ref().unwrap().headers.is_empty());
}

#[test]
fn clusters_are_eds_round_robin_with_weighted_localities() {
    let resources = client();
    assert!(!resources.clusters.is_empty());
    for cluster in &resources.clusters {
        assert_eq!(
            cluster.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Eds as i32
            )),
            "{}",
            cluster.name
        );
        assert_eq!(cluster.lb_policy, cluster::LbPolicy::RoundRobin as i32);
        assert!(cluster.outlier_detection.is_none() && cluster.transport_socket.is_none());
        assert!(!cluster.name.contains("httpbin") && cluster.name != pilot_xds::PASSTHROUGH);
    }
    assert!(
        resources
            .clusters
            .iter()
            .any(|c| c.name == "outbound|9080|version=v2|reviews.default.svc.cluster.local")
    );
    for assignment in &resources.endpoints {
        for locality in &assignment.endpoints {
            assert!(locality.locality.is_some(), "{}", assignment.cluster_name);
            assert_eq!(
                locality.load_balancing_weight.as_ref().map(|w| w.value as usize),
                Some(locality.lb_endpoints.len()),
                "{}",
                assignment.cluster_name
            );
        }
    }
}

#[test]
fn servers_get_listeners_for_their_instances() {
    // greeter v1 runs on 10.1.5.1:50051.
    let resources = resources("sidecar~10.1.5.1~greeter-v1.default~default.svc.cluster.local");
    for (address, ip) in [("10.1.5.1", "10.1.5.1"), ("0.0.0.0", "0.0.0.0"), ("[::]", "::")] {
        let name = format!("{GRPC_SERVER_LISTENER_PREFIX}{address}:50051");
        let listener = resources
            .listeners
            .iter()
            .find(|l| l.name == name)
            .unwrap_or_else(|| panic!("no {name}"));
        let Some(address::Address::SocketAddress(socket)) =
            listener.address.as_ref().and_then(|a| a.address.as_ref())
        else {
            panic!("{name} has no socket address");
        };
        assert_eq!(socket.address, ip);
        assert_eq!(
            socket.port_specifier,
            Some(socket_address::PortSpecifier::PortValue(50051))
        );
        let chain = &listener.filter_chains[0];
        let Some(filter::ConfigType::TypedConfig(any)) = &chain.filters[0].config_type else {
            panic!("{name}: no connection manager");
        };
        let manager = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
        let Some(http_connection_manager::RouteSpecifier::RouteConfig(config)) = manager.route_specifier
        else {
            panic!("{name}: no inline routes");
        };
        let route = &config.virtual_hosts[0].routes[0];
        assert!(
            matches!(route.action, Some(route::Action::NonForwardingAction(_))),
            "{route:?}"
        );
    }
    // A client with no instance gets no server listener.
    assert!(
        !client()
            .listeners
            .iter()
            .any(|l| l.name.starts_with(GRPC_SERVER_LISTENER_PREFIX))
    );
}

#[test]
fn envoys_are_unchanged_by_the_grpc_generator() {
    let envoy = Proxy::from_node_id("sidecar~10.9.0.1~client.default~default.svc.cluster.local").unwrap();
    let resources = generate(&envoy, &support::registry(), &support::mesh());
    assert!(resources.listeners.iter().all(|l| l.api_listener.is_none()));
    assert!(!resources.listeners.iter().any(|l| l.name == "greeter:50051"));
}
