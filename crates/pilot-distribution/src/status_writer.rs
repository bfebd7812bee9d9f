//! The status writer ([`StatusWriter`]): each routing object's
//! distribution status, computed from the connected proxies' records and
//! written back to the store (`ConfigStore::update_status`), coalesced.
//!
//! Once per interval (pilot-discovery's `--status-interval`, default 1 s)
//! the writer takes
//! the proxies' records from a [`ProxyRecords`] source, computes every
//! routing object's status ([`pilot_model::distribution_status`]) and
//! writes only those that changed since the last write. So an object gets
//! at most one status write per interval, however many proxies ACK a push
//! in between, and a push to 2,000 proxies costs at most one write per
//! object it changed.
//!
//! Which proxies should have an object: those it concerns
//! ([`pilot_ads::Audience`]). Where a Sidecar or `exportTo` leaves its
//! hosts out of a proxy's scope, that proxy is not counted at all (not
//! among the proxies, not as ACKing nor as pending); with no scoping,
//! every connected proxy.
//!
//! The cache follows the store's watch, so a status just written shows
//! there only when its echo arrives; until then (an object the cache
//! still holds as it was) a round started by another change does not write
//! the same status again.
//!
//! A write for a version the object no longer has (a user's write came
//! first) is refused by the store and dropped; the next round computes the
//! status of the new version.
//!
//! Given [`Findings`] ([`StatusWriter::with_findings`]), each status also
//! carries the object's `Reconciled` condition and its analysis findings
//! as `validationMessages` (`findings.rs`), in the same write; only a
//! status that changed is written, so the same findings round after round
//! cost nothing, and a fix clears them at the next round.
//!
//! A status with proxies still pending (neither ACKed nor NACKed: a push
//! in flight, proxies connecting) is held back for up to
//! [`HOLD_ROUNDS`] rounds while it keeps changing, so a push that
//! completes within them costs one write per object it changed (the final
//! counts), not one per round it spanned; a status with nothing pending
//! (every proxy ACKed or NACKed) is written at once.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pilot_ads::{Audience, XdsServer};
use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, DistributionIndex, ProxyDistribution, StoreError,
    distribution_status, now_seconds,
};
use pilot_store::Controller;

use crate::Findings;

/// Writes routing objects' distribution status to a store, every interval,
/// from the records of the proxies that should have them (see the module
/// and the crate documentation).
pub struct StatusWriter {
    controller: Arc<Controller>,
    store: Arc<dyn ConfigStore>,
    source: Arc<dyn ProxyRecords>,
    interval: Duration,
    counts: Arc<WriterCounts>,
    findings: Option<Arc<dyn Findings>>,
}

impl std::fmt::Debug for StatusWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusWriter")
            .field("interval", &self.interval)
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl StatusWriter {
    /// A writer of the status of the routing objects in `controller`'s
    /// cache, written to `store` (the store itself, not the Controller: a
    /// status write is not a user's write) from the records `source` gives,
    /// once a second.
    pub fn new(
        controller: Arc<Controller>,
        store: Arc<dyn ConfigStore>,
        source: Arc<dyn ProxyRecords>,
    ) -> Self {
        StatusWriter {
            controller,
            store,
            source,
            interval: Duration::from_secs(1),
            counts: Arc::default(),
            findings: None,
        }
    }

    /// Adds each object's `Reconciled` condition and its findings
    /// (`validationMessages`) from `findings` to the status it writes.
    pub fn with_findings(mut self, findings: Arc<dyn Findings>) -> Self {
        self.findings = Some(findings);
        self
    }

    /// Runs a round every `interval` instead.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Counts into `counts` instead of counts of its own (made before the
    /// writer, e.g. for metrics that show them whether it runs or not).
    pub fn with_counts(mut self, counts: Arc<WriterCounts>) -> Self {
        self.counts = counts;
        self
    }

    /// What the writer has done, counted as it runs.
    pub fn counts(&self) -> Arc<WriterCounts> {
        Arc::clone(&self.counts)
    }

    /// Writes status every interval, once the Controller has synced, until
    /// `shutdown` completes. Returns at once, writing nothing, when the
    /// store keeps no status ([`ConfigStore::keeps_status`]).
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        run(
            self.controller,
            self.store,
            self.source,
            self.interval,
            self.counts,
            self.findings,
            shutdown,
        )
        .await
    }
}

