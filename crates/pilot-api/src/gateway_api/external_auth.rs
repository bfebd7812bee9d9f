//! The ExternalAuth filter of HTTPRoute (experimental): requests
//! authorized by an HTTP or gRPC service first, with the CRD's rule that
//! the protocol and its settings agree.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at};
use super::common::BackendObjectReference;
use super::patterns;

/// External authorization of requests (experimental).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["backendRef", "protocol"])))]
pub struct ExternalAuth {
    /// The protocol of the authorization service (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ExternalAuthProtocol>,
    /// The authorization service (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ref: Option<BackendObjectReference>,
    /// Settings for a gRPC service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcAuthConfig>,
    /// Settings for an HTTP service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpAuthConfig>,
    /// Whether and how much of the body is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forward_body: Option<ForwardBody>,
}

/// The protocols of an external authorization service.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ExternalAuthProtocol {
    /// HTTP.
    #[serde(rename = "HTTP")]
    Http,
    /// gRPC (Envoy's ext_authz protocol).
    #[serde(rename = "GRPC")]
    Grpc,
}

/// Settings for a gRPC authorization service.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcAuthConfig {
    /// Request headers sent to the service (at most 64, unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Option<Vec<String>>,
}

/// Settings for an HTTP authorization service.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpAuthConfig {
    /// A path prefix for the authorization requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(
            length(max = 1024),
            pattern(r#"^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$"#)
        )
    )]
    pub path: Option<String>,
    /// Request headers sent to the service (at most 64, unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_headers: Option<Vec<String>>,
    /// Response headers of the service copied to the request (at most
    /// 64, unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "set")))]
    pub allowed_response_headers: Option<Vec<String>>,
}

/// How much of the request body the authorization service sees.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForwardBody {
    /// Bytes of body buffered and sent (0 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size: Option<i32>,
}

pub(crate) fn check(errors: &mut FieldErrors, path: &str, auth: &ExternalAuth) {
    checks::required(errors, &at(path, "protocol"), auth.protocol.as_ref());
    match &auth.backend_ref {
        Some(backend) => backend.check(errors, &at(path, "backendRef")),
        None => errors.push(at(path, "backendRef"), "is required"),
    }
    if let Some(grpc) = &auth.grpc {
        let path = at(path, "grpc.allowedHeaders");
        checks::items(errors, &path, checks::list(&grpc.allowed_headers).len(), 0, 64);
        checks::unique_items(errors, &path, checks::list(&grpc.allowed_headers));
    }
    if let Some(http) = &auth.http {
        let at_http = at(path, "http");
        if let Some(prefix) = &http.path {
            let path = at(&at_http, "path");
            checks::length(errors, &path, prefix, 0, 1024);
            if !patterns::is_path_chars(prefix) {
                errors.push(
                    path,
                    format!(
                        "{prefix:?} is not a path: letters, digits, -/._~!$&'()*+,;=:@ and %-escapes only"
                    ),
                );
            }
        }
        for (field, headers) in [
            ("allowedHeaders", checks::list(&http.allowed_headers)),
            (
                "allowedResponseHeaders",
                checks::list(&http.allowed_response_headers),
            ),
        ] {
            let path = at(&at_http, field);
            checks::items(errors, &path, headers.len(), 0, 64);
            checks::unique_items(errors, &path, headers);
        }
    }
    if let Some(body) = &auth.forward_body
        && let Some(size) = body.max_size
    {
        checks::range(errors, &at(path, "forwardBody.maxSize"), size.into(), 0, i64::MAX);
    }
    match auth.protocol {
        Some(ExternalAuthProtocol::Grpc) if auth.grpc.is_none() => {
            errors.push(path, "protocol GRPC needs grpc")
        }
        Some(ExternalAuthProtocol::Http) if auth.http.is_none() => {
            errors.push(path, "protocol HTTP needs http")
        }
        _ => {}
    }
    if auth.grpc.is_some() && auth.protocol != Some(ExternalAuthProtocol::Grpc) {
        errors.push(path, "grpc is only for protocol GRPC");
    }
    if auth.http.is_some() && auth.protocol != Some(ExternalAuthProtocol::Http) {
        errors.push(path, "http is only for protocol HTTP");
    }
}
