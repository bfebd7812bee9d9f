//! Several pilot-discovery replicas on one store: the contract a backend
//! implements so the replicas see each other.
//!
//! Every replica serves its own proxies and keeps their ACK/NACK records in
//! memory. To give operators one view (`pilotctl proxy-status` through any
//! replica lists every proxy) and objects one status (counted over every
//! proxy of every replica), each replica **publishes** a [`ReplicaRecord`]
//! (its name, addresses and its proxies' records) in the store, under a
//! lease of its own: a replica that dies (kill -9, lost network) drops out
//! within [`Membership::ttl`] without anyone deleting its record.
//!
//! One replica at a time is **elected** ([`Membership::campaign`]) to write
//! objects' distribution status: it sums the records of every live replica
//! and writes each changed object once. One writer rather than each replica
//! writing its share, because an object's status is one value (N/M over all
//! proxies): shares written by several replicas would race on the same
//! object and need a read-modify-write per replica per change, and a dead
//! replica's share would stay in the status until someone cleaned it up.
//! With one writer, a dead replica's proxies leave the sum when its record
//! expires, and a dead writer is replaced when its election lease expires.
//!
//! Backends: the in-memory store has one replica ([`LocalMembership`]); etcd
//! keeps records under the replica's etcd lease; Kubernetes keeps them with a
//! `coordination.k8s.io/v1` Lease per replica.
//!
//! During a rolling upgrade, replicas of two releases read each other's
//! records: a reader ignores fields it does not know, and a field added
//! after a record's first release is optional (`tests/records_across_versions.rs`
//! lists each record's first-release fields and checks both).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{ProxyDistribution, StoreError};

/// What one replica publishes about itself and its connected proxies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRecord {
    /// The replica's name (`--replica-name`, by default the host name and
    /// the REST port), unique among the replicas of one store.
    pub replica: String,
    /// Where the replica serves its REST API (`host:port`), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rest_address: Option<String>,
    /// Where the replica serves ADS (`host:port`), if it says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xds_address: Option<String>,
    /// Its connected proxies, one record each, ordered by node id.
    pub proxies: Vec<ConnectedProxy>,
    /// Whether the replica held the status-writer election when it took
    /// this record (shown by proxy-status; the election itself is
    /// [`Membership::campaign`]'s).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub writer: bool,
    /// When the replica took this record (RFC 3339).
    #[serde(
        serialize_with = "crate::config::serialize_time",
        deserialize_with = "crate::config::deserialize_time"
    )]
    pub published: SystemTime,
}

/// One connected proxy as its replica reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectedProxy {
    /// The proxy's node id.
    pub node_id: String,
    /// The node it runs on, when it said (a ztunnel's `NODE_NAME`: the
    /// node whose workloads it serves).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// True for an incremental (delta) stream.
    #[serde(default)]
    pub incremental: bool,
    /// Per xDS type (`CDS`, `EDS`, `LDS`, `RDS`): what the replica sent and
    /// what the proxy answered. Versions are the replica's own push numbers.
    #[serde(default)]
    pub types: BTreeMap<String, TypeRecord>,
    /// What the proxy has, in store revisions (comparable across replicas):
    /// what objects' status is counted from.
    pub distribution: ProxyDistribution,
    /// What the proxy's pilot-agent reported to this replica of Envoy's
    /// process life, if it reported here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessReport>,
}

/// What a pilot-agent reported of its Envoy's process life
/// (`POST /v1/proxy-events`), as a replica keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReport {
    /// Restarts after failures (the agent's count).
    pub restarts: u64,
    /// The newest epoch started.
    pub epoch: u32,
    /// The last unexpected exit: `signal 9 (SIGKILL)`, `exit code 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit: Option<String>,
    /// The agent's message with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_exit_message: Option<String>,
    /// The last report's kind, as posted (`started`, `exited`, ...).
    pub last_event: String,
    /// When the last report was made (agent's clock, ms since the epoch).
    pub time_ms: u64,
}

/// One xDS type of one proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeRecord {
    /// The version last sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent: Option<String>,
    /// The version last ACKed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acked: Option<String>,
    /// The last rejection: the version and the proxy's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nack: Option<TypeNack>,
}

/// A rejected version of one xDS type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeNack {
    /// The version rejected.
    pub version: String,
    /// The proxy's error message.
    pub message: String,
}

