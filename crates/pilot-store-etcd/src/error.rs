//! [`EtcdError`]: what went wrong talking to etcd, in the user's terms.
//!
//! Every backend failure of this crate reaches callers as a
//! [`StoreError::Unavailable`] or [`StoreError::Indeterminate`] whose
//! message is this error's `Display` ("etcd at http://127.0.0.1:2379 is
//! unreachable") and whose source is this error, which carries the etcd
//! client's own (the gRPC status, the transport error chain) for logs.

use std::fmt;
use std::path::PathBuf;

use pilot_model::StoreError;

/// Which etcd a handle talks to: its endpoints, or "etcd" when the client
/// was made elsewhere ([`EtcdConfigStore::with_client`](crate::EtcdConfigStore::with_client)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints(Option<String>);

impl Endpoints {
    /// These endpoints, joined with `,`.
    pub fn new<S: AsRef<str>>(endpoints: &[S]) -> Self {
        let joined = endpoints.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(",");
        Endpoints((!joined.is_empty()).then_some(joined))
    }
}

impl fmt::Display for Endpoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Some(endpoints) => write!(f, "etcd at {endpoints}"),
            None => f.write_str("etcd"),
        }
    }
}

/// A failure of the etcd backend.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// No connection could be made (or kept) to any endpoint.
    #[error("{endpoints} is unreachable")]
    Unreachable {
        /// The etcd in question.
        endpoints: Endpoints,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// The request was sent but no answer came in time: it may have been
    /// applied.
    #[error("{endpoints} did not answer in time")]
    NoAnswer {
        /// The etcd in question.
        endpoints: Endpoints,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// etcd answered with an error (authentication, permission, a request
    /// it does not accept); `message` is etcd's own.
    #[error("{endpoints} refused the request: {message}")]
    Refused {
        /// The etcd in question.
        endpoints: Endpoints,
        /// What etcd said (`etcdserver: permission denied`).
        message: String,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// Any other failure of the client.
    #[error("{endpoints} failed: {what}")]
    Failed {
        /// The etcd in question.
        endpoints: Endpoints,
        /// What failed, briefly.
        what: &'static str,
        /// The client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// etcd ended a watch (the stream closed, or etcd cancelled it for a
    /// reason other than compaction).
    #[error("{endpoints} ended the watch of {what}{}", reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default())]
    WatchEnded {
        /// The etcd in question.
        endpoints: Endpoints,
        /// What was watched (a kind, the service registry).
        what: String,
        /// etcd's cancel reason, if it gave one.
        reason: Option<String>,
    },
    /// A key under the prefix holds something that is not a valid object.
    #[error("etcd key {key} holds a bad object: {reason}")]
    BadObject {
        /// The etcd key.
        key: String,
        /// What is wrong with its value.
        reason: String,
    },
    /// A TLS file named in [`EtcdOptions`](crate::EtcdOptions) could not be
    /// read.
    #[error("cannot read {}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A value could not be encoded as JSON.
    #[error("cannot encode {what}")]
    Encode {
        /// What was encoded.
        what: &'static str,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

impl EtcdError {
    /// Classifies a client error from a request to `endpoints`.
    pub(crate) fn from_client(endpoints: &Endpoints, what: &'static str, source: etcd_client::Error) -> Self {
        let endpoints = endpoints.clone();
        match &source {
            etcd_client::Error::TransportError(_) => EtcdError::Unreachable { endpoints, source },
            etcd_client::Error::GRpcStatus(status) => match status.code() {
                // The channel could not connect (or lost its connection).
                tonic::Code::Unavailable => EtcdError::Unreachable { endpoints, source },
                // Sent, then cut off or timed out (tonic's "Timeout expired"
                // is CANCELLED).
                tonic::Code::Cancelled | tonic::Code::DeadlineExceeded | tonic::Code::Unknown => {
                    EtcdError::NoAnswer { endpoints, source }
                }
                _ => EtcdError::Refused {
                    endpoints,
                    message: status.message().to_string(),
                    source,
                },
            },
            _ => EtcdError::Failed {
                endpoints,
                what,
                source,
            },
        }
    }

    /// True if the request may have been applied (sent, no answer).
    pub fn may_have_been_applied(&self) -> bool {
        matches!(self, EtcdError::NoAnswer { .. })
    }
}

impl From<EtcdError> for StoreError {
    fn from(error: EtcdError) -> Self {
        StoreError::unavailable_from(error)
    }
}

/// A failed read (or a write that was not sent): [`StoreError::Unavailable`].
pub(crate) fn unavailable(endpoints: &Endpoints, error: etcd_client::Error) -> StoreError {
    EtcdError::from_client(endpoints, "request", error).into()
}

/// A failed write transaction: if it timed out or was cut off after being
/// sent, etcd may have applied it ([`StoreError::Indeterminate`]); if it
/// could not be sent, it was not ([`StoreError::Unavailable`]).
pub(crate) fn write_failed(endpoints: &Endpoints, error: etcd_client::Error) -> StoreError {
    let error = EtcdError::from_client(endpoints, "write", error);
    if error.may_have_been_applied() {
        StoreError::indeterminate_from(error)
    } else {
        error.into()
    }
}

/// A failed request of a handle that does not know its endpoints (the
/// service registry's writes, the status lease): "etcd is unreachable".
pub(crate) fn unavailable_etcd(error: etcd_client::Error) -> StoreError {
    unavailable(&Endpoints::default(), error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_which_etcd_and_hide_the_client_error() {
        let endpoints = Endpoints::new(&["http://127.0.0.1:2379"]);
        let refused = tonic::Status::unavailable("tcp connect error: Connection refused (os error 111)");
        let error = unavailable(&endpoints, etcd_client::Error::GRpcStatus(refused));
        assert_eq!(
            error.to_string(),
            "backend unavailable: etcd at http://127.0.0.1:2379 is unreachable"
        );
        assert!(
            error.details().contains("Connection refused"),
            "{}",
            error.details()
        );

        let timeout = tonic::Status::cancelled("Timeout expired");
        let error = write_failed(&endpoints, etcd_client::Error::GRpcStatus(timeout));
        assert!(matches!(error, StoreError::Indeterminate { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("etcd at http://127.0.0.1:2379 did not answer in time")
        );

        let denied = tonic::Status::permission_denied("etcdserver: permission denied");
        let error = write_failed(&endpoints, etcd_client::Error::GRpcStatus(denied));
        assert_eq!(
            error.to_string(),
            "backend unavailable: etcd at http://127.0.0.1:2379 refused the request: etcdserver: permission denied"
        );
        assert_eq!(Endpoints::default().to_string(), "etcd");
    }
}
