//! [`KubeError`]: what went wrong talking to the Kubernetes API, in the
//! user's terms.
//!
//! Backend failures of this crate reach callers as a
//! [`StoreError::Unavailable`] whose message is this error's `Display`
//! ("the Kubernetes API refused: ... (403 Forbidden, creating RouteRule ...)") and
//! whose source is this error, which carries the client's own (`kube::Error`
//! with its hyper or tower chain) for logs.

use pilot_model::StoreError;

/// A failure of the Kubernetes backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KubeError {
    /// The API server could not be reached (connection refused or lost,
    /// TLS, a proxy).
    #[error("the Kubernetes API server is unreachable ({action})")]
    Unreachable {
        /// What was being done ("listing routerules.config.istio.io").
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// The API server answered with an error Status that pilot does not turn
    /// into another [`StoreError`] (403, 429, 500, 503, ...).
    #[error("the Kubernetes API refused: {message} ({code} {reason}, {action})")]
    Refused {
        /// What was being done.
        action: String,
        /// The HTTP code.
        code: u16,
        /// The Status reason (`Forbidden`, `TooManyRequests`).
        reason: String,
        /// The Status message, as the API server wrote it.
        message: String,
    },
    /// The API server does not serve a kind's custom resource.
    #[error(
        "the Kubernetes API server does not serve {resource} ({message}): install the CRDs first (pilot_store_k8s::install_crds)"
    )]
    NotServed {
        /// `<plural>.<group>/<version>`.
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// The answer could not be read (not JSON, cut off).
    #[error("the Kubernetes API server's answer to {action} could not be read")]
    BadAnswer {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// An answer that makes no sense for the request (a conflict on a read).
    #[error("the Kubernetes API server answered {action} unexpectedly")]
    Unexpected {
        /// What was being done.
        action: String,
    },
    /// A resourceVersion that is not an etcd revision.
    #[error(
        "the resourceVersion {version:?} of {of} is not a decimal number: pilot-store-k8s needs an \
         API server whose resource versions are etcd revisions"
    )]
    NotARevision {
        /// The version.
        version: String,
        /// Whose version.
        of: String,
    },
    /// A custom object that is not a pilot object (no spec, no name).
    #[error("{0}")]
    NotPilotObject(String),
    /// A CustomResourceDefinition did not become `Established` in time.
    #[error("CustomResourceDefinition {name} is not Established after {waited:?}")]
    NotEstablished {
        /// The CRD's name.
        name: String,
        /// How long [`install_crds`](crate::install_crds) waited.
        waited: std::time::Duration,
    },
    /// A watch ended with an error event.
    #[error("the watch of {what} ended with {code} {reason}: {message}")]
    WatchEnded {
        /// What was watched.
        what: String,
        /// The Status code.
        code: u16,
        /// The Status reason.
        reason: String,
        /// The Status message.
        message: String,
    },
}

impl KubeError {
    /// Classifies a client error from `action` ("creating RouteRule default/r").
    pub(crate) fn from_client(action: impl Into<String>, error: kube::Error) -> Self {
        let action = action.into();
        match error {
            kube::Error::Api(status) => KubeError::Refused {
                action,
                code: status.code,
                reason: status.reason.clone(),
                message: status.message.clone(),
            },
            kube::Error::HyperError(_)
            | kube::Error::Service(_)
            | kube::Error::RustlsTls(_)
            | kube::Error::TlsRequired
            | kube::Error::Auth(_) => KubeError::Unreachable {
                action,
                source: error,
            },
            _ => KubeError::BadAnswer {
                action,
                source: error,
            },
        }
    }
}

impl From<KubeError> for StoreError {
    fn from(error: KubeError) -> Self {
        StoreError::unavailable_from(error)
    }
}

/// A failed request for `action` as a [`StoreError::Unavailable`].
pub(crate) fn unavailable(action: impl Into<String>, error: kube::Error) -> StoreError {
    KubeError::from_client(action, error).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_quote_the_api_server_not_the_client() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "code": 403, "reason": "Forbidden", "message": "routerules is forbidden: User \"x\" cannot create"
        }))
        .unwrap();
        let error = unavailable("creating RouteRule default/r", kube::Error::Api(Box::new(status)));
        assert_eq!(
            error.to_string(),
            "backend unavailable: the Kubernetes API refused: routerules is forbidden: \
             User \"x\" cannot create (403 Forbidden, creating RouteRule default/r)"
        );
        assert!(!error.to_string().contains("ApiError"), "{error}");
    }
}
