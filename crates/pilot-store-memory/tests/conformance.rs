//! The backend conformance suite, run against the in-memory store.

use std::sync::Arc;

use pilot_model::{ConfigWatch, KindRegistry};
use pilot_store_memory::MemoryConfigStore;

pilot_store::conformance_suite!(|registry: KindRegistry| async move {
    Arc::new(MemoryConfigStore::new(registry)) as Arc<dyn ConfigWatch>
});

mod status {
    use super::*;

    pilot_store::status_conformance_suite!(|registry: KindRegistry| async move {
        Arc::new(MemoryConfigStore::new(registry)) as Arc<dyn ConfigWatch>
    });
}

/// The in-memory store has one replica: the single-replica membership
/// properties on `LocalMembership`.
mod membership {
    use std::time::Duration;

    use pilot_model::{LocalMembership, Membership};

    use super::*;

    pilot_store::membership_conformance_suite!(single: |replicas: Vec<String>, _ttl: Duration| async move {
        replicas
            .into_iter()
            .map(|name| Arc::new(LocalMembership::new(name)) as Arc<dyn Membership>)
            .collect::<Vec<_>>()
    });
}