/// The replicas of one control plane sharing a store: each publishes its
/// record under its own lease, and one at a time is elected status writer.
///
/// Object safe; pilot-discovery holds an `Arc<dyn Membership>`.
#[async_trait]
pub trait Membership: Send + Sync {
    /// This replica's name.
    fn replica(&self) -> &str;

    /// How long a record (and the writer's election) outlives the last
    /// renewal of its replica's lease.
    fn ttl(&self) -> Duration;

    /// Replaces this replica's record. It lives as long as the replica's
    /// lease: renewed by further calls (a replica publishes at least every
    /// `ttl / 3`), gone within [`ttl`](Self::ttl) after the replica stops.
    async fn publish(&self, record: &ReplicaRecord) -> Result<(), StoreError>;

    /// The records of every live replica (this one's included, once
    /// published), ordered by replica name.
    async fn members(&self) -> Result<Vec<ReplicaRecord>, StoreError>;

    /// Becomes, or stays, the status writer if no other live replica is:
    /// true while this replica holds the election. Called periodically (at
    /// least every `ttl / 3`); a writer that stops calling loses it within
    /// `ttl`, and at most one replica holds it at a time.
    async fn campaign(&self) -> Result<bool, StoreError>;

    /// Gives up the election and withdraws this replica's record (a clean
    /// shutdown), so others need not wait for the lease to expire.
    async fn resign(&self) -> Result<(), StoreError>;
}

/// The membership of a store only one process uses (the in-memory store,
/// with or without `--data-dir`): one replica, always the writer.
#[derive(Debug)]
pub struct LocalMembership {
    replica: String,
    record: Mutex<Option<ReplicaRecord>>,
}

impl LocalMembership {
    /// A membership of one replica named `replica`.
    pub fn new(replica: impl Into<String>) -> Self {
        LocalMembership {
            replica: replica.into(),
            record: Mutex::new(None),
        }
    }
}

#[async_trait]
impl Membership for LocalMembership {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn ttl(&self) -> Duration {
        // Nothing expires: the record lives as long as the process.
        Duration::MAX
    }

    async fn publish(&self, record: &ReplicaRecord) -> Result<(), StoreError> {
        *self.record.lock().unwrap_or_else(|p| p.into_inner()) = Some(record.clone());
        Ok(())
    }

    async fn members(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        Ok(self
            .record
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect())
    }

    async fn campaign(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn resign(&self) -> Result<(), StoreError> {
        self.record.lock().unwrap_or_else(|p| p.into_inner()).take();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(replica: &str) -> ReplicaRecord {
        ReplicaRecord {
            replica: replica.into(),
            rest_address: Some("127.0.0.1:8080".into()),
            xds_address: None,
            proxies: vec![ConnectedProxy {
                node_id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
                node_name: None,
                incremental: false,
                types: [(
                    "CDS".to_string(),
                    TypeRecord {
                        sent: Some("3".into()),
                        acked: Some("2".into()),
                        nack: Some(TypeNack {
                            version: "3".into(),
                            message: "bad regex".into(),
                        }),
                    },
                )]
                .into_iter()
                .collect(),
                distribution: ProxyDistribution {
                    node_id: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
                    acked: Some([("RouteRule".to_string(), 7)].into_iter().collect()),
                    nack: None,
                    withheld: Vec::new(),
                },
                process: Some(ProcessReport {
                    restarts: 1,
                    epoch: 1,
                    last_exit: Some("signal 9 (SIGKILL)".into()),
                    last_exit_message: None,
                    last_event: "started".into(),
                    time_ms: 1_700_000_000_000,
                }),
            }],
            writer: false,
            published: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    #[test]
    fn a_record_survives_json() {
        let record = record("pilot-1");
        let text = serde_json::to_string(&record).unwrap();
        assert!(text.contains("\"restAddress\":\"127.0.0.1:8080\""), "{text}");
        assert!(text.contains("\"published\":\"2023-11-14T22:13:20Z\""), "{text}");
        let back: ReplicaRecord = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
    }

    #[tokio::test]
    async fn one_local_replica_is_always_the_writer() {
        let local = LocalMembership::new("pilot-1");
        assert!(local.members().await.unwrap().is_empty());
        local.publish(&record("pilot-1")).await.unwrap();
        assert_eq!(local.members().await.unwrap(), vec![record("pilot-1")]);
        assert!(local.campaign().await.unwrap());
        local.resign().await.unwrap();
        assert!(local.members().await.unwrap().is_empty());
    }
}
