//! Several pilot-discovery replicas on one store: this replica's
//! record, the others' records, and the status-writer election.
//!
//! A task ([`run`]) publishes this replica's [`ReplicaRecord`] (its
//! proxies' xDS state and distribution, its addresses) through the
//! store's [`Membership`]: every third of `--replica-ttl`, and when its
//! proxies change (checked every [`CHANGE_POLL`], so a burst of ACKs is
//! one publish). Every [`REFRESH`] it reads every live replica's record
//! and campaigns for the status-writer election.
//!
//! [`Replicas`] is then
//! - the status writer's [`ProxyRecords`] source: this replica's proxies
//!   (live, from memory) and every other live replica's, a proxy listed by
//!   two replicas (during a reconnect) counted once, the newest record
//!   winning; its rounds run only while this replica holds the election;
//! - what `/debug/proxy-status` lists beside this replica's own proxies;
//! - `/metrics`: `pilot_replicas` (live replicas seen), `pilot_status_writer`
//!   (1 on the elected replica), `pilot_replica_failures` (publish, read,
//!   campaign failures, by operation).
//!
//! Failures are logged and counted; they never touch `/readyz` (a replica
//! that cannot reach the store already says so there).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use pilot_ads::XdsServer;
use pilot_model::{ConnectedProxy, Membership, ProxyDistribution, ReplicaRecord, TypeNack, TypeRecord};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::sync::watch;

use super::proxy_events::ProxyEvents;
use super::status_writer::ProxyRecords;

/// How often this replica's proxies are compared with the last record
/// published (a change is published at the next check).
pub(crate) const CHANGE_POLL: Duration = Duration::from_millis(200);

/// How often the other replicas' records are read and the election is
/// campaigned for (more often if the ttl is short).
pub(crate) const REFRESH: Duration = Duration::from_secs(1);

/// This replica among the replicas of its store.
pub(crate) struct Replicas {
    membership: Arc<dyn Membership>,
    xds: XdsServer,
    /// The agents' reports posted to this replica, published with its
    /// proxies.
    events: Arc<ProxyEvents>,
    rest_address: String,
    xds_address: String,
    /// The other live replicas' records, as last read.
    others: Mutex<Vec<ReplicaRecord>>,
    writer: AtomicBool,
    live: AtomicU64,
    publish_failures: AtomicU64,
    read_failures: AtomicU64,
    campaign_failures: AtomicU64,
}

impl std::fmt::Debug for Replicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicas")
            .field("replica", &self.membership.replica())
            .finish_non_exhaustive()
    }
}

/// The default replica name: the host name and the REST port.
pub(crate) fn default_name(rest_port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|text| text.trim().to_string())
        .filter(|host| !host.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "pilot".to_string());
    format!("{host}-{rest_port}")
}

impl Replicas {
    /// This replica (`membership`'s name) serving `xds`, reachable at
    /// `rest_address` and `xds_address`.
    pub(crate) fn new(
        membership: Arc<dyn Membership>,
        xds: XdsServer,
        events: Arc<ProxyEvents>,
        rest_address: String,
        xds_address: String,
    ) -> Self {
        Replicas {
            membership,
            xds,
            events,
            rest_address,
            xds_address,
            others: Mutex::new(Vec::new()),
            writer: AtomicBool::new(false),
            live: AtomicU64::new(0),
            publish_failures: AtomicU64::new(0),
            read_failures: AtomicU64::new(0),
            campaign_failures: AtomicU64::new(0),
        }
    }

    /// This replica's name.
    pub(crate) fn name(&self) -> &str {
        self.membership.replica()
    }

    /// True while this replica holds the status-writer election.
    pub(crate) fn is_writer(&self) -> bool {
        self.writer.load(Ordering::Relaxed)
    }

