//! LDS of a sidecar, outbound: one listener per HTTP port (all services on
//! it share the port's route configuration), one per TCP service port
//! (the routing model's TCP and TLS routes, `build/l4.rs`), and, with
//! capture, the virtual listener captured connections arrive on. With
//! capture the outbound listeners do not bind (the virtual listener hands
//! connections over by original destination), and an HTTP port where the
//! Gateway API's routes of a Service with an address apply routes by that
//! address (`build/destination.rs`); without, they bind 127.0.0.1 at the
//! service port.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    Rds, http_connection_manager,
};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{ServiceDiscovery, ServiceInstance};
use pilot_routing::RoutingModel;

use crate::Proxy;
use crate::build::cluster::PASSTHROUGH;
use crate::build::listeners::{ListenerPlan, http_filter_chain, listener, tcp_filter_chain};
use crate::build::util::{ads, socket};

/// The port of the virtual listener that captured traffic arrives on.
pub(crate) const VIRTUAL_PORT: u16 = 15001;

/// The outbound listeners of the sidecar `proxy`, with the HTTP ports
/// whose route configurations they refer to: the external services'
/// HTTP ports and the registry's, then the virtual listener when it
/// captures.
pub(crate) fn plan(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    own: &[ServiceInstance],
) -> ListenerPlan {
    let mut plan = ListenerPlan::default();
    plan.http_ports.extend(crate::build::egress::http_ports(model));
    outbound(proxy, registry, model, own, &mut plan);
    if proxy.capture.captures() {
        plan.listeners.push(virtual_listener());
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
    let mut destination_ports = BTreeSet::new();
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
        let mut http = listener(
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
        );
        // Captured, a port where the Gateway API's routes of a Service
        // apply routes by the Service address a connection was sent to.
        if capture && let Some(chains) = crate::build::destination::filter_chains(*port, &services, model) {
            http.filter_chains = chains;
            destination_ports.insert(*port);
        }
        plan.listeners.push(http);
    }
    plan.destination_ports.extend(destination_ports);
    let address_of = |service: &pilot_model::Service| match (capture, service.address) {
        (true, Some(vip)) => vip.to_string(),
        (true, None) => "0.0.0.0".to_string(),
        (false, _) => "127.0.0.1".to_string(),
    };
    let shared = crate::build::l4::shared_tls_listeners(&services, address_of);
    let tcp_owners = crate::build::l4::tcp_listener_owners(&services, address_of);
    for service in &services {
        for port in service
            .ports
            .iter()
            .filter(|p| !p.protocol.is_http() && p.protocol != pilot_model::Protocol::Udp)
        {
            let address = address_of(service);
            let key = (address.clone(), port.port);
            let by_sni = port.protocol == pilot_model::Protocol::Https && shared.contains(&key);
            if crate::build::l4::is_plain_tcp(port.protocol)
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
                    let chains = crate::build::l4::sni_filter_chains(service, port, model, proxy, own);
                    crate::build::l4::add_chains(existing, chains);
                }
                continue;
            }
            // The model's TCP and TLS routes of the service, else its own
            // cluster.
            let (chains, sni) = if by_sni {
                let mut chains = crate::build::l4::sni_filter_chains(service, port, model, proxy, own);
                if capture {
                    chains.push(crate::build::l4::passthrough_chain());
                }
                (chains, true)
            } else {
                crate::build::l4::filter_chains(service, port, model, proxy, own)
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
                tcp.listener_filters.push(crate::build::l4::tls_inspector());
            }
            plan.listeners.push(tcp);
        }
    }
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
