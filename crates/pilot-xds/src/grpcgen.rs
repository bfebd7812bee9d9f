//! Proxyless gRPC (Istio's `grpcgen`): configuration for gRPC libraries
//! that speak xDS themselves (gRFC A27 client, A36 server), built from the
//! same services and rules as an Envoy's, keeping only what gRPC reads and
//! accepts.
//!
//! - LDS, client side: a listener named `host:port` for every name a client
//!   may dial (`xds:///reviews.default.svc.cluster.local:9080`, and as for
//!   Envoy `name.namespace`, `name.namespace.svc`, the short name in the
//!   client's namespace and the VIP, always with the port), holding an
//!   `api_listener` HttpConnectionManager with RDS and the fault (when a
//!   rule of the host asks for faults) and router filters (gRFC A39).
//!   Unknown names have no resource: the client reports "does not exist".
//! - RDS: one route configuration per service port, named
//!   `hostname:port`, one virtual host with every alias as domain; routes
//!   from the routing model as for Envoy (header and path matches, weighted
//!   subsets), then reduced to gRPC's subset (A28): timeouts become
//!   `max_stream_duration` (A31), retries keep gRPC status codes (A44),
//!   faults stay per route (A33); rewrites, mirrors, header mutations
//!   (a VirtualService's `headers`, an HTTPRoute's or GRPCRoute's header
//!   modifier filters: gRPC does not apply them), CORS and websocket
//!   settings are dropped (gRPC NACKs per-route
//!   configuration of filters it does not run, and ignores the rest).
//! - CDS/EDS: an EDS cluster per service port and per subset a rule or
//!   policy names (round robin; a policy's `httpMaxRequests` as the
//!   circuit breaker, A32); load assignments with a weight per locality
//!   (gRPC drops localities without one) and a locality, empty without a zone. External (DNS) services,
//!   service entries resolved by DNS or passed through, and egress rules
//!   are not generated for gRPC.
//! - LDS, server side (A36): for each instance the registry has on the
//!   proxy's IP, listeners named
//!   `grpc/server?xds.resource.listening_address=IP:PORT` (the instance's
//!   address, `0.0.0.0` and `[::]`), whose address is that address, with an
//!   inline route configuration whose only route is a non-forwarding one,
//!   so an xDS-enabled gRPC server starts serving.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, circuit_breakers::Thresholds, cluster,
};
use envoy_types::pb::envoy::config::core::v3::TrafficDirection;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    NonForwardingAction, RetryPolicy, Route, RouteAction, RouteConfiguration, VirtualHost, route,
    route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::RegexMatcher;
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{Labels, ServiceDiscovery, ServiceInstance};
use pilot_routing::RoutingModel;

use crate::build::clusters::{load_assignment, subsets_of};
use crate::build::route_config::domains_with_port;
use crate::build::routes::{FAULT_FILTER, admitted, prefix_match, virtual_host_routes};
use crate::build::util::{ads, any, socket, u32_value};
use crate::{ClusterName, Proxy, Resources};

/// The prefix of the listener names xDS-enabled gRPC servers ask for (the
/// `server_listener_resource_name_template` of the bootstrap, `%s` being
/// the listening address).
pub const GRPC_SERVER_LISTENER_PREFIX: &str = "grpc/server?xds.resource.listening_address=";

/// The router filter's name.
const ROUTER_FILTER: &str = "envoy.filters.http.router";
/// The connection manager's name (server-side filter chains).
const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";
/// What a rule's retries retry on for gRPC (gRFC A44 takes gRPC status
/// codes; UNAVAILABLE is what Envoy's `5xx,connect-failure` become).
const GRPC_RETRY_ON: &str = "unavailable";