    /// The other live replicas' records, as last read (ordered by name).
    pub(crate) fn others(&self) -> Vec<ReplicaRecord> {
        self.others.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// This replica's record now: its proxies from the ADS server's memory.
    pub(crate) fn own_record(&self) -> ReplicaRecord {
        ReplicaRecord {
            replica: self.name().to_string(),
            rest_address: Some(self.rest_address.clone()),
            xds_address: Some(self.xds_address.clone()),
            proxies: self.own_proxies(),
            writer: self.is_writer(),
            published: SystemTime::now(),
        }
    }

    fn own_proxies(&self) -> Vec<ConnectedProxy> {
        let mut distribution: BTreeMap<String, ProxyDistribution> = self
            .xds
            .distribution()
            .into_iter()
            .map(|d| (d.node_id.clone(), d))
            .collect();
        let events = self.events.all();
        let mut proxies: Vec<ConnectedProxy> = self
            .xds
            .status()
            .into_iter()
            .filter_map(|proxy| {
                // A proxy that connected between the two reads is in the
                // next record.
                let distribution = distribution.remove(&proxy.node_id)?;
                Some(ConnectedProxy {
                    types: proxy
                        .types
                        .iter()
                        .map(|(short, status)| {
                            (
                                short.to_string(),
                                TypeRecord {
                                    sent: status.sent.clone(),
                                    acked: status.acked.clone(),
                                    nack: status.nack.as_ref().map(|n| TypeNack {
                                        version: n.version.clone(),
                                        message: n.message.clone(),
                                    }),
                                },
                            )
                        })
                        .collect(),
                    process: events.get(&proxy.node_id).map(|e| e.report()),
                    node_id: proxy.node_id,
                    incremental: proxy.incremental,
                    distribution,
                })
            })
            .collect();
        proxies.sort_by(|a, b| a.node_id.cmp(&b.node_id));
        proxies
    }

    async fn publish(&self, proxies: Vec<ConnectedProxy>) -> bool {
        let mut record = self.own_record();
        record.proxies = proxies;
        match self.membership.publish(&record).await {
            Ok(()) => true,
            Err(error) => {
                self.publish_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(replica = self.name(), %error, "could not publish this replica's record; retrying");
                false
            }
        }
    }

    async fn refresh(&self) {
        match self.membership.members().await {
            Ok(members) => {
                self.live.store(members.len() as u64, Ordering::Relaxed);
                let others: Vec<ReplicaRecord> =
                    members.into_iter().filter(|r| r.replica != self.name()).collect();
                *self.others.lock().unwrap_or_else(|p| p.into_inner()) = others;
            }
            Err(error) => {
                self.read_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "could not read the replicas' records; keeping the last ones");
            }
        }
        let writer = match self.membership.campaign().await {
            Ok(writer) => writer,
            Err(error) => {
                // Unsure whether it still holds the election: stops writing
                // (another replica may take over).
                self.campaign_failures.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "could not campaign for the status writer election");
                false
            }
        };
        if self.writer.swap(writer, Ordering::Relaxed) != writer {
            tracing::info!(replica = self.name(), writer, "status writer election");
        }
    }

    /// Every proxy of every live replica, each once: this replica's from
    /// memory, the others' from their last records (the newest record wins
    /// for a proxy listed by two replicas), with the replica serving it.
    pub(crate) fn all_proxies(&self) -> Vec<(String, ConnectedProxy)> {
        merge(self.name(), self.own_proxies(), self.others())
    }
}

/// Every proxy once, with its replica: `own` (live, this replica's) win
/// over any record; among `others`, the newest record wins.
fn merge(
    own_name: &str,
    own: Vec<ConnectedProxy>,
    others: Vec<ReplicaRecord>,
) -> Vec<(String, ConnectedProxy)> {
    let mut newest: BTreeMap<String, (Option<SystemTime>, String, ConnectedProxy)> = BTreeMap::new();
    for record in others {
        for proxy in record.proxies {
            let newer = newest
                .get(&proxy.node_id)
                .is_none_or(|(published, _, _)| *published < Some(record.published));
            if newer {
                newest.insert(
                    proxy.node_id.clone(),
                    (Some(record.published), record.replica.clone(), proxy),
                );
            }
        }
    }
    for proxy in own {
        // `None` marks this replica's own: nothing replaces them.
        newest.insert(proxy.node_id.clone(), (None, own_name.to_string(), proxy));
    }
    newest
        .into_values()
        .map(|(_, replica, proxy)| (replica, proxy))
        .collect()
}

impl ProxyRecords for Replicas {
    fn records(&self) -> Vec<ProxyDistribution> {
        self.all_proxies()
            .into_iter()
            .map(|(_, proxy)| proxy.distribution)
            .collect()
    }

    fn is_writer(&self) -> bool {
        Replicas::is_writer(self)
    }

    fn audience(&self) -> Option<pilot_ads::Audience> {
        Some(self.xds.audience())
    }
}

