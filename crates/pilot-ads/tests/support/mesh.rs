//! A mesh of service entries through a real Envoy: an ADS server over a
//! memory store whose registry is an empty platform registry and the
//! store's ServiceEntries (and WorkloadEntries), with an Envoy (no traffic
//! capture: its listeners bind 127.0.0.1 at the service ports) fed by it.

use std::sync::Arc;

use pilot_ads::XdsServer;
use pilot_api::default_registry;
use pilot_model::{AggregateDiscovery, ConfigKey, ConfigStore, document};
use pilot_store::{Controller, service_entry_registry};
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;

use super::envoy::serve_envoy;

/// The store, the server and the Envoy of one test; all stop when it is
/// dropped.
pub(crate) struct Mesh {
    /// The store the test writes to.
    pub store: MemoryConfigStore,
    /// The ADS server over it.
    pub server: XdsServer,
    /// The Envoy the server feeds.
    pub envoy: Envoy,
}

impl Mesh {
    /// A mesh over an empty store.
    pub(crate) async fn start() -> Self {
        Self::with("").await
    }

    /// A mesh whose store holds the objects of `text` before the server
    /// starts, so that Envoy's first configuration has them.
    pub(crate) async fn with(text: &str) -> Self {
        let store = MemoryConfigStore::new(default_registry());
        apply(&store, text).await;
        let controller = Arc::new(Controller::new(Arc::new(store.clone())));
        controller.run();
        let registry = AggregateDiscovery::new(vec![
            Arc::new(MemoryServiceRegistry::new()),
            Arc::new(service_entry_registry(&controller)),
        ]);
        let (server, envoy) = serve_envoy(controller, Arc::new(registry), false);
        Mesh { store, server, envoy }
    }

    /// Creates the objects of `text`.
    pub(crate) async fn apply(&self, text: &str) {
        apply(&self.store, text).await;
    }

    /// Creates the objects of `text`, or replaces the spec of those that
    /// exist.
    pub(crate) async fn put(&self, text: &str) {
        for object in document::parse("objects.yaml", text, &default_registry()).unwrap() {
            let key = ConfigKey::new(&object.meta.kind, &object.meta.namespace, &object.meta.name);
            match self.store.get(&key).await.unwrap() {
                Some(current) => {
                    let mut next = (*current).clone();
                    next.spec = object.spec.clone();
                    self.store.update(next).await.unwrap();
                }
                None => {
                    self.store.create(object).await.unwrap();
                }
            }
        }
    }
}

/// Creates the objects of `text` (any kind of the default registry) in
/// `store`.
pub(crate) async fn apply(store: &MemoryConfigStore, text: &str) {
    for object in document::parse("objects.yaml", text, &default_registry()).unwrap() {
        store.create(object).await.unwrap();
    }
}
