//! Gateways in the routing model: each server of a `networking.istio.io`
//! `Gateway` becomes an [`IngressServer`] for the proxies its selector
//! picks, with the HTTP routes of the VirtualServices bound to the gateway,
//! per host both name; a server that routes connections (TCP, TLS, or TLS
//! passed through) takes their TCP routes, or their TLS routes when it
//! passes TLS through. As Istio reads them:
//!
//! - A VirtualService binds to a gateway by `gateways`: `namespace/name`,
//!   or `name` in the VirtualService's own namespace (`mesh` stands for the
//!   sidecars, not a gateway).
//! - A server host is `host` (any namespace) or `namespace/host`, where
//!   the namespace `*` is any and `.` the gateway's own; only
//!   VirtualServices of that namespace bind through it. The server keeps
//!   each host with its namespace ([`ServerHost`]): generation reads it
//!   again for `AUTO_PASSTHROUGH`, which exposes that namespace's
//!   services only.
//! - A server host and a VirtualService host meet when they are equal or
//!   one's wildcard (`*.example.com`, `*`) covers the other; the virtual
//!   host is then the more specific of the two.
//! - A route whose every match names other gateways is left out; a match
//!   naming other gateways is left out of its route.
//! - Servers are kept as written, one per server; servers of several
//!   gateways on one port are merged at generation, for the proxies that
//!   serve them all.

use std::sync::Arc;

use pilot_api::networking::{self, Gateway, ServerTlsMode as SpecTlsMode};
use pilot_model::{Config, Labels, Protocol};

use super::{
    GatewayHost, HttpRoute, IngressServer, L4Match, RoutingConfigs, RoutingModel, ServerHost, ServerTls,
    ServerTlsMode, TcpRoute, TlsRoute,
};

/// The HTTP routes of one VirtualService bound to named gateways.
pub(super) struct Bound {
    /// The VirtualService's namespace.
    pub(super) namespace: String,
    /// The gateways it binds to, `namespace/name`.
    pub(super) gateways: Vec<String>,
    /// Its hosts, resolved.
    pub(super) hosts: Vec<String>,
    /// Its HTTP routes, compiled.
    pub(super) http: Vec<HttpRoute>,
    /// Its TCP routes, compiled.
    pub(super) tcp: Vec<TcpRoute>,
    /// Its TLS routes, compiled.
    pub(super) tls: Vec<TlsRoute>,
}

/// A gateway reference of an object in `namespace` as `namespace/name`:
/// `name` is in `namespace`, `name.namespace.svc...` in `namespace`.
pub(super) fn qualify(gateway: &str, namespace: &str) -> String {
    if gateway.contains('/') {
        return gateway.to_string();
    }
    let mut parts = gateway.split('.');
    match (parts.next(), parts.next()) {
        (Some(name), Some(ns)) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => format!("{namespace}/{gateway}"),
    }
}

/// Adds the servers of the gateways of `configs`, with the routes of the
/// VirtualServices `bound` to them, to `model`.
pub(super) fn compile(configs: &RoutingConfigs, bound: &[Bound], model: &mut RoutingModel) {
    let mut gateways: Vec<&Config<Gateway>> = configs.gateways.iter().map(|c| &**c).collect();
    gateways.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    for gateway in gateways {
        let name = format!("{}/{}", gateway.meta.namespace, gateway.meta.name);
        let selector = Labels(gateway.spec.selector.clone());
        for server in &gateway.spec.servers {
            let Some(port) = server.port.as_ref() else {
                continue;
            };
            let Ok(number) = u16::try_from(port.number) else {
                continue;
            };
            let protocol = Protocol::from_port_name(&port.protocol);
            let tls = match server_tls(server, protocol) {
                Ok(tls) => tls,
                Err(Unsupported) => continue,
            };
            let hosts: Vec<ServerHost> = server
                .hosts
                .iter()
                .map(|h| ServerHost::parse(h, &gateway.meta.namespace))
                .collect();
            let mut out = IngressServer::new(number);
            out.protocol = protocol;
            out.port_name = port.name.clone();
            out.gateway = name.clone();
            out.selector = Some(selector.clone());
            out.https_redirect = server.tls.as_ref().is_some_and(|t| t.https_redirect);
            out.tls = tls;
            if protocol.is_http() || out.terminates_tls() {
                out.virtual_hosts = virtual_hosts(&name, &hosts, bound)
                    .into_iter()
                    .map(Arc::new)
                    .collect();
            }
            if !protocol.is_http() {
                match out.tls.as_ref().map(|t| t.mode) {
                    Some(ServerTlsMode::Passthrough) => out.tls_routes = tls_routes(&name, &hosts, bound),
                    // Routed by the SNI's cluster name, not by routes.
                    Some(ServerTlsMode::AutoPassthrough) => {}
                    _ => out.tcp_routes = tcp_routes(&name, &hosts, bound),
                }
            }
            out.hosts = hosts;
            model.ingress.push(out);
        }
    }
}

