//! LDS: the listeners of sidecars (with or without traffic capture) and
//! ingress proxies (the routing model's ingress servers).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::TransportSocket;
use envoy_types::pb::envoy::config::core::v3::transport_socket;
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
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::routing::{PortSelector, RoutingModel};
use pilot_model::{Labels, ServiceDiscovery, ServiceInstance};

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
    /// An ingress's route configurations (from ingress rules).
    pub ingress_routes: Vec<RouteConfiguration>,
}

/// The listeners of `proxy` (but its inbound ones), with the route
/// configurations they refer to.
pub fn listeners(proxy: &Proxy, registry: &dyn ServiceDiscovery, model: &RoutingModel) -> ListenerPlan {
    let mut plan = ListenerPlan {
        listeners: Vec::new(),
        http_ports: BTreeSet::new(),
        ingress_routes: Vec::new(),
    };
    match proxy.proxy_type {
        ProxyType::Sidecar => {
            plan.http_ports.extend(crate::egress::http_ports(model));
            outbound(proxy, registry, &mut plan);
            if proxy.capture.captures() {
                plan.listeners.push(virtual_listener());
            }
        }
        ProxyType::Ingress => ingress(registry, model, &mut plan),
        ProxyType::Router => {}
    }
    plan
}

/// Outbound listeners: one per HTTP port (all services on it share the
/// port's route configuration), one per TCP service port. With capture they
/// do not bind (the virtual listener hands connections over by original
/// destination); without, they bind 127.0.0.1 at the service port.
fn outbound(proxy: &Proxy, registry: &dyn ServiceDiscovery, plan: &mut ListenerPlan) {
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
    for service in &services {
        for port in service
            .ports
            .iter()
            .filter(|p| !p.protocol.is_http() && p.protocol != pilot_model::Protocol::Udp)
        {
            let address = match (capture, service.address) {
                (true, Some(vip)) => vip.to_string(),
                (true, None) => "0.0.0.0".to_string(),
                (false, _) => "127.0.0.1".to_string(),
            };
            if !taken.insert((address.clone(), port.port)) {
                continue;
            }
            let cluster = ClusterName::outbound(&service.hostname, port.port, Labels::new()).to_string();
            plan.listeners.push(listener(
                &format!("{address}_{}", port.port),
                &address,
                port.port,
                !capture,
                tcp_filter_chain(&cluster),
            ));
        }
    }
}

/// Inbound listeners for a captured sidecar's own instances, to 127.0.0.1,
/// with the RBAC filters of the authorization policies applying to them.
pub(crate) fn inbound(own: &[ServiceInstance], authz: &crate::rbac::Authorization) -> Vec<Listener> {
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
        listeners.push(listener(&format!("{ip}_{port}"), &ip, port, false, chain));
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

/// Ingress listeners: one per ingress server of the model, routing by its
/// routes in order, with TLS from its secret.
fn ingress(registry: &dyn ServiceDiscovery, model: &RoutingModel, plan: &mut ListenerPlan) {
    for server in model.ingress_servers() {
        let port = server.port;
        let mut routes = Vec::new();
        for ingress_route in &server.routes {
            let target_port = match &ingress_route.port {
                PortSelector::Number(number) => Some(*number),
                PortSelector::Name(name) => registry
                    .get_service(&ingress_route.host)
                    .and_then(|s| s.port(name).map(|p| p.port)),
                _ => None,
            };
            let Some(target_port) = target_port else { continue };
            let cluster = ClusterName::outbound(&ingress_route.host, target_port, Labels::new()).to_string();
            let mut route = route_to(&cluster, "/");
            route.name = ingress_route.name.clone();
            route.r#match = Some(crate::routes::request_match(&ingress_route.request));
            routes.push(route);
        }
        let name = format!("ingress_{port}");
        plan.ingress_routes.push(RouteConfiguration {
            name: name.clone(),
            virtual_hosts: vec![VirtualHost {
                name: name.clone(),
                domains: vec!["*".into()],
                routes,
                ..Default::default()
            }],
            validate_clusters: Some(BoolValue { value: false }),
            ..Default::default()
        });
        let mut chain = http_filter_chain(
            &name,
            http_connection_manager::RouteSpecifier::Rds(Rds {
                config_source: Some(ads()),
                route_config_name: name.clone(),
            }),
        );
        if let Some(secret) = &server.tls_secret {
            chain.transport_socket = Some(tls(secret));
        }
        plan.listeners
            .push(listener(&format!("0.0.0.0_{port}"), "0.0.0.0", port, true, chain));
    }
}

fn tls(secret: &str) -> TransportSocket {
    let context = DownstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            tls_certificate_sds_secret_configs: vec![SdsSecretConfig {
                name: secret.to_string(),
                sds_config: Some(ads()),
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    TransportSocket {
        name: "envoy.transport_sockets.tls".into(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&context))),
    }
}

fn listener(name: &str, address: &str, port: u16, bind: bool, chain: FilterChain) -> Listener {
    Listener {
        name: name.to_string(),
        address: Some(socket(address, port)),
        filter_chains: vec![chain],
        bind_to_port: (!bind).then_some(BoolValue { value: false }),
        ..Default::default()
    }
}

fn route_to(cluster: &str, prefix: &str) -> Route {
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
fn http_filter_chain(stat_prefix: &str, routes: http_connection_manager::RouteSpecifier) -> FilterChain {
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

fn tcp_filter_chain(cluster: &str) -> FilterChain {
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
