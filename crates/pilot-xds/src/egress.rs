//! External hosts egress rules allow, on a sidecar's outbound HTTP ports:
//! a virtual host per rule and HTTP port (its domain is the rule's host,
//! a wildcard such as `*.foo.com`, `*-bar.foo.com` or `*` included), where
//! the route rules whose destination is that host apply, as Istio's
//! sidecars routed egress traffic. The clusters they reach are in
//! `clusters` (DNS for a domain, the original destination for a wildcard).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::VirtualHost;
use pilot_model::istio::EgressRule;
use pilot_model::{Config, Port, Protocol, Service, ServiceInstance};

use crate::routes::{applies_to, virtual_host_routes};
use crate::{MeshConfig, MeshIndex, Proxy};

/// The egress rules' HTTP ports (HTTP, HTTP2, GRPC: Envoy routes them by
/// host), each an outbound HTTP port with a route configuration.
pub(crate) fn http_ports(mesh: &MeshConfig) -> impl Iterator<Item = u16> + '_ {
    mesh.egress_rules
        .iter()
        .flat_map(|rule| http_ports_of(rule).map(|(number, _)| number))
}

/// The virtual hosts of the egress rules on HTTP port `port`, skipping any
/// domain already in `used` (a service of the registry, or an earlier rule,
/// has it: Envoy takes a domain once per route configuration).
pub(crate) fn virtual_hosts(
    port: u16,
    mesh: &MeshConfig,
    proxy: &Proxy,
    own: &[ServiceInstance],
    index: &MeshIndex<'_>,
    used: &mut BTreeSet<String>,
) -> Vec<VirtualHost> {
    let mut hosts = Vec::new();
    let mut rules: Vec<&Config<EgressRule>> = mesh.egress_rules.iter().collect();
    rules.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    for rule in rules {
        let Some(host) = rule.spec.destination.as_ref().map(|d| d.service.clone()) else {
            continue;
        };
        let Some((_, protocol)) = http_ports_of(rule).find(|(number, _)| *number == port) else {
            continue;
        };
        if !used.insert(host.clone()) {
            continue;
        }
        let service = Service::new(host.clone(), vec![Port::new("http", port, protocol)]);
        let applying = index
            .rules_for(&host)
            .iter()
            .copied()
            .filter(|rule| applies_to(rule, mesh, own, proxy));
        hosts.push(VirtualHost {
            name: format!("{host}:{port}"),
            domains: vec![host],
            routes: virtual_host_routes(&service, port, port, applying, mesh),
            ..Default::default()
        });
    }
    hosts
}

fn http_ports_of(rule: &Config<EgressRule>) -> impl Iterator<Item = (u16, Protocol)> + '_ {
    rule.spec.ports.iter().filter_map(|port| {
        let protocol = match port.protocol.to_ascii_uppercase().as_str() {
            "HTTP" => Protocol::Http,
            "HTTP2" => Protocol::Http2,
            "GRPC" => Protocol::Grpc,
            _ => return None,
        };
        Some((u16::try_from(port.port).ok()?, protocol))
    })
}