/// The mode is one this generation does not serve (ISTIO_MUTUAL).
struct Unsupported;

/// A server's TLS in the model's terms: none for plain HTTP (a redirect
/// to HTTPS is not TLS), passthrough when the mode is not given.
fn server_tls(server: &networking::Server, protocol: Protocol) -> Result<Option<ServerTls>, Unsupported> {
    let Some(tls) = &server.tls else { return Ok(None) };
    if protocol.is_http() {
        return Ok(None);
    }
    let mode = match tls.mode.unwrap_or(SpecTlsMode::Passthrough) {
        SpecTlsMode::Simple => ServerTlsMode::Simple,
        SpecTlsMode::Mutual | SpecTlsMode::OptionalMutual => ServerTlsMode::Mutual,
        SpecTlsMode::Passthrough => ServerTlsMode::Passthrough,
        SpecTlsMode::AutoPassthrough => ServerTlsMode::AutoPassthrough,
        SpecTlsMode::IstioMutual => return Err(Unsupported),
    };
    let non_empty = |s: &str| (!s.is_empty()).then(|| s.to_string());
    Ok(Some(ServerTls {
        mode,
        credential_name: non_empty(&tls.credential_name).or_else(|| tls.credential_names.first().cloned()),
        server_certificate: non_empty(&tls.server_certificate)
            .or_else(|| tls.tls_certificates.first().map(|c| c.server_certificate.clone())),
        private_key: non_empty(&tls.private_key)
            .or_else(|| tls.tls_certificates.first().map(|c| c.private_key.clone())),
        ca_certificates: non_empty(&tls.ca_certificates),
        subject_alt_names: tls.subject_alt_names.clone(),
        ..Default::default()
    }))
}

/// The virtual hosts of a server of gateway `name` with `hosts`: each
/// host the server and a bound VirtualService share, with the routes of
/// every such VirtualService in order.
fn virtual_hosts(name: &str, hosts: &[ServerHost], bound: &[Bound]) -> Vec<GatewayHost> {
    let mut out: Vec<GatewayHost> = Vec::new();
    for service in bound.iter().filter(|b| b.gateways.iter().any(|g| g == name)) {
        let routes: Vec<HttpRoute> = service
            .http
            .iter()
            .filter_map(|route| for_gateway(route, name, &service.namespace))
            .collect();
        for host in shared_hosts(hosts, &service.namespace, &service.hosts) {
            match out.iter_mut().find(|h| h.host == host) {
                Some(existing) => existing.routes.extend(routes.iter().cloned()),
                None => out.push(GatewayHost {
                    host,
                    routes: routes.clone(),
                }),
            }
        }
    }
    out
}

/// The hosts of server `hosts` a VirtualService of `namespace` with
/// `vs_hosts` binds through: each pair that meets, the more specific,
/// through the server hosts admitting `namespace` only.
fn shared_hosts(hosts: &[ServerHost], namespace: &str, vs_hosts: &[String]) -> Vec<String> {
    let mut shared: Vec<String> = Vec::new();
    for vs_host in vs_hosts {
        for server_host in hosts.iter().filter(|h| h.admits(namespace)) {
            if let Some(host) = intersect(&server_host.host, vs_host)
                && !shared.contains(&host)
            {
                shared.push(host);
            }
        }
    }
    shared
}

/// The TCP routes of the VirtualServices bound to gateway `name` whose
/// hosts meet the server's `hosts`, each with the matches this gateway
/// takes.
fn tcp_routes(name: &str, hosts: &[ServerHost], bound: &[Bound]) -> Vec<TcpRoute> {
    let mut out = Vec::new();
    for service in bound.iter().filter(|b| b.gateways.iter().any(|g| g == name)) {
        if shared_hosts(hosts, &service.namespace, &service.hosts).is_empty() {
            continue;
        }
        for route in &service.tcp {
            if let Some(matches) = l4_for_gateway(&route.matches, name, &service.namespace) {
                let mut route = route.clone();
                route.matches = matches;
                out.push(route);
            }
        }
    }
    out
}

