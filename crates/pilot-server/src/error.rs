//! [`StartError`]: why `pilot-discovery` did not start, from any step of
//! the start sequence ([`crate::start`]): the flags, the listeners, the
//! store and registries, the injection webhook.

/// Why the server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The flags ask for something impossible (exit code 2).
    #[error("{0}")]
    Usage(String),
    /// Something failed (exit code 1).
    #[error("{0}")]
    Failed(String),
}

impl StartError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            StartError::Usage(_) => 2,
            StartError::Failed(_) => 1,
        }
    }
}
