//! A Sidecar's egress listeners with a port, generated: each listens on
//! its port at its address (bound for `captureMode: NONE` or a proxy
//! without capture, else reached by original destination) for the hosts
//! it imports, with a route configuration of its own for HTTP; the
//! port-less listener's hosts get the usual outbound listeners but where
//! a listener with a port has taken the address and port
//! (`layout.rs` and `pilot_routing`'s compiled Sidecar say how Istio reads them). Listeners on a
//! Unix domain socket are `unix.rs`'s.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    Rds, http_connection_manager,
};
use pilot_model::{Protocol, RegistrySnapshot, ServiceDiscovery, ServiceInstance};
use pilot_proxy_api::InterceptionMode;
use pilot_routing::RoutingModel;

use super::layout::{EgressPort, SidecarListeners};
use super::outbound::plan as listener_plan;
use crate::build::listeners::{http_filter_chain, listener};
use crate::build::route_config::route_configuration;
use crate::build::util::{ads, socket};
use crate::{Proxy, Resources};

/// Replaces the outbound listeners and route configurations of
/// `resources` (generated for every host in scope) with those of the
/// Sidecar's egress listeners: `registry` and `model` are already
/// restricted to the scope.
pub(crate) fn egress_listeners(
    proxy: &Proxy,
    registry: &RegistrySnapshot,
    model: &RoutingModel,
    layout: &SidecarListeners,
    own: &[ServiceInstance],
    resources: &mut Resources,
) {
    if layout.egress.is_empty() && layout.sockets.is_empty() {
        return;
    }
    let mut listeners: Vec<Listener> = Vec::new();
    let mut routes = Vec::new();
    for egress in &layout.egress {
        let registry = registry.scoped(|s| egress.hosts.contains(&s.hostname));
        let model = model.scoped(|h| egress.hosts.contains(h));
        let bound = egress.uncaptured || !proxy.capture.captures();
        let mut as_bound = proxy.clone();
        if bound {
            as_bound.capture = InterceptionMode::None;
        }
        let address = match (egress.bind.as_str(), bound) {
            ("", true) => "127.0.0.1",
            ("", false) => "0.0.0.0",
            (bind, _) => bind,
        };
        let name = format!("{address}_{}", egress.port);
        if listeners.iter().any(|l| l.name == name) {
            continue;
        }
        let services = registry.services();
        if is_http(egress, &services) {
            let route_name = route_name(egress, proxy);
            let mut config = route_configuration(egress.port, &services, &model, &as_bound, own);
            config.name = route_name.clone();
            routes.push(config);
            listeners.push(listener(
                &name,
                address,
                egress.port,
                bound,
                http_filter_chain(
                    &format!("outbound_{}", egress.port),
                    http_connection_manager::RouteSpecifier::Rds(Rds {
                        config_source: Some(ads()),
                        route_config_name: route_name,
                    }),
                ),
            ));
        } else {
            // The TCP listeners the hosts would have on this port: one
            // bound, or one per address captured; at a bind, the first.
            let plan = listener_plan(&as_bound, &registry, &model, own);
            let mut on_port = plan
                .listeners
                .into_iter()
                .filter(|l| l.name.ends_with(&format!("_{}", egress.port)) && l.name != "virtualOutbound");
            if egress.bind.is_empty() {
                listeners.extend(on_port);
            } else if let Some(mut tcp) = on_port.next() {
                tcp.name = name;
                tcp.address = Some(socket(address, egress.port));
                listeners.push(tcp);
            }
        }
    }
    for socket in &layout.sockets {
        if let Some((listener, config)) = super::unix::socket_listener(proxy, registry, model, socket, own) {
            listeners.push(listener);
            routes.extend(config);
        }
    }
    // The port-less listener's hosts (none without one), on the addresses
    // and ports left; the virtual listener when the proxy captures.
    let none = BTreeSet::new();
    let carried = layout.catch_all.as_ref().unwrap_or(&none);
    let registry = registry.scoped(|s| carried.contains(&s.hostname));
    let model = model.scoped(|h| carried.contains(h));
    let plan = listener_plan(proxy, &registry, &model, own);
    let taken: BTreeSet<String> = listeners.iter().map(|l| l.name.clone()).collect();
    let address = if proxy.capture.captures() {
        "0.0.0.0"
    } else {
        "127.0.0.1"
    };
    let services = registry.services();
    for port in &plan.http_ports {
        if taken.contains(&format!("{address}_{port}")) {
            continue;
        }
        if plan.destination_ports.contains(port) {
            routes.extend(crate::build::destination::route_configurations(
                *port, &services, &model, proxy, own,
            ));
        } else {
            routes.push(route_configuration(*port, &services, &model, proxy, own));
        }
    }
    listeners.extend(plan.listeners.into_iter().filter(|l| !taken.contains(&l.name)));
    resources.listeners = listeners;
    resources.routes = routes;
}

/// An HTTP listener's route configuration name: the port's, as for any
/// outbound HTTP port, unless it listens at an address of its own.
fn route_name(egress: &EgressPort, proxy: &Proxy) -> String {
    let default_address = egress.bind.is_empty() && (!egress.uncaptured || !proxy.capture.captures());
    if default_address {
        crate::names::route_config_name(egress.port)
    } else {
        let address = if egress.bind.is_empty() {
            "127.0.0.1"
        } else {
            &egress.bind
        };
        format!("{address}:{}", egress.port)
    }
}

/// Whether the listener speaks HTTP: its protocol's, else its hosts' port.
fn is_http(egress: &EgressPort, services: &[std::sync::Arc<pilot_model::Service>]) -> bool {
    match egress.protocol {
        Some(protocol) => protocol.is_http(),
        None => services.iter().any(|s| {
            s.port_by_number(egress.port)
                .is_some_and(|p| p.protocol.is_http() && p.protocol != Protocol::Udp)
        }),
    }
}
