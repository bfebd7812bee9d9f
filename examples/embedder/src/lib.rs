//! pilot embedded as a dependency, exactly as docs/guide/embedding.md
//! describes: the crates themselves (pilot-model, pilot-store, pilot-ads,
//! pilot-apiserver, pilot-distribution), no facade.
//!
//! - [`FileConfigStore`]: a configuration backend of one's own (a directory
//!   of JSON files), which pilot's store conformance suite checks
//!   (`tests/store_conformance.rs`).
//! - [`JsonFileRegistry`]: a service registry of one's own (a JSON file of
//!   services), which pilot's registry conformance suite checks
//!   (`tests/registry_conformance.rs`).
//! - [`serve`]: both behind pilot's cached Controller and ADS server,
//!   serving Envoy (`tests/envoy.rs` sends real traffic through a real
//!   Envoy configured by it, then reads the rule's status, 1/1, through
//!   the REST API); the REST API over the file store ([`rest_api`],
//!   `tests/rest_api.rs`); the status loop writing each routing object's
//!   distribution status into its file (`tests/status.rs`). The binary
//!   runs it from the command line.

mod file_store;
mod json_registry;
mod serve;

pub use file_store::FileConfigStore;
pub use json_registry::{InstanceJson, JsonFileRegistry, ServiceJson, ServicesJson, desired};
pub use serve::{Error, rest_api, serve};
