//! What can go wrong in the agent, from its caller's side.

use std::path::PathBuf;

/// An error of the proxy agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The proxy's identity is incomplete or malformed (which flag or
    /// environment variable to set is in the message).
    #[error("proxy identity: {field}: {message}")]
    Identity {
        /// The flag (and environment variable) at fault.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// A file the agent reads (labels, token) or writes (bootstrap).
    #[error("{}: {message}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong, with the line when it is a parse error.
        message: String,
    },
    /// The Envoy binary (`--envoy-binary`) is missing or cannot be run:
    /// a configuration error, found before anything starts.
    #[error("envoy binary {}: {message}", binary.display())]
    EnvoyBinary {
        /// The binary as configured.
        binary: PathBuf,
        /// What is wrong with it, and what to set.
        message: String,
    },
    /// Envoy could not be started at all (binary missing, not executable).
    #[error("cannot start envoy {}: {source}", binary.display())]
    Spawn {
        /// The Envoy binary.
        binary: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Envoy kept exiting: the retry budget is spent. The message names the
    /// last exit and the tail of Envoy's log.
    #[error("envoy exited {attempts} times in a row (retry budget spent); last exit: {last_exit}")]
    BudgetExhausted {
        /// Exits counted against the budget.
        attempts: u32,
        /// The last exit (code or signal) and what Envoy said.
        last_exit: String,
    },
    /// An HTTP call (Envoy's admin endpoint, pilot-discovery) failed.
    #[error("{url}: {message}")]
    Http {
        /// What was called.
        url: String,
        /// The error or the unexpected status.
        message: String,
    },
    /// A secret (the bearer token, the workload certificates) would cross
    /// plaintext to an address that is not loopback: the message names the
    /// flag that allows it.
    #[error("{address}: {message}")]
    Plaintext {
        /// The discovery address or report URL.
        address: String,
        /// What it would carry, and the flags that fix it.
        message: String,
    },
    /// The SDS socket or its directory cannot be made private.
    #[error("SDS socket {}: {message}", path.display())]
    SdsSocket {
        /// The socket or its directory.
        path: PathBuf,
        /// What is wrong, and what to do.
        message: String,
    },
    /// Binding the status port failed.
    #[error("status port {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
}

impl AgentError {
    pub(crate) fn file(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        AgentError::File {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
