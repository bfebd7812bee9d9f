//! Istio's certificate service messages (`security/v1alpha1/ca.proto`,
//! package `istio.v1.auth`), the fields this server reads and writes.

/// `IstioCertificateRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IstioCertificateRequest {
    /// PEM-encoded certificate signing request.
    #[prost(string, tag = "1")]
    pub(crate) csr: String,
    /// Requested lifetime in seconds; 0 or absent: the CA's default.
    #[prost(int64, tag = "3")]
    pub(crate) validity_duration: i64,
}

/// `IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IstioCertificateResponse {
    /// PEM texts: the leaf, the intermediates one each (the
    /// cross-certificate during a root rotation), and last the trust
    /// bundle (one or more roots, the signing root first).
    #[prost(string, repeated, tag = "1")]
    pub(crate) cert_chain: Vec<String>,
}
