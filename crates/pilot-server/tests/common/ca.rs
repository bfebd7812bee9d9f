//! A workload's side of the certificate service: Istio's messages, a
//! plaintext or TLS channel to the ADS port, `CreateCertificate`.

use std::path::Path;

use tonic::transport::{Channel, Endpoint};

/// Istio's `IstioCertificateRequest`, as a client declares it.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IstioCertificateRequest {
    #[prost(string, tag = "1")]
    pub(crate) csr: String,
    #[prost(int64, tag = "3")]
    pub(crate) validity_duration: i64,
    #[prost(message, optional, tag = "4")]
    pub(crate) metadata: Option<Struct>,
}

/// `google.protobuf.Struct`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Struct {
    #[prost(btree_map = "string, message", tag = "1")]
    pub(crate) fields: std::collections::BTreeMap<String, Value>,
}

/// `google.protobuf.Value`: a number or a string.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Value {
    #[prost(double, optional, tag = "2")]
    pub(crate) number_value: Option<f64>,
    #[prost(string, optional, tag = "3")]
    pub(crate) string_value: Option<String>,
}

/// Metadata naming `ImpersonatedIdentity`, as ztunnel in shared mode
/// sends it.
pub(crate) fn impersonating(identity: &str) -> Struct {
    let value = Value {
        string_value: Some(identity.to_string()),
        ..Default::default()
    };
    Struct {
        fields: [("ImpersonatedIdentity".to_string(), value)].into(),
    }
}

/// Istio's `IstioCertificateResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct IstioCertificateResponse {
    #[prost(string, repeated, tag = "1")]
    pub(crate) cert_chain: Vec<String>,
}

/// A plaintext channel to `address`.
pub(crate) async fn channel(address: std::net::SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// `CreateCertificate` with `csr`, with a bearer `token` if any.
pub(crate) async fn create_with_csr(
    channel: &Channel,
    token: Option<&str>,
    csr: String,
    ttl_seconds: i64,
) -> Result<Vec<String>, tonic::Status> {
    create_with_metadata(channel, token, csr, ttl_seconds, None).await
}

/// `CreateCertificate` with `csr` and `metadata`, with a bearer `token`
/// if any.
pub(crate) async fn create_with_metadata(
    channel: &Channel,
    token: Option<&str>,
    csr: String,
    ttl_seconds: i64,
    metadata: Option<Struct>,
) -> Result<Vec<String>, tonic::Status> {
    let mut request = tonic::Request::new(IstioCertificateRequest {
        csr,
        validity_duration: ttl_seconds,
        metadata,
    });
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready().await.unwrap();
    let path =
        http::uri::PathAndQuery::from_static("/istio.v1.auth.IstioCertificateService/CreateCertificate");
    grpc.unary(request, path, tonic_prost::ProstCodec::default())
        .await
        .map(|response: tonic::Response<IstioCertificateResponse>| response.into_inner().cert_chain)
}

/// A PEM CSR with a new key, asking for the URI `uri` (any text, even
/// one against the SPIFFE rules).
pub(crate) fn csr_for_uri(uri: &str) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = vec![rcgen::SanType::URI(uri.try_into().unwrap())];
    params.serialize_request(&key).unwrap().pem().unwrap()
}

/// A token file: `TOKEN xds NAME namespace=NS [serviceAccount=SA]` lines
/// and one `rw` admin token.
pub(crate) fn write_token_file(dir: &Path, lines: &[&str]) -> String {
    let path = dir.join("tokens");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.display().to_string()
}
