//! The status writer: each routing object's distribution status, computed
//! from the connected proxies' records and written back to the store
//! (`ConfigStore::update_status`), coalesced.
//!
//! Once per interval (`--status-interval`, default 1 s) the writer takes
//! the proxies' records from a [`ProxyRecords`] source, computes every
//! routing object's status ([`pilot_model::distribution_status`]) and
//! writes only those that changed since the last write. So an object gets
//! at most one status write per interval, however many proxies ACK a push
//! in between, and a push to 2,000 proxies costs at most one write per
//! object it changed.
//!
//! Which proxies should have an object: every connected proxy. pilot has no
//! visibility scoping (Istio's `Sidecar`, `exportTo`): every proxy gets
//! every host's routes and policies, so its configuration depends on every
//! routing object.
//!
//! A write for a version the object no longer has (a user's write came
//! first) is refused by the store and dropped; the next round computes the
//! status of the new version.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pilot_model::{ConfigWatch, ProxyDistribution, StoreError, distribution_status, now_seconds};
use pilot_store::Controller;
use pilot_xds::XdsServer;
use tokio::sync::watch;

/// Where the proxies' records come from: one replica's ADS server, or
/// with several replicas the records every live replica publishes
/// (`crate::replicas::Replicas`).
pub trait ProxyRecords: Send + Sync + 'static {
    /// One record per proxy that should have the routing configuration.
    fn records(&self) -> Vec<ProxyDistribution>;

    /// Whether this replica writes status now (several replicas: only the
    /// elected one). Rounds are skipped while false.
    fn is_writer(&self) -> bool {
        true
    }
}

impl ProxyRecords for XdsServer {
    fn records(&self) -> Vec<ProxyDistribution> {
        self.distribution()
    }
}

/// What the writer has done since it started.
#[derive(Debug, Default)]
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
}

/// Writes routing objects' status to `backend` every `interval` until
/// `shutdown` is set. Objects are read from `controller`'s cache.
pub async fn run(
    controller: Arc<Controller>,
    backend: Arc<dyn ConfigWatch>,
    source: Arc<dyn ProxyRecords>,
    interval: Duration,
    counts: Arc<WriterCounts>,
    mut shutdown: watch::Receiver<bool>,
) {
    if !backend.keeps_status() {
        tracing::info!("this store keeps no status: objects' distribution status is not written");
        return;
    }
    controller.wait_synced().await;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = crate::closed(&mut shutdown) => return,
        }
        if !source.is_writer() {
            continue;
        }
        round(&controller, &*backend, &*source, &counts).await;
        counts.rounds.fetch_add(1, Ordering::Relaxed);
    }
}

/// One round: computes every routing object's status and writes those that
/// differ from the status the cache shows (the cache follows the store's
/// watch, so a status that went away, e.g. with the lease of the replica
/// that wrote it, is written again).
pub async fn round(
    controller: &Controller,
    backend: &dyn ConfigWatch,
    source: &dyn ProxyRecords,
    counts: &WriterCounts,
) {
    let proxies = source.records();
    let now = now_seconds();
    for kind in pilot_xds::PUSHED_KINDS {
        for object in controller.list_cached(kind, None) {
            let key = object.key();
            let Some(version) = object.meta.resource_version.as_deref() else {
                continue;
            };
            let status = distribution_status(kind, version, &proxies, now);
            if object
                .meta
                .status
                .as_ref()
                .is_some_and(|known| known.same_counts(&status))
            {
                continue;
            }
            match backend.update_status(&key, version, status).await {
                Ok(()) => {
                    counts.written.fetch_add(1, Ordering::Relaxed);
                }
                Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {
                    // A user's write won; the next round sees it.
                    counts.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(%key, version, "status for an older version dropped");
                }
                Err(error) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%key, %error, "could not write status; trying again next round");
                }
            }
        }
    }
}
