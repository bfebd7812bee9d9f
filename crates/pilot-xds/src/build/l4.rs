//! The routing model's TCP and TLS routes on a sidecar's outbound TCP
//! listeners: one filter chain per route match that admits the proxy,
//! each a `tcp_proxy` to its destinations by weight
//! (`weighted_clusters`); a match's `destinationSubnets` become the
//! chain's prefix ranges and a TLS match's `sniHosts` its server names
//! (read by the `tls_inspector` listener filter). Envoy picks the most
//! specific chain, not the first, so of two matches with the same
//! criteria the first route's is kept. Connections no match takes go to
//! the service port's own cluster.
//!
//! TLS services that share one listener (no VIP to tell them apart:
//! ServiceEntries with resolution `NONE` or `DNS` and no addresses, or any
//! services without traffic capture) are told apart by SNI, as Istio does:
//! each service's chains match its own hostname as server name (a chain
//! that already names server names keeps them), so every host on the port
//! is reachable; of chains with the same match, the first service's is
//! kept. On a capturing sidecar, a connection whose server name no service
//! has is passed through to its original destination.
//!
//! Plain TCP services on one listener (no VIP, or no capture) cannot be
//! told apart: as Istio, which orders services by age and keeps the
//! first one's chains, the oldest service (by its object's creation, then
//! by hostname; services of unknown age after the others) has the port and
//! the others get no listener there ([`tcp_listener_owners`]);
//! `pilotctl analyze` names them.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::core::v3::CidrRange;
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{Labels, Port, Protocol, Service, ServiceInstance};
use pilot_routing::{HttpMatch, L4Match, RoutingModel, WeightedDestination};

use super::cluster::PASSTHROUGH;
use super::util::any;
use crate::{ClusterName, Proxy};

/// The filter chains of `service`'s TCP port `port` for `proxy`, and
/// whether one matches on SNI (the listener then needs
/// [`tls_inspector`]).
pub(crate) fn filter_chains(
    service: &Service,
    port: &Port,
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
) -> (Vec<FilterChain>, bool) {
    let mut chains: Vec<FilterChain> = Vec::new();
    let mut sni = false;
    let routes = model.routes(&service.hostname);
    // TLS routes apply to TLS ports (a TLS service entry port, HTTPS),
    // TCP routes to every TCP port, in that order.
    let tls = routes
        .filter(|_| port.protocol == Protocol::Https)
        .into_iter()
        .flat_map(|r| r.tls.iter().map(|t| (&t.matches, &t.destinations)));
    let tcp = routes
        .into_iter()
        .flat_map(|r| r.tcp.iter().map(|t| (&t.matches, &t.destinations)));
    for (matches, destinations) in tls.chain(tcp).filter(|(_, d)| !d.is_empty()) {
        let every = [L4Match::default()];
        let matches = if matches.is_empty() {
            &every[..]
        } else {
            &matches[..]
        };
        for m in matches.iter().filter(|m| applies(m, port.port, own, proxy)) {
            let chain_match = chain_match(m);
            if chains.iter().any(|c| c.filter_chain_match == chain_match) {
                continue;
            }
            sni |= chain_match.as_ref().is_some_and(|c| !c.server_names.is_empty());
            let mut chain = tcp_proxy_chain(&service.hostname, port.port, destinations);
            chain.filter_chain_match = chain_match;
            chains.push(chain);
        }
    }
    if !chains.iter().any(|c| c.filter_chain_match.is_none()) {
        let own_cluster = ClusterName::outbound(&service.hostname, port.port, Labels::new()).to_string();
        chains.push(tcp_chain(TcpProxy {
            stat_prefix: own_cluster.clone(),
            cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(own_cluster)),
            ..Default::default()
        }));
    }
    (chains, sni)
}

/// The (address, port) listeners that two or more TLS services share,
/// each service's listener address given by `address`: their chains are
/// told apart by SNI ([`sni_filter_chains`]).
pub(crate) fn shared_tls_listeners(
    services: &[std::sync::Arc<Service>],
    address: impl Fn(&Service) -> String,
) -> BTreeSet<(String, u16)> {
    let mut count: BTreeMap<(String, u16), usize> = BTreeMap::new();
    for service in services {
        for port in service.ports.iter().filter(|p| p.protocol == Protocol::Https) {
            *count.entry((address(service), port.port)).or_default() += 1;
        }
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(key, _)| key)
        .collect()
}

/// Of the plain TCP services (neither HTTP, TLS nor UDP) on each
/// (address, port) listener, each service's listener address given by
/// `address`, the one that has it: the oldest, then the first by hostname.
pub(crate) fn tcp_listener_owners(
    services: &[std::sync::Arc<Service>],
    address: impl Fn(&Service) -> String,
) -> BTreeMap<(String, u16), String> {
    let mut owners: BTreeMap<(String, u16), &Service> = BTreeMap::new();
    let age = |s: &Service| (s.created.is_none(), s.created, s.hostname.clone());
    for service in services {
        for port in service.ports.iter().filter(|p| is_plain_tcp(p.protocol)) {
            owners
                .entry((address(service), port.port))
                .and_modify(|owner| {
                    if age(service) < age(owner) {
                        *owner = service;
                    }
                })
                .or_insert(service);
        }
    }
    owners
        .into_iter()
        .map(|(key, owner)| (key, owner.hostname.clone()))
        .collect()
}

