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
