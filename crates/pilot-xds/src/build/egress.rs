//! External hosts egress rules allow (the model's external services), on a sidecar's outbound HTTP ports:
//! a virtual host per rule and HTTP port (its domain is the rule's host,
//! a wildcard such as `*.foo.com`, `*-bar.foo.com` or `*` included), where
//! the model's HTTP routes of that host apply, as Istio's
//! sidecars routed egress traffic. The clusters they reach are in
//! `clusters.rs` (DNS for a domain, the original destination for a wildcard).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::VirtualHost;
use pilot_model::{Port, Protocol, Service, ServiceInstance};
use pilot_routing::{ExternalService, RoutingModel};

use super::routes::{admitted, virtual_host_routes};
use crate::Proxy;

/// The external services' HTTP ports (HTTP, HTTP2, GRPC: Envoy routes them
/// by host), each an outbound HTTP port with a route configuration.
pub(crate) fn http_ports(model: &RoutingModel) -> impl Iterator<Item = u16> + '_ {
    model
        .external_services()
        .iter()
        .flat_map(|service| http_ports_of(service).map(|(number, _)| number))
}

/// The virtual hosts of the external services on HTTP port `port`,
/// skipping any domain already in `used` (a service of the registry, or an
/// earlier external service, has it: Envoy takes a domain once per route
/// configuration).
pub(crate) fn virtual_hosts(
    port: u16,
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
    used: &mut BTreeSet<String>,
) -> Vec<VirtualHost> {
    let mut hosts = Vec::new();
    for external in model.external_services() {
        let Some((_, protocol)) = http_ports_of(external).find(|(number, _)| *number == port) else {
            continue;
        };
        let host = external.host.clone();
        if !used.insert(host.clone()) {
            continue;
        }
        let service = Service::new(host.clone(), vec![Port::new("http", port, protocol)]);
        let host_routes = model.http_routes(&host);
        let admitted = admitted(host_routes, own, proxy);
        let routes = virtual_host_routes(
            &service,
            port,
            port,
            host_routes,
            &admitted,
            model.default_hash(&host, port),
        );
        hosts.push(VirtualHost {
            name: format!("{host}:{port}"),
            domains: vec![host],
            routes,
            ..Default::default()
        });
    }
    hosts
}

fn http_ports_of(service: &ExternalService) -> impl Iterator<Item = (u16, Protocol)> + '_ {
    service
        .ports
        .iter()
        .filter(|port| port.protocol.is_http())
        .map(|port| (port.number, port.protocol))
}
