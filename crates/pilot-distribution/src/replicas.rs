//! Several replicas on one store: this replica's record, the others'
//! records, and the status-writer election.
//!
//! A task ([`Replicas::run`]) publishes this replica's [`ReplicaRecord`]
//! (its proxies' xDS state and distribution, its addresses) through the
//! store's [`Membership`]: every third of the membership's ttl
//! (pilot-discovery's `--replica-ttl`), and when its proxies change
//! (checked every [`CHANGE_POLL`], so a burst of ACKs is one publish).
//! Every [`REFRESH`] it reads every live replica's record and campaigns
//! for the status-writer election.
//!
//! [`Replicas`] is then
//! - the status writer's [`ProxyRecords`] source: this replica's proxies
//!   (live, from memory) and every other live replica's, a proxy listed by
//!   two replicas (during a reconnect) counted once, the newest record
//!   winning; its rounds run only while this replica holds the election;
//! - what pilot-discovery's `/debug/proxy-status` lists beside this
//!   replica's own proxies;
//! - counts for metrics ([`ReplicaCounts`]: live replicas seen, whether
//!   this one writes status, publish, read and campaign failures).
//!
//! Failures are logged and counted; they never stop the task (a replica
//! that cannot reach the store says so through its own readiness check).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use pilot_ads::XdsServer;
use pilot_model::{ConnectedProxy, Membership, ProxyDistribution, ReplicaRecord, TypeNack, TypeRecord};

use crate::proxy_events::ProxyEvents;
use crate::status_writer::ProxyRecords;

/// How often this replica's proxies are compared with the last record
/// published (a change is published at the next check).
pub const CHANGE_POLL: Duration = Duration::from_millis(200);

/// How often the other replicas' records are read and the election is
/// campaigned for (more often if the ttl is short).
pub const REFRESH: Duration = Duration::from_secs(1);

/// This replica among the replicas of its store: see the module
/// documentation.
pub struct Replicas {
    membership: Arc<dyn Membership>,
    xds: XdsServer,
    /// The agents' reports posted to this replica, published with its
    /// proxies.
    events: Arc<ProxyEvents>,
    rest_address: Option<String>,
    xds_address: Option<String>,
    /// The other live replicas' records, as last read.
    others: Mutex<Vec<ReplicaRecord>>,
    /// How many reads found the others' records changed.
    others_changed: AtomicU64,
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

/// What [`Replicas`] has seen and done, for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplicaCounts {
    /// Live replicas on the store as last read (this one included once it
    /// published).
    pub live: u64,
    /// Whether this replica holds the status-writer election.
    pub writer: bool,
    /// Failures to publish this replica's record.
    pub publish_failures: u64,
    /// Failures to read the replicas' records.
    pub read_failures: u64,
    /// Failures to campaign for the election.
    pub campaign_failures: u64,
}

impl Replicas {
    /// This replica (`membership`'s name) serving `xds`'s proxies, with no
    /// proxy events and no addresses in its record.
    pub fn new(membership: Arc<dyn Membership>, xds: XdsServer) -> Self {
        Replicas {
            membership,
            xds,
            events: Arc::default(),
            rest_address: None,
            xds_address: None,
            others: Mutex::new(Vec::new()),
            others_changed: AtomicU64::new(0),
            writer: AtomicBool::new(false),
            live: AtomicU64::new(0),
            publish_failures: AtomicU64::new(0),
            read_failures: AtomicU64::new(0),
            campaign_failures: AtomicU64::new(0),
        }
    }

    /// The agents' reports posted to this replica ([`ProxyEvents`]),
    /// published with its proxies' records.
    pub fn with_proxy_events(mut self, events: Arc<ProxyEvents>) -> Self {
        self.events = events;
        self
    }

    /// Where this replica serves its REST API and ADS (`host:port`), as its
    /// record tells the other replicas and operators.
    pub fn with_addresses(mut self, rest: impl Into<String>, xds: impl Into<String>) -> Self {
        self.rest_address = Some(rest.into());
        self.xds_address = Some(xds.into());
        self
    }

    /// This replica's name.
    pub fn name(&self) -> &str {
        self.membership.replica()
    }

    /// True while this replica holds the status-writer election.
    pub fn is_writer(&self) -> bool {
        self.writer.load(Ordering::Relaxed)
    }

