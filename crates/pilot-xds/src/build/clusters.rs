//! CDS and EDS: clusters for services, their subsets, the proxy's own
//! instances, and external services, with the routing model's traffic
//! policies; the load assignments of the EDS clusters. The shape of one
//! cluster is `cluster.rs`'s.

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{DnsEndpoint, Labels, Port, Service, ServiceDiscovery, ServiceInstance, ServiceResolution};
use pilot_routing::{Resolution, RoutingModel};

use super::cluster::{
    PASSTHROUGH, apply_policy, eds_cluster, original_destination, set_protocol, static_cluster,
};
use super::util::socket;
use crate::ClusterName;
use crate::mesh::MeshTls;

/// The subsets of `host` the model has, by their labels, in order.
pub(crate) fn subsets_of<'a>(model: &'a RoutingModel, host: &str) -> impl Iterator<Item = &'a Labels> {
    model
        .destination(host)
        .into_iter()
        .flat_map(|d| &d.subsets)
        .map(|s| &s.labels)
}

/// An EDS cluster of the mesh: a service port, whole or one subset.
pub struct EdsCluster {
    /// The cluster's name (its service, port and subset).
    pub name: ClusterName,
    /// The service.
    pub service: std::sync::Arc<Service>,
    /// The name of the service port.
    pub port_name: String,
}

/// The EDS clusters every Envoy gets, in CDS order: for each service port
/// (but external names), the whole service and each of its subsets in the
/// model. They depend on no proxy, so their load assignments are built
/// once per push for every proxy.
pub fn eds_clusters(services: &[std::sync::Arc<Service>], model: &RoutingModel) -> Vec<EdsCluster> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for service in services
        .iter()
        .filter(|s| s.external_name.is_none() && super::resolved::uses_eds(&s.resolution))
    {
        for port in &service.ports {
            let wanted = std::iter::once(Labels::new()).chain(subsets_of(model, &service.hostname).cloned());
            for subset in wanted {
                let name = ClusterName::outbound(&service.hostname, port.port, subset);
                if seen.insert(name.to_string()) {
                    out.push(EdsCluster {
                        name,
                        service: std::sync::Arc::clone(service),
                        port_name: port.name.clone(),
                    });
                }
            }
        }
    }
    out
}

/// The outbound clusters (CDS but the proxy's inbound ones): they depend
/// on the proxy only through `captured` (the passthrough cluster),
/// `edge` (a router or ingress proxy, whose clusters follow the
/// BackendTLSPolicies of their Services; a sidecar's do not) and
/// `backend_client_credential` (the client certificate an edge proxy
/// presents where a BackendTLSPolicy has it originate TLS: its Gateway's
/// `tls.backend.clientCertificateRef`, a credential name sent over SDS).
/// Mesh
/// services' clusters originate mutual TLS as `security` and their
/// traffic policies say (`security/outbound.rs`); none: for a proxy
/// without workload certificates, plaintext.
pub fn outbound(
    captured: bool,
    edge: bool,
    backend_client_credential: Option<&str>,
    services: &[std::sync::Arc<Service>],
    model: &RoutingModel,
    security: Option<MeshTls<'_>>,
) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    for service in services {
        for port in &service.ports {
            if let Some(external) = &service.external_name {
                let name = ClusterName::outbound(&service.hostname, port.port, Labels::new());
                clusters.push(super::cluster::dns_cluster(
                    &name.to_string(),
                    external,
                    port.port,
                    port.protocol,
                ));
                continue;
            }
            let whole = Labels::new();
            let wanted = std::iter::once(&whole).chain(subsets_of(model, &service.hostname));
            for subset in wanted {
                let name = crate::names::outbound_cluster(&service.hostname, port.port, subset);
                let mut cluster = super::resolved::cluster(&name, &service.resolution, port, subset)
                    .unwrap_or_else(|| eds_cluster(&name, port.protocol));
                let policy = model
                    .policy_for(&service.hostname, subset)
                    .map(|p| p.for_port(port.port));
                if let Some(policy) = policy {
                    apply_policy(&mut cluster, policy);
                }
                // At the edge, a BackendTLSPolicy for the port replaces a
                // DestinationRule's `tls`.
                let backend_tls = edge
                    .then(|| model.backend_tls().for_port(&service.hostname, &port.name))
                    .flatten();
                // Presenting the Gateway's client certificate, if it has one.
                let mutual = backend_tls.zip(backend_client_credential).map(|(b, credential)| {
                    let mut tls = b.tls.clone();
                    tls.mode = pilot_routing::TlsMode::Mutual;
                    tls.credential_name = Some(credential.to_string());
                    tls
                });
                let tls = mutual
                    .as_ref()
                    .or(backend_tls.map(|b| &b.tls))
                    .or_else(|| policy.and_then(|p| p.tls.as_ref()));
                super::upstream_tls::apply(&mut cluster, tls, &service.hostname);
                if let Some(security) = &security {
                    let sni = crate::names::sni(
                        &service.hostname,
                        port.port,
                        crate::names::subset_name(model, &service.hostname, subset),
                    );
                    super::security::secure_outbound(
                        &mut cluster,
                        service,
                        port.port,
                        subset,
                        &sni,
                        tls,
                        security,
                    );
                }
                if let Some(version) = policy.and_then(|p| p.proxy_protocol) {
                    super::cluster::proxy_protocol(&mut cluster, version);
                }
                clusters.push(cluster);
            }
        }
    }
    clusters.extend(external_clusters(model));
    if captured {
        clusters.push(original_destination(PASSTHROUGH));
    }
    // The first of each name, without copying the names.
    let mut seen = BTreeSet::new();
    let first: Vec<bool> = clusters.iter().map(|c| seen.insert(c.name.as_str())).collect();
    drop(seen);
    let mut first = first.into_iter();
    clusters.retain(|_| first.next().unwrap_or(true));
    clusters
}

