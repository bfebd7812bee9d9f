//! A Sidecar's egress listeners bound to a Unix domain socket (`bind:
//! unix:///path`, port 0), generated: an Envoy pipe listener at that path
//! the application connects to instead of a TCP port, whatever the
//! proxy's capture. For HTTP (its protocol, or none given and one of its
//! hosts' ports is HTTP) it routes by host to the hosts it imports on all
//! their HTTP ports, with a route configuration of its own named for its
//! bind (`unix:///path`); a host's first HTTP port takes its bare name.
//! For TCP it forwards to its host when it imports exactly one host with
//! one port (a socket has no port to tell several apart), and is not
//! generated otherwise.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::core::v3::{Address, Pipe, address};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    Rds, http_connection_manager,
};
use pilot_model::{Labels, RegistrySnapshot, ServiceDiscovery, ServiceInstance};
use pilot_proxy_api::InterceptionMode;
use pilot_routing::RoutingModel;

use super::layout::EgressSocket;
use crate::build::listeners::{http_filter_chain, tcp_filter_chain};
use crate::build::route_config::route_configuration;
use crate::build::util::ads;
use crate::{ClusterName, Proxy};

/// The listener (and, for HTTP, the route configuration) of `socket`;
/// `registry` and `model` are already restricted to the scope. `None`
/// for a TCP socket that does not import exactly one host port.
pub(crate) fn socket_listener(
    proxy: &Proxy,
    registry: &RegistrySnapshot,
    model: &RoutingModel,
    socket: &EgressSocket,
    own: &[ServiceInstance],
) -> Option<(Listener, Option<RouteConfiguration>)> {
    let registry = registry.scoped(|s| socket.hosts.contains(&s.hostname));
    let model = model.scoped(|h| socket.hosts.contains(h));
    let services = registry.services();
    let http_ports: BTreeSet<u16> = services
        .iter()
        .flat_map(|s| s.ports.iter())
        .filter(|p| p.protocol.is_http())
        .map(|p| p.port)
        .collect();
    let http = match socket.protocol {
        Some(protocol) => protocol.is_http(),
        None => !http_ports.is_empty(),
    };
    let name = format!("unix://{}", socket.path);
    if http {
        // Called directly, as a bound listener is.
        let mut as_bound = proxy.clone();
        as_bound.capture = InterceptionMode::None;
        let mut config = RouteConfiguration {
            name: name.clone(),
            ..Default::default()
        };
        let mut domains = BTreeSet::new();
        for port in &http_ports {
            let on_port = route_configuration(*port, &services, &model, &as_bound, own);
            for mut host in on_port.virtual_hosts {
                host.domains.retain(|d| domains.insert(d.clone()));
                if !host.domains.is_empty() && !config.virtual_hosts.iter().any(|v| v.name == host.name) {
                    config.virtual_hosts.push(host);
                }
            }
        }
        let chain = http_filter_chain(
            &name,
            http_connection_manager::RouteSpecifier::Rds(Rds {
                config_source: Some(ads()),
                route_config_name: name.clone(),
            }),
        );
        return Some((pipe_listener(&name, &socket.path, chain), Some(config)));
    }
    let mut ports = services
        .iter()
        .flat_map(|s| s.ports.iter().map(move |p| (s.hostname.clone(), p.port)));
    let (host, port) = ports.next()?;
    if ports.next().is_some() {
        return None;
    }
    let chain = tcp_filter_chain(&ClusterName::outbound(&host, port, Labels::new()).to_string());
    Some((pipe_listener(&name, &socket.path, chain), None))
}

/// A listener at the Unix domain socket `path`.
fn pipe_listener(name: &str, path: &str, chain: FilterChain) -> Listener {
    Listener {
        name: name.to_string(),
        address: Some(Address {
            address: Some(address::Address::Pipe(Pipe {
                path: path.to_string(),
                mode: 0,
            })),
        }),
        filter_chains: vec![chain],
        ..Default::default()
    }
}
