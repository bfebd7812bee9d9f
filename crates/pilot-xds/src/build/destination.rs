//! Routing by a Service's address (the Gateway API's ClusterIP matching)
//! on a captured sidecar's outbound HTTP listeners.
//!
//! Istio routes a sidecar's HTTP requests by their Host header; the
//! Gateway API's routes attached to a Service (GAMMA) apply to the
//! requests sent to that Service's address, whatever their Host. On a
//! port where some Service with an address has such routes ("a
//! destination port"), the captured listener of the port gets a filter
//! chain per Service address on it (`filter_chain_match.prefix_ranges`,
//! the connection's original destination):
//!
//! - to a Service with Gateway API routes on the port: the route
//!   configuration `PORT/HOST`, one virtual host `*` with that Service's
//!   routes;
//! - to another Service: the port's route configuration (`PORT`, routing
//!   by Host as before, but for the Hosts of the Services with Gateway API
//!   routes, which go to the destination's own cluster), the connection
//!   manager first setting [`DESTINATION_HEADER`] to that cluster;
//! - to any other address: the port's route configuration, the header
//!   removed (a
//!   Host naming a Service with Gateway API routes finds no cluster:
//!   Envoy answers 503).
//!
//! A Service without an address, a proxy without capture (its listeners
//! bind 127.0.0.1: no Service address to match), a Sidecar resource's
//! egress listeners with a port of their own and the ports without such
//! Services route by Host as before.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use envoy_types::pb::envoy::config::common::mutation_rules::v3::{HeaderMutation, header_mutation};
use envoy_types::pb::envoy::config::core::v3::{
    CidrRange, HeaderValue, HeaderValueOption, TypedExtensionConfig, header_value_option,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, VirtualHost, route, route_action,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager,
};
use envoy_types::pb::envoy::extensions::http::early_header_mutation::header_mutation::v3::HeaderMutation as EarlyMutation;
use envoy_types::pb::google::protobuf::{BoolValue, UInt32Value};
use pilot_model::{Service, ServiceInstance};
use pilot_routing::RoutingModel;
use prost::Message;

use super::listeners::http_filter_chain;
use super::route_config::route_configuration;
use super::routes::{admitted, prefix_match, virtual_host_routes};
use super::util::{ads, any};
use crate::{ClusterName, Proxy};

/// The request header naming the cluster of the Service a captured
/// connection was sent to, set by the listener's filter chain of that
/// Service's address (removed from what the application sent on any
/// other chain) and removed before the request leaves the proxy.
pub const DESTINATION_HEADER: &str = "x-pilot-destination-cluster";

/// The route configuration of the Service `host`'s address on `port`.
pub(crate) fn service_route_name(port: u16, host: &str) -> String {
    format!("{port}/{host}")
}

/// The Services with an address whose Gateway API routes apply on `port`.
pub(crate) fn routed_by_address<'a>(
    port: u16,
    services: &'a [Arc<Service>],
    model: &RoutingModel,
) -> Vec<&'a Arc<Service>> {
    services
        .iter()
        .filter(|s| s.address.is_some() && http_port(s, port) && model.has_service_routes(&s.hostname, port))
        .collect()
}

/// The filter chains of a captured listener on the destination port
/// `port`: one per Service address on it, then the default chain (the
/// listener's chain for any other address). None when `port` is not a
/// destination port.
pub(crate) fn filter_chains(
    port: u16,
    services: &[Arc<Service>],
    model: &RoutingModel,
) -> Option<Vec<FilterChain>> {
    let routed = routed_by_address(port, services, model);
    if routed.is_empty() {
        return None;
    }
    let routed_hosts: BTreeSet<&str> = routed.iter().map(|s| s.hostname.as_str()).collect();
    let mut addresses = BTreeSet::new();
    let mut chains = Vec::new();
    for service in services.iter().filter(|s| http_port(s, port)) {
        let Some(address) = service.address else { continue };
        if !addresses.insert(address) {
            // An older Service has this address.
            continue;
        }
        let stat_prefix = format!("outbound_{port}_{}", service.hostname);
        let mut chain = if routed_hosts.contains(service.hostname.as_str()) {
            http_filter_chain(&stat_prefix, rds(service_route_name(port, &service.hostname)))
        } else {
            let cluster = ClusterName::outbound(&service.hostname, port, Default::default()).to_string();
            with_early_mutation(
                http_filter_chain(&stat_prefix, rds(by_destination_route_name(port))),
                set_header(&cluster),
            )
        };
        chain.filter_chain_match = Some(to_address(address));
        chains.push(chain);
    }
    chains.push(with_early_mutation(
        http_filter_chain(&format!("outbound_{port}"), rds(by_destination_route_name(port))),
        remove_header(),
    ));
    Some(chains)
}

