//! Every conformance suite, run as an embedder's crate runs them: a store
//! of its own (a `BTreeMap` with pilot-store's `WatchLog` for watches), a
//! registry (pilot-store's `ServiceCache`, written directly) and
//! memberships (`LocalMembership`), with `pilot-model` and `pilot-store`
//! (feature `testing`) as the only dependencies.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pilot_model::{
    ConfigKey, ConfigStatus, ConfigStore, ConfigWatch, DynConfig, KindRegistry, LocalMembership, Membership,
    Revision, ServiceDiscovery, Snapshot, StoreError, WatchStream, now_seconds,
};
use pilot_store::testing::{RegistrySource, SourceService, async_trait, desired_state};
use pilot_store::{ServiceCache, WatchLog};

/// Objects by (kind, namespace, name): the order `list` must return.
type Objects = BTreeMap<(String, String, String), Arc<DynConfig>>;

/// A store of one's own: a map under a lock, writes recorded in a
/// [`WatchLog`] (whose write lock orders them) for watches to resume from.
struct MapStore {
    registry: KindRegistry,
    objects: Mutex<Objects>,
    log: WatchLog,
}

impl MapStore {
    fn new(registry: KindRegistry) -> Self {
        MapStore {
            registry,
            objects: Mutex::new(BTreeMap::new()),
            log: WatchLog::default(),
        }
    }

    fn known(&self, kind: &str) -> Result<(), StoreError> {
        self.registry.schema(kind).map(|_| ())
    }

    fn objects(&self) -> std::sync::MutexGuard<'_, Objects> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn slot(key: &ConfigKey) -> (String, String, String) {
    (key.kind.clone(), key.namespace.clone(), key.name.clone())
}

/// A conflict unless `given` is `current`'s version (a delete may omit it).
fn check_version(
    key: &ConfigKey,
    given: Option<&str>,
    current: &DynConfig,
    required: bool,
) -> Result<(), StoreError> {
    let actual = current.meta.resource_version.clone().unwrap_or_default();
    match given {
        Some(given) if given == actual => Ok(()),
        None if !required => Ok(()),
        given => Err(StoreError::Conflict {
            key: key.clone(),
            expected: given.map(str::to_string),
            actual,
        }),
    }
}

#[async_trait]
impl ConfigStore for MapStore {
    fn registry(&self) -> &KindRegistry {
        &self.registry
    }

    async fn get(&self, key: &ConfigKey) -> Result<Option<Arc<DynConfig>>, StoreError> {
        self.known(&key.kind)?;
        Ok(self.objects().get(&slot(key)).cloned())
    }

    async fn list(&self, kind: &str, namespace: Option<&str>) -> Result<Vec<Arc<DynConfig>>, StoreError> {
        self.known(kind)?;
        Ok(self
            .objects()
            .iter()
            .filter(|((k, ns, _), _)| k == kind && namespace.is_none_or(|n| n == ns))
            .map(|(_, config)| Arc::clone(config))
            .collect())
    }

    async fn create(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.registry.prepare(config)?;
        let key = config.key();
        let mut log = self.log.write();
        let mut objects = self.objects();
        if objects.contains_key(&slot(&key)) {
            return Err(StoreError::AlreadyExists { key });
        }
        config.meta.resource_version = Some(log.next_revision().to_string());
        config.meta.creation_timestamp = Some(now_seconds());
        config.meta.status = None;
        let config = Arc::new(config);
        objects.insert(slot(&key), Arc::clone(&config));
        log.put(Arc::clone(&config));
        Ok(config)
    }

    async fn update(&self, config: DynConfig) -> Result<Arc<DynConfig>, StoreError> {
        let mut config = self.registry.prepare(config)?;
        let key = config.key();
        let mut log = self.log.write();
        let mut objects = self.objects();
        let current = objects
            .get(&slot(&key))
            .cloned()
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(&key, config.meta.resource_version.as_deref(), &current, true)?;
        self.registry.check_update(&current, &config)?;
        config.meta.resource_version = Some(log.next_revision().to_string());
        config.meta.creation_timestamp = current.meta.creation_timestamp;
        config.meta.status = current.meta.status.clone();
        let config = Arc::new(config);
        objects.insert(slot(&key), Arc::clone(&config));
        log.put(Arc::clone(&config));
        Ok(config)
    }

    async fn delete(&self, key: &ConfigKey, resource_version: Option<&str>) -> Result<(), StoreError> {
        self.known(&key.kind)?;
        let mut log = self.log.write();
        let mut objects = self.objects();
        let current = objects
            .get(&slot(key))
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(key, resource_version, current, false)?;
        objects.remove(&slot(key));
        log.delete(key.clone());
        Ok(())
    }

    fn keeps_status(&self) -> bool {
        true
    }

    async fn update_status(
        &self,
        key: &ConfigKey,
        observed: &str,
        status: ConfigStatus,
    ) -> Result<(), StoreError> {
        self.known(&key.kind)?;
        let mut log = self.log.write();
        let mut objects = self.objects();
        let current = objects
            .get(&slot(key))
            .ok_or_else(|| StoreError::NotFound { key: key.clone() })?;
        check_version(key, Some(observed), current, true)?;
        let mut config = (**current).clone();
        config.meta.status = Some(status);
        let config = Arc::new(config);
        objects.insert(slot(key), Arc::clone(&config));
        log.put(config);
        Ok(())
    }
}

#[async_trait]
impl ConfigWatch for MapStore {
    async fn snapshot(&self, kind: &str) -> Result<Snapshot, StoreError> {
        self.known(kind)?;
        // Under the log's write lock, items and revision agree.
        let log = self.log.write();
        let items = self
            .objects()
            .iter()
            .filter(|((k, _, _), _)| k == kind)
            .map(|(_, config)| Arc::clone(config))
            .collect();
        Ok(Snapshot::new(log.revision(), items))
    }

    async fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.known(kind)?;
        self.log.watch(kind, after)
    }

    async fn current_revision(&self) -> Result<Revision, StoreError> {
        Ok(self.log.revision())
    }
}

pilot_store::conformance_suite!(|registry: KindRegistry| async move {
    Arc::new(MapStore::new(registry)) as Arc<dyn ConfigWatch>
});

mod status {
    use super::*;

    pilot_store::status_conformance_suite!(|registry: KindRegistry| async move {
        Arc::new(MapStore::new(registry)) as Arc<dyn ConfigWatch>
    });
}

/// A registry written directly: its own source.
struct Direct(ServiceCache);

#[async_trait]
impl RegistrySource for Direct {
    async fn write(&mut self, services: &[SourceService]) {
        self.0.apply(desired_state(services));
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        Arc::new(self.0.clone())
    }

    async fn disconnect(&mut self) -> bool {
        false
    }

    async fn reconnect(&mut self) {}
}

mod registry {
    use super::*;

    pilot_store::registry_conformance_suite!(|| async {
        Box::new(Direct(ServiceCache::new())) as Box<dyn RegistrySource>
    });
}

mod membership {
    use super::*;

    pilot_store::membership_conformance_suite!(single: |replicas: Vec<String>, _ttl: Duration| async move {
        replicas
            .into_iter()
            .map(|name| Arc::new(LocalMembership::new(name)) as Arc<dyn Membership>)
            .collect::<Vec<_>>()
    });
}