/// Where the proxies' records come from: one replica's ADS server, or
/// with several replicas the records every live replica publishes
/// ([`crate::Replicas`]).
pub trait ProxyRecords: Send + Sync + 'static {
    /// One record per proxy that should have the routing configuration.
    fn records(&self) -> Vec<ProxyDistribution>;

    /// Whether this replica writes status now (several replicas: only the
    /// elected one). Rounds are skipped while false.
    fn is_writer(&self) -> bool {
        true
    }

    /// Which proxies each object concerns; `None`: every proxy.
    fn audience(&self) -> Option<Audience> {
        None
    }

    /// Numbers that move whenever [`records`](Self::records) may return
    /// something else; `None` (the default) when the source cannot tell,
    /// and each round reads the records to compare them.
    fn changes(&self) -> Option<[u64; 3]> {
        None
    }
}

impl ProxyRecords for XdsServer {
    fn records(&self) -> Vec<ProxyDistribution> {
        self.distribution()
    }

    fn audience(&self) -> Option<Audience> {
        Some(XdsServer::audience(self))
    }

    fn changes(&self) -> Option<[u64; 3]> {
        let (feedback, push) = self.feedback_changes();
        Some([feedback, push.unwrap_or(0), 0])
    }
}

/// What the writer has done since it started.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct WriterCounts {
    /// Status writes the store accepted.
    pub written: AtomicU64,
    /// Writes refused because the object had moved on (or was deleted):
    /// dropped, not retried.
    pub dropped: AtomicU64,
    /// Writes that failed otherwise (tried again next round).
    pub failed: AtomicU64,
    /// Rounds run.
    pub rounds: AtomicU64,
    /// Rounds skipped: nothing they read (the proxies' records, the
    /// objects, the findings, the push placing the proxies) had changed
    /// since the last round, and nothing was held back.
    pub skipped: AtomicU64,
}