    /// The other live replicas' records, as last read (ordered by name).
    pub fn others(&self) -> Vec<ReplicaRecord> {
        self.others.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// This replica's record now: its proxies from the ADS server's memory.
    pub fn own_record(&self) -> ReplicaRecord {
        ReplicaRecord {
            replica: self.name().to_string(),
            rest_address: self.rest_address.clone(),
            xds_address: self.xds_address.clone(),
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
        let events = self.events.reports();
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
                    process: events.get(&proxy.node_id).cloned(),
                    node_id: proxy.node_id,
                    node_name: proxy.node_name,
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
                let mut held = self.others.lock().unwrap_or_else(|p| p.into_inner());
                let changed = !same_proxies(&held, &others);
                *held = others;
                if changed {
                    self.others_changed.fetch_add(1, Ordering::Release);
                }
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
    pub fn all_proxies(&self) -> Vec<(String, ConnectedProxy)> {
        merge(self.name(), self.own_proxies(), self.others())
    }

    /// What this replica has seen and done, for metrics.
    pub fn counts(&self) -> ReplicaCounts {
        ReplicaCounts {
            live: self.live.load(Ordering::Relaxed),
            writer: self.is_writer(),
            publish_failures: self.publish_failures.load(Ordering::Relaxed),
            read_failures: self.read_failures.load(Ordering::Relaxed),
            campaign_failures: self.campaign_failures.load(Ordering::Relaxed),
        }
    }

    /// Publishes, reads and campaigns until `shutdown` completes; then
    /// resigns, so the others need not wait for this replica's ttl.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        run(self, shutdown).await
    }
}

/// Whether `a` and `b` give [`merge`] the same proxies: the same replicas
/// with the same proxies, whenever each was published, unless a proxy is
/// listed by two of them (the newest record wins it: a renewal can change
/// which).
fn same_proxies(a: &[ReplicaRecord], b: &[ReplicaRecord]) -> bool {
    let same = a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(a, b)| a.replica == b.replica && a.proxies == b.proxies);
    if !same || a.iter().zip(b).all(|(a, b)| a.published == b.published) {
        return same;
    }
    let mut seen = std::collections::HashSet::new();
    b.iter()
        .flat_map(|record| &record.proxies)
        .all(|proxy| seen.insert(proxy.node_id.as_str()))
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

    fn changes(&self) -> Option<[u64; 3]> {
        let (feedback, push) = self.xds.feedback_changes();
        Some([
            feedback,
            push.unwrap_or(0),
            self.others_changed.load(Ordering::Acquire),
        ])
    }
}

/// [`Replicas::run`].
async fn run(replicas: Arc<Replicas>, shutdown: impl Future<Output = ()>) {
    let ttl = replicas.membership.ttl();
    let renew = (ttl / 3).min(Duration::from_secs(3600));
    let refresh_every = REFRESH.min(renew);
    let mut published: Option<(Instant, Vec<ConnectedProxy>)> = None;
    // The ADS server's feedback when `published` was taken: while it has
    // not moved, the proxies are the same and are not rebuilt.
    let mut seen: Option<(u64, Option<u64>)> = None;
    let mut refreshed: Option<Instant> = None;
    let mut retry_after: Option<Instant> = None;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let now = Instant::now();
        let changes = replicas.xds.feedback_changes();
        let renewal = published
            .as_ref()
            .is_none_or(|(at, _)| now.duration_since(*at) >= renew);
        // Rebuilt only when the feedback moved since, or to renew.
        if let Some(proxies) = (renewal || seen != Some(changes)).then(|| replicas.own_proxies()) {
            let changed = published.as_ref().is_none_or(|(_, last)| *last != proxies);
            if !renewal && !changed {
                seen = Some(changes);
            } else if retry_after.is_none_or(|after| now >= after) {
                if replicas.publish(proxies.clone()).await {
                    published = Some((Instant::now(), proxies));
                    seen = Some(changes);
                    retry_after = None;
                } else {
                    retry_after = Some(Instant::now() + refresh_every);
                }
            }
        }
        if refreshed.is_none_or(|at| at.elapsed() >= refresh_every) {
            replicas.refresh().await;
            refreshed = Some(Instant::now());
        }
        tokio::select! {
            () = tokio::time::sleep(CHANGE_POLL) => {}
            () = &mut shutdown => break,
        }
    }
    replicas.writer.store(false, Ordering::Relaxed);
    match tokio::time::timeout(Duration::from_secs(5), replicas.membership.resign()).await {
        Ok(Ok(())) => tracing::info!(replica = replicas.name(), "resigned: record withdrawn"),
        Ok(Err(error)) => tracing::warn!(%error, "could not resign; the record expires with its ttl"),
        Err(_) => tracing::warn!("resigning timed out; the record expires with its ttl"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proxy(node: &str, acked: u64) -> ConnectedProxy {
        ConnectedProxy {
            node_id: node.into(),
            node_name: None,
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
    fn a_renewal_alone_changes_no_proxy_unless_two_records_share_one() {
        let before = vec![
            record("b", 100, vec![proxy("p1", 1)]),
            record("c", 100, vec![proxy("p2", 1)]),
        ];
        let mut renewed = before.clone();
        renewed[0].published += Duration::from_secs(5);
        assert!(same_proxies(&before, &renewed));
        let mut acked = renewed.clone();
        acked[1].proxies[0] = proxy("p2", 2);
        assert!(!same_proxies(&renewed, &acked));
        // p1 listed by both: which record is newer decides what counts.
        let shared = vec![
            record("b", 100, vec![proxy("p1", 1)]),
            record("c", 200, vec![proxy("p1", 2)]),
        ];
        let mut flipped = shared.clone();
        flipped[0].published += Duration::from_secs(300);
        assert!(!same_proxies(&shared, &flipped));
        assert!(same_proxies(&shared, &shared.clone()));
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
}