/// Everything a gRPC client may ask for: listeners by `host:port`, route
/// configurations, clusters and load assignments.
pub(crate) fn outbound(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    own: &[ServiceInstance],
) -> Resources {
    let mut resources = Resources::default();
    let mut listener_names = BTreeSet::new();
    for service in registry.services() {
        // Services the proxy would resolve itself (DNS, passthrough) are
        // not generated for gRPC.
        if service.external_name.is_some() || !crate::build::resolved::uses_eds(&service.resolution) {
            continue;
        }
        let host_routes = model.http_routes(&service.hostname);
        let admitted = admitted(host_routes, own, proxy);
        let mut flags = admitted.iter().copied();
        // Faults of routes that apply to this proxy (a route applies when
        // one of its matches does, or it has none).
        let faults = host_routes.iter().any(|route| {
            let applies = if route.matches.is_empty() {
                true
            } else {
                route
                    .matches
                    .iter()
                    .fold(false, |any, _| flags.next().unwrap_or(true) | any)
            };
            applies && route.fault.is_some()
        });
        for port in &service.ports {
            let canonical = format!("{}:{}", service.hostname, port.port);
            // Listeners: one per name with the port (the first service to
            // claim a name keeps it, as Envoy's domains do).
            let aliases = domains_with_port(&service, port.port, proxy);
            let suffix = format!(":{}", port.port);
            for alias in aliases.iter().filter(|a| a.ends_with(&suffix)) {
                if listener_names.insert(alias.clone()) {
                    resources
                        .listeners
                        .push(client_listener(alias, &canonical, faults));
                }
            }
            // The route configuration.
            let routes: Vec<Route> = virtual_host_routes(
                &service,
                port.port,
                port.port,
                host_routes,
                &admitted,
                model.default_hash(&service.hostname, port.port),
            )
            .into_iter()
            .map(for_grpc)
            .collect();
            resources.routes.push(RouteConfiguration {
                name: canonical.clone(),
                virtual_hosts: vec![VirtualHost {
                    name: canonical,
                    domains: aliases,
                    routes,
                    ..Default::default()
                }],
                ..Default::default()
            });
            // Clusters and load assignments.
            let wanted = std::iter::once(Labels::new()).chain(subsets_of(model, &service.hostname).cloned());
            for subset in wanted {
                let name = ClusterName::outbound(&service.hostname, port.port, subset.clone());
                let max_requests = model
                    .policy_for(&service.hostname, &subset)
                    .and_then(|p| p.for_port(port.port).connection_pool.as_ref()?.max_requests);
                resources
                    .clusters
                    .push(eds_cluster(&name.to_string(), max_requests));
                resources
                    .endpoints
                    .push(weighted(load_assignment(&name, &service, &port.name, registry)));
            }
        }
    }
    resources
}

/// The server-side listeners of a gRPC proxy: one per name an xDS-enabled
/// server listening for one of its instances may ask for.
pub(crate) fn inbound(own: &[ServiceInstance]) -> Resources {
    let mut listeners: BTreeMap<String, Listener> = BTreeMap::new();
    for instance in own {
        let port = instance.endpoint.port;
        let wildcards: &[&str] = if instance.endpoint.address.is_ipv4() {
            &["0.0.0.0", "[::]"]
        } else {
            &["[::]", "0.0.0.0"]
        };
        let own_address = match instance.endpoint.address {
            std::net::IpAddr::V4(v4) => v4.to_string(),
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
        };
        for address in std::iter::once(own_address.as_str()).chain(wildcards.iter().copied()) {
            let name = format!("{GRPC_SERVER_LISTENER_PREFIX}{address}:{port}");
            listeners
                .entry(name.clone())
                .or_insert_with(|| server_listener(&name, address, port, &instance.service.hostname));
        }
    }
    Resources {
        listeners: listeners.into_values().collect(),
        ..Default::default()
    }
}

/// A client-side listener: an API listener whose connection manager takes
/// its routes from `route_config`.
fn client_listener(name: &str, route_config: &str, faults: bool) -> Listener {
    let mut http_filters = Vec::new();
    if faults {
        http_filters.push(http_filter(FAULT_FILTER, any(&HttpFault::default())));
    }
    http_filters.push(http_filter(ROUTER_FILTER, any(&Router::default())));
    let manager = HttpConnectionManager {
        stat_prefix: name.to_string(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: route_config.to_string(),
        })),
        http_filters,
        ..Default::default()
    };
    Listener {
        name: name.to_string(),
        api_listener: Some(ApiListener {
            api_listener: Some(any(&manager)),
        }),
        ..Default::default()
    }
}

