//! In-memory backends for pilot: [`MemoryConfigStore`], a concurrent
//! [`ConfigStore`](pilot_model::ConfigStore) with resumable watches, and
//! [`MemoryServiceRegistry`], a [`ServiceDiscovery`](pilot_model::ServiceDiscovery)
//! fed by the embedding program. With feature `journal`, [`journal::open`]
//! makes the store durable in a data directory. Feature `fuzzing` adds
//! `journal::fuzzing`, the journal's record reader for the fuzz targets
//! (not an API for anything else).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod config_store;
mod credentials;
#[cfg(feature = "journal")]
#[cfg_attr(docsrs, doc(cfg(feature = "journal")))]
pub mod journal;

pub use config_store::{MemoryConfigStore, PendingWrite, WriteAhead};
pub use credentials::MemoryCredentials;
/// The in-memory service registry: pilot-store's [`ServiceCache`](pilot_store::ServiceCache), fed by
/// the embedding program. Its instances carry the workloads the program
/// gives them ([`ServiceInstance::with_workload`](pilot_model::ServiceInstance::with_workload)), and
/// [`set_workload`](pilot_store::ServiceCache::set_workload) lists those that back no service.
pub use pilot_store::ServiceCache as MemoryServiceRegistry;
pub use pilot_store::{EVENT_BUFFER, RegistryError};
