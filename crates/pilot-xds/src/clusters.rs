//! CDS: clusters for services, their subsets, the proxy's own instances,
//! and external services, with the routing model's traffic policies.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, OutlierDetection, circuit_breakers::Thresholds, cluster,
};
use envoy_types::pb::envoy::config::core::v3::{
    Http2ProtocolOptions, HttpProtocolOptions as CoreHttpOptions,
};
use envoy_types::pb::envoy::config::endpoint::v3::Endpoint;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{HttpProtocolOptions, http_protocol_options};
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{
    DnsEndpoint, Labels, Port, Protocol, Service, ServiceDiscovery, ServiceInstance, ServiceResolution,
};
use pilot_routing::{LoadBalancer, Resolution, RoutingModel, SimpleLb, TrafficPolicy};

use crate::security::MeshTls;
use crate::util::{ads, any, duration, socket};
use crate::{ClusterName, Proxy};

/// How long a new upstream connection may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// The cluster that forwards to a connection's original destination.
pub const PASSTHROUGH: &str = "PassthroughCluster";

const HTTP_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// The clusters for `proxy`, and the load assignments of its EDS clusters.
pub(crate) fn clusters(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    security: Option<MeshTls<'_>>,
) -> (Vec<Cluster>, Vec<ClusterLoadAssignment>) {
    // The passthrough serves captured traffic only.
    let captured = proxy.proxy_type == crate::ProxyType::Sidecar && proxy.capture.captures();
    let services = registry.services();
    let assignments = eds_clusters(&services, model)
        .iter()
        .map(|c| load_assignment(&c.name, &c.service, &c.port_name, registry))
        .collect();
    let mut clusters = outbound(captured, &services, model, security);
    clusters.extend(crate::sni_dnat::clusters(proxy, &services, model));
    (clusters, assignments)
}

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
        .filter(|s| s.external_name.is_none() && crate::resolved::uses_eds(&s.resolution))
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
/// on the proxy only through `captured` (the passthrough cluster). Mesh
/// services' clusters originate mutual TLS as `security` and their
/// traffic policies say (`security/outbound.rs`); none: for a proxy
/// without workload certificates, plaintext.
pub fn outbound(
    captured: bool,
    services: &[std::sync::Arc<Service>],
    model: &RoutingModel,
    security: Option<MeshTls<'_>>,
) -> Vec<Cluster> {
    let mut clusters = Vec::new();
    for service in services {
        for port in &service.ports {
            if let Some(external) = &service.external_name {
                let name = ClusterName::outbound(&service.hostname, port.port, Labels::new());
                clusters.push(dns_cluster(&name.to_string(), external, port.port, port.protocol));
                continue;
            }
            let whole = Labels::new();
            let wanted = std::iter::once(&whole).chain(subsets_of(model, &service.hostname));
            for subset in wanted {
                let name = crate::names::outbound_cluster(&service.hostname, port.port, subset);
                let mut cluster = crate::resolved::cluster(&name, &service.resolution, port, subset)
                    .unwrap_or_else(|| eds_cluster(&name, port.protocol));
                let policy = model
                    .policy_for(&service.hostname, subset)
                    .map(|p| p.for_port(port.port));
                if let Some(policy) = policy {
                    apply_policy(&mut cluster, policy);
                }
                let tls = policy.and_then(|p| p.tls.as_ref());
                crate::upstream_tls::apply(&mut cluster, tls, &service.hostname);
                if let Some(security) = &security {
                    let sni = crate::sni_dnat::sni(
                        &service.hostname,
                        port.port,
                        crate::sni_dnat::subset_name(model, &service.hostname, subset),
                    );
                    crate::security::secure_outbound(
                        &mut cluster,
                        service,
                        port.port,
                        subset,
                        &sni,
                        tls,
                        security,
                    );
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

pub(crate) fn base(name: &str, kind: cluster::DiscoveryType) -> Cluster {
    Cluster {
        name: name.to_string(),
        connect_timeout: Some(duration(CONNECT_TIMEOUT)),
        cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(kind as i32)),
        ..Default::default()
    }
}

fn eds_cluster(name: &str, protocol: Protocol) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::Eds);
    cluster.eds_cluster_config = Some(cluster::EdsClusterConfig {
        eds_config: Some(ads()),
        service_name: name.to_string(),
    });
    set_protocol(&mut cluster, protocol);
    cluster
}

fn static_cluster(name: &str, address: &str, port: u16) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::Static);
    cluster.load_assignment = Some(ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![lb_endpoint_at(address, port)],
            ..Default::default()
        }],
        ..Default::default()
    });
    cluster
}

fn dns_cluster(name: &str, host: &str, port: u16, protocol: Protocol) -> Cluster {
    let mut cluster = static_cluster(name, host, port);
    cluster.cluster_discovery_type = Some(cluster::ClusterDiscoveryType::Type(
        cluster::DiscoveryType::StrictDns as i32,
    ));
    set_protocol(&mut cluster, protocol);
    cluster
}