/// Writes routing objects' status to `backend` every `interval` until
/// `shutdown` completes. Objects are read from `controller`'s cache.
async fn run(
    controller: Arc<Controller>,
    backend: Arc<dyn ConfigStore>,
    source: Arc<dyn ProxyRecords>,
    interval: Duration,
    counts: Arc<WriterCounts>,
    findings: Option<Arc<dyn Findings>>,
    shutdown: impl Future<Output = ()>,
) {
    if !backend.keeps_status() {
        tracing::info!("this store keeps no status: objects' distribution status is not written");
        return;
    }
    controller.wait_synced().await;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut held = Held::default();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = &mut shutdown => return,
        }
        if !source.is_writer() {
            // Another replica writes; what was held back is its business now.
            held = Held::default();
            continue;
        }
        let ran = round(
            &controller,
            &*backend,
            &*source,
            findings.as_deref(),
            &counts,
            &mut held,
        )
        .await;
        if ran {
            counts.rounds.fetch_add(1, Ordering::Relaxed);
        } else {
            counts.skipped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One round: computes every routing object's status and writes those that
/// differ from the status the cache shows (the cache follows the store's
/// watch, so a status that went away, e.g. with the lease of the replica
/// that wrote it, is written again). Returns false, doing nothing, when
/// nothing it reads changed since the last round (which wrote all it
/// computed) and nothing is held back: the statuses would be the same.
async fn round(
    controller: &Controller,
    backend: &dyn ConfigStore,
    source: &dyn ProxyRecords,
    findings: Option<&dyn Findings>,
    counts: &WriterCounts,
    held: &mut Held,
) -> bool {
    // A round over the inputs of the last one, with nothing held back,
    // would compute the statuses it wrote (or found written): skipped.
    // When the source numbers its changes, equal numbers, objects and push
    // say so before the records are gathered (the findings follow from
    // those three); otherwise the records and findings are compared.
    let changes = source.changes();
    let audience = source.audience();
    // A kind the Controller does not watch has no object to report on.
    let mut kinds: Vec<String> = pilot_ads::PUSHED_KINDS
        .iter()
        .map(|kind| kind.to_string())
        .collect();
    for kind in findings.map(Findings::status_kinds).unwrap_or_default() {
        if !kinds.contains(&kind) {
            kinds.push(kind);
        }
    }
    let objects: Vec<Arc<pilot_model::DynConfig>> = kinds
        .iter()
        .flat_map(|kind| controller.list_cached(kind, None).unwrap_or_default())
        .collect();
    if held.since.is_empty()
        && changes.is_some()
        && held
            .last
            .as_ref()
            .is_some_and(|last| last.changes == changes && last.same_objects(&objects, audience.as_ref()))
    {
        return false;
    }
    let inputs = Inputs {
        changes,
        proxies: source.records(),
        objects,
        // Analysis and the Gateway API's statuses of every object: off the
        // runtime's queue (the API's writes go on meanwhile).
        found: findings.map(|f| pilot_ads::cpu_bound(|| f.findings())),
        gateway_api: findings.map(|f| pilot_ads::cpu_bound(|| f.gateway_api())),
        audience,
    };
    if held.since.is_empty() && held.last.as_ref().is_some_and(|last| last.same_as(&inputs)) {
        return false;
    }
    let Inputs {
        proxies,
        objects,
        found,
        gateway_api,
        audience,
        ..
    } = &inputs;
    let index = DistributionIndex::new(proxies);
    // A write that failed is tried again next round, whatever the inputs.
    let mut failed = false;
    let now = now_seconds();
    held.round += 1;
    let round = held.round;
    // Objects no longer pending (or gone) are forgotten, and writes whose
    // object is gone.
    held.since.retain(|_, (_, _, seen)| *seen + 1 >= round);
    held.written.retain(|_, (_, _, seen)| *seen + 1 >= round);
    for object in objects {
        let kind = object.meta.kind.as_str();
        let key = object.key();
        let Some(version) = object.meta.resource_version.as_deref() else {
            continue;
        };
        let mut status = match audience.as_ref().and_then(|a| a.of(object, proxies)) {
            Some(concerned) => distribution_status(kind, version, &concerned, now),
            None => index.status(kind, version, now),
        };
        if let Some(found) = found {
            crate::findings::apply(
                object,
                found.get(&key).map_or(&[], Vec::as_slice),
                now,
                &mut status,
            );
        }
        if let Some(parts) = gateway_api.as_ref().and_then(|statuses| statuses.get(&key)) {
            crate::findings::apply_gateway_api(object, parts, now, &mut status);
        }
        // This writer's last write to the object, its echo not yet in the
        // cache (the cached object is the one it was computed over): the
        // cache's status is not the store's, and the same status is not
        // written twice.
        if let Some((over, wrote, seen)) = held.written.get_mut(&key) {
            if Arc::ptr_eq(over, object) {
                *seen = round;
                if wrote.same_as(&status) {
                    held.since.remove(&key);
                    continue;
                }
            } else {
                held.written.remove(&key);
            }
        }
        if object
            .meta
            .status
            .as_ref()
            .is_some_and(|known| known.same_as(&status))
        {
            held.since.remove(&key);
            continue;
        }
        if held.hold(&key, version, &status) {
            continue;
        }
        match backend.update_status(&key, version, status.clone()).await {
            Ok(()) => {
                counts.written.fetch_add(1, Ordering::Relaxed);
                held.written.insert(key, (Arc::clone(object), status, round));
            }
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                // A user's write won; the next round sees it.
                counts.dropped.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%key, version, "status for an older version dropped");
            }
            Err(error) => {
                failed = true;
                counts.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%key, %error, "could not write status; trying again next round");
            }
        }
    }
    held.last = (!failed).then_some(inputs);
    true
}

