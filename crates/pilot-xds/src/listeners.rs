//! LDS: the listeners of sidecars (with or without traffic capture); those
//! of edge proxies (ingress, router) are `gateway.rs`'s.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::{Filter, FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteConfiguration, VirtualHost, route, route_action,
};
use envoy_types::pb::envoy::config::route::v3::{RouteAction, RouteMatch, route_match};

use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors;
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::HttpFault;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds, http_connection_manager, http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{ServiceDiscovery, ServiceInstance};
use pilot_routing::RoutingModel;

use crate::clusters::PASSTHROUGH;
use crate::routes::{CORS_FILTER, FAULT_FILTER};
use crate::util::{ads, any, socket};
use crate::{ClusterName, Proxy, ProxyType};

/// The port of the virtual listener that captured traffic arrives on.
pub const VIRTUAL_PORT: u16 = 15001;

/// What listeners a proxy gets, and the outbound HTTP ports (each with a
/// route configuration) and ingress route configurations they refer to.
pub struct ListenerPlan {
    /// The listeners.
    pub listeners: Vec<Listener>,
    /// The outbound HTTP ports: one route configuration each.
    pub http_ports: BTreeSet<u16>,
    /// An edge proxy's route configurations (ingress rules', gateways').
    pub ingress_routes: Vec<RouteConfiguration>,
}

/// The listeners of `proxy` (but its inbound ones), with the route
/// configurations they refer to.
pub fn listeners(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    own: &[ServiceInstance],
) -> ListenerPlan {
    let mut plan = ListenerPlan {
        listeners: Vec::new(),
        http_ports: BTreeSet::new(),
        ingress_routes: Vec::new(),
    };
    match proxy.proxy_type {
        ProxyType::Sidecar => {
            plan.http_ports.extend(crate::egress::http_ports(model));
            outbound(proxy, registry, model, own, &mut plan);
            if proxy.capture.captures() {
                plan.listeners.push(virtual_listener());
            }
        }
        ProxyType::Ingress | ProxyType::Router => {
            crate::gateway::listeners(proxy, registry, model, &mut plan)
        }
    }
    plan
}

/// Outbound listeners: one per HTTP port (all services on it share the
/// port's route configuration), one per TCP service port. With capture they
/// do not bind (the virtual listener hands connections over by original
/// destination); without, they bind 127.0.0.1 at the service port.
fn outbound(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    own: &[ServiceInstance],
    plan: &mut ListenerPlan,
) {
    let capture = proxy.capture.captures();
    let mut taken = BTreeSet::new();
    let services = registry.services();
    for service in &services {
        for port in &service.ports {
            if port.protocol.is_http() {
                plan.http_ports.insert(port.port);
            }
        }
    }
    for port in &plan.http_ports {
        let address = if capture { "0.0.0.0" } else { "127.0.0.1" };
        taken.insert((address.to_string(), *port));
        plan.listeners.push(listener(
            &format!("{address}_{port}"),
            address,
            *port,
            !capture,
            http_filter_chain(
                &format!("outbound_{port}"),
                http_connection_manager::RouteSpecifier::Rds(Rds {
                    config_source: Some(ads()),
                    route_config_name: crate::names::route_config_name(*port),
                }),
            ),
        ));
    }
    let address_of = |service: &pilot_model::Service| match (capture, service.address) {
        (true, Some(vip)) => vip.to_string(),
        (true, None) => "0.0.0.0".to_string(),
        (false, _) => "127.0.0.1".to_string(),
    };
    let shared = crate::l4::shared_tls_listeners(&services, address_of);
    let tcp_owners = crate::l4::tcp_listener_owners(&services, address_of);
    for service in &services {
        for port in service
            .ports
            .iter()
            .filter(|p| !p.protocol.is_http() && p.protocol != pilot_model::Protocol::Udp)
        {
            let address = address_of(service);
            let key = (address.clone(), port.port);
            let by_sni = port.protocol == pilot_model::Protocol::Https && shared.contains(&key);
            if crate::l4::is_plain_tcp(port.protocol)
                && tcp_owners
                    .get(&key)
                    .is_some_and(|owner| *owner != service.hostname)
            {
                // An older plain TCP service has this listener.
                continue;
            }
            if !taken.insert(key) {
                // A TLS service on a listener another one has: by SNI.
                let name = format!("{address}_{}", port.port);
                if by_sni && let Some(existing) = plan.listeners.iter_mut().find(|l| l.name == name) {
                    let chains = crate::l4::sni_filter_chains(service, port, model, proxy, own);
                    crate::l4::add_chains(existing, chains);
                }
                continue;
            }
            // The model's TCP and TLS routes of the service, else its own
            // cluster.
            let (chains, sni) = if by_sni {
                let mut chains = crate::l4::sni_filter_chains(service, port, model, proxy, own);
                if capture {
                    chains.push(crate::l4::passthrough_chain());
                }
                (chains, true)
            } else {
                crate::l4::filter_chains(service, port, model, proxy, own)
            };
            let mut tcp = listener(
                &format!("{address}_{}", port.port),
                &address,
                port.port,
                !capture,
                FilterChain::default(),
            );
            tcp.filter_chains = chains;
            if sni {
                tcp.listener_filters.push(crate::l4::tls_inspector());
            }
            plan.listeners.push(tcp);
        }
    }
}

