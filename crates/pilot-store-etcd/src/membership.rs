//! Several pilot-discovery replicas on one etcd: each replica's record and
//! the status writer's election ([`pilot_model::Membership`]).
//!
//! ```text
//! <prefix>/_replicas/<replica>          the replica's ReplicaRecord (JSON),
//!                                       under the replica's lease
//! <prefix>/_election/status-writer      the elected replica's name, under
//!                                       the same lease
//! ```
//!
//! Both keys live under one lease per replica (TTL `--replica-ttl`),
//! renewed every third of it: a replica killed with `kill -9` loses its
//! record and, if it was the writer, the election within the TTL, and
//! nobody has to delete anything. The names start with `_`, which no API
//! group does, so they are never taken for configuration objects: the
//! store reads and watches only `<prefix>/<group>/<kind>/` ranges.
//!
//! One record is one etcd request, and etcd refuses requests over
//! `--max-request-bytes` (1.5 MiB by default). A proxy's record is about
//! 450 bytes of JSON (see the test `a_record_of_a_typical_proxy_is_small`),
//! so one replica can publish about 3,000 proxies; beyond
//! [`MAX_RECORD_BYTES`] publishing fails with an error saying so.

use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{Client, Compare, CompareOp, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse};
use pilot_model::{Membership, ReplicaRecord, StoreError};

use crate::EtcdConfigStore;
use crate::error::unavailable_etcd;
use crate::status_lease::StatusLease;

/// The largest record published (etcd's default request limit, 1.5 MiB,
/// less room for the key and the request's framing).
pub const MAX_RECORD_BYTES: usize = 1_500_000;

/// The replicas of one control plane on one etcd: records under
/// `<prefix>/_replicas/`, the status writer at
/// `<prefix>/_election/status-writer`.
pub struct EtcdMembership {
    client: Client,
    replica: String,
    ttl: Duration,
    replicas_prefix: String,
    record_key: String,
    election_key: String,
    lease: StatusLease,
}

impl EtcdMembership {
    /// The membership of replica `replica` on `store`'s etcd and prefix,
    /// with records living `ttl` (whole seconds, at least 1) after the last
    /// renewal.
    pub fn new(store: &EtcdConfigStore, replica: impl Into<String>, ttl: Duration) -> Self {
        let prefix = store.layout().prefix().to_string();
        Self::with_client(store.client(), &prefix, replica, ttl)
    }

    /// The same on an existing client and prefix.
    pub fn with_client(client: Client, prefix: &str, replica: impl Into<String>, ttl: Duration) -> Self {
        let prefix = prefix.trim_end_matches('/');
        let replica = replica.into();
        let seconds = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        EtcdMembership {
            lease: StatusLease::with_ttl(client.clone(), seconds),
            client,
            ttl: Duration::from_secs(seconds.unsigned_abs()),
            replicas_prefix: format!("{prefix}/_replicas/"),
            record_key: format!("{prefix}/_replicas/{replica}"),
            election_key: format!("{prefix}/_election/status-writer"),
            replica,
        }
    }

    /// Runs `txn` under lease `lease`; a lease etcd no longer knows is
    /// forgotten, so the next call takes a new one.
    async fn txn(&self, lease: i64, txn: Txn) -> Result<etcd_client::TxnResponse, StoreError> {
        let mut client = self.client.clone();
        match client.txn(txn).await {
            Ok(response) => Ok(response),
            Err(error) => {
                if error.to_string().contains("lease not found") {
                    self.lease.lost(lease);
                }
                Err(unavailable_etcd(error))
            }
        }
    }
}

#[async_trait]
impl Membership for EtcdMembership {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn publish(&self, record: &ReplicaRecord) -> Result<(), StoreError> {
        let value = serde_json::to_vec(record)
            .map_err(|e| StoreError::unavailable(format!("cannot encode the replica record: {e}")))?;
        if value.len() > MAX_RECORD_BYTES {
            return Err(StoreError::unavailable(format!(
                "replica {}'s record of {} proxies is {} bytes, over etcd's request limit \
                 ({MAX_RECORD_BYTES} bytes): spread the proxies over more replicas",
                self.replica,
                record.proxies.len(),
                value.len()
            )));
        }
        let lease = self.lease.id().await?;
        let txn = Txn::new().and_then([TxnOp::put(
            self.record_key.clone(),
            value,
            Some(PutOptions::new().with_lease(lease)),
        )]);
        self.txn(lease, txn).await.map(|_| ())
    }

