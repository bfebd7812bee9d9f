//! What an emulated proxy reads of a response and how it writes a
//! request, at the least cost: responses decoded only as far as the proxy
//! needs (names, and enough to count a response's bytes), in place where
//! it can; requests written from encoded parts shared by every request of
//! a proxy and, for name lists, by every proxy listing them.

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use prost::Message;

/// What a client decodes of a `DiscoveryResponse` (every field the server
/// sends, so `encoded_len` is the message's size; resources not copied).
#[derive(Clone, PartialEq, Message)]
pub(super) struct Response {
    #[prost(string, tag = "1")]
    pub(super) version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub(super) resources: Vec<AnyValue>,
    #[prost(string, tag = "4")]
    pub(super) type_url: String,
    #[prost(string, tag = "5")]
    pub(super) nonce: String,
}

/// What a client decodes of a `DeltaDiscoveryResponse` (every field the
/// server sends).
#[derive(Clone, PartialEq, Message)]
pub(super) struct DeltaResponse {
    #[prost(string, tag = "1")]
    pub(super) system_version_info: String,
    #[prost(message, repeated, tag = "2")]
    pub(super) resources: Vec<DeltaResource>,
    #[prost(string, tag = "4")]
    pub(super) type_url: String,
    #[prost(string, tag = "5")]
    pub(super) nonce: String,
    #[prost(string, repeated, tag = "6")]
    pub(super) removed_resources: Vec<String>,
}

/// `envoy.service.discovery.v3.Resource`: version, the resource, name.
#[derive(Clone, PartialEq, Message)]
pub(super) struct DeltaResource {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(message, optional, tag = "2")]
    pub(super) resource: Option<AnyValue>,
    /// Read in place (a string on the wire).
    #[prost(bytes = "bytes", tag = "3")]
    name: Bytes,
}

impl DeltaResource {
    pub(super) fn name(&self) -> &str {
        std::str::from_utf8(&self.name).unwrap_or_default()
    }
}

/// `google.protobuf.Any`, not copied.
#[derive(Clone, PartialEq, Message)]
pub(super) struct AnyValue {
    #[prost(bytes = "bytes", tag = "1")]
    type_url: Bytes,
    #[prost(bytes = "bytes", tag = "2")]
    pub(super) value: Bytes,
}

/// `Listener.filter_chains` (3) → `FilterChain.filters` (3) →
/// `Filter.typed_config` (4) → `HttpConnectionManager.rds` (3) →
/// `Rds.route_config_name` (2).
#[derive(Clone, PartialEq, Message)]
struct ListenerRoutes {
    #[prost(message, repeated, tag = "3")]
    filter_chains: Vec<ChainFilters>,
}
#[derive(Clone, PartialEq, Message)]
struct ChainFilters {
    #[prost(message, repeated, tag = "3")]
    filters: Vec<FilterConfig>,
}
#[derive(Clone, PartialEq, Message)]
struct FilterConfig {
    #[prost(message, optional, tag = "4")]
    typed_config: Option<AnyValue>,
}
#[derive(Clone, PartialEq, Message)]
struct ManagerRds {
    #[prost(message, optional, tag = "3")]
    rds: Option<RdsName>,
}
#[derive(Clone, PartialEq, Message)]
struct RdsName {
    #[prost(string, tag = "2")]
    route_config_name: String,
}

/// The EDS name a cluster carries (its own, when it uses EDS), read in
/// place (`Cluster` field 1, `name`, and field 3, `eds_cluster_config`):
/// 4,000 clusters per CDS response, each client.
pub(super) fn eds_name(mut cluster: &[u8]) -> Option<&str> {
    use prost::encoding::decode_varint;
    let (mut name, mut eds) = (None, false);
    while !cluster.is_empty() {
        let key = decode_varint(&mut cluster).ok()?;
        match key & 7 {
            0 => {
                decode_varint(&mut cluster).ok()?;
            }
            1 => cluster = cluster.get(8..)?,
            2 => {
                let len = usize::try_from(decode_varint(&mut cluster).ok()?).ok()?;
                let (field, rest) = cluster.split_at_checked(len)?;
                cluster = rest;
                match key >> 3 {
                    1 => name = Some(std::str::from_utf8(field).ok()?),
                    3 => eds = true,
                    _ => {}
                }
            }
            5 => cluster = cluster.get(4..)?,
            _ => return None,
        }
    }
    if eds { name } else { None }
}

/// The route configuration names a listener's connection managers use.
pub(super) fn route_names(value: &Bytes) -> Vec<String> {
    ListenerRoutes::decode(value.clone())
        .map(|l| {
            l.filter_chains
                .into_iter()
                .flat_map(|c| c.filters)
                .filter_map(|f| ManagerRds::decode(f.typed_config?.value).ok()?.rds)
                .map(|rds| rds.route_config_name)
                .collect()
        })
        .unwrap_or_default()
}

/// A request as its encoded fields, in field order: the node and name
/// lists already encoded, shared by every request of a client and the
/// names by every client listing them. The same bytes prost would write
/// for a `DiscoveryRequest` or `DeltaDiscoveryRequest`, sent as they are.
#[derive(Debug, Clone, Default)]
pub(super) struct Encoded(pub(super) Vec<Bytes>);