/// Inbound listeners for a captured sidecar's own instances, to 127.0.0.1,
/// with the RBAC filters of the authorization policies applying to them.
pub(crate) fn inbound(
    own: &[ServiceInstance],
    mtls: impl Fn(&ServiceInstance) -> pilot_routing::MtlsMode,
    authz: &crate::rbac::Authorization,
) -> Vec<Listener> {
    let mut listeners = Vec::new();
    let mut taken = BTreeSet::new();
    for instance in own {
        let (ip, port) = (instance.endpoint.address.to_string(), instance.endpoint.port);
        if !taken.insert((ip.clone(), port)) {
            continue;
        }
        let cluster =
            ClusterName::inbound(&instance.service.hostname, instance.endpoint.service_port.port).to_string();
        let mut chain = if instance.endpoint.service_port.protocol.is_http() {
            http_filter_chain(
                &format!("inbound_{port}"),
                http_connection_manager::RouteSpecifier::RouteConfig(RouteConfiguration {
                    name: format!("inbound|{port}"),
                    virtual_hosts: vec![VirtualHost {
                        name: format!("inbound|{port}"),
                        domains: vec!["*".into()],
                        routes: vec![route_to(&cluster, "/")],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            )
        } else {
            tcp_filter_chain(&cluster)
        };
        authz.secure(&mut chain, &instance.labels);
        let mut inbound = listener(&format!("{ip}_{port}"), &ip, port, false, chain);
        crate::security::secure_inbound(&mut inbound, mtls(instance));
        listeners.push(inbound);
    }
    listeners
}

/// The listener captured connections arrive on; it hands each to the
/// listener of its original destination, or passes it through.
fn virtual_listener() -> Listener {
    Listener {
        name: "virtualOutbound".into(),
        address: Some(socket("0.0.0.0", VIRTUAL_PORT)),
        use_original_dst: Some(BoolValue { value: true }),
        filter_chains: vec![tcp_filter_chain(PASSTHROUGH)],
        ..Default::default()
    }
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

/// The HTTP connection manager with the fault, CORS and router filters.
pub(crate) fn http_filter_chain(
    stat_prefix: &str,
    routes: http_connection_manager::RouteSpecifier,
) -> FilterChain {
    let filter = |name: &str, config| HttpFilter {
        name: name.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    let manager = HttpConnectionManager {
        stat_prefix: stat_prefix.to_string(),
        route_specifier: Some(routes),
        http_filters: vec![
            filter(FAULT_FILTER, any(&HttpFault::default())),
            filter(CORS_FILTER, any(&Cors::default())),
            filter("envoy.filters.http.router", any(&Router::default())),
        ],
        upgrade_configs: vec![http_connection_manager::UpgradeConfig {
            upgrade_type: "websocket".into(),
            enabled: Some(BoolValue { value: false }),
            ..Default::default()
        }],
        ..Default::default()
    };
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