    async fn members(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let mut client = self.client.clone();
        let response = client
            .get(
                self.replicas_prefix.clone(),
                Some(GetOptions::new().with_prefix()),
            )
            .await
            .map_err(unavailable_etcd)?;
        let mut records = Vec::new();
        for kv in response.kvs() {
            match serde_json::from_slice::<ReplicaRecord>(kv.value()) {
                Ok(record) => records.push(record),
                // Another version's record, or a hand-written key: named in
                // the log, left out of the sum.
                Err(error) => tracing::warn!(
                    key = %String::from_utf8_lossy(kv.key()),
                    %error,
                    "a replica record that is not a ReplicaRecord; ignored"
                ),
            }
        }
        records.sort_by(|a, b| a.replica.cmp(&b.replica));
        Ok(records)
    }

    async fn campaign(&self) -> Result<bool, StoreError> {
        let lease = self.lease.id().await?;
        // Create the key if nobody holds it; otherwise read who does.
        let txn = Txn::new()
            .when([Compare::version(self.election_key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                self.election_key.clone(),
                self.replica.clone(),
                Some(PutOptions::new().with_lease(lease)),
            )])
            .or_else([TxnOp::get(self.election_key.clone(), None)]);
        let response = self.txn(lease, txn).await?;
        if response.succeeded() {
            return Ok(true);
        }
        // Ours only if under this lease: a previous process of the same
        // name holds it until its own lease expires.
        Ok(response.op_responses().iter().any(|op| match op {
            TxnOpResponse::Get(get) => get
                .kvs()
                .iter()
                .any(|kv| kv.lease() == lease && kv.value() == self.replica.as_bytes()),
            _ => false,
        }))
    }

    async fn resign(&self) -> Result<(), StoreError> {
        // Revoking the lease deletes the record and, if ours, the election.
        self.lease.revoke().await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::SystemTime;

    use pilot_model::{ConnectedProxy, ProxyDistribution, TypeRecord};

    use super::*;

    /// A proxy as a replica reports it after a few pushes: four types
    /// ACKed, revisions of the pushed kinds.
    fn typical_proxy(i: usize) -> ConnectedProxy {
        let node_id = format!(
            "sidecar~10.0.{}.{}~reviews-v1-7d4f9c-{i:05}.default~default.svc.cluster.local",
            i / 250,
            i % 250
        );
        let types: BTreeMap<String, TypeRecord> = ["CDS", "EDS", "LDS", "RDS"]
            .into_iter()
            .map(|t| {
                (
                    t.to_string(),
                    TypeRecord {
                        sent: Some("1234".into()),
                        acked: Some("1234".into()),
                        nack: None,
                    },
                )
            })
            .collect();
        let acked = ["RouteRule", "DestinationPolicy", "EgressRule", "ServiceEntry"]
            .into_iter()
            .map(|k| (k.to_string(), 1_234_567u64))
            .collect();
        ConnectedProxy {
            node_id: node_id.clone(),
            node_name: None,
            incremental: false,
            types,
            distribution: ProxyDistribution {
                node_id,
                acked: Some(acked),
                nack: None,
                withheld: Vec::new(),
            },
            process: None,
        }
    }

    #[test]
    fn a_record_of_a_typical_proxy_is_small() {
        let proxies: Vec<ConnectedProxy> = (0..1000).map(typical_proxy).collect();
        let record = ReplicaRecord {
            replica: "pilot-0-8080".into(),
            rest_address: Some("10.0.0.1:8080".into()),
            xds_address: Some("10.0.0.1:15010".into()),
            proxies,
            writer: false,
            published: SystemTime::now(),
        };
        let bytes = serde_json::to_vec(&record).unwrap().len();
        let per_proxy = bytes / 1000;
        // The module doc says about 450 bytes, so about 3,000 proxies.
        assert!((300..600).contains(&per_proxy), "{per_proxy} bytes per proxy");
        assert!(
            MAX_RECORD_BYTES / per_proxy >= 2_500,
            "{per_proxy} bytes per proxy"
        );
    }
}