/// Publishes, reads and campaigns until `shutdown` is set; then resigns,
/// so the others need not wait for this replica's ttl.
pub(crate) async fn run(replicas: Arc<Replicas>, mut shutdown: watch::Receiver<bool>) {
    let ttl = replicas.membership.ttl();
    let renew = (ttl / 3).min(Duration::from_secs(3600));
    let refresh_every = REFRESH.min(renew);
    let mut published: Option<(Instant, Vec<ConnectedProxy>)> = None;
    let mut refreshed: Option<Instant> = None;
    let mut retry_after: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let proxies = replicas.own_proxies();
        let due = match &published {
            None => true,
            Some((at, last)) => now.duration_since(*at) >= renew || *last != proxies,
        };
        if due && retry_after.is_none_or(|after| now >= after) {
            if replicas.publish(proxies.clone()).await {
                published = Some((Instant::now(), proxies));
                retry_after = None;
            } else {
                retry_after = Some(Instant::now() + refresh_every);
            }
        }
        if refreshed.is_none_or(|at| at.elapsed() >= refresh_every) {
            replicas.refresh().await;
            refreshed = Some(Instant::now());
        }
        tokio::select! {
            () = tokio::time::sleep(CHANGE_POLL) => {}
            () = crate::shutdown::closed(&mut shutdown) => break,
        }
    }
    replicas.writer.store(false, Ordering::Relaxed);
    match tokio::time::timeout(Duration::from_secs(5), replicas.membership.resign()).await {
        Ok(Ok(())) => tracing::info!(replica = replicas.name(), "resigned: record withdrawn"),
        Ok(Err(error)) => tracing::warn!(%error, "could not resign; the record expires with its ttl"),
        Err(_) => tracing::warn!("resigning timed out; the record expires with its ttl"),
    }
}

/// `/metrics`: the replicas' gauges and failure counters.
#[derive(Debug)]
pub(crate) struct Metrics(pub Arc<Replicas>);

impl Collector for Metrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let replicas = &self.0;
        let live = ConstGauge::new(replicas.live.load(Ordering::Relaxed) as i64);
        live.encode(encoder.encode_descriptor(
            "pilot_replicas",
            "Live pilot-discovery replicas on this store, as last read (this one included once it published)",
            None,
            live.metric_type(),
        )?)?;
        let writer = ConstGauge::new(i64::from(replicas.is_writer()));
        writer.encode(encoder.encode_descriptor(
            "pilot_status_writer",
            "1 while this replica is the elected writer of objects' distribution status",
            None,
            writer.metric_type(),
        )?)?;
        let mut family = encoder.encode_descriptor(
            "pilot_replica_failures",
            "Failures to publish this replica's record, read the replicas' records, or campaign, by operation",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (operation, count) in [
            ("publish", &replicas.publish_failures),
            ("read", &replicas.read_failures),
            ("campaign", &replicas.campaign_failures),
        ] {
            ConstCounter::new(count.load(Ordering::Relaxed))
                .encode(family.encode_family(&[("operation", operation)])?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(node: &str, acked: u64) -> ConnectedProxy {
        ConnectedProxy {
            node_id: node.into(),
            incremental: false,
            types: BTreeMap::new(),
            distribution: ProxyDistribution {
                node_id: node.into(),
                acked: Some([("RouteRule".to_string(), acked)].into_iter().collect()),
                nack: None,
                withheld: Vec::new(),
            },
            process: None,
        }
    }

    fn record(replica: &str, seconds: u64, proxies: Vec<ConnectedProxy>) -> ReplicaRecord {
        ReplicaRecord {
            replica: replica.into(),
            rest_address: None,
            xds_address: None,
            proxies,
            writer: false,
            published: SystemTime::UNIX_EPOCH + Duration::from_secs(seconds),
        }
    }

    #[test]
    fn a_proxy_listed_by_two_replicas_counts_once_newest_first() {
        // p1 moved from b (old record) to c (newer record); p2 moved from
        // c to this replica (a), whose view is live.
        let others = vec![
            record("b", 100, vec![proxy("p1", 1), proxy("p3", 1)]),
            record("c", 200, vec![proxy("p1", 2), proxy("p2", 2)]),
        ];
        let merged = merge("a", vec![proxy("p2", 3)], others);
        let seen: Vec<(String, String, u64)> = merged
            .iter()
            .map(|(replica, p)| {
                let acked = p.distribution.acked.as_ref().unwrap()["RouteRule"];
                (replica.clone(), p.node_id.clone(), acked)
            })
            .collect();
        assert_eq!(
            seen,
            [
                ("c".to_string(), "p1".to_string(), 2),
                ("a".to_string(), "p2".to_string(), 3),
                ("b".to_string(), "p3".to_string(), 1),
            ]
        );
    }

    #[test]
    fn the_default_name_is_the_host_and_the_port() {
        let name = default_name(8080);
        assert!(name.ends_with("-8080"), "{name}");
        assert!(name.len() > "-8080".len(), "{name}");
    }
}
