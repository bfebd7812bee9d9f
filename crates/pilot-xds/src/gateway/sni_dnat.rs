//! `AUTO_PASSTHROUGH` gateway servers, as Istio's "SNI-DNAT" routers
//! serve them: the client names the cluster it wants in its SNI, and the
//! gateway forwards the connection, still encrypted, to that cluster. No
//! VirtualService is needed.
//!
//! - The SNI is the one a sidecar sends when it originates mutual TLS to a
//!   service (`names::sni`): `outbound_.<port>_.<subset>_.<hostname>`, the
//!   subset empty for the whole service (`outbound_.9080_._.reviews...`).
//! - An `AUTO_PASSTHROUGH` server gets one filter chain per service its
//!   hosts match (but services outside the mesh), per port (but UDP), and
//!   per subset of the routing model (the whole service first), each
//!   matching that SNI with a `tcp_proxy` to the cluster of that name.
//! - A host restricted to a namespace (`ns1/*.svc.cluster.local`,
//!   `./*`) matches only the services of that namespace, a service's
//!   namespace being the second label of its hostname (as Sidecar scopes
//!   read it); `host` and `*/host` match every namespace's.
//! - The SNI-DNAT clusters ([`clusters`]) are the edge proxy's own: EDS clusters
//!   named by the SNI that read the load assignment of the service's own
//!   cluster (`outbound|<port>|<labels>|<hostname>`), with the traffic
//!   policy's load balancing, limits and outlier detection but no TLS
//!   origination: the TLS is the client's, end to end.
//!
//! Unlike Istio, the chains do not also require the Istio mutual-TLS ALPN
//! values: the sidecars here send none. And Istio drops a host's
//! namespace part here, exposing every namespace's services whatever it
//! says; the Gateway reference documents the part as selecting the
//! namespace's services, which is what is done here.

use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_model::{Labels, Protocol, Service, ServiceDiscovery};
use pilot_routing::{IngressServer, RoutingModel, ServerHost, ServerTlsMode, host_matches};

use crate::build::util::ads;
use crate::names::{host_namespace, sni};
use crate::{ClusterName, Proxy};

/// The filter chains of the `AUTO_PASSTHROUGH` server `server`: one per
/// SNI-DNAT target of its hosts, matching the target's SNI.
pub(crate) fn chains(
    server: &IngressServer,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
) -> Vec<FilterChain> {
    targets(&server.hosts, &registry.services(), model)
        .into_iter()
        .map(|target| {
            let mut chain = crate::build::l4::tcp_chain(TcpProxy {
                stat_prefix: target.sni.clone(),
                cluster_specifier: Some(tcp_proxy::ClusterSpecifier::Cluster(target.sni.clone())),
                ..Default::default()
            });
            chain.filter_chain_match = Some(FilterChainMatch {
                server_names: vec![target.sni],
                ..Default::default()
            });
            chain
        })
        .collect()
}

/// Whether `proxy` (an edge proxy) serves some `AUTO_PASSTHROUGH` server
/// of `model`: then it gets the SNI-DNAT [`clusters`].
pub fn serves_auto_passthrough(proxy: &Proxy, model: &RoutingModel) -> bool {
    !auto_passthrough_hosts(proxy, model).is_empty()
}

/// The SNI-DNAT clusters of `proxy`: one per target of the hosts of the
/// `AUTO_PASSTHROUGH` servers it serves (none for a proxy serving none),
/// as the module describes.
pub fn clusters(proxy: &Proxy, services: &[Arc<Service>], model: &RoutingModel) -> Vec<Cluster> {
    let hosts = auto_passthrough_hosts(proxy, model);
    if hosts.is_empty() {
        return Vec::new();
    }
    targets(&hosts, services, model)
        .into_iter()
        .map(|target| {
            let mut out = crate::build::cluster::base(&target.sni, cluster::DiscoveryType::Eds);
            out.eds_cluster_config = Some(cluster::EdsClusterConfig {
                eds_config: Some(ads()),
                service_name: target.cluster.to_string(),
            });
            if let Some(policy) = model.policy_for(&target.cluster.hostname, &target.cluster.subset) {
                crate::build::cluster::apply_policy(&mut out, policy.for_port(target.cluster.port));
            }
            out
        })
        .collect()
}

/// One SNI-DNAT target: the SNI (and cluster name) and the service
/// cluster whose endpoints it reaches.
struct Target {
    sni: String,
    cluster: ClusterName,
}

/// The targets of servers with `hosts`: each mesh service one of them
/// matches, served from its instances, each port but UDP, the whole
/// service and each subset of the model; by SNI, each once.
fn targets(hosts: &[ServerHost], services: &[Arc<Service>], model: &RoutingModel) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for service in services.iter().filter(|s| {
        !s.mesh_external
            && s.external_name.is_none()
            && crate::build::resolved::uses_eds(&s.resolution)
            && hosts.iter().any(|h| {
                h.admits(host_namespace(&s.hostname).unwrap_or_default())
                    && host_matches(&h.host, &s.hostname)
            })
    }) {
        for port in service.ports.iter().filter(|p| p.protocol != Protocol::Udp) {
            let whole = (String::new(), Labels::new());
            let subsets = model
                .destination(&service.hostname)
                .into_iter()
                .flat_map(|d| &d.subsets)
                .map(|s| (s.name.clone(), s.labels.clone()));
            for (name, labels) in std::iter::once(whole).chain(subsets) {
                let sni = sni(&service.hostname, port.port, &name);
                if seen.insert(sni.clone()) {
                    out.push(Target {
                        sni,
                        cluster: ClusterName::outbound(&service.hostname, port.port, labels),
                    });
                }
            }
        }
    }
    out
}

/// The hosts of the `AUTO_PASSTHROUGH` servers `proxy` serves.
fn auto_passthrough_hosts(proxy: &Proxy, model: &RoutingModel) -> Vec<ServerHost> {
    if proxy.proxy_type == crate::ProxyType::Sidecar {
        return Vec::new();
    }
    let mut hosts: Vec<ServerHost> = model
        .ingress_servers()
        .iter()
        .filter(|s| {
            s.tls
                .as_ref()
                .is_some_and(|t| t.mode == ServerTlsMode::AutoPassthrough)
                && super::serves(proxy, s)
        })
        .flat_map(|s| s.hosts.iter().cloned())
        .collect();
    hosts.sort();
    hosts.dedup();
    hosts
}
