//! EgressRules to ServiceEntries, IngressRules to a Gateway and the
//! VirtualService bound to it.

use std::collections::BTreeMap;

use crate::RoutingConfigs;
use pilot_api::istio::IngressRule;
use pilot_api::networking::{
    Destination, Gateway, GatewayPort, HttpRoute, HttpRouteDestination, Location, PortSelector, Resolution,
    Server, ServerTlsMode, ServerTlsSettings, ServiceEntry, ServicePort, VirtualService,
};
use pilot_model::Config;

use super::routes::request_match;
use super::{Out, object_name};

/// The name of the Gateway (and of its VirtualService) the ingress rules
/// become.
pub(super) const INGRESS_GATEWAY: &str = "istio-ingress";

/// Each egress rule becomes a `MESH_EXTERNAL` ServiceEntry of the same
/// name: DNS resolution for a host, `NONE` for a wildcard, an address or a
/// CIDR block (which goes in `addresses`). The rules of one host in one
/// namespace become one entry (the first rule's, by namespace and name)
/// with the ports of all of them, the first rule's protocol for a port
/// listed twice: a host is one service.
pub(super) fn egress_rules(configs: &RoutingConfigs, out: &mut Out) {
    for rule in &configs.egress_rules {
        let Some(destination) = &rule.spec.destination else {
            out.note(
                rule,
                "spec.destination",
                "an egress rule without a destination: not converted",
            );
            continue;
        };
        let host = destination.service.clone();
        let address = host.contains('/') || host.parse::<std::net::IpAddr>().is_ok();
        let passthrough = address || host.contains('*');
        if rule.spec.use_egress_proxy {
            out.note(
                rule,
                "spec.useEgressProxy",
                "v1 routes through an egress gateway with a Gateway and VirtualService, not a flag: dropped",
            );
        }
        // A non-HTTP port of a ServiceEntry is a listener of its own on
        // the sidecar (without a single address to listen on: for every
        // destination of that port); an egress rule's was a cluster alone.
        for (i, port) in rule.spec.ports.iter().enumerate() {
            let protocol = port.protocol.to_ascii_uppercase();
            if !matches!(protocol.as_str(), "" | "HTTP" | "HTTP2" | "GRPC") {
                out.note(
                    rule,
                    &format!("spec.ports[{i}]"),
                    format!(
                        "a {protocol} port of a ServiceEntry has a listener on the sidecar (without a single address, for every outbound connection to port {}), where the egress rule's had a cluster only",
                        port.port
                    ),
                );
            }
        }
        let ports = rule
            .spec
            .ports
            .iter()
            .map(|port| {
                let protocol = port.protocol.to_ascii_uppercase();
                let protocol = if protocol.is_empty() {
                    "HTTP".to_string()
                } else {
                    protocol
                };
                ServicePort {
                    number: u32::try_from(port.port).unwrap_or(0),
                    name: format!("{}-{}", protocol.to_ascii_lowercase(), port.port),
                    protocol,
                    target_port: None,
                }
            })
            .collect();
        let ports: Vec<ServicePort> = ports;
        let hosts = vec![if address { object_name(&host) } else { host.clone() }];
        // The rules of one host are one entry: a host has one service.
        if let Some(earlier) = out
            .service_entries
            .iter_mut()
            .find(|e| e.meta.namespace == rule.meta.namespace && e.spec.hosts == hosts)
        {
            let mut conflicts = Vec::new();
            for port in ports {
                match earlier.spec.ports.iter().find(|p| p.number == port.number) {
                    None => earlier.spec.ports.push(port),
                    Some(p) if p.protocol != port.protocol => {
                        conflicts.push((port.number, p.protocol.clone()))
                    }
                    Some(_) => {}
                }
            }
            let name = earlier.meta.name.clone();
            for (number, protocol) in conflicts {
                out.note(
                    rule,
                    "spec.ports",
                    format!("port {number} of {host} is {protocol} in the ServiceEntry {name}, from an earlier rule"),
                );
            }
            continue;
        }
        let spec = ServiceEntry {
            hosts,
            addresses: if address { vec![host.clone()] } else { Vec::new() },
            ports,
            location: Some(Location::MeshExternal),
            resolution: Some(if passthrough {
                Resolution::None
            } else {
                Resolution::Dns
            }),
            ..Default::default()
        };
        let namespace = rule.meta.namespace.clone();
        let name = out.unique_name("ServiceEntry", &namespace, &rule.meta.name);
        out.service_entries.push(Config::new(namespace, name, spec));
    }
}