impl Encoded {
    /// Adds string field `tag` (left out when empty, as prost does).
    pub(super) fn string(self, tag: u32, value: &str) -> Self {
        if value.is_empty() {
            return self;
        }
        self.fields(&encode_names(tag, std::iter::once(value)))
    }

    /// Adds already encoded fields.
    pub(super) fn fields(mut self, encoded: &Bytes) -> Self {
        if !encoded.is_empty() {
            self.0.push(encoded.clone());
        }
        self
    }
}

/// `node` encoded as field `tag` (2 in `DiscoveryRequest`, 1 in
/// `DeltaDiscoveryRequest`).
pub(super) fn encoded_node(tag: u32, node: &Node) -> Bytes {
    let mut encoded = bytes::BytesMut::new();
    prost::encoding::message::encode(tag, node, &mut encoded);
    encoded.freeze()
}

/// `names` as repeated string field `tag`.
pub(super) fn encode_names<'a>(tag: u32, names: impl Iterator<Item = &'a str>) -> Bytes {
    let mut encoded = bytes::BytesMut::new();
    for name in names {
        prost::encoding::encode_key(tag, prost::encoding::WireType::LengthDelimited, &mut encoded);
        prost::encoding::encode_varint(name.len() as u64, &mut encoded);
        bytes::BufMut::put_slice(&mut encoded, name.as_bytes());
    }
    encoded.freeze()
}

/// What a client decodes of a `ClusterLoadAssignment` when it watches a
/// host: its cluster's name (1) and, of each `LocalityLbEndpoints` (2),
/// each `LbEndpoint`'s (2) health status (2).
#[derive(Clone, PartialEq, Message)]
struct Assignment {
    #[prost(string, tag = "1")]
    cluster_name: String,
    #[prost(message, repeated, tag = "2")]
    endpoints: Vec<LocalityEndpoints>,
}
#[derive(Clone, PartialEq, Message)]
struct LocalityEndpoints {
    #[prost(message, repeated, tag = "2")]
    lb_endpoints: Vec<EndpointHealth>,
}
#[derive(Clone, PartialEq, Message)]
struct EndpointHealth {
    #[prost(int32, tag = "2")]
    health_status: i32,
}

/// When `assignment` (an encoded `ClusterLoadAssignment`) is one of
/// `host`'s clusters (`outbound|PORT|SUBSET|HOST`): how many of its
/// endpoints Envoy would send traffic to (health status UNKNOWN, HEALTHY
/// or DEGRADED). Assignments of other hosts are not decoded.
pub(super) fn ready_endpoints(assignment: &Bytes, host: &str) -> Option<usize> {
    let bytes: &[u8] = assignment;
    if !bytes.windows(host.len()).any(|w| w == host.as_bytes()) {
        return None;
    }
    let decoded = Assignment::decode(assignment.clone()).ok()?;
    (decoded.cluster_name.rsplit('|').next() == Some(host)).then(|| {
        decoded
            .endpoints
            .iter()
            .flat_map(|l| &l.lb_endpoints)
            .filter(|e| matches!(e.health_status, 0 | 1 | 5))
            .count()
    })
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::HealthStatus;
    use envoy_types::pb::envoy::config::endpoint::v3::{
        ClusterLoadAssignment, LbEndpoint, LocalityLbEndpoints,
    };

    use super::*;

    fn assignment(cluster: &str, health: &[HealthStatus]) -> Bytes {
        ClusterLoadAssignment {
            cluster_name: cluster.into(),
            endpoints: vec![LocalityLbEndpoints {
                lb_endpoints: health
                    .iter()
                    .map(|h| LbEndpoint {
                        health_status: *h as i32,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }],
            ..Default::default()
        }
        .encode_to_vec()
        .into()
    }

    #[test]
    fn ready_endpoints_count_what_envoy_sends_traffic_to_of_the_watched_host_only() {
        let host = "svc-1.ns1.svc.cluster.local";
        let mixed = assignment(
            &format!("outbound|9080|v1|{host}"),
            &[
                HealthStatus::Unknown,
                HealthStatus::Healthy,
                HealthStatus::Draining,
                HealthStatus::Unhealthy,
            ],
        );
        assert_eq!(ready_endpoints(&mixed, host), Some(2));
        let empty = assignment(&format!("outbound|9080||{host}"), &[]);
        assert_eq!(ready_endpoints(&empty, host), Some(0));
        let draining = assignment(&format!("outbound|9080||{host}"), &[HealthStatus::Draining]);
        assert_eq!(ready_endpoints(&draining, host), Some(0));
        // Another host, even one whose name holds the watched one's.
        let other = assignment("outbound|9080||svc-11.ns1.svc.cluster.local", &[]);
        assert_eq!(ready_endpoints(&other, host), None);
        let suffixed = assignment(&format!("outbound|9080||x{host}"), &[]);
        assert_eq!(ready_endpoints(&suffixed, host), None);
    }
}
