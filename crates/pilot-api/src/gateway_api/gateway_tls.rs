//! A Gateway's TLS as a whole: the client certificate it presents to
//! backends and how it validates clients' certificates, by default and
//! per port.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{ObjectReference, SecretObjectReference};

/// TLS for the Gateway as a whole.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayTlsConfig {
    /// The client certificate the Gateway presents to backends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<GatewayBackendTls>,
    /// Validation of clients' certificates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frontend: Option<FrontendTlsConfig>,
}

/// The client certificate presented to backends.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayBackendTls {
    /// The certificate's Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_ref: Option<SecretObjectReference>,
}

/// Validation of clients' certificates, by default and per port.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["default"])))]
pub struct FrontendTlsConfig {
    /// For every port without its own (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<TlsConfig>,
    /// Per port (at most 64, unique by port).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["port"])))]
    pub per_port: Option<Vec<TlsPortConfig>>,
}

/// Client certificate validation.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsConfig {
    /// The CA certificates and mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validation: Option<FrontendTlsValidation>,
}

/// The client certificate validation of one port.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["port", "tls"])))]
pub struct TlsPortConfig {
    /// The port (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
    /// Its validation (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsConfig>,
}

/// The CA certificates clients' certificates are verified against.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["caCertificateRefs"])))]
pub struct FrontendTlsValidation {
    /// The CA certificates (1 to 16, required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub ca_certificate_refs: Vec<ObjectReference>,
    /// Whether clients without a valid certificate are let in
    /// ([`FrontendTlsValidation::mode`] gives the default).
    #[serde(default, rename = "mode", skip_serializing_if = "Option::is_none")]
    pub mode_written: Option<FrontendValidationMode>,
}

impl FrontendTlsValidation {
    /// The validation mode, `AllowValidOnly` when not written.
    pub fn mode(&self) -> FrontendValidationMode {
        self.mode_written
            .unwrap_or(FrontendValidationMode::AllowValidOnly)
    }
}

/// Whether clients without a valid certificate are let in.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FrontendValidationMode {
    /// Only clients with a valid certificate.
    AllowValidOnly,
    /// Every client; the certificate is checked when given.
    AllowInsecureFallback,
}

pub(crate) fn check(errors: &mut FieldErrors, path: &str, tls: &GatewayTlsConfig) {
    if let Some(reference) = tls
        .backend
        .as_ref()
        .and_then(|b| b.client_certificate_ref.as_ref())
    {
        reference.check(errors, &at(path, "backend.clientCertificateRef"));
    }
    let Some(frontend) = &tls.frontend else { return };
    let path = at(path, "frontend");
    match &frontend.default {
        Some(config) => check_tls_config(errors, &at(&path, "default"), config),
        None => errors.push(at(&path, "default"), "is required"),
    }
    let ports = at(&path, "perPort");
    checks::items(errors, &ports, checks::list(&frontend.per_port).len(), 0, 64);
    checks::unique_keys(
        errors,
        &ports,
        checks::list(&frontend.per_port),
        |p| p.port,
        "port",
    );
    for (i, per_port) in checks::list(&frontend.per_port).iter().enumerate() {
        let path = index(&ports, i);
        match per_port.port {
            Some(port) => checks::port(errors, &at(&path, "port"), port),
            None => errors.push(at(&path, "port"), "is required"),
        }
        match &per_port.tls {
            Some(config) => check_tls_config(errors, &at(&path, "tls"), config),
            None => errors.push(at(&path, "tls"), "is required"),
        }
    }
    let mut seen = std::collections::HashSet::new();
    if checks::list(&frontend.per_port)
        .iter()
        .any(|p| !seen.insert(p.port))
    {
        errors.push(
            ports,
            "two entries configure the same port: ports must be unique within the Gateway",
        );
    }
}

fn check_tls_config(errors: &mut FieldErrors, path: &str, config: &TlsConfig) {
    let Some(validation) = &config.validation else {
        return;
    };
    let refs = at(&at(path, "validation"), "caCertificateRefs");
    checks::items(errors, &refs, validation.ca_certificate_refs.len(), 1, 16);
    for (i, reference) in validation.ca_certificate_refs.iter().enumerate() {
        reference.check(errors, &index(&refs, i));
    }
}
