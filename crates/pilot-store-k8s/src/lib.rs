//! Kubernetes adapter for pilot.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod convert;
mod crd;
mod registry;
mod store;
mod watch;

#[cfg(feature = "testing")]
pub mod testing;

pub use crd::{FIELD_MANAGER, crd, crds, install_crds};
pub use registry::{DiscoveryOptions, KubeServiceDiscovery, hostname, port_protocol};
pub use store::KubeConfigStore;
