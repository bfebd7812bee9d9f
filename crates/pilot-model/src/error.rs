//! What can go wrong when talking to a configuration store.

use crate::{ConfigKey, FieldError};

/// Every way a store operation can fail, as the caller sees it.
///
/// Each variant carries what a user needs to fix the input: the key, the
/// versions involved, or every field error with its path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No object has this key.
    #[error("{key} not found")]
    NotFound {
        /// The missing key.
        key: ConfigKey,
    },
    /// `create` found an object with this key already.
    #[error("{key} already exists")]
    AlreadyExists {
        /// The key that is taken.
        key: ConfigKey,
    },
    /// The caller's resource version is not the stored one (or was missing
    /// on an update).
    #[error(
        "conflict on {key}: {} but the current resourceVersion is {actual}; get the object again and retry",
        match expected { Some(v) => format!("the request carried resourceVersion {v}"), None => "the request carried no resourceVersion".to_string() }
    )]
    Conflict {
        /// The key written.
        key: ConfigKey,
        /// The version the caller sent, if any.
        expected: Option<String>,
        /// The version in the store.
        actual: String,
    },
    /// The object does not satisfy its kind's schema; nothing was stored.
    #[error("{key} is invalid: {}", join(errors))]
    Invalid {
        /// The object's key.
        key: ConfigKey,
        /// Every problem, each with its field path.
        errors: Vec<FieldError>,
    },
    /// The kind is not registered with this store.
    #[error("unknown kind {kind:?}: register it with the store's KindRegistry first")]
    UnknownKind {
        /// The kind's name.
        kind: String,
    },
    /// A kind of this name is already registered.
    #[error("kind {kind:?} is already registered")]
    KindAlreadyRegistered {
        /// The kind's name.
        kind: String,
    },
    /// A watch cannot resume after `requested`: the backend no longer keeps
    /// history that old. The caller must list again.
    #[error(
        "cannot watch after revision {requested}: history before revision {oldest} was compacted; relist"
    )]
    Compacted {
        /// The revision the caller wanted to resume after.
        requested: u64,
        /// The oldest revision the backend can still resume after.
        oldest: u64,
    },
    /// The backend could not be reached or failed; the operation may be
    /// retried.
    #[error("backend unavailable: {reason}")]
    Unavailable {
        /// What the backend said.
        reason: String,
    },
    /// A write was sent but the backend did not say whether it was applied
    /// (it timed out after sending): it may have been. Read the object
    /// before retrying.
    #[error("the write may have been applied; the backend did not confirm it: {reason}")]
    Indeterminate {
        /// What the backend said.
        reason: String,
    },
}

impl StoreError {
    /// A [`StoreError::Unavailable`] from any error.
    pub fn unavailable(reason: impl std::fmt::Display) -> Self {
        StoreError::Unavailable {
            reason: reason.to_string(),
        }
    }
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_key_versions_and_paths() {
        let key = ConfigKey::new("RouteRule", "default", "r");
        let conflict = StoreError::Conflict {
            key: key.clone(),
            expected: Some("3".into()),
            actual: "5".into(),
        };
        assert_eq!(
            conflict.to_string(),
            "conflict on RouteRule default/r: the request carried resourceVersion 3 but the current resourceVersion is 5; get the object again and retry"
        );
        let invalid = StoreError::Invalid {
            key,
            errors: vec![
                FieldError::new("spec.a", "must be set"),
                FieldError::new("metadata.name", "bad"),
            ],
        };
        assert_eq!(
            invalid.to_string(),
            "RouteRule default/r is invalid: spec.a: must be set; metadata.name: bad"
        );
    }
}
