//! The pieces every listener is made of: a listener on an address with a
//! filter chain, the HTTP connection manager (fault, CORS and router
//! filters) with its routes, a TCP proxy, a route to a cluster; and the
//! plan a proxy's listeners are gathered in ([`ListenerPlan`]). A
//! sidecar's listeners are `sidecar/`'s, an edge proxy's `gateway/`'s.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteMatch, route, route_action, route_match,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::http::stateful_session::v3::StatefulSession;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::BoolValue;

use super::routes::{CORS_FILTER, FAULT_FILTER, STATEFUL_SESSION_FILTER};
use super::util::{any, socket};

/// What listeners a proxy gets, and the outbound HTTP ports (each with a
/// route configuration) and ingress route configurations they refer to.
#[derive(Default)]
pub struct ListenerPlan {
    /// The listeners.
    pub listeners: Vec<Listener>,
    /// The outbound HTTP ports: one route configuration each.
    pub http_ports: BTreeSet<u16>,
    /// The outbound HTTP ports whose captured listener routes by the
    /// Service address a connection was sent to: their route
    /// configurations are `serving::destination_route_configurations`'s
    /// (the port's own among them), not `route_configuration`'s.
    pub destination_ports: BTreeSet<u16>,
    /// An edge proxy's route configurations (ingress rules', gateways'),
    /// to be built ([`EdgeRouteConfiguration::build`]).
    ///
    /// [`EdgeRouteConfiguration::build`]: crate::serving::EdgeRouteConfiguration::build
    pub ingress_routes: Vec<super::edge_routes::EdgeRouteConfiguration>,
    /// An edge proxy's scopes (SRDS): for a connection manager with many
    /// hosts, one per host, each naming its route configuration among
    /// `ingress_routes`.
    pub scoped_routes: Vec<envoy_types::pb::envoy::config::route::v3::ScopedRouteConfiguration>,
}

/// A listener on `address:port` with one filter chain; `bind`: whether it
/// binds the port itself.
pub(crate) fn listener(name: &str, address: &str, port: u16, bind: bool, chain: FilterChain) -> Listener {
    Listener {
        name: name.to_string(),
        address: Some(socket(address, port)),
        filter_chains: vec![chain],
        bind_to_port: (!bind).then_some(BoolValue { value: false }),
        ..Default::default()
    }
}

/// A route of every request under `prefix` to `cluster`.
pub(crate) fn route_to(cluster: &str, prefix: &str) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(route_match::PathSpecifier::Prefix(prefix.to_string())),
            ..Default::default()
        }),
        action: Some(route::Action::Route(RouteAction {
            cluster_specifier: Some(route_action::ClusterSpecifier::Cluster(cluster.to_string())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The Lua filter's name (an edge proxy's scoped routes make the host
/// lower case with it, before any other filter).
pub(crate) const LUA_FILTER: &str = "envoy.filters.http.lua";

/// Where a filter added ahead of the others goes in `filters`: first, or
/// after the Lua filter making the host lower case, which stays first.
pub(crate) fn front(filters: &[HttpFilter]) -> usize {
    usize::from(filters.first().is_some_and(|f| f.name == LUA_FILTER))
}

/// The HTTP connection manager with the fault, CORS, stateful session
/// (for the routes keeping sessions) and router filters.
pub(crate) fn http_filter_chain(
    stat_prefix: &str,
    routes: http_connection_manager::RouteSpecifier,
) -> FilterChain {
    http_filter_chain_with(stat_prefix, routes, |_| {})
}

/// An inbound listener's HTTP connection manager: [`http_filter_chain`]
/// without the stateful session filter (its routes go to the workload's
/// own port; no route of it keeps sessions).
pub(crate) fn inbound_http_filter_chain(
    stat_prefix: &str,
    routes: http_connection_manager::RouteSpecifier,
) -> FilterChain {
    http_filter_chain_with(stat_prefix, routes, |manager| {
        manager.http_filters.retain(|f| f.name != STATEFUL_SESSION_FILTER);
    })
}

/// [`http_filter_chain`] with the connection manager changed by `edit`.
pub(crate) fn http_filter_chain_with(
    stat_prefix: &str,
    routes: http_connection_manager::RouteSpecifier,
    edit: impl FnOnce(&mut HttpConnectionManager),
) -> FilterChain {
    let filter = |name: &str, config| HttpFilter {
        name: name.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    let mut manager = HttpConnectionManager {
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(routes),
        http_filters: vec![
            filter(FAULT_FILTER, any(&HttpFault::default())),
            filter(CORS_FILTER, any(&Cors::default())),
            filter(STATEFUL_SESSION_FILTER, any(&StatefulSession::default())),
            filter("envoy.filters.http.router", any(&Router::default())),
        ],
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            enabled: Some(BoolValue { value: false }),
            ..Default::default()
        }],
        ..Default::default()
    };
    edit(&mut manager);
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.http_connection_manager".into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&manager))),
        }],
        ..Default::default()
    }
}

/// A TCP proxy to `cluster`.
pub(crate) fn tcp_filter_chain(cluster: &str) -> FilterChain {
    let proxy = TcpProxy {
        stat_prefix: cluster.to_string(),
        cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(cluster.to_string())),
        ..Default::default()
    };
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.tcp_proxy".into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
        }],
        ..Default::default()
    }
}
