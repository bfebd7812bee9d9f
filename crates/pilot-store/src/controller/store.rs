//! The [`Controller`] as a [`ConfigStore`]: reads from the cache, writes
//! to the backend that return once the cache shows them.

use std::sync::Arc;

use async_trait::async_trait;
use pilot_model::{ConfigKey, ConfigStatus, ConfigStore, DynConfig, Event, KindRegistry, StoreError};
use tokio::sync::broadcast;

use super::Controller;

#[async_trait]
impl ConfigStore for Controller {
    fn registry(&self) -> &KindRegistry {
        self.shared.backend.registry()
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        if !self.watches(&key.kind) || self.behind_own_writes(&key.kind) {
            return self.shared.backend.get(key).await;
        }
        Ok(self.shared.cache.get(key))
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        if !self.watches(kind) {
            return self.shared.backend.list(kind, namespace).await;
        }
        Ok(self.shared.cache.list(kind, namespace))
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.watched(&config.meta.kind)?;
        let stored = self.shared.backend.create(config).await?;
        self.await_stored(&stored).await;
        Ok(stored)
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        self.watched(&config.meta.kind)?;
        let stored = self.shared.backend.update(config).await?;
        self.await_stored(&stored).await;
        Ok(stored)
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        self.watched(&key.kind)?;
        // The delete's revision is not returned, so its event is what
        // shows it: subscribed before the write, so it cannot be missed.
        let mut events = self.shared.events.subscribe();
        self.shared.backend.delete(key, resource_version).await?;
        let cache = &self.shared.cache;
        let deleted = async {
            // Absent now: the delete (or an earlier one) is what a read
            // shows. Present: it was recreated after the delete, or the
            // delete's event is still to come; wait for that event.
            while cache.get(key).is_some() {
                match events.recv().await {
                    Ok(Event::Deleted(gone)) if gone.key() == *key => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        };
        if tokio::time::timeout(self.shared.options.write_sync_timeout, deleted)
            .await
            .is_err()
        {
            tracing::warn!(kind = %key.kind, "the cache did not show a delete through it in time");
        }
        Ok(())
    }

    fn keeps_status(&self) -> bool {
        self.shared.backend.keeps_status()
    }

    async fn update_status(
        &self,
        key: &ConfigKey,
        observed_version: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.watched(&key.kind)?;
        self.shared
            .backend
            .update_status(key, observed_version, status.clone())
            .await?;
        // Shown once the cached object carries this status, or has moved
        // past the version the status was about (or is gone).
        let cache = &self.shared.cache;
        self.await_cache(&key.kind, "a status write", |_| match cache.get(key) {
            Some(cached) => {
                cached.meta.status.as_ref() == Some(&status)
                    || cached.meta.resource_version.as_deref() != Some(observed_version)
            }
            None => true,
        })
        .await;
        Ok(())
    }
}
