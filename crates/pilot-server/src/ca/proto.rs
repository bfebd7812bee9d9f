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
    /// Options; `ImpersonatedIdentity` (a string) asks for another
    /// workload's certificate (a node proxy's shared mode).
    #[prost(message, optional, tag = "4")]
    pub(crate) metadata: Option<Struct>,
}

/// `google.protobuf.Struct`: named values.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Struct {
    /// The values by name.
    #[prost(btree_map = "string, message", tag = "1")]
    pub(crate) fields: std::collections::BTreeMap<String, Value>,
}

/// `google.protobuf.Value`, the kind this server reads: a string (the
/// other kinds decode as `None`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Value {
    /// `string_value`.
    #[prost(string, optional, tag = "3")]
    pub(crate) string_value: Option<String>,
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
