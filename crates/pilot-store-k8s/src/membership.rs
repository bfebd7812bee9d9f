//! [`KubeMembership`]: several pilot-discovery replicas on one Kubernetes
//! API server ([`Membership`] on `coordination.k8s.io/v1` Leases and
//! ConfigMaps).
//!
//! In the membership's namespace (the store's, or the kubeconfig's):
//!
//! - **One Lease per replica**, `pilot-replica-<name>` (the replica's name
//!   made a DNS-1123 label, with a hash of the original so two names never
//!   share a Lease), labelled [`ROLE_LABEL`]`=`[`ROLE_REPLICA`] and
//!   `app.kubernetes.io/managed-by=pilot-discovery`: `holderIdentity` is the
//!   replica's name, `leaseDurationSeconds` its ttl (whole seconds, at least
//!   1), `renewTime` the last publish. A replica is live while `renewTime +
//!   leaseDurationSeconds` is in the future (by the reader's clock: the
//!   replicas' clocks are assumed synchronised within a small part of the
//!   ttl, as Kubernetes' node heartbeats assume).
//! - **One ConfigMap per replica**, of the same name and labels, holding
//!   the [`ReplicaRecord`] as JSON under [`RECORD_KEY`]. Written before the
//!   Lease is renewed, so a live Lease's record is never older than its
//!   previous renewal. A ConfigMap holds at most 1 MiB: a record of ~
//!   [`RECORD_BYTES_PER_PROXY`] bytes per proxy (4 xDS types, 6 kinds)
//!   fits about 1,700 proxies per replica; a bigger record is refused by
//!   `publish` with an error saying so (run more replicas). A Lease's
//!   annotations are capped at 256 KiB, hence the ConfigMap.
//! - **The election**: the Lease [`WRITER_LEASE`], with client-go's
//!   leader-election semantics: a campaigner acquires it when it is
//!   missing, unheld (`holderIdentity` empty, as a resigned holder leaves
//!   it) or expired (`renewTime + leaseDurationSeconds` past), counting
//!   `leaseTransitions`; the holder renews it by updating `renewTime`.
//!   Every write is a create (409 when another won) or a replace carrying
//!   the resourceVersion read (409 when anyone wrote since), so two
//!   replicas never both win.
//!
//! `members` lists the replica Leases and ConfigMaps (two requests,
//! filtered by label on the client side) and joins them; expired replicas
//! are ignored and their Lease and ConfigMap deleted (anyone may; the
//! delete carries the resourceVersion read, so a replica that came back
//! meanwhile keeps its objects).
//!
//! RBAC: `get`, `list`, `create`, `update`, `patch`, `delete` on `leases`
//! (coordination.k8s.io) and `configmaps` in that namespace.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use pilot_model::{Membership, ReplicaRecord, StoreError};

use crate::error::unavailable;

/// The label that marks pilot's replica Leases and ConfigMaps.
pub const ROLE_LABEL: &str = "pilot.istio.io/role";
/// [`ROLE_LABEL`]'s value on a replica's Lease and ConfigMap.
pub const ROLE_REPLICA: &str = "replica";
/// The Lease of the status-writer election.
pub const WRITER_LEASE: &str = "pilot-status-writer";
/// The key of a replica's ConfigMap that holds its record (JSON).
pub const RECORD_KEY: &str = "record.json";
/// About how many bytes of JSON one proxy adds to a record (measured in
/// this module's tests with 4 xDS types and 6 kinds).
pub const RECORD_BYTES_PER_PROXY: usize = 600;
/// The most a record may take: a ConfigMap is capped at 1 MiB, minus room
/// for its metadata.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024 - 16 * 1024;

const FIELD_MANAGER: &str = "pilot-discovery";
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "pilot-discovery");

/// The replicas of pilot-discovery sharing one Kubernetes API server (see
/// the module doc for where everything lives).
pub struct KubeMembership {
    replica: String,
    object: String,
    ttl: Duration,
    namespace: String,
    leases: Api<Lease>,
    configmaps: Api<ConfigMap>,
}