/// The route configurations the destination port `port`'s chains name:
/// one per Service with Gateway API routes on it, and the port's own (in
/// place of [`route_configuration`]'s). Empty when `port` is not a
/// destination port.
pub fn route_configurations(
    port: u16,
    services: &[Arc<Service>],
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
) -> Vec<RouteConfiguration> {
    let routed = routed_by_address(port, services, model);
    if routed.is_empty() {
        return Vec::new();
    }
    let mut configs: Vec<RouteConfiguration> = routed
        .iter()
        .map(|service| {
            let host_routes = model.http_routes(&service.hostname);
            let routes = virtual_host_routes(
                service,
                port,
                port,
                host_routes,
                &admitted(host_routes, own, proxy),
                model.default_hash(&service.hostname, port),
            );
            RouteConfiguration {
                name: service_route_name(port, &service.hostname),
                virtual_hosts: vec![VirtualHost {
                    name: format!("{}:{port}", service.hostname),
                    domains: vec!["*".into()],
                    routes,
                    ..Default::default()
                }],
                validate_clusters: Some(BoolValue { value: false }),
                ..Default::default()
            }
        })
        .collect();
    let mut by_destination = route_configuration(port, services, model, proxy, own);
    by_destination.name = by_destination_route_name(port);
    by_destination
        .request_headers_to_remove
        .push(DESTINATION_HEADER.into());
    let routed_names: BTreeSet<String> = routed.iter().map(|s| format!("{}:{port}", s.hostname)).collect();
    for host in &mut by_destination.virtual_hosts {
        if routed_names.contains(&host.name) {
            host.routes = vec![to_destination()];
        }
    }
    configs.push(by_destination);
    configs
}

/// The route configuration of a destination port `port` for connections
/// to addresses of Services without Gateway API routes on it, and to
/// other addresses: the port's own name, in place of its configuration
/// by Host.
fn by_destination_route_name(port: u16) -> String {
    crate::names::route_config_name(port)
}

/// Whether `service` has `port` as an HTTP port.
fn http_port(service: &Service, port: u16) -> bool {
    service.port_by_number(port).is_some_and(|p| p.protocol.is_http())
}

fn rds(name: String) -> http_connection_manager::RouteSpecifier {
    http_connection_manager::RouteSpecifier::Rds(Rds {
        config_source: Some(ads()),
        route_config_name: name,
    })
}

/// A chain's match of the connections sent to `address`.
fn to_address(address: IpAddr) -> FilterChainMatch {
    FilterChainMatch {
        prefix_ranges: vec![CidrRange {
            address_prefix: address.to_string(),
            prefix_len: Some(UInt32Value {
                value: if address.is_ipv4() { 32 } else { 128 },
            }),
        }],
        ..Default::default()
    }
}

/// The route of a request whose Host names a Service with Gateway API
/// routes but which was sent to another Service's address: to that
/// Service's cluster, named by [`DESTINATION_HEADER`] (without it, no
/// cluster: Envoy answers 503).
fn to_destination() -> Route {
    Route {
        name: "by-destination".into(),
        r#match: Some(prefix_match("/")),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::ClusterHeader(
                DESTINATION_HEADER.into(),
            )),
            ..Default::default()
        })),
        ..Default::default()
    }
}

fn set_header(cluster: &str) -> HeaderMutation {
    HeaderMutation {
        action: Some(header_mutation::Action::Append(HeaderValueOption {
            header: Some(HeaderValue {
                key: DESTINATION_HEADER.into(),
                value: cluster.into(),
                ..Default::default()
            }),
            append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd.into(),
            ..Default::default()
        })),
    }
}

fn remove_header() -> HeaderMutation {
    HeaderMutation {
        action: Some(header_mutation::Action::Remove(DESTINATION_HEADER.into())),
    }
}

/// `chain`'s connection manager with `mutation` made before routing.
fn with_early_mutation(mut chain: FilterChain, mutation: HeaderMutation) -> FilterChain {
    for filter in &mut chain.filters {
        let Some(filter::ConfigType::TypedConfig(config)) = &mut filter.config_type else {
            continue;
        };
        let Ok(mut manager) = HttpConnectionManager::decode(config.value.as_slice()) else {
            continue;
        };
        manager
            .early_header_mutation_extensions
            .push(TypedExtensionConfig {
                name: "envoy.http.early_header_mutation.header_mutation".into(),
                typed_config: Some(any(&EarlyMutation {
                    mutations: vec![mutation.clone()],
                })),
            });
        *config = any(&manager);
    }
    chain
}
