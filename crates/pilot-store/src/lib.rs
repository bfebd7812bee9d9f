//! Backend-agnostic store machinery for pilot.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod index;
mod log;

pub use index::ConfigIndex;
pub use log::{DEFAULT_HISTORY, LogWriter, WatchLog};
