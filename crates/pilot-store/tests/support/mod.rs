//! A backend wrapper whose watches can be cut, to make gaps on purpose.

#![allow(dead_code)]

use std::sync::Arc;

use async_trait::async_trait;
use futures::StreamExt;
use pilot_model::{
    ConfigKey, ConfigStore, ConfigWatch, DynConfig, KindRegistry, Revision, Snapshot, StoreError, WatchStream,
};
use pilot_store_memory::MemoryConfigStore;
use tokio::sync::watch;

/// A memory store whose watches end (and cannot restart) while it is
/// disconnected, as a network partition would do to a remote backend.
#[derive(Clone)]
pub struct Flaky {
    pub store: MemoryConfigStore,
    connected: watch::Sender<bool>,
    /// The kinds as readers see them (the store's unless overridden).
    registry: KindRegistry,
}

impl Flaky {
    pub fn new(store: MemoryConfigStore) -> Self {
        let registry = store.registry().clone();
        Self::with_registry(store, registry)
    }

    /// As [`Flaky::new`], but readers (a Controller) validate with
    /// `registry` while the store accepted its objects with its own: a
    /// backend another tool writes without pilot's validation.
    pub fn with_registry(store: MemoryConfigStore, registry: KindRegistry) -> Self {
        Flaky {
            store,
            connected: watch::channel(true).0,
            registry,
        }
    }

    pub fn disconnect(&self) {
        self.connected.send_replace(false);
    }

    pub fn reconnect(&self) {
        self.connected.send_replace(true);
    }
}

#[async_trait]
impl ConfigStore for Flaky {
    fn registry(&self) -> &KindRegistry {
        &self.registry
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
impl ConfigWatch for Flaky {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        if !*self.connected.borrow() {
            return Err(StoreError::unavailable("disconnected"));
        }
        self.store.snapshot(kind).await
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        if !*self.connected.borrow() {
            return Err(StoreError::unavailable("disconnected"));
        }
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