impl std::fmt::Debug for KubeMembership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeMembership")
            .field("replica", &self.replica)
            .field("namespace", &self.namespace)
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl KubeMembership {
    /// The membership of `replica` in `namespace`, its records living `ttl`
    /// (rounded up to whole seconds, at least one) past each renewal.
    pub fn new(
        client: Client,
        namespace: impl Into<String>,
        replica: impl Into<String>,
        ttl: Duration,
    ) -> Self {
        let namespace = namespace.into();
        let replica = replica.into();
        let seconds = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        KubeMembership {
            object: object_name(&replica),
            replica,
            ttl: Duration::from_secs(seconds.max(1)),
            leases: Api::namespaced(client.clone(), &namespace),
            configmaps: Api::namespaced(client, &namespace),
            namespace,
        }
    }

    /// The namespace of the Leases and ConfigMaps.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The name of this replica's Lease and ConfigMap.
    pub fn object_name(&self) -> &str {
        &self.object
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.ttl.as_secs()).unwrap_or(i32::MAX)
    }

    fn action(&self, what: &str, name: &str) -> String {
        format!("{what} {}/{name}", self.namespace)
    }

    /// Acquires the writer Lease when it is missing, unheld or expired.
    async fn acquire(&self, current: Option<Lease>) -> Result<bool, StoreError> {
        let now = micro_now();
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: meta(WRITER_LEASE, "status-writer"),
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.replica.clone()),
                    lease_duration_seconds: Some(self.duration_seconds()),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.leases.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(error) if status_code(&error) == Some(409) => Ok(false),
                Err(error) => Err(unavailable(self.action("creating Lease", WRITER_LEASE), error)),
            };
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder == self.replica {
            spec.renew_time = Some(now);
            spec.lease_duration_seconds = Some(self.duration_seconds());
        } else if holder.is_empty() || !live(spec, SystemTime::now()) {
            spec.holder_identity = Some(self.replica.clone());
            spec.lease_duration_seconds = Some(self.duration_seconds());
            spec.acquire_time = Some(now.clone());
            spec.renew_time = Some(now);
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        } else {
            return Ok(false);
        }
        // The replace carries the resourceVersion read: 409 if anyone
        // (another campaigner) wrote since.
        match self
            .leases
            .replace(WRITER_LEASE, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(error) if matches!(status_code(&error), Some(409 | 404)) => Ok(false),
            Err(error) => Err(unavailable(self.action("updating Lease", WRITER_LEASE), error)),
        }
    }

    async fn get_lease(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        self.leases
            .get_opt(name)
            .await
            .map_err(|error| unavailable(self.action("reading Lease", name), error))
    }

    /// Deletes an expired replica's Lease (only at the version read) and
    /// its ConfigMap; failures are logged, someone else will retry.
    async fn collect(&self, lease: &Lease) {
        let Some(name) = lease.metadata.name.as_deref() else {
            return;
        };
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: lease.metadata.resource_version.clone(),
                uid: None,
            }),
            ..DeleteParams::default()
        };
        match self.leases.delete(name, &params).await {
            Ok(_) => {
                if let Err(error) = self.configmaps.delete(name, &DeleteParams::default()).await
                    && status_code(&error) != Some(404)
                {
                    tracing::debug!(%error, name, "deleting an expired replica's ConfigMap");
                }
            }
            Err(error) => tracing::debug!(%error, name, "deleting an expired replica's Lease"),
        }
    }
}

#[async_trait]
impl Membership for KubeMembership {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn ttl(&self) -> Duration {
        self.ttl
    }

