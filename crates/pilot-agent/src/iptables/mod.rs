//! Traffic capture: the iptables rules that send a pod's TCP traffic to its
//! Envoy (`pilot-agent iptables`).
//!
//! [`rules::apply_script`] and [`rules::cleanup_script`] are pure: they turn a
//! [`CaptureConfig`] (and what `iptables-save` shows is installed) into
//! `iptables-restore` input, so `--dry-run` prints exactly what would be
//! applied and golden tests pin it. [`apply`] and [`cleanup`] run them, one
//! `iptables-restore --noflush` transaction per address family.

mod args;
pub mod config;
pub mod rules;
mod run;

pub use args::IptablesArgs;
pub use config::{CaptureConfig, Cidr, CidrSet, PortSet};
pub use rules::Family;
pub use run::{apply, cleanup, dry_run, families};

/// What went wrong while capturing traffic.
#[derive(Debug, thiserror::Error)]
pub enum IptablesError {
    /// An option's value does not parse.
    #[error("{option} {value:?}: {reason}")]
    Option {
        /// The option, such as `--exclude-outbound-cidrs`.
        option: &'static str,
        /// Its value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The iptables programs are not installed.
    #[error("{program} is not installed (Debian package iptables): {source}")]
    Missing {
        /// The program that could not be started.
        program: &'static str,
        /// Why it could not be started.
        source: std::io::Error,
    },
    /// The process may not change the network namespace's rules.
    #[error(
        "{program} was refused: this process lacks the NET_ADMIN capability (run as root or grant NET_ADMIN and NET_RAW): {stderr}"
    )]
    NotPermitted {
        /// The program that was refused.
        program: &'static str,
        /// What it printed.
        stderr: String,
    },
    /// The program failed for another reason.
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        /// The program that failed.
        program: &'static str,
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
}
