//! The filter chains of an edge proxy's gateway servers that route
//! connections, not requests (the servers terminating TLS for HTTP are
//! `mod.rs`'s, and share the port's one listener with these): a chain
//! per server and route, each a `tcp_proxy` to the route's destinations by
//! weight:
//!
//! - `tls.mode: PASSTHROUGH`: the TLS routes of the bound VirtualServices,
//!   a chain per match with its `sniHosts` as server names (read by the
//!   `tls_inspector`); TLS is not terminated, the upstream's certificate
//!   reaches the client.
//! - `tls.mode: AUTO_PASSTHROUGH`: a chain per service cluster the SNI
//!   names, no VirtualService needed (`sni_dnat.rs`).
//! - A `TLS` server with `SIMPLE` or `MUTUAL` and TLS routes (a Gateway
//!   API `TLS` listener with `mode: Terminate` and its TLSRoutes): a chain
//!   per route match, its SNI hosts as server names, TLS ended with the
//!   server's certificate, then a `tcp_proxy` to the route's
//!   destinations.
//! - A `TLS` server with `SIMPLE` or `MUTUAL`: TLS ends here with the
//!   server's certificate (a chain matched by SNI on its hosts, none for
//!   `*`), then the first TCP route of the bound VirtualServices.
//! - A `TCP` server: the first TCP route, for every connection.
//!
//! Of two chains with one match, the first server's is kept (Envoy
//! refuses a listener with two). A destination without a port goes to its
//! service's first port.

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch};
use pilot_model::ServiceDiscovery;
use pilot_routing::{IngressServer, L4Match, RoutingModel, ServerTlsMode, WeightedDestination};

/// The filter chains of the gateway `servers` on `port` that route
/// connections (but those whose match one of `chains` has already),
/// added to `chains`.
pub(crate) fn add_chains(
    port: u16,
    servers: &[&IngressServer],
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    chains: &mut Vec<FilterChain>,
) {
    let connections = servers
        .iter()
        .filter(|s| !s.gateway.is_empty() && !s.protocol.is_http() && !super::serves_http(s));
    for server in connections {
        match server.tls.as_ref() {
            Some(tls) if tls.mode == ServerTlsMode::AutoPassthrough => {
                for chain in super::sni_dnat::chains(server, registry, model) {
                    if !chains
                        .iter()
                        .any(|c| c.filter_chain_match == chain.filter_chain_match)
                    {
                        chains.push(chain);
                    }
                }
            }
            // TLS routes by SNI: passed through, or ended here first.
            Some(tls) if tls.mode == ServerTlsMode::Passthrough || !server.tls_routes.is_empty() => {
                let ends = tls.mode != ServerTlsMode::Passthrough;
                for route in &server.tls_routes {
                    let destinations = with_ports(&route.destinations, registry);
                    for m in route.matches.iter().filter(|m| applies(m, port)) {
                        let chain_match = Some(FilterChainMatch {
                            server_names: m.sni_hosts.clone(),
                            ..Default::default()
                        });
                        if push(chains, chain_match, &destinations, port)
                            && ends
                            && let Some(chain) = chains.last_mut()
                        {
                            chain.transport_socket = Some(crate::build::downstream_tls::server_socket(
                                tls,
                                pilot_model::Protocol::Tcp,
                            ));
                        }
                    }
                }
            }
            tls => {
                let Some(route) = server
                    .tcp_routes
                    .iter()
                    .find(|r| r.matches.is_empty() || r.matches.iter().any(|m| applies(m, port)))
                else {
                    continue;
                };
                let destinations = with_ports(&route.destinations, registry);
                let chain_match = tls
                    .and(super::server_names(server))
                    .map(|names| FilterChainMatch {
                        server_names: names,
                        ..Default::default()
                    });
                if push(chains, chain_match, &destinations, port)
                    && let (Some(tls), Some(chain)) = (tls, chains.last_mut())
                {
                    chain.transport_socket = Some(crate::build::downstream_tls::server_socket(
                        tls,
                        pilot_model::Protocol::Tcp,
                    ));
                }
            }
        }
    }
}

/// Whether an L4 match applies on the gateway's `port`.
fn applies(m: &L4Match, port: u16) -> bool {
    m.port.is_none_or(|p| p == port)
}

/// Adds a chain with `chain_match` to `destinations` unless one with the
/// same match is there (the first route's wins); whether it was added.
fn push(
    chains: &mut Vec<FilterChain>,
    chain_match: Option<FilterChainMatch>,
    destinations: &[WeightedDestination],
    port: u16,
) -> bool {
    let Some(first) = destinations.first() else {
        return false;
    };
    if chains.iter().any(|c| c.filter_chain_match == chain_match) {
        return false;
    }
    let mut chain = crate::build::l4::tcp_proxy_chain(&first.destination.host, port, destinations);
    chain.filter_chain_match = chain_match;
    chains.push(chain);
    true
}

/// `destinations`, each with a port: its service's first when it names
/// none (the gateway's port is not the service's).
fn with_ports(
    destinations: &[WeightedDestination],
    registry: &dyn ServiceDiscovery,
) -> Vec<WeightedDestination> {
    destinations
        .iter()
        .map(|d| {
            let mut d = d.clone();
            if d.destination.port.is_none() {
                d.destination.port = registry
                    .get_service(&d.destination.host)
                    .and_then(|s| s.ports.first().map(|p| p.port));
            }
            d
        })
        .collect()
}
