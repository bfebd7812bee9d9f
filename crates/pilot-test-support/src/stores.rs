//! A configuration backend wrapper that fails on purpose: watches that can
//! be cut (a partition) and a first list that is slow (a remote store after
//! a restart).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use pilot_model::{
    ConfigKey, ConfigStore, ConfigWatch, DynConfig, KindRegistry, Revision, Snapshot, StoreError, WatchStream,
};
use tokio::sync::watch;

/// Any [`ConfigWatch`] whose watches end (and cannot restart) while it is
/// disconnected, as a network partition would do to a remote backend, and
/// whose snapshots can be made slow.
#[derive(Clone)]
pub struct FlakyStore<S> {
    /// The wrapped store (writes and reads go straight to it).
    pub store: S,
    connected: watch::Sender<bool>,
    snapshot_delay: Duration,
    /// The kinds as readers see them, when not the store's own.
    registry: Option<KindRegistry>,
}

impl<S: ConfigWatch> FlakyStore<S> {
    /// `store`, connected, with prompt snapshots.
    pub fn new(store: S) -> Self {
        FlakyStore {
            store,
            connected: watch::channel(true).0,
            snapshot_delay: Duration::ZERO,
            registry: None,
        }
    }

    /// As [`FlakyStore::new`], but readers (a Controller) validate with
    /// `registry` while the store accepted its objects with its own: a
    /// backend another tool writes without pilot's validation.
    pub fn with_registry(store: S, registry: KindRegistry) -> Self {
        FlakyStore {
            registry: Some(registry),
            ..Self::new(store)
        }
    }

    /// The same, but every snapshot (list) first waits `delay`: a cache on
    /// it is slow to sync.
    pub fn slow_to_sync(mut self, delay: Duration) -> Self {
        self.snapshot_delay = delay;
        self
    }

    /// Cuts every watch; snapshots and new watches fail until
    /// [`reconnect`](Self::reconnect).
    pub fn disconnect(&self) {
        self.connected.send_replace(false);
    }

    /// Ends the partition.
    pub fn reconnect(&self) {
        self.connected.send_replace(true);
    }

    fn check(&self) -> Result<(), StoreError> {
        if *self.connected.borrow() {
            Ok(())
        } else {
            Err(StoreError::unavailable("disconnected"))
        }
    }
}

#[async_trait]
impl<S: ConfigWatch> ConfigStore for FlakyStore<S> {
    fn registry(&self) -> &KindRegistry {
        self.registry.as_ref().unwrap_or_else(|| self.store.registry())
    }
    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.store.get(key).await
    }
    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.store.list(kind, namespace).await
    }
    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.store.create(config).await
    }
    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.store.update(config).await
    }
    async fn delete(&self, key: &ConfigKey, version: Option<&str>) -> Result<(), StoreError> {
        self.store.delete(key, version).await
    }
}

#[async_trait]
impl<S: ConfigWatch> ConfigWatch for FlakyStore<S> {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        tokio::time::sleep(self.snapshot_delay).await;
        self.check()?;
        self.store.snapshot(kind).await
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.check()?;
        let inner = self.store.watch(kind, after).await?;
        let mut connected = self.connected.subscribe();
        let cut = async move {
            let _ = connected.wait_for(|c| !*c).await;
        };
        let broken = futures::stream::once(async { Err(StoreError::unavailable("connection cut")) });
        Ok(inner.take_until(cut).chain(broken).boxed())
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        self.store.current_revision().await
    }
}
