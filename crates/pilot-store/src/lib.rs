//! Backend-agnostic store machinery for pilot: the cached [`Controller`],
//! the [`TypedStore`] wrapper, the building blocks backends share
//! ([`ConfigIndex`], [`WatchLog`], [`Backoff`], [`ServiceCache`]), and, behind the `testing`
//! feature, the conformance suites every backend and registry runs.
//!
//! # Conformance suites
//!
//! A store or registry of your own is checked by the same suites pilot's
//! backends run. Enable the feature in your dev-dependencies:
//!
//! ```toml
//! [dev-dependencies]
//! pilot-store = { version = "0.1", features = ["testing"] }
//! ```
//!
//! then expand `pilot_store::conformance_suite!` (stores),
//! `pilot_store::status_conformance_suite!` (stores that keep distribution
//! status), `pilot_store::registry_conformance_suite!` (service registries)
//! or `pilot_store::membership_conformance_suite!` (replica membership) in a
//! test file; `testing` describes each property and the rules behind them.
#![cfg_attr(docsrs, feature(doc_cfg))]

mod backoff;
mod change_ticks;
mod controller;
mod followed;
mod handlers;
mod index;
mod log;
mod notification;
mod quarantine;
mod reconcile;
mod service_cache;
pub mod service_entries;
mod typed;

#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use backoff::Backoff;
pub use change_ticks::ChangeTicks;
pub use controller::{Controller, ControllerOptions};
pub use followed::{FollowedRegistry, RegistryWriter};
pub use handlers::Handler;
pub use index::ConfigIndex;
pub use log::{DEFAULT_HISTORY, LogWriter, WatchLog};
pub use notification::{ConfigEvent, Notification};
pub use quarantine::{Quarantine, QuarantineReason, Quarantined};
pub use reconcile::{Applied, DesiredService, DesiredState};
pub use service_cache::{EVENT_BUFFER, RegistryError, ServiceCache};
pub use service_entries::service_entry_registry;
pub use typed::TypedStore;