/// What one round computed statuses from.
struct Inputs {
    /// The source's number for its records ([`ProxyRecords::changes`]).
    changes: Option<[u64; 3]>,
    /// The proxies' records.
    proxies: Vec<ProxyDistribution>,
    /// The routing objects, as the Controller's cache holds them: a change
    /// (a status written, by this writer or anyone, included) replaces an
    /// object's `Arc`. Held, so an address is never reused meanwhile.
    objects: Vec<Arc<pilot_model::DynConfig>>,
    found: Option<HashMap<ConfigKey, Vec<pilot_model::ValidationMessage>>>,
    /// The Gateway API's statuses ([`Findings::gateway_api`]).
    gateway_api: Option<HashMap<ConfigKey, pilot_model::GatewayApiStatus>>,
    audience: Option<Audience>,
}

impl Inputs {
    /// The same objects (the same `Arc`s) and the same push.
    fn same_objects(&self, objects: &[Arc<pilot_model::DynConfig>], audience: Option<&Audience>) -> bool {
        let same_audience = match (&self.audience, audience) {
            (None, None) => true,
            (Some(a), Some(b)) => a.same_push(b),
            _ => false,
        };
        same_audience
            && self.objects.len() == objects.len()
            && self.objects.iter().zip(objects).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    fn same_as(&self, other: &Inputs) -> bool {
        self.same_objects(&other.objects, other.audience.as_ref())
            && self.found == other.found
            && same_gateway_api(self.gateway_api.as_ref(), other.gateway_api.as_ref())
            && self.proxies == other.proxies
    }
}

/// The same Gateway API statuses, the times aside (each round computes its
/// own).
fn same_gateway_api(
    a: Option<&HashMap<ConfigKey, pilot_model::GatewayApiStatus>>,
    b: Option<&HashMap<ConfigKey, pilot_model::GatewayApiStatus>>,
) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.len() == b.len() && a.iter().all(|(key, s)| b.get(key).is_some_and(|t| s.same(t)))
        }
        _ => false,
    }
}

/// Rounds a changing status with pending proxies is held back at most.
pub const HOLD_ROUNDS: u64 = 5;

/// The objects whose status is held back while proxies are pending.
#[derive(Default)]
struct Held {
    round: u64,
    /// By object: the version held, the round holding started (or the
    /// last held write) and the last round it was seen pending.
    since: HashMap<ConfigKey, (String, u64, u64)>,
    /// What the last round computed from.
    last: Option<Inputs>,
    /// By object: the cached object a status was computed over and
    /// written for, that status, and the last round that saw that object
    /// still cached unchanged (its write's echo not yet arrived).
    written: HashMap<ConfigKey, (Arc<pilot_model::DynConfig>, ConfigStatus, u64)>,
}

