//! Clusters whose endpoints the proxy finds itself rather than through
//! EDS: the original destination (a service entry's `NONE`, an egress
//! rule's wildcard host or address), `STRICT_DNS` (`DNS`, an egress rule's
//! domain) and `LOGICAL_DNS` (`DNS_ROUND_ROBIN`). Registry services and
//! the routing model's external services take this one path.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::endpoint::v3::{ClusterLoadAssignment, LocalityLbEndpoints};
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{DnsEndpoint, Labels, Port, ServiceResolution};

/// The cluster `name` for service port `port` resolved as `resolution`,
/// its endpoints those of `subset` (empty: all); `None` for a service
/// whose instances come over EDS.
pub(crate) fn cluster(
    name: &str,
    resolution: &ServiceResolution,
    port: &Port,
    subset: &Labels,
) -> Option<Cluster> {
    let (kind, endpoints) = match resolution {
        ServiceResolution::Passthrough => {
            let mut cluster = super::cluster::base(name, cluster::DiscoveryType::OriginalDst);
            cluster.lb_policy = cluster::LbPolicy::ClusterProvided as i32;
            return Some(cluster);
        }
        ServiceResolution::Dns(endpoints) => (cluster::DiscoveryType::StrictDns, endpoints.as_slice()),
        // Envoy's LOGICAL_DNS takes exactly one endpoint.
        ServiceResolution::DnsRoundRobin(endpoints) => (
            cluster::DiscoveryType::LogicalDns,
            endpoints.get(..1).unwrap_or_default(),
        ),
        _ => return None,
    };
    let lb_endpoints = endpoints
        .iter()
        .filter(|e| subset.is_subset_of(&e.labels))
        .map(|e| lb_endpoint(e, port))
        .collect();
    let mut cluster = super::cluster::base(name, kind);
    // An IPv4 address where a name has one: a name such as `localhost`
    // resolves to both families, and services listen on IPv4 far more
    // often.
    cluster.dns_lookup_family = cluster::DnsLookupFamily::V4Preferred as i32;
    cluster.load_assignment = Some(ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints,
            ..Default::default()
        }],
        ..Default::default()
    });
    super::cluster::set_protocol(&mut cluster, port.protocol);
    Some(cluster)
}

/// Whether the cluster of a service resolved as `resolution` is sent
/// over EDS.
pub(crate) fn uses_eds(resolution: &ServiceResolution) -> bool {
    resolution.is_instances()
}

fn lb_endpoint(
    endpoint: &DnsEndpoint,
    port: &Port,
) -> envoy_types::pb::envoy::config::endpoint::v3::LbEndpoint {
    let mut lb = super::cluster::lb_endpoint_at(&endpoint.address, endpoint.port_for(port));
    lb.load_balancing_weight = endpoint.weight.map(|value| UInt32Value { value });
    lb
}
