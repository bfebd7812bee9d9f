//! What can go wrong when talking to a configuration store.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

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
        /// What failed, in the user's terms ("etcd at 127.0.0.1:2379 is
        /// unreachable"): safe to show to a REST client.
        reason: String,
        /// The backend's own error (its gRPC status, transport error chain),
        /// for logs: see [`StoreError::details`].
        #[source]
        source: Option<BackendError>,
    },
    /// A write was sent but the backend did not say whether it was applied
    /// (it timed out after sending): it may have been. Read the object
    /// before retrying.
    #[error("the write may have been applied; the backend did not confirm it: {reason}")]
    Indeterminate {
        /// What happened, in the user's terms.
        reason: String,
        /// The backend's own error, for logs.
        #[source]
        source: Option<BackendError>,
    },
    /// A cache (`pilot_store::Controller`) was asked to write, cache or
    /// announce a kind it does not watch: one registered after the cache
    /// was built, or left out of the kinds it was told to watch.
    #[error(
        "kind {kind:?} is not watched by this Controller, which watches {watched:?}: a Controller watches the kinds \
         registered when it is built (or those in ControllerOptions::kinds); build it after registering every kind"
    )]
    NotWatched {
        /// The kind asked for.
        kind: String,
        /// The kinds the cache watches.
        watched: Vec<String>,
    },
}

impl StoreError {
    /// A [`StoreError::Unavailable`] with this message and no underlying
    /// error.
    pub fn unavailable(reason: impl fmt::Display) -> Self {
        StoreError::Unavailable {
            reason: reason.to_string(),
            source: None,
        }
    }

    /// A [`StoreError::Unavailable`] carrying a backend's typed error: its
    /// `Display` is the user-facing reason, the error itself (with its
    /// source chain) the [`source`](Error::source).
    pub fn unavailable_from(error: impl Error + Send + Sync + 'static) -> Self {
        StoreError::Unavailable {
            reason: error.to_string(),
            source: Some(BackendError::new(error)),
        }
    }

    /// A [`StoreError::Indeterminate`] carrying a backend's typed error, as
    /// [`StoreError::unavailable_from`].
    pub fn indeterminate_from(error: impl Error + Send + Sync + 'static) -> Self {
        StoreError::Indeterminate {
            reason: error.to_string(),
            source: Some(BackendError::new(error)),
        }
    }

    /// The backend's own error, if this error carries one.
    pub fn backend(&self) -> Option<&BackendError> {
        match self {
            StoreError::Unavailable { source, .. } | StoreError::Indeterminate { source, .. } => {
                source.as_ref()
            }
            _ => None,
        }
    }

    /// This error and every error under it, joined with `": "`: what a log
    /// line should carry (a REST body carries only the `Display`).
    pub fn details(&self) -> String {
        chain(self)
    }
}

/// A backend's own error inside a [`StoreError`]: shared (so the
/// `StoreError` stays `Clone`), with its source chain. Two are equal when
/// their chains read the same.
#[derive(Clone)]
pub struct BackendError(Arc<dyn Error + Send + Sync>);

impl BackendError {
    /// Wraps a backend's error.
    pub fn new(error: impl Error + Send + Sync + 'static) -> Self {
        BackendError(Arc::new(error))
    }

    /// The backend's error, to downcast to its type
    /// (`pilot_store_etcd::EtcdError`, `pilot_store_k8s::KubeError`).
    pub fn get(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Debug for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl Error for BackendError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || chain(&*self.0) == chain(&*other.0)
    }
}

impl Eq for BackendError {}

/// An error and its sources, outermost first, joined with `": "`; a source
/// whose message its parent already shows is not repeated.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(source) = next {
        let message = source.to_string();
        if !text.ends_with(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        next = source.source();
    }
    text
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

    #[derive(Debug, thiserror::Error)]
    #[error("etcd at 127.0.0.1:2379 is unreachable")]
    struct Unreachable(#[source] std::io::Error);

    #[test]
    fn backend_details_stay_out_of_the_message() {
        let error = StoreError::unavailable_from(Unreachable(std::io::Error::other(
            "transport error: tcp connect error: Connection refused",
        )));
        assert_eq!(
            error.to_string(),
            "backend unavailable: etcd at 127.0.0.1:2379 is unreachable"
        );
        assert_eq!(
            error.details(),
            "backend unavailable: etcd at 127.0.0.1:2379 is unreachable: \
             transport error: tcp connect error: Connection refused"
        );
        let backend = error.backend().unwrap();
        assert!(backend.get().downcast_ref::<Unreachable>().is_some());
        assert_eq!(error.clone(), error);
        assert_ne!(
            error,
            StoreError::unavailable("etcd at 127.0.0.1:2379 is unreachable")
        );
    }
}