fn original_destination(name: &str) -> Cluster {
    let mut cluster = base(name, cluster::DiscoveryType::OriginalDst);
    cluster.lb_policy = cluster::LbPolicy::ClusterProvided as i32;
    cluster
}

/// HTTP/2 upstreams for HTTP/2 and gRPC ports.
pub(crate) fn set_protocol(cluster: &mut Cluster, protocol: Protocol) {
    if matches!(protocol, Protocol::Http2 | Protocol::Grpc) {
        use_http2(cluster);
    }
}

/// Makes a cluster speak HTTP/2 to its upstreams (gRPC, xDS).
pub(crate) fn use_http2(cluster: &mut Cluster) {
    let options = HttpProtocolOptions {
        upstream_protocol_options: Some(
            http_protocol_options::UpstreamProtocolOptions::ExplicitHttpConfig(
                http_protocol_options::ExplicitHttpConfig {
                    protocol_config: Some(
                        http_protocol_options::explicit_http_config::ProtocolConfig::Http2ProtocolOptions(
                            Http2ProtocolOptions::default(),
                        ),
                    ),
                },
            ),
        ),
        ..Default::default()
    };
    cluster
        .typed_extension_protocol_options
        .insert(HTTP_OPTIONS_KEY.into(), any(&options));
}

/// Load balancing, circuit breaking and outlier detection from a traffic
/// policy.
pub(crate) fn apply_policy(cluster: &mut Cluster, policy: &TrafficPolicy) {
    if let Some(balancer) = &policy.load_balancer {
        let lb = match balancer {
            LoadBalancer::Simple(SimpleLb::RoundRobin) => Some(cluster::LbPolicy::RoundRobin),
            LoadBalancer::Simple(SimpleLb::LeastRequest) => Some(cluster::LbPolicy::LeastRequest),
            LoadBalancer::Simple(SimpleLb::Random) => Some(cluster::LbPolicy::Random),
            LoadBalancer::ConsistentHash(_) => Some(cluster::LbPolicy::RingHash),
            _ => None,
        };
        if let Some(lb) = lb {
            cluster.lb_policy = lb as i32;
        }
        if let LoadBalancer::ConsistentHash(hash) = balancer {
            crate::hash_policy::apply(cluster, hash);
        }
    }
    let count = |n: u32| UInt32Value { value: n };
    if let Some(pool) = &policy.connection_pool {
        cluster.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![Thresholds {
                max_connections: pool.max_connections.map(count),
                max_pending_requests: pool.max_pending_requests.map(count),
                max_requests: pool.max_requests.map(count),
                max_retries: pool.max_retries.map(count),
                ..Default::default()
            }],
            ..Default::default()
        });
        if let Some(timeout) = pool.connect_timeout {
            cluster.connect_timeout = Some(duration(timeout));
        }
    }
    if let Some(outlier) = &policy.outlier_detection {
        cluster.outlier_detection = Some(OutlierDetection {
            consecutive_5xx: outlier.consecutive_5xx_errors.map(count),
            interval: outlier.interval.map(duration),
            base_ejection_time: outlier.base_ejection_time.map(duration),
            max_ejection_percent: outlier.max_ejection_percent.map(count),
            ..Default::default()
        });
    }
    if let Some(per_connection) = policy
        .connection_pool
        .as_ref()
        .and_then(|p| p.max_requests_per_connection)
    {
        let key = HTTP_OPTIONS_KEY.to_string();
        let mut options = cluster
            .typed_extension_protocol_options
            .get(&key)
            .and_then(|a| <HttpProtocolOptions as prost::Message>::decode(a.value.as_slice()).ok())
            .unwrap_or_else(|| HttpProtocolOptions {
                upstream_protocol_options: Some(
                    http_protocol_options::UpstreamProtocolOptions::UseDownstreamProtocolConfig(
                        http_protocol_options::UseDownstreamHttpConfig::default(),
                    ),
                ),
                ..Default::default()
            });
        options.common_http_protocol_options = Some(CoreHttpOptions {
            max_requests_per_connection: Some(count(per_connection)),
            ..Default::default()
        });
        cluster
            .typed_extension_protocol_options
            .insert(key, any(&options));
    }
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
            let Some(mut cluster) = crate::resolved::cluster(&name, &resolution, &as_port, &Labels::new())
            else {
                continue;
            };
            if let Some(policy) = model.policy_for(&service.host, &Labels::new()) {
                apply_policy(&mut cluster, policy.for_port(port.number));
                crate::upstream_tls::apply(
                    &mut cluster,
                    policy.for_port(port.number).tls.as_ref(),
                    &service.host,
                );
            }
            clusters.push(cluster);
        }
    }
    clusters
}

pub(crate) fn lb_endpoint_at(address: &str, port: u16) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
            address: Some(socket(address, port)),
            ..Default::default()
        })),
        ..Default::default()
    }
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
                metadata: crate::security::endpoint_metadata(&instance),
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