    async fn publish(&self, record: &ReplicaRecord) -> Result<(), StoreError> {
        if record.replica != self.replica {
            return Err(StoreError::unavailable(format!(
                "replica {:?} cannot publish the record of replica {:?}",
                self.replica, record.replica
            )));
        }
        let json = serde_json::to_string(record).map_err(StoreError::unavailable)?;
        if json.len() > MAX_RECORD_BYTES {
            return Err(StoreError::unavailable(format!(
                "the record of replica {:?} ({} proxies) takes {} bytes, more than a ConfigMap holds \
                 ({MAX_RECORD_BYTES} bytes for the record, about {} proxies): run more replicas",
                self.replica,
                record.proxies.len(),
                json.len(),
                MAX_RECORD_BYTES / RECORD_BYTES_PER_PROXY
            )));
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let configmap = ConfigMap {
            metadata: meta(&self.object, ROLE_REPLICA),
            data: Some([(RECORD_KEY.to_string(), json)].into_iter().collect()),
            ..ConfigMap::default()
        };
        self.configmaps
            .patch(&self.object, &params, &Patch::Apply(&configmap))
            .await
            .map_err(|error| unavailable(self.action("writing ConfigMap", &self.object), error))?;
        let now = micro_now();
        let lease = Lease {
            metadata: meta(&self.object, ROLE_REPLICA),
            spec: Some(LeaseSpec {
                holder_identity: Some(self.replica.clone()),
                lease_duration_seconds: Some(self.duration_seconds()),
                renew_time: Some(now),
                ..LeaseSpec::default()
            }),
        };
        self.leases
            .patch(&self.object, &params, &Patch::Apply(&lease))
            .await
            .map_err(|error| unavailable(self.action("renewing Lease", &self.object), error))?;
        Ok(())
    }

    async fn members(&self) -> Result<Vec<ReplicaRecord>, StoreError> {
        let leases = self
            .leases
            .list(&ListParams::default())
            .await
            .map_err(|error| unavailable(self.action("listing Leases in", ""), error))?;
        let configmaps = self
            .configmaps
            .list(&ListParams::default())
            .await
            .map_err(|error| unavailable(self.action("listing ConfigMaps in", ""), error))?;
        let mut records: BTreeMap<String, &ConfigMap> = BTreeMap::new();
        for configmap in configmaps.items.iter().filter(|c| is_replica(&c.metadata)) {
            if let Some(name) = &configmap.metadata.name {
                records.insert(name.clone(), configmap);
            }
        }
        let now = SystemTime::now();
        let mut members = Vec::new();
        for lease in leases.items.iter().filter(|l| is_replica(&l.metadata)) {
            let Some(name) = lease.metadata.name.as_deref() else {
                continue;
            };
            let Some(spec) = &lease.spec else { continue };
            if !live(spec, now) {
                // Expired: ignored, and cleaned up once it is well past
                // its ttl (a replica renewing late keeps its objects).
                if !live_at(spec, now.checked_sub(self.ttl).unwrap_or(now)) {
                    self.collect(lease).await;
                }
                continue;
            }
            // A live Lease whose ConfigMap is not there yet (first publish
            // in flight) has no record to show.
            let Some(json) = records
                .get(name)
                .and_then(|c| c.data.as_ref())
                .and_then(|d| d.get(RECORD_KEY))
            else {
                continue;
            };
            let record: ReplicaRecord = serde_json::from_str(json).map_err(|error| {
                StoreError::unavailable(format!(
                    "ConfigMap {}/{name} key {RECORD_KEY}: not a replica record: {error}",
                    self.namespace
                ))
            })?;
            members.push(record);
        }
        members.sort_by(|a, b| a.replica.cmp(&b.replica));
        Ok(members)
    }

    async fn campaign(&self) -> Result<bool, StoreError> {
        let current = self.get_lease(WRITER_LEASE).await?;
        self.acquire(current).await
    }

    async fn resign(&self) -> Result<(), StoreError> {
        if let Some(mut lease) = self.get_lease(WRITER_LEASE).await?
            && let Some(spec) = lease.spec.as_mut()
            && spec.holder_identity.as_deref() == Some(self.replica.as_str())
        {
            // As client-go's ReleaseOnCancel: unheld, so the next
            // campaigner takes it at once. A 409 means it is no longer
            // ours anyway.
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(micro_now());
            if let Err(error) = self
                .leases
                .replace(WRITER_LEASE, &PostParams::default(), &lease)
                .await
                && !matches!(status_code(&error), Some(409 | 404))
            {
                return Err(unavailable(self.action("releasing Lease", WRITER_LEASE), error));
            }
        }
        for (what, result) in [
            (
                "deleting Lease",
                self.leases
                    .delete(&self.object, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            ),
            (
                "deleting ConfigMap",
                self.configmaps
                    .delete(&self.object, &DeleteParams::default())
                    .await
                    .map(|_| ()),
            ),
        ] {
            if let Err(error) = result
                && status_code(&error) != Some(404)
            {
                return Err(unavailable(self.action(what, &self.object), error));
            }
        }
        Ok(())
    }
}

/// `pilot-replica-<name as a DNS label>-<hash>`: at most 63 characters, the
/// same for the same replica name, different for different ones.
pub fn object_name(replica: &str) -> String {
    let mut label: String = replica
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    label = label.trim_matches('-').to_string();
    // FNV-1a: stable across processes and versions (unlike std's hasher).
    let hash = replica.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    if label.is_empty() {
        format!("pilot-replica-{:08x}", hash as u32)
    } else {
        format!("pilot-replica-{label}-{:08x}", hash as u32)
    }
}

fn meta(name: &str, role: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        labels: Some(
            [
                (ROLE_LABEL.to_string(), role.to_string()),
                (MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string()),
            ]
            .into_iter()
            .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn is_replica(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .and_then(|labels| labels.get(ROLE_LABEL))
        .is_some_and(|role| role == ROLE_REPLICA)
}

/// True while `renewTime + leaseDurationSeconds` is after `now`.
fn live(spec: &LeaseSpec, now: SystemTime) -> bool {
    live_at(spec, now)
}

fn live_at(spec: &LeaseSpec, at: SystemTime) -> bool {
    let (Some(renewed), Some(seconds)) = (&spec.renew_time, spec.lease_duration_seconds) else {
        return false;
    };
    let renewed = SystemTime::from(renewed.0);
    let duration = Duration::from_secs(u64::try_from(seconds).unwrap_or(0));
    renewed + duration > at
}

fn micro_now() -> MicroTime {
    MicroTime(Timestamp::try_from(SystemTime::now()).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_dns_labels_and_distinct() {
        let a = object_name("pilot-0.example:8080");
        let b = object_name("pilot-0.example:8081");
        assert_ne!(a, b);
        for name in [&a, &b, &object_name("::"), &object_name(&"X".repeat(300))] {
            assert!(name.len() <= 63, "{name}");
            assert!(
                name.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-'),
                "{name}"
            );
            assert!(!name.ends_with('-'), "{name}");
        }
        assert_eq!(object_name("pilot-a"), object_name("pilot-a"));
    }

    #[test]
    fn a_proxy_costs_about_record_bytes_per_proxy() {
        use pilot_model::{ConnectedProxy, ProxyDistribution, TypeRecord};
        let kinds = [
            "RouteRule",
            "DestinationPolicy",
            "EgressRule",
            "Gateway",
            "VirtualService",
            "ServiceEntry",
        ];
        let proxy = |i: usize| {
            let node_id = format!(
                "sidecar~10.1.{}.{}~productpage-v1-7f9c8d6b5-x{i:04}.bookinfo~bookinfo.svc.cluster.local",
                i / 256,
                i % 256
            );
            ConnectedProxy {
                node_id: node_id.clone(),
                node_name: None,
                incremental: false,
                types: ["CDS", "EDS", "LDS", "RDS"]
                    .into_iter()
                    .map(|t| {
                        (
                            t.to_string(),
                            TypeRecord {
                                sent: Some("12345".into()),
                                acked: Some("12345".into()),
                                nack: None,
                            },
                        )
                    })
                    .collect(),
                distribution: ProxyDistribution {
                    node_id,
                    acked: Some(kinds.iter().map(|k| (k.to_string(), 1_234_567)).collect()),
                    nack: None,
                    withheld: Vec::new(),
                },
                process: None,
            }
        };
        let record = ReplicaRecord {
            replica: "pilot-0".into(),
            rest_address: Some("10.0.0.1:8080".into()),
            xds_address: Some("10.0.0.1:15010".into()),
            proxies: (0..1000).map(proxy).collect(),
            writer: false,
            published: SystemTime::UNIX_EPOCH,
        };
        let per_proxy = serde_json::to_string(&record).unwrap().len() / 1000;
        assert!(
            per_proxy <= RECORD_BYTES_PER_PROXY && per_proxy * 10 >= RECORD_BYTES_PER_PROXY * 8,
            "a proxy takes {per_proxy} bytes: update RECORD_BYTES_PER_PROXY and the module doc"
        );
        assert_eq!(
            MAX_RECORD_BYTES / RECORD_BYTES_PER_PROXY / 100,
            17,
            "the module doc says ~1,700"
        );
    }
}