/// The inbound clusters of a captured sidecar: one per own instance's
/// service port, to the application on 127.0.0.1.
pub(crate) fn inbound(own: &[ServiceInstance]) -> Vec<Cluster> {
    let mut clusters: Vec<Cluster> = Vec::new();
    for instance in own {
        let port = &instance.endpoint.service_port;
        let name = ClusterName::inbound(&instance.service.hostname, port.port).to_string();
        if clusters.iter().any(|c| c.name == name) {
            continue;
        }
        let mut cluster = static_cluster(&name, "127.0.0.1", instance.endpoint.port);
        set_protocol(&mut cluster, port.protocol);
        clusters.push(cluster);
    }
    clusters
}

/// Clusters for the external services: DNS for a domain, the original
/// destination for wildcards, addresses and CIDR blocks; with the host's
/// traffic policy.
fn external_clusters(model: &RoutingModel) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    for service in model.external_services() {
        for port in &service.ports {
            let name = ClusterName::outbound(&service.host, port.number, Labels::new()).to_string();
            let resolution = match service.resolution {
                Resolution::Dns => ServiceResolution::Dns(vec![DnsEndpoint::new(service.host.clone())]),
                _ => ServiceResolution::Passthrough,
            };
            let as_port = Port::new("external", port.number, port.protocol);
            let Some(mut cluster) = super::resolved::cluster(&name, &resolution, &as_port, &Labels::new())
            else {
                continue;
            };
            if let Some(policy) = model.policy_for(&service.host, &Labels::new()) {
                apply_policy(&mut cluster, policy.for_port(port.number));
                super::upstream_tls::apply(
                    &mut cluster,
                    policy.for_port(port.number).tls.as_ref(),
                    &service.host,
                );
                if let Some(version) = policy.for_port(port.number).proxy_protocol {
                    super::cluster::proxy_protocol(&mut cluster, version);
                }
            }
            clusters.push(cluster);
        }
    }
    clusters
}

/// EDS: the instances of a service port (and subset), grouped by zone.
pub fn load_assignment(
    name: &ClusterName,
    service: &Service,
    port_name: &str,
    registry: &dyn ServiceDiscovery,
) -> ClusterLoadAssignment {
    let selectors: Vec<Labels> = if name.subset.is_empty() {
        Vec::new()
    } else {
        vec![name.subset.clone()]
    };
    let count = |value: u32| UInt32Value { value };
    let mut by_zone: BTreeMap<String, Vec<LbEndpoint>> = BTreeMap::new();
    for instance in registry.instances(&service.hostname, &[port_name], &selectors) {
        by_zone
            .entry(instance.availability_zone.clone().unwrap_or_default())
            .or_default()
            .push(LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(socket(
                        &instance.endpoint.address.to_string(),
                        instance.endpoint.port,
                    )),
                    ..Default::default()
                })),
                load_balancing_weight: instance.weight.map(count),
                metadata: super::security::endpoint_metadata(&instance),
                ..Default::default()
            });
    }
    ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: by_zone
            .into_iter()
            .map(|(zone, lb_endpoints)| LocalityLbEndpoints {
                locality: (!zone.is_empty()).then(|| envoy_types::pb::envoy::config::core::v3::Locality {
                    zone,
                    ..Default::default()
                }),
                lb_endpoints,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