/// The TLS routes of the VirtualServices bound to gateway `name` whose
/// hosts meet the server's `hosts`; a match naming no SNI host takes the
/// hosts both name.
fn tls_routes(name: &str, hosts: &[ServerHost], bound: &[Bound]) -> Vec<TlsRoute> {
    let mut out = Vec::new();
    for service in bound.iter().filter(|b| b.gateways.iter().any(|g| g == name)) {
        let shared = shared_hosts(hosts, &service.namespace, &service.hosts);
        if shared.is_empty() {
            continue;
        }
        for route in &service.tls {
            let matches = if route.matches.is_empty() {
                Some(vec![L4Match::default()])
            } else {
                l4_for_gateway(&route.matches, name, &service.namespace)
            };
            let Some(mut matches) = matches else { continue };
            for m in &mut matches {
                if m.sni_hosts.is_empty() {
                    m.sni_hosts = shared.clone();
                }
            }
            let mut route = route.clone();
            route.matches = matches;
            out.push(route);
        }
    }
    out
}

/// The matches of an L4 route gateway `name` takes (those naming no
/// gateway or this one, their gateways cleared); none when every match
/// names others.
fn l4_for_gateway(matches: &[L4Match], name: &str, namespace: &str) -> Option<Vec<L4Match>> {
    if matches.is_empty() {
        return Some(Vec::new());
    }
    let kept: Vec<L4Match> = matches
        .iter()
        .filter(|m| m.gateways.is_empty() || m.gateways.iter().any(|g| qualify(g, namespace) == name))
        .map(|m| {
            let mut m = m.clone();
            m.gateways.clear();
            m
        })
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// `route` as gateway `name` serves it: only its matches that name no
/// gateway or name this one; none when every match names others.
fn for_gateway(route: &HttpRoute, name: &str, namespace: &str) -> Option<HttpRoute> {
    if route.matches.is_empty() {
        return Some(route.clone());
    }
    let mut out = route.clone();
    out.matches
        .retain(|m| m.gateways.is_empty() || m.gateways.iter().any(|g| qualify(g, namespace) == name));
    if out.matches.is_empty() {
        return None;
    }
    for m in &mut out.matches {
        m.gateways.clear();
    }
    Some(out)
}

/// The host two hosts share: the more specific when they are equal or
/// one's wildcard covers the other.
///
/// `*.example.com` and `a.example.com`: `a.example.com`; `*` and
/// `*.example.com`: `*.example.com`; `a.example.com` and `b.example.com`:
/// none.
pub(super) fn intersect(a: &str, b: &str) -> Option<String> {
    if a == b {
        return Some(a.to_string());
    }
    let covers = |wild: &str, other: &str| {
        wild.strip_prefix('*')
            .is_some_and(|suffix| other.ends_with(suffix))
    };
    if covers(a, b) && (!b.starts_with('*') || b.len() >= a.len()) {
        return Some(b.to_string());
    }
    if covers(b, a) && (!a.starts_with('*') || a.len() >= b.len()) {
        return Some(a.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_meet_at_the_more_specific() {
        assert_eq!(intersect("*", "a.example.com").as_deref(), Some("a.example.com"));
        assert_eq!(intersect("a.example.com", "*").as_deref(), Some("a.example.com"));
        assert_eq!(
            intersect("*.example.com", "a.example.com").as_deref(),
            Some("a.example.com")
        );
        assert_eq!(intersect("*", "*.example.com").as_deref(), Some("*.example.com"));
        assert_eq!(
            intersect("*.example.com", "*.a.example.com").as_deref(),
            Some("*.a.example.com")
        );
        assert_eq!(intersect("a.example.com", "b.example.com"), None);
        assert_eq!(intersect("*.example.com", "example.org"), None);
    }

    #[test]
    fn gateway_references() {
        assert_eq!(qualify("gw", "default"), "default/gw");
        assert_eq!(qualify("edge/gw", "default"), "edge/gw");
        assert_eq!(qualify("gw.edge.svc.cluster.local", "default"), "edge/gw");
    }
}
