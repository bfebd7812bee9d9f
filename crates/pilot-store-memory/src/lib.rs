//! In-memory backends for pilot: [`MemoryConfigStore`], a concurrent
//! [`ConfigStore`](pilot_model::ConfigStore) with resumable watches, and
//! [`MemoryServiceRegistry`], a [`ServiceDiscovery`](pilot_model::ServiceDiscovery)
//! fed by the embedding program.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod config_store;
mod registry;

pub use config_store::MemoryConfigStore;
pub use registry::{EVENT_BUFFER, MemoryServiceRegistry, RegistryError};