/// The ingress rules become one Gateway (a server per port, every host,
/// HTTPS with the rule's secret as its credential where a rule names one)
/// and one VirtualService bound to it, its routes the rules by precedence
/// (higher first), then namespace and name, each matching its port.
pub(super) fn ingress_rules(configs: &RoutingConfigs, out: &mut Out) {
    let mut rules: Vec<&Config<IngressRule>> = configs.ingress_rules.iter().map(|c| &**c).collect();
    if rules.is_empty() {
        return;
    }
    rules.sort_by(|a, b| {
        b.spec
            .precedence
            .cmp(&a.spec.precedence)
            .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
    });
    let namespace = rules[0].meta.namespace.clone();
    // port -> TLS secret (the first named)
    let mut ports: BTreeMap<u32, String> = BTreeMap::new();
    let mut http = Vec::new();
    for rule in &rules {
        let port = u32::try_from(rule.spec.listener_port()).unwrap_or(0);
        let secret = ports.entry(port).or_default();
        if secret.is_empty() {
            secret.clone_from(&rule.spec.tls_secret);
        } else if !rule.spec.tls_secret.is_empty() && *secret != rule.spec.tls_secret {
            out.note(
                *rule,
                "spec.tlsSecret",
                format!("a server has one certificate: port {port} keeps {secret}"),
            );
        }
        let Some(destination) = &rule.spec.destination else {
            out.note(
                *rule,
                "spec.destination",
                "an ingress rule without a destination: not converted",
            );
            continue;
        };
        out.note(
            *rule,
            "spec",
            "v1 allows websocket upgrades on every route: this rule's route now allows them",
        );
        let destination_port = match (&rule.spec.destination_port, &rule.spec.destination_port_name) {
            (Some(number), _) => Some(PortSelector {
                number: u32::try_from(*number).unwrap_or(0),
            }),
            (None, Some(name)) => {
                out.note(
                    *rule,
                    "spec.destinationPortName",
                    format!("a v1 destination names its port by number: the port named {name} was left to the service's only port"),
                );
                None
            }
            (None, None) => None,
        };
        let mut matches = rule
            .spec
            .match_condition
            .as_ref()
            .and_then(|m| m.request.as_ref())
            .map(request_match)
            .unwrap_or_default();
        matches.port = Some(port);
        if rule
            .spec
            .match_condition
            .as_ref()
            .is_some_and(|m| m.source.is_some())
        {
            out.note(
                *rule,
                "spec.match.source",
                "an ingress has no source service to match: dropped",
            );
        }
        http.push(HttpRoute {
            name: rule.meta.name.clone(),
            matches: vec![matches],
            route: vec![HttpRouteDestination {
                destination: Destination {
                    host: configs.hostname(destination, &rule.meta.namespace),
                    subset: String::new(),
                    port: destination_port,
                },
                ..Default::default()
            }],
            ..Default::default()
        });
    }
    let servers = ports
        .into_iter()
        .map(|(number, secret)| {
            let tls = !secret.is_empty();
            Server {
                port: Some(GatewayPort {
                    number,
                    protocol: if tls { "HTTPS" } else { "HTTP" }.to_string(),
                    name: format!("{}-{number}", if tls { "https" } else { "http" }),
                    target_port: None,
                }),
                hosts: vec!["*".to_string()],
                tls: tls.then(|| ServerTlsSettings {
                    mode: Some(ServerTlsMode::Simple),
                    credential_name: secret,
                    ..Default::default()
                }),
                ..Default::default()
            }
        })
        .collect();
    let gateway_name = out.unique_name("Gateway", &namespace, INGRESS_GATEWAY);
    let service_name = out.unique_name("VirtualService", &namespace, INGRESS_GATEWAY);
    out.gateways.push(Config::new(
        namespace.clone(),
        gateway_name.clone(),
        Gateway {
            servers,
            selector: BTreeMap::from([("istio".to_string(), "ingress".to_string())]),
        },
    ));
    out.ingress_services.push(Config::new(
        namespace,
        service_name,
        VirtualService {
            hosts: vec!["*".to_string()],
            gateways: vec![gateway_name],
            http,
            ..Default::default()
        },
    ));
}
