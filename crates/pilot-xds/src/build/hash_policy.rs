//! Session affinity: a DestinationRule's `consistentHash` as the hash
//! policy of the routes to its destination (what is hashed: a header, a
//! cookie, the source address, a query parameter) and the load balancer of
//! its clusters (a ring, or Maglev with its table size).

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::route::v3::route_action::{HashPolicy, hash_policy};
use envoy_types::pb::google::protobuf::UInt64Value;
use pilot_routing::{ConsistentHash, HashKey};

use super::util::duration;

/// The route hash policy of `key`.
pub(crate) fn route_hash_policy(key: &HashKey) -> HashPolicy {
    let specifier = match key {
        HashKey::Header(name) => hash_policy::PolicySpecifier::Header(hash_policy::Header {
            header_name: name.clone(),
            ..Default::default()
        }),
        HashKey::Cookie { name, path, ttl } => hash_policy::PolicySpecifier::Cookie(hash_policy::Cookie {
            name: name.clone(),
            ttl: ttl.map(duration),
            path: path.clone().unwrap_or_default(),
            ..Default::default()
        }),
        HashKey::QueryParameter(name) => {
            hash_policy::PolicySpecifier::QueryParameter(hash_policy::QueryParameter { name: name.clone() })
        }
        _ => hash_policy::PolicySpecifier::ConnectionProperties(hash_policy::ConnectionProperties {
            source_ip: true,
        }),
    };
    HashPolicy {
        policy_specifier: Some(specifier),
        ..Default::default()
    }
}

/// A consistent-hash load balancer on `cluster`: Maglev when asked for,
/// else a ring with its minimum size.
pub(crate) fn apply(cluster: &mut Cluster, hash: &ConsistentHash) {
    if let Some(table_size) = hash.maglev {
        cluster.lb_policy = cluster::LbPolicy::Maglev as i32;
        cluster.lb_config = Some(cluster::LbConfig::MaglevLbConfig(cluster::MaglevLbConfig {
            table_size: table_size.map(|value| UInt64Value { value }),
        }));
        return;
    }
    cluster.lb_policy = cluster::LbPolicy::RingHash as i32;
    if let Some(size) = hash.minimum_ring_size {
        cluster.lb_config = Some(cluster::LbConfig::RingHashLbConfig(cluster::RingHashLbConfig {
            minimum_ring_size: Some(UInt64Value { value: size }),
            ..Default::default()
        }));
    }
}
