//! A lease of this process: granted on first use, renewed every third of
//! its TTL while its owner lives, so what the process wrote under it goes
//! away when the process dies. The store writes objects' status under one
//! (TTL [`STATUS_LEASE_TTL`]); the replica membership (`membership.rs`)
//! keeps the replica's record and its election under another
//! (TTL `--replica-ttl`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::Client;
use pilot_model::StoreError;
use tokio::task::JoinHandle;

use crate::error::unavailable_etcd;

/// The status lease's time to live, in seconds.
pub const STATUS_LEASE_TTL: i64 = 30;

pub(crate) struct StatusLease {
    client: Client,
    ttl: i64,
    current: tokio::sync::Mutex<Option<Held>>,
}

struct Held {
    id: i64,
    alive: Arc<AtomicBool>,
    keeper: JoinHandle<()>,
}

impl StatusLease {
    pub(crate) fn new(client: Client) -> Self {
        Self::with_ttl(client, STATUS_LEASE_TTL)
    }

    /// A lease of `ttl` seconds (at least 1; etcd may raise it to its
    /// minimum).
    pub(crate) fn with_ttl(client: Client, ttl: i64) -> Self {
        StatusLease {
            client,
            ttl: ttl.max(1),
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The live lease, granted now if there is none (or it was lost).
    pub(crate) async fn id(&self) -> Result<i64, StoreError> {
        let mut current = self.current.lock().await;
        if let Some(held) = current.as_ref()
            && held.alive.load(Ordering::Relaxed)
        {
            return Ok(held.id);
        }
        let mut client = self.client.clone();
        let id = client
            .lease_grant(self.ttl, None)
            .await
            .map_err(unavailable_etcd)?
            .id();
        let alive = Arc::new(AtomicBool::new(true));
        let keeper = tokio::spawn(keep_alive(client, id, self.ttl, Arc::clone(&alive)));
        if let Some(old) = current.replace(Held { id, alive, keeper }) {
            old.keeper.abort();
        }
        Ok(id)
    }

    /// Revokes the live lease, if any: every key under it goes at once.
    pub(crate) async fn revoke(&self) -> Result<(), StoreError> {
        let held = self.current.lock().await.take();
        if let Some(held) = held {
            held.keeper.abort();
            let mut client = self.client.clone();
            client.lease_revoke(held.id).await.map_err(unavailable_etcd)?;
        }
        Ok(())
    }

    /// Forgets lease `id` (etcd no longer knows it): the next write gets a
    /// new one.
    pub(crate) fn lost(&self, id: i64) {
        if let Ok(current) = self.current.try_lock()
            && let Some(held) = current.as_ref()
            && held.id == id
        {
            held.alive.store(false, Ordering::Relaxed);
        }
    }
}

impl Drop for StatusLease {
    fn drop(&mut self) {
        if let Some(held) = self.current.get_mut().take() {
            held.keeper.abort();
        }
    }
}

/// Renews `id` every third of its TTL until etcd says it is gone; then
/// marks it dead. Renewal failures (etcd unreachable) are retried.
async fn keep_alive(mut client: Client, id: i64, ttl: i64, alive: Arc<AtomicBool>) {
    let period = Duration::from_millis(u64::try_from(ttl).unwrap_or(1) * 1000 / 3);
    loop {
        tokio::time::sleep(period).await;
        let renewed = match client.lease_keep_alive(id).await {
            Ok((mut keeper, mut responses)) => match keeper.keep_alive().await {
                Ok(()) => match responses.message().await {
                    Ok(Some(response)) => Some(response.ttl() > 0),
                    _ => None,
                },
                Err(_) => None,
            },
            Err(_) => None,
        };
        match renewed {
            Some(true) => {}
            Some(false) => {
                tracing::info!(
                    lease = id,
                    "the lease expired; the next write under it takes a new one"
                );
                alive.store(false, Ordering::Relaxed);
                return;
            }
            None => tracing::warn!(lease = id, "could not renew the lease; retrying"),
        }
    }
}
