//! In-memory backends for pilot: [`MemoryConfigStore`], a concurrent
//! [`ConfigStore`](pilot_model::ConfigStore) with resumable watches, and
//! [`MemoryServiceRegistry`], a [`ServiceDiscovery`](pilot_model::ServiceDiscovery)
//! fed by the embedding program.

mod config_store;

pub use config_store::{MemoryConfigStore, PendingWrite, WriteAhead};
/// The in-memory service registry: pilot-store's [`ServiceCache`](pilot_store::ServiceCache), fed by
/// the embedding program.
pub use pilot_store::ServiceCache as MemoryServiceRegistry;
pub use pilot_store::{EVENT_BUFFER, RegistryError};
