//! What can go wrong in the certificate authority.

/// A certificate authority error, named from the caller's side.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CaError {
    /// A PEM input (certificate, key, CSR) could not be read.
    #[error("{what}: {reason}")]
    Pem {
        /// What was being read (`the CA certificate`, `the CSR`, ...).
        what: String,
        /// Why it was refused.
        reason: String,
    },
    /// The signing key does not belong to the signing certificate, or the
    /// chain does not lead to the root.
    #[error("the CA material is inconsistent: {0}")]
    Material(String),
    /// A URI is not `spiffe://<trust-domain>/ns/<namespace>/sa/<account>`.
    #[error(
        "{uri:?} is not a SPIFFE workload identity (spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>)"
    )]
    NotSpiffe {
        /// The URI given.
        uri: String,
    },
    /// An identity breaks the SPIFFE ID rules (charset, `.`/`..` or empty
    /// segments, length).
    #[error("{id:?} breaks the SPIFFE ID rules: the {part} {reason}")]
    InvalidIdentity {
        /// The identity (its start, when it is long).
        id: String,
        /// The offending part: `trust domain`, `namespace`,
        /// `service account`, `path segment` or `URI`.
        part: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A certificate signing request asks for something this CA does not
    /// grant to the caller.
    #[error("the certificate request is refused: {0}")]
    Refused(String),
    /// The requested lifetime is over the maximum.
    #[error("the requested lifetime {requested_secs} s is over the maximum {max_secs} s")]
    TtlOverMax {
        /// Seconds asked for.
        requested_secs: u64,
        /// The CA's maximum, in seconds.
        max_secs: u64,
    },
    /// A chain does not verify against the root.
    #[error("the certificate chain does not verify: {0}")]
    Verify(String),
    /// Generating or signing failed in the crypto library.
    #[error("signing failed: {0}")]
    Signing(String),
}

impl From<rcgen::Error> for CaError {
    fn from(error: rcgen::Error) -> Self {
        CaError::Signing(error.to_string())
    }
}
