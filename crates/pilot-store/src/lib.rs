//! Backend-agnostic store machinery for pilot: the cached [`Controller`],
//! the [`TypedStore`] wrapper, the building blocks backends share
//! ([`ConfigIndex`], [`WatchLog`], [`Backoff`], [`ServiceCache`]), and, behind the `testing`
//! feature, the conformance suite every backend runs.

mod backoff;
mod controller;
mod handlers;
mod index;
mod log;
mod notification;
mod service_cache;
mod typed;

#[cfg(feature = "testing")]
pub mod testing;

pub use backoff::Backoff;
pub use controller::{Controller, ControllerOptions};
pub use handlers::Handler;
pub use index::ConfigIndex;
pub use log::{DEFAULT_HISTORY, LogWriter, WatchLog};
pub use notification::{ConfigEvent, Notification};
pub use service_cache::{EVENT_BUFFER, RegistryError, ServiceCache};
pub use typed::TypedStore;