/// A server-side listener at `address:port` (gRFC A36): every request is
/// served by the server itself (a non-forwarding route).
fn server_listener(name: &str, address: &str, port: u16, hostname: &str) -> Listener {
    let bare = address.trim_start_matches('[').trim_end_matches(']');
    let routes = RouteConfiguration {
        name: format!("inbound|{port}||{hostname}"),
        virtual_hosts: vec![VirtualHost {
            name: "inbound|http".into(),
            domains: vec!["*".into()],
            routes: vec![Route {
                name: "default".into(),
                r#match: Some(prefix_match("/")),
                action: Some(route::Action::NonForwardingAction(NonForwardingAction {})),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let manager = HttpConnectionManager {
        stat_prefix: name.to_string(),
        route_specifier: Some(http_connection_manager::RouteSpecifier::RouteConfig(routes)),
        http_filters: vec![http_filter(ROUTER_FILTER, any(&Router::default()))],
        ..Default::default()
    };
    Listener {
        name: name.to_string(),
        address: Some(socket(bare, port)),
        traffic_direction: TrafficDirection::Inbound as i32,
        filter_chains: vec![FilterChain {
            name: "inbound".into(),
            filters: vec![Filter {
                name: HCM_FILTER.into(),
                config_type: Some(filter::ConfigType::TypedConfig(any(&manager))),
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn http_filter(name: &str, config: envoy_types::pb::google::protobuf::Any) -> HttpFilter {
    HttpFilter {
        name: name.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    }
}

/// An EDS cluster over ADS, round robin (what every gRPC supports).
fn eds_cluster(name: &str, max_requests: Option<u32>) -> Cluster {
    Cluster {
        name: name.to_string(),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
            cluster::DiscoveryType::Eds as i32,
        )),
        eds_cluster_config: Some(cluster::EdsClusterConfig {
            eds_config: Some(ads()),
            ..Default::default()
        }),
        lb_policy: cluster::LbPolicy::RoundRobin as i32,
        circuit_breakers: max_requests.map(|n| CircuitBreakers {
            thresholds: vec![Thresholds {
                max_requests: Some(UInt32Value { value: n }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Gives each locality a weight (its number of endpoints), which gRPC
/// needs (it ignores localities without one), and a locality message
/// (empty for endpoints without a zone: gRPC NACKs a missing one).
fn weighted(mut assignment: ClusterLoadAssignment) -> ClusterLoadAssignment {
    for locality in &mut assignment.endpoints {
        locality.locality.get_or_insert_with(Default::default);
        let n = i32::try_from(locality.lb_endpoints.len()).unwrap_or(i32::MAX);
        locality.load_balancing_weight = Some(u32_value(n.max(1)));
    }
    assignment
}

/// An Envoy route reduced to what gRPC reads (gRFC A28, A31, A33, A44).
/// gRPC does not apply header mutations (a route's or a weighted
/// cluster's, request or response): they are left out, so the
/// configuration a proxyless client holds says what it does.
fn for_grpc(mut route: Route) -> Route {
    route.request_headers_to_add.clear();
    route.request_headers_to_remove.clear();
    route.response_headers_to_add.clear();
    route.response_headers_to_remove.clear();
    // gRPC matches a path by prefix, whole path or regular expression
    // only: a prefix of whole segments is the expression it stands for.
    if let Some(matcher) = &mut route.r#match
        && let Some(route_match::PathSpecifier::PathSeparatedPrefix(prefix)) = &matcher.path_specifier
    {
        matcher.path_specifier = Some(route_match::PathSpecifier::SafeRegex(RegexMatcher {
            regex: format!("{}(/.*)?", regex_escape(prefix)),
            ..Default::default()
        }));
    }
    route
        .typed_per_filter_config
        .retain(|name, _| name == FAULT_FILTER);
    if let Some(route::Action::Route(action)) = &mut route.action {
        *action = action_for_grpc(std::mem::take(action));
    }
    route
}

/// `text` as an RE2 expression matching it literally.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn action_for_grpc(action: RouteAction) -> RouteAction {
    let max_stream_duration = action.timeout.map(|timeout| route_action::MaxStreamDuration {
        max_stream_duration: Some(timeout),
        ..Default::default()
    });
    let retry_policy = action
        .retry_policy
        .filter(|retry| retry.num_retries.as_ref().is_some_and(|n| n.value > 0))
        .map(|retry| RetryPolicy {
            retry_on: GRPC_RETRY_ON.to_string(),
            num_retries: retry.num_retries,
            ..Default::default()
        });
    let mut cluster_specifier = action.cluster_specifier;
    if let Some(route_action::ClusterSpecifier::WeightedClusters(weighted)) = &mut cluster_specifier {
        for cluster in &mut weighted.clusters {
            cluster.request_headers_to_add.clear();
            cluster.request_headers_to_remove.clear();
            cluster.response_headers_to_add.clear();
            cluster.response_headers_to_remove.clear();
        }
    }
    RouteAction {
        cluster_specifier,
        max_stream_duration,
        retry_policy,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_of_whole_segments_is_a_regular_expression_for_grpc() {
        let route = Route {
            r#match: Some(envoy_types::pb::envoy::config::route::v3::RouteMatch {
                path_specifier: Some(route_match::PathSpecifier::PathSeparatedPrefix("/pkg.Svc".into())),
                ..Default::default()
            }),
            ..Default::default()
        };
        let specifier = for_grpc(route).r#match.unwrap().path_specifier.unwrap();
        let route_match::PathSpecifier::SafeRegex(regex) = specifier else {
            panic!("{specifier:?}")
        };
        assert_eq!(regex.regex, "/pkg\\.Svc(/.*)?");
    }

    #[test]
    fn header_mutations_are_left_out_for_grpc() {
        use envoy_types::pb::envoy::config::core::v3::{HeaderValue, HeaderValueOption};
        use envoy_types::pb::envoy::config::route::v3::{WeightedCluster, weighted_cluster::ClusterWeight};
        let add = || {
            vec![HeaderValueOption {
                header: Some(HeaderValue {
                    key: "x-set".into(),
                    value: "v".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }]
        };
        let cluster = ClusterWeight {
            name: "outbound|80||a".into(),
            weight: Some(u32_value(1)),
            request_headers_to_add: add(),
            request_headers_to_remove: vec!["x-gone".into()],
            response_headers_to_add: add(),
            response_headers_to_remove: vec!["x-gone".into()],
            ..Default::default()
        };
        let route = Route {
            request_headers_to_add: add(),
            request_headers_to_remove: vec!["x-gone".into()],
            response_headers_to_add: add(),
            response_headers_to_remove: vec!["x-gone".into()],
            action: Some(route::Action::Route(RouteAction {
                cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(
                    WeightedCluster {
                        clusters: vec![cluster],
                        ..Default::default()
                    },
                )),
                ..Default::default()
            })),
            ..Default::default()
        };
        let grpc = for_grpc(route);
        assert!(grpc.request_headers_to_add.is_empty() && grpc.request_headers_to_remove.is_empty());
        assert!(grpc.response_headers_to_add.is_empty() && grpc.response_headers_to_remove.is_empty());
        let Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::WeightedClusters(weighted)),
            ..
        })) = grpc.action
        else {
            panic!("the weighted clusters are kept")
        };
        let cluster = &weighted.clusters[0];
        assert_eq!(cluster.name, "outbound|80||a");
        assert!(cluster.request_headers_to_add.is_empty() && cluster.request_headers_to_remove.is_empty());
        assert!(cluster.response_headers_to_add.is_empty() && cluster.response_headers_to_remove.is_empty());
    }

    #[test]
    fn retries_keep_only_grpc_codes() {
        let action = RouteAction {
            retry_policy: Some(RetryPolicy {
                retry_on: "5xx,connect-failure".into(),
                num_retries: Some(u32_value(3)),
                ..Default::default()
            }),
            prefix_rewrite: "/x".into(),
            ..Default::default()
        };
        let grpc = action_for_grpc(action);
        let retry = grpc.retry_policy.unwrap();
        assert_eq!(retry.retry_on, "unavailable");
        assert_eq!(retry.num_retries.unwrap().value, 3);
        assert!(grpc.prefix_rewrite.is_empty());
        let none = action_for_grpc(RouteAction {
            retry_policy: Some(RetryPolicy {
                num_retries: Some(u32_value(0)),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert!(none.retry_policy.is_none());
    }
}
