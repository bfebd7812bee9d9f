//! What can go wrong generating configuration.

/// What can go wrong generating configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XdsError {
    /// The Envoy node id is not `type~ip~id~domain`.
    #[error("bad node id {node_id:?}: {reason}")]
    BadNodeId {
        /// The node id as sent.
        node_id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A resource name does not parse.
    #[error("bad resource name {name:?}: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A configuration object does not decode as its kind.
    #[error("bad configuration: {0}")]
    BadConfig(String),
    /// The generated resources refer to each other inconsistently.
    #[error("inconsistent resources: {0}")]
    Inconsistent(String),
}