impl Held {
    /// True when `status` (which differs from the object's cached one)
    /// should wait: some proxies are pending, and it has waited fewer
    /// than [`HOLD_ROUNDS`] rounds.
    fn hold(&mut self, key: &ConfigKey, version: &str, status: &ConfigStatus) -> bool {
        if status.acked + status.nacked + status.withheld >= status.proxies {
            self.since.remove(key);
            return false;
        }
        let round = self.round;
        let entry = self
            .since
            .entry(key.clone())
            .or_insert_with(|| (version.to_string(), round, round));
        if entry.0 != version {
            *entry = (version.to_string(), round, round);
        }
        entry.2 = round;
        if round - entry.1 >= HOLD_ROUNDS {
            // Written now; held again from here while still pending.
            entry.1 = round;
            return false;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(proxies: u64, acked: u64, nacked: u64) -> ConfigStatus {
        ConfigStatus {
            observed_version: "7".into(),
            proxies,
            acked,
            nacked,
            withheld: 0,
            nacks: Vec::new(),
            last_update: std::time::SystemTime::UNIX_EPOCH,
            conditions: Vec::new(),
            validation_messages: Vec::new(),
            parents: Vec::new(),
            listeners: Vec::new(),
            addresses: Vec::new(),
            ancestors: Vec::new(),
        }
    }

    #[test]
    fn a_pending_status_waits_a_few_rounds_and_a_settled_one_does_not() {
        let key = ConfigKey::new("RouteRule", "default", "r");
        let mut held = Held::default();
        let mut written = Vec::new();
        // A push in flight for 3 rounds, then every proxy ACKed: one write.
        for (round, s) in [
            status(10, 2, 0),
            status(10, 6, 0),
            status(10, 9, 0),
            status(10, 10, 0),
        ]
        .iter()
        .enumerate()
        {
            held.round += 1;
            if !held.hold(&key, "7", s) {
                written.push(round);
            }
        }
        assert_eq!(written, [3]);
        // NACKs are not pending: written at once.
        held.round += 1;
        assert!(!held.hold(&key, "7", &status(10, 7, 3)));
        // A proxy that never answers: written every HOLD_ROUNDS rounds.
        let mut writes = 0;
        for _ in 0..(3 * HOLD_ROUNDS) {
            held.round += 1;
            if !held.hold(&key, "8", &status(10, 9, 0)) {
                writes += 1;
            }
        }
        assert_eq!(writes, 2);
    }

    /// Records a test changes between rounds.
    struct Fixed(std::sync::Mutex<Vec<ProxyDistribution>>);

    impl ProxyRecords for Fixed {
        fn records(&self) -> Vec<ProxyDistribution> {
            self.0.lock().unwrap().clone()
        }
    }

    /// Waits until `check` holds, at most [`pilot_test_support::PATIENCE`].
    async fn until(what: &str, check: &dyn Fn() -> bool) {
        let started = std::time::Instant::now();
        while !check() {
            assert!(
                started.elapsed() < pilot_test_support::PATIENCE,
                "timed out waiting for {what}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn acked(id: &str, revision: u64) -> ProxyDistribution {
        ProxyDistribution {
            node_id: id.into(),
            acked: Some(
                pilot_ads::PUSHED_KINDS
                    .iter()
                    .map(|k| (k.to_string(), revision))
                    .collect(),
            ),
            nack: None,
            withheld: Vec::new(),
        }
    }

    /// The cache lags the store: a status written whose echo has not come
    /// back is not written again by a round that another object's change
    /// started; a status that changed meanwhile is.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_status_written_is_not_written_again_before_its_echo() {
        use pilot_model::ConfigWatch;
        let registry = pilot_api::default_registry();
        let rule = |name: &str| {
            let yaml = format!(
                "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: {name}, namespace: default}}\n\
                 spec: {{destination: {{name: reviews}}}}\n"
            );
            pilot_model::document::parse("r.yaml", &yaml, &registry)
                .unwrap()
                .remove(0)
        };
        // The Controller watches `watched`; statuses go to `backend`, whose
        // writes the Controller never sees (an echo that never arrives).
        let watched = Arc::new(pilot_store_memory::MemoryConfigStore::new(registry.clone()));
        let backend = Arc::new(pilot_store_memory::MemoryConfigStore::new(registry.clone()));
        watched.create(rule("r")).await.unwrap();
        backend.create(rule("r")).await.unwrap();
        let key = ConfigKey::new("RouteRule", "default", "r");
        assert_eq!(
            watched.get_now(&key).unwrap().unwrap().meta.resource_version,
            backend.get_now(&key).unwrap().unwrap().meta.resource_version,
        );
        let store: Arc<dyn ConfigWatch> = watched.clone();
        let controller = Arc::new(Controller::new(store));
        controller.run();
        controller.wait_synced().await;
        let source = Arc::new(Fixed(std::sync::Mutex::new(vec![acked("a", 100)])));
        let writer = StatusWriter::new(Arc::clone(&controller), backend.clone(), source.clone())
            .interval(Duration::from_millis(10));
        let counts = writer.counts();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(writer.run(async {
            let _ = stopped.await;
        }));
        let summary = || {
            let object = backend.get_now(&key).unwrap().unwrap();
            object.meta.status.as_ref().map(|s| s.summary())
        };
        until("1/1 written", &|| summary().as_deref() == Some("1/1")).await;
        assert_eq!(counts.written.load(Ordering::Relaxed), 1);
        // Another object: a round runs over `r` as cached, without status.
        // (`s` is not in `backend`: its write is dropped.)
        watched.create(rule("s")).await.unwrap();
        until("a round over the new object", &|| {
            counts.dropped.load(Ordering::Relaxed) >= 1
        })
        .await;
        // That round over: the next ones are skipped (nothing changed).
        let skipped = counts.skipped.load(Ordering::Relaxed);
        until("the round to end", &|| {
            counts.skipped.load(Ordering::Relaxed) > skipped
        })
        .await;
        assert_eq!(
            counts.written.load(Ordering::Relaxed),
            1,
            "the status was written again before its echo"
        );
        // A second proxy: the status differs from the one written, and is.
        source.0.lock().unwrap().push(acked("b", 100));
        until("2/2 written", &|| summary().as_deref() == Some("2/2")).await;
        assert_eq!(counts.written.load(Ordering::Relaxed), 2);
        let _ = stop.send(());
        task.await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn rounds_over_unchanged_records_and_objects_are_skipped_and_a_change_is_written() {
        use pilot_model::ConfigWatch;
        let memory = Arc::new(pilot_store_memory::MemoryConfigStore::new(
            pilot_api::default_registry(),
        ));
        let yaml = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: r, namespace: default}\n\
                    spec: {destination: {name: reviews}}\n";
        let rule = pilot_model::document::parse("r.yaml", yaml, &pilot_api::default_registry())
            .unwrap()
            .remove(0);
        memory.create(rule).await.unwrap();
        let key = ConfigKey::new("RouteRule", "default", "r");
        let store: Arc<dyn ConfigWatch> = memory.clone();
        let controller = Arc::new(Controller::new(store));
        controller.run();
        controller.wait_synced().await;
        let source = Arc::new(Fixed(std::sync::Mutex::new(vec![
            acked("a", 100),
            acked("b", 100),
        ])));
        let writer = StatusWriter::new(Arc::clone(&controller), memory.clone(), source.clone())
            .interval(Duration::from_millis(10));
        let counts = writer.counts();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(writer.run(async {
            let _ = stopped.await;
        }));
        let summary = |memory: &pilot_store_memory::MemoryConfigStore| {
            let object = memory.get_now(&key).unwrap().unwrap();
            object.meta.status.as_ref().map(|s| s.summary())
        };
        until("2/2 written", &|| summary(&memory).as_deref() == Some("2/2")).await;
        // The write's own echo is one more round; then nothing changes.
        let skipped = counts.skipped.load(Ordering::Relaxed);
        until("rounds to be skipped", &|| {
            counts.skipped.load(Ordering::Relaxed) >= skipped + 20
        })
        .await;
        let rounds = counts.rounds.load(Ordering::Relaxed);
        until("more rounds to be skipped", &|| {
            counts.skipped.load(Ordering::Relaxed) >= skipped + 40
        })
        .await;
        assert_eq!(
            counts.rounds.load(Ordering::Relaxed),
            rounds,
            "a round ran with nothing changed"
        );
        assert_eq!(counts.written.load(Ordering::Relaxed), 1);

        // A third proxy connects: the next round counts it.
        source.0.lock().unwrap().push(acked("c", 100));
        until("3/3 written", &|| summary(&memory).as_deref() == Some("3/3")).await;
        // The status goes away (as with the lease of a writer that died):
        // the object's revision moves, and it is written again.
        let object = memory.get_now(&key).unwrap().unwrap();
        let version = object.meta.resource_version.clone().unwrap();
        memory
            .update_status(
                &key,
                &version,
                distribution_status("RouteRule", &version, &[], now_seconds()),
            )
            .await
            .unwrap();
        until("3/3 written again", &|| {
            summary(&memory).as_deref() == Some("3/3")
        })
        .await;
        let _ = stop.send(());
        task.await.unwrap();
    }
}
