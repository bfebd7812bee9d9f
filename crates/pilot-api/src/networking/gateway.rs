//! `Gateway`: the ports, hosts and TLS of a load balancer at the edge of
//! the mesh (an ingress or egress proxy selected by labels).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A load balancer's listeners.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Gateway {
    /// The servers (listeners), at least one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub servers: Vec<Server>,
    /// Labels of the gateway proxies this configuration applies to.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub selector: BTreeMap<String, String>,
}

/// One listener: a port, the hosts served on it and TLS.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Server {
    /// The port (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<GatewayPort>,
    /// The address to bind to (all when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// Hosts served, as `host` or `namespace/host` (required); `*`
    /// wildcards allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// TLS settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ServerTlsSettings>,
    /// Where traffic goes when no route matches (not supported).
    #[serde(default, alias = "default_endpoint", skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
    /// The server's name, unique within the gateway.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

/// A gateway port.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayPort {
    /// The port number (required).
    #[serde(default)]
    pub number: u32,
    /// HTTP, HTTPS, GRPC, HTTP2, MONGO, TCP or TLS (required).
    #[serde(default)]
    pub protocol: String,
    /// The port's name (required).
    #[serde(default)]
    pub name: String,
    /// Deprecated: the port the proxy listens on.
    #[serde(default, alias = "target_port", skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u32>,
}

/// TLS on a gateway server.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServerTlsSettings {
    /// Redirect plain HTTP requests to HTTPS.
    #[serde(default, alias = "https_redirect", skip_serializing_if = "std::ops::Not::not")]
    pub https_redirect: bool,
    /// The TLS mode (PASSTHROUGH when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ServerTlsMode>,
    /// Path of the server certificate.
    #[serde(
        default,
        alias = "server_certificate",
        skip_serializing_if = "String::is_empty"
    )]
    pub server_certificate: String,
    /// Path of the server's private key.
    #[serde(default, alias = "private_key", skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// Path of the CA certificates that verify clients (MUTUAL).
    #[serde(default, alias = "ca_certificates", skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
    /// Path of a certificate revocation list.
    #[serde(default, alias = "ca_crl", skip_serializing_if = "String::is_empty")]
    pub ca_crl: String,
    /// A secret holding the certificates instead of paths.
    #[serde(default, alias = "credential_name", skip_serializing_if = "String::is_empty")]
    pub credential_name: String,
    /// Several secrets (an RSA and an ECDSA certificate).
    #[serde(default, alias = "credential_names", skip_serializing_if = "Vec::is_empty")]
    pub credential_names: Vec<String>,
    /// A secret holding the CA certificate.
    #[serde(
        default,
        alias = "ca_cert_credential_name",
        skip_serializing_if = "String::is_empty"
    )]
    pub ca_cert_credential_name: String,
    /// Several certificates by path.
    #[serde(default, alias = "tls_certificates", skip_serializing_if = "Vec::is_empty")]
    pub tls_certificates: Vec<TlsCertificate>,
    /// Names a client certificate must carry.
    #[serde(default, alias = "subject_alt_names", skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
    /// Base64 SPKI hashes a client certificate must match.
    #[serde(
        default,
        alias = "verify_certificate_spki",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub verify_certificate_spki: Vec<String>,
    /// Hex hashes a client certificate must match.
    #[serde(
        default,
        alias = "verify_certificate_hash",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub verify_certificate_hash: Vec<String>,
    /// Minimum TLS version.
    #[serde(
        default,
        alias = "min_protocol_version",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_protocol_version: Option<TlsProtocol>,
    /// Maximum TLS version.
    #[serde(
        default,
        alias = "max_protocol_version",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_protocol_version: Option<TlsProtocol>,
    /// Cipher suites offered.
    #[serde(default, alias = "cipher_suites", skip_serializing_if = "Vec::is_empty")]
    pub cipher_suites: Vec<String>,
    /// Skip verification of client certificates.
    #[serde(
        default,
        alias = "insecure_skip_verify",
        skip_serializing_if = "Option::is_none"
    )]
    pub insecure_skip_verify: Option<bool>,
}

/// A certificate and key by path.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsCertificate {
    /// Path of the certificate.
    #[serde(
        default,
        alias = "server_certificate",
        skip_serializing_if = "String::is_empty"
    )]
    pub server_certificate: String,
    /// Path of the private key.
    #[serde(default, alias = "private_key", skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// Path of the CA certificates.
    #[serde(default, alias = "ca_certificates", skip_serializing_if = "String::is_empty")]
    pub ca_certificates: String,
}

/// Server TLS modes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServerTlsMode {
    /// Forward the TLS connection by SNI, unterminated.
    Passthrough,
    /// Terminate TLS.
    Simple,
    /// Terminate TLS and require a client certificate.
    Mutual,
    /// Forward by SNI without a VirtualService (not supported).
    AutoPassthrough,
    /// Terminate mutual TLS with the mesh's workload certificates.
    IstioMutual,
    /// Terminate TLS, client certificate optional.
    OptionalMutual,
}

/// TLS protocol versions.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TlsProtocol {
    /// Envoy's default.
    #[serde(rename = "TLS_AUTO")]
    TlsAuto,
    /// TLS 1.0.
    #[serde(rename = "TLSV1_0")]
    TlsV1_0,
    /// TLS 1.1.
    #[serde(rename = "TLSV1_1")]
    TlsV1_1,
    /// TLS 1.2.
    #[serde(rename = "TLSV1_2")]
    TlsV1_2,
    /// TLS 1.3.
    #[serde(rename = "TLSV1_3")]
    TlsV1_3,
}
