//! The in-memory service registry passes the registry conformance suite:
//! it is its own source, and a whole desired state applied to it emits only
//! the real differences.

use std::sync::Arc;

use pilot_model::ServiceDiscovery;
use pilot_store::testing::{RegistrySource, SourceService, desired_state};
use pilot_store_memory::MemoryServiceRegistry;

struct Memory(MemoryServiceRegistry);

#[async_trait::async_trait]
impl RegistrySource for Memory {
    async fn write(&mut self, services: &[SourceService]) {
        self.0.apply(desired_state(services));
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        Arc::new(self.0.clone())
    }

    /// Writes reach the registry at once: there is no gap to make.
    async fn disconnect(&mut self) -> bool {
        false
    }

    async fn reconnect(&mut self) {}
}

pilot_store::registry_conformance_suite!(|| async {
    Box::new(Memory(MemoryServiceRegistry::new())) as Box<dyn RegistrySource>
});