/// Whether a port speaking `protocol` is plain TCP: routed by address and
/// port alone.
pub(crate) fn is_plain_tcp(protocol: Protocol) -> bool {
    !protocol.is_http() && !matches!(protocol, Protocol::Https | Protocol::Udp)
}

/// [`filter_chains`] of a TLS service on a listener it shares with other
/// TLS services: each chain without server names matches the service's
/// hostname.
pub(crate) fn sni_filter_chains(
    service: &Service,
    port: &Port,
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
) -> Vec<FilterChain> {
    let (chains, _) = filter_chains(service, port, model, proxy, own);
    let mut out = Listener::default();
    for mut chain in chains {
        let chain_match = chain.filter_chain_match.get_or_insert_with(Default::default);
        if chain_match.server_names.is_empty() {
            chain_match.server_names = vec![service.hostname.clone()];
        }
        add_chains(&mut out, vec![chain]);
    }
    out.filter_chains
}

/// The chain of a shared TLS listener of a capturing sidecar for
/// connections no service's server name matches: passed through to their
/// original destination, as the virtual listener passes through
/// connections to ports no service has.
pub(crate) fn passthrough_chain() -> FilterChain {
    tcp_chain(TcpProxy {
        stat_prefix: PASSTHROUGH.to_string(),
        cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(PASSTHROUGH.to_string())),
        ..Default::default()
    })
}

/// Adds `chains` to `listener`, but those whose match one of its chains
/// already has (Envoy refuses two chains with one match).
pub(crate) fn add_chains(listener: &mut Listener, chains: Vec<FilterChain>) {
    for chain in chains {
        if !listener
            .filter_chains
            .iter()
            .any(|c| c.filter_chain_match == chain.filter_chain_match)
        {
            listener.filter_chains.push(chain);
        }
    }
}

/// The listener filter that reads a TLS client hello's SNI.
pub(crate) fn tls_inspector() -> ListenerFilter {
    ListenerFilter {
        name: "envoy.filters.listener.tls_inspector".into(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(any(
            &TlsInspector::default(),
        ))),
        ..Default::default()
    }
}

/// Whether match `m` applies on service port `port` to this proxy.
fn applies(m: &L4Match, port: u16, own: &[ServiceInstance], proxy: &Proxy) -> bool {
    if m.port.is_some_and(|p| p != port) {
        return false;
    }
    // Source and gateway conditions are the HTTP match's.
    let mut source = HttpMatch::default();
    source.source_labels = m.source_labels.clone();
    source.source_namespace = m.source_namespace.clone();
    source.gateways = m.gateways.clone();
    super::routes::admits(&source, own, proxy)
}

/// The chain's match: none for a match on nothing but the proxy.
fn chain_match(m: &L4Match) -> Option<FilterChainMatch> {
    let prefix_ranges: Vec<CidrRange> = m.destination_subnets.iter().filter_map(|s| cidr(s)).collect();
    if prefix_ranges.is_empty() && m.sni_hosts.is_empty() {
        return None;
    }
    Some(FilterChainMatch {
        prefix_ranges,
        server_names: m.sni_hosts.clone(),
        ..Default::default()
    })
}

/// `a.b.c.d/n` or an address alone (its whole length).
fn cidr(subnet: &str) -> Option<CidrRange> {
    let (ip, bits) = match subnet.split_once('/') {
        Some((ip, bits)) => (ip.parse::<std::net::IpAddr>().ok()?, bits.parse::<u32>().ok()?),
        None => {
            let ip: std::net::IpAddr = subnet.parse().ok()?;
            (ip, if ip.is_ipv4() { 32 } else { 128 })
        }
    };
    Some(CidrRange {
        address_prefix: ip.to_string(),
        prefix_len: Some(UInt32Value { value: bits }),
    })
}

/// A chain proxying connections to `destinations` by weight (a
/// destination without a port goes to `port`).
pub(crate) fn tcp_proxy_chain(host: &str, port: u16, destinations: &[WeightedDestination]) -> FilterChain {
    let cluster = |d: &WeightedDestination| {
        ClusterName::outbound(
            &d.destination.host,
            d.destination.port.unwrap_or(port),
            d.destination.subset.clone(),
        )
        .to_string()
    };
    let stat_prefix = ClusterName::outbound(host, port, Labels::new()).to_string();
    let specifier = match destinations {
        [one] => tcp_proxy::ClusterSpecifier::Cluster(cluster(one)),
        many => tcp_proxy::ClusterSpecifier::WeightedClusters(tcp_proxy::WeightedCluster {
            clusters: many
                .iter()
                .map(|d| tcp_proxy::weighted_cluster::ClusterWeight {
                    name: cluster(d),
                    weight: d.weight,
                    ..Default::default()
                })
                .collect(),
        }),
    };
    tcp_chain(TcpProxy {
        stat_prefix,
        cluster_specifier: Some(specifier),
        ..Default::default()
    })
}

pub(crate) fn tcp_chain(proxy: TcpProxy) -> FilterChain {
    FilterChain {
        filters: vec![Filter {
            name: "envoy.filters.network.tcp_proxy".into(),
            config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
        }],
        ..Default::default()
    }
}
