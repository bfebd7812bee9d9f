//! The `extensionProviders` section of the mesh config file (Istio's
//! `MeshConfig.extensionProviders`): the external authorizers an
//! AuthorizationPolicy with `action: CUSTOM` names by `provider.name`.
//! Two kinds, named and typed as Istio's `mesh.v1alpha1` proto:
//! `envoyExtAuthzHttp` (an HTTP authorization service) and
//! `envoyExtAuthzGrpc` (Envoy's `envoy.service.auth.v3.Authorization`
//! gRPC service). Validated as Istio validates them
//! (`pkg/config/validation`, `validateExtensionProvider`), each error
//! naming its field (`extensionProviders[1].envoyExtAuthzHttp.port`).
//! Istio's other provider kinds (tracing, access logging) are accepted
//! and not used ([`ExtensionProviders::warnings`]).
//!
//! ```
//! use pilot_api::mesh::ExtensionProviders;
//! let text = "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc:\n    service: authz.foo.svc.cluster.local\n    port: 9000\n";
//! let providers = ExtensionProviders::parse("mesh.yaml", text).unwrap();
//! assert_eq!(providers.get("authz").unwrap().service(), "authz.foo.svc.cluster.local");
//! let bad = "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz, port: 0}\n";
//! let error = ExtensionProviders::parse("mesh.yaml", bad).unwrap_err();
//! assert!(error.contains("extensionProviders[0].envoyExtAuthzGrpc.port"), "{error}");
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::primitives::{Duration, wildcard_host};
use pilot_model::FieldErrors;

/// The extension providers of the mesh, in the order the file gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionProviders {
    /// Istio's `extensionProviders`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extension_providers: Vec<ExtensionProvider>,
}

/// One provider: a name and exactly one kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtensionProvider {
    /// The name policies use (`provider.name`); unique in the mesh.
    #[serde(default)]
    pub name: String,
    /// An HTTP authorization service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envoy_ext_authz_http: Option<EnvoyExtAuthzHttp>,
    /// A gRPC `envoy.service.auth.v3.Authorization` service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envoy_ext_authz_grpc: Option<EnvoyExtAuthzGrpc>,
    /// Its other fields: one of Istio's other provider kinds
    /// ([`OTHER_ISTIO_KINDS`]: tracing, access logging), which pilot
    /// accepts with a warning and does not use, or a mistake (refused).
    #[serde(flatten, skip_serializing)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// Istio's provider kinds other than external authorization (tracing,
/// metrics, access logging, SDS): valid in Istio's mesh config, accepted
/// and not used here (a CUSTOM policy naming such a provider denies what
/// its rules match, as Istio does for a provider that is no authorizer).
pub const OTHER_ISTIO_KINDS: &[&str] = &[
    "zipkin",
    "lightstep",
    "datadog",
    "stackdriver",
    "opencensus",
    "skywalking",
    "opentelemetry",
    "prometheus",
    "envoyFileAccessLog",
    "envoyHttpAls",
    "envoyTcpAls",
    "envoyOtelAls",
    "sds",
];

/// Istio's `EnvoyExternalAuthorizationHttpProvider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyExtAuthzHttp {
    /// The service's hostname (`authz.foo.svc.cluster.local`), or
    /// `namespace/hostname`.
    #[serde(default)]
    pub service: String,
    /// The service's port.
    #[serde(default)]
    pub port: u32,
    /// How long a check may take (default 600s, as Istio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Put before the request's path in the check request.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path_prefix: String,
    /// Allow the request when the service cannot be reached or fails.
    #[serde(default)]
    pub fail_open: bool,
    /// Clear the route cache after the check (headers it adds may route).
    #[serde(default)]
    pub clear_route_cache: bool,
    /// The status sent when the service cannot be reached (default 403).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_on_error: String,
    /// Deprecated by Istio in favour of `includeRequestHeadersInCheck`;
    /// used when that is empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_headers_in_check: Vec<String>,
    /// Request headers sent in the check (`x-*`, `*-id` patterns allowed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_request_headers_in_check: Vec<String>,
    /// Headers added to every check request.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub include_additional_headers_in_check: BTreeMap<String, String>,
    /// Send the request body in the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_request_body_in_check: Option<RequestBody>,
    /// Headers of the service's answer copied to the request when it
    /// allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers_to_upstream_on_allow: Vec<String>,
    /// Headers of the service's answer sent to the client when it denies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers_to_downstream_on_deny: Vec<String>,
    /// Headers of the service's answer added to the response when it
    /// allows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers_to_downstream_on_allow: Vec<String>,
}

/// Istio's `EnvoyExternalAuthorizationGrpcProvider`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvoyExtAuthzGrpc {
    /// The service's hostname, or `namespace/hostname`.
    #[serde(default)]
    pub service: String,
    /// The service's port.
    #[serde(default)]
    pub port: u32,
    /// How long a check may take (Envoy's default, 200ms, when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Allow the request (connection) when the service cannot be reached.
    #[serde(default)]
    pub fail_open: bool,
    /// Clear the route cache after the check.
    #[serde(default)]
    pub clear_route_cache: bool,
    /// The status sent when the service cannot be reached (default 403).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status_on_error: String,
    /// Send the request body in the check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_request_body_in_check: Option<RequestBody>,
}

/// Istio's `EnvoyExternalAuthorizationRequestBody`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestBody {
    /// The most body bytes buffered for the check.
    #[serde(default)]
    pub max_request_bytes: u32,
    /// Send the first `maxRequestBytes` of a longer body (else 413).
    #[serde(default)]
    pub allow_partial_message: bool,
    /// Send the body as bytes (gRPC), not as a UTF-8 string.
    #[serde(default)]
    pub pack_as_bytes: bool,
}

/// A provider's kind, borrowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind<'a> {
    /// `envoyExtAuthzHttp`.
    Http(&'a EnvoyExtAuthzHttp),
    /// `envoyExtAuthzGrpc`.
    Grpc(&'a EnvoyExtAuthzGrpc),
}

impl ExtensionProvider {
    /// Its kind (`None` only for a provider validation refuses).
    pub fn kind(&self) -> Option<ProviderKind<'_>> {
        match (&self.envoy_ext_authz_http, &self.envoy_ext_authz_grpc) {
            (Some(http), _) => Some(ProviderKind::Http(http)),
            (None, Some(grpc)) => Some(ProviderKind::Grpc(grpc)),
            (None, None) => None,
        }
    }

    /// Its service as written (`namespace/host` or `host`).
    pub fn service(&self) -> &str {
        match self.kind() {
            Some(ProviderKind::Http(p)) => &p.service,
            Some(ProviderKind::Grpc(p)) => &p.service,
            None => "",
        }
    }

    /// The hostname of its service (without a `namespace/`).
    pub fn hostname(&self) -> &str {
        let service = self.service();
        service.split_once('/').map_or(service, |(_, host)| host)
    }

    /// Its service's port.
    pub fn port(&self) -> u32 {
        match self.kind() {
            Some(ProviderKind::Http(p)) => p.port,
            Some(ProviderKind::Grpc(p)) => p.port,
            None => 0,
        }
    }
}

/// The codes Envoy's `type.v3.StatusCode` names (`statusOnError` must be
/// one; Envoy refuses 0).
const ENVOY_STATUS_CODES: &[u16] = &[
    100, 200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 307, 308, 400, 401,
    402, 403, 404, 405, 406, 407, 408, 409, 410, 411, 412, 413, 414, 415, 416, 417, 421, 422, 423, 424, 426,
    428, 429, 431, 500, 501, 502, 503, 504, 505, 506, 507, 508, 510, 511,
];

impl ExtensionProviders {
    /// The provider named `name`.
    pub fn get(&self, name: &str) -> Option<&ExtensionProvider> {
        self.extension_providers.iter().find(|p| p.name == name)
    }

    /// The providers' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.extension_providers.iter().map(|p| p.name.as_str()).collect()
    }

    /// What is accepted but not used: each provider of one of Istio's
    /// other kinds ([`OTHER_ISTIO_KINDS`]), as a sentence.
    pub fn warnings(&self) -> Vec<String> {
        self.extension_providers
            .iter()
            .enumerate()
            .flat_map(|(index, provider)| {
                provider.other.keys().map(move |kind| {
                    format!(
                        "extensionProviders[{index}].{kind}: provider {:?} is of a kind pilot does not use ({kind}; only envoyExtAuthzHttp and envoyExtAuthzGrpc are): ignored, and a CUSTOM policy naming it denies what its rules match",
                        provider.name
                    )
                })
            })
            .collect()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.extension_providers.is_empty()
    }

    /// Reads the `extensionProviders` section of the mesh config file at
    /// `path` (other sections are left to their readers): errors name the
    /// file and the field.
    pub fn load(path: &Path) -> Result<Self, String> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
        Self::parse(&file, &text)
    }

    /// [`ExtensionProviders::load`] on `text`, read from `file`.
    pub fn parse(file: &str, text: &str) -> Result<Self, String> {
        let values = pilot_model::document::parse_values(file, text).map_err(|e| e.to_string())?;
        let Some(section) = values
            .first()
            .and_then(|v| v.get("extensionProviders"))
            .filter(|s| !s.is_null())
        else {
            return Ok(Self::default());
        };
        let locate = |path: &str| {
            pilot_model::document::locate_path(text, 0, &format!(".{path}"))
                .map(|p| format!("{}:{}: ", p.line, p.column))
                .unwrap_or_default()
        };
        let Some(list) = section.as_array() else {
            return Err(format!(
                "{file}: {}extensionProviders: must be a list of providers",
                locate("extensionProviders")
            ));
        };
        let mut providers = Vec::new();
        for (index, value) in list.iter().enumerate() {
            let at = format!("extensionProviders[{index}]");
            let refused = |at: &str, e: serde_json::Error| {
                let message = e.to_string();
                // serde names the unknown or mistyped field in backquotes.
                let field = message.split('`').nth(1).filter(|f| !f.contains(' '));
                let path = field.map_or(at.to_string(), |f| format!("{at}.{f}"));
                format!("{file}: {}{path}: {message}", locate(&path))
            };
            // Each kind alone first, so an error inside one names its path.
            for (key, check) in [
                (
                    "envoyExtAuthzHttp",
                    check_as::<EnvoyExtAuthzHttp> as fn(&serde_json::Value) -> _,
                ),
                ("envoyExtAuthzGrpc", check_as::<EnvoyExtAuthzGrpc>),
            ] {
                if let Some(kind) = value.get(key) {
                    let kind_at = format!("{at}.{key}");
                    check(kind).map_err(|e| refused(&kind_at, e))?;
                }
            }
            let provider: ExtensionProvider =
                serde_json::from_value(value.clone()).map_err(|e| refused(&at, e))?;
            providers.push(provider);
        }
        let providers = ExtensionProviders {
            extension_providers: providers,
        };
        let mut errors = FieldErrors::new();
        providers.validate(&mut errors);
        if errors.is_empty() {
            return Ok(providers);
        }
        Err(errors
            .iter()
            .map(|e| format!("{file}: {}{e}", locate(&e.path)))
            .collect::<Vec<_>>()
            .join("\n"))
    }

    /// Istio's checks: a non-empty unique name, exactly one supported
    /// kind, its service a hostname (or `namespace/hostname`, or an IP),
    /// its port in 1..65535, `statusOnError` an HTTP status Envoy knows,
    /// `pathPrefix` starting with `/`; and what Envoy itself refuses (a
    /// timeout under 1ms, a header name that is not one).
    pub fn validate(&self, errors: &mut FieldErrors) {
        let mut seen = BTreeSet::new();
        for (index, provider) in self.extension_providers.iter().enumerate() {
            let at = format!("extensionProviders[{index}]");
            if provider.name.is_empty() {
                errors.push(format!("{at}.name"), "the provider name must not be empty");
            } else if !seen.insert(provider.name.as_str()) {
                errors.push(
                    format!("{at}.name"),
                    format!("duplicate extension provider name {:?}", provider.name),
                );
            }
            for key in provider.other.keys() {
                if !OTHER_ISTIO_KINDS.contains(&key.as_str()) {
                    errors.push(
                        format!("{at}.{key}"),
                        format!(
                            "unknown field `{key}`: a provider is `name` and one kind (envoyExtAuthzHttp, envoyExtAuthzGrpc, or one of Istio's others: {})",
                            OTHER_ISTIO_KINDS.join(", ")
                        ),
                    );
                }
            }
            let kinds = usize::from(provider.envoy_ext_authz_http.is_some())
                + usize::from(provider.envoy_ext_authz_grpc.is_some())
                + provider.other.len();
            match kinds {
                0 => errors.push(
                    at.clone(),
                    "a provider needs its kind: envoyExtAuthzHttp or envoyExtAuthzGrpc (or one of Istio's others)",
                ),
                1 => {}
                _ => errors.push(at.clone(), "a provider has exactly one kind"),
            }
            if let Some(http) = &provider.envoy_ext_authz_http {
                let at = format!("{at}.envoyExtAuthzHttp");
                check_common(
                    errors,
                    &at,
                    &http.service,
                    http.port,
                    &http.status_on_error,
                    http.timeout,
                );
                if !http.path_prefix.is_empty() {
                    if !http.path_prefix.starts_with('/') {
                        errors.push(
                            format!("{at}.pathPrefix"),
                            format!("pathPrefix must begin with `/`, found {:?}", http.path_prefix),
                        );
                    } else if let Err(message) = crate::primitives::uri_text(&http.path_prefix) {
                        errors.push(format!("{at}.pathPrefix"), message);
                    }
                }
                for (field, headers) in [
                    ("includeHeadersInCheck", &http.include_headers_in_check),
                    (
                        "includeRequestHeadersInCheck",
                        &http.include_request_headers_in_check,
                    ),
                    ("headersToUpstreamOnAllow", &http.headers_to_upstream_on_allow),
                    ("headersToDownstreamOnDeny", &http.headers_to_downstream_on_deny),
                    ("headersToDownstreamOnAllow", &http.headers_to_downstream_on_allow),
                ] {
                    for (i, header) in headers.iter().enumerate() {
                        if header.is_empty() || header == "*" {
                            errors.push(
                                format!("{at}.{field}[{i}]"),
                                "a header name (or a `prefix*`, `*suffix` pattern) must be given",
                            );
                        }
                    }
                }
                for (name, value) in &http.include_additional_headers_in_check {
                    let path = format!("{at}.includeAdditionalHeadersInCheck.{name}");
                    if let Err(message) = crate::primitives::header_name(&name.to_ascii_lowercase()) {
                        errors.push(&path, message);
                    }
                    if let Err(message) = crate::primitives::header_value(value) {
                        errors.push(&path, message);
                    }
                }
            }
            if let Some(grpc) = &provider.envoy_ext_authz_grpc {
                let at = format!("{at}.envoyExtAuthzGrpc");
                check_common(
                    errors,
                    &at,
                    &grpc.service,
                    grpc.port,
                    &grpc.status_on_error,
                    grpc.timeout,
                );
            }
        }
    }
}

fn check_as<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<(), serde_json::Error> {
    serde_json::from_value::<T>(value.clone()).map(drop)
}

fn check_common(
    errors: &mut FieldErrors,
    at: &str,
    service: &str,
    port: u32,
    status_on_error: &str,
    timeout: Option<Duration>,
) {
    if service.is_empty() {
        errors.push(format!("{at}.service"), "service must not be empty");
    } else {
        let host = match service.split_once('/') {
            Some((namespace, host)) => {
                if let Err(message) = pilot_model::dns1123_label(namespace)
                    && namespace != "*"
                    && namespace != "."
                {
                    errors.push(
                        format!("{at}.service"),
                        format!("namespace {namespace:?}: {message}"),
                    );
                }
                host
            }
            None => service,
        };
        let is_ip = host.parse::<std::net::IpAddr>().is_ok();
        if !is_ip && (host.contains('*') || wildcard_host(host).is_err()) {
            errors.push(
                format!("{at}.service"),
                format!("service {service:?} is not a hostname (authz.foo.svc.cluster.local), namespace/hostname or an IP"),
            );
        }
    }
    if !(1..=65_535).contains(&port) {
        errors.push(
            format!("{at}.port"),
            format!("port must be in the range [1, 65535], found: {port}"),
        );
    }
    if !status_on_error.is_empty() {
        match status_on_error.parse::<u16>() {
            Ok(code) if ENVOY_STATUS_CODES.contains(&code) => {}
            Ok(_) => errors.push(
                format!("{at}.statusOnError"),
                format!("unsupported statusOnError {status_on_error}: not an HTTP status Envoy knows"),
            ),
            Err(_) => errors.push(
                format!("{at}.statusOnError"),
                format!("invalid statusOnError {status_on_error:?}: a number such as 403 is expected"),
            ),
        }
    }
    if let Some(timeout) = timeout {
        timeout.check_millis(&format!("{at}.timeout"), errors);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        ExtensionProviders::parse("mesh.yaml", text).unwrap_err()
    }

    #[test]
    fn every_field_of_both_kinds_is_read() {
        let text = r#"
sidecarInjector: {proxyImage: x}
extensionProviders:
- name: http
  envoyExtAuthzHttp:
    service: foo/authz.foo.svc.cluster.local
    port: 8000
    timeout: 2s
    pathPrefix: /check
    failOpen: true
    clearRouteCache: true
    statusOnError: "503"
    includeHeadersInCheck: [x-old]
    includeRequestHeadersInCheck: [x-ext-authz, "x-prefix-*"]
    includeAdditionalHeadersInCheck: {x-added: "1"}
    includeRequestBodyInCheck: {maxRequestBytes: 100, allowPartialMessage: true, packAsBytes: true}
    headersToUpstreamOnAllow: [x-user]
    headersToDownstreamOnDeny: [x-reason]
    headersToDownstreamOnAllow: [x-seen]
- name: grpc
  envoyExtAuthzGrpc:
    service: 10.0.0.1
    port: 9000
    timeout: 100ms
    failOpen: true
    clearRouteCache: true
    statusOnError: "500"
    includeRequestBodyInCheck: {maxRequestBytes: 10}
"#;
        let providers = ExtensionProviders::parse("mesh.yaml", text).unwrap();
        assert_eq!(providers.names(), ["http", "grpc"]);
        let http = providers.get("http").unwrap();
        assert_eq!(http.hostname(), "authz.foo.svc.cluster.local");
        let Some(ProviderKind::Http(h)) = http.kind() else {
            panic!()
        };
        assert_eq!(h.include_request_headers_in_check, ["x-ext-authz", "x-prefix-*"]);
        assert_eq!(h.include_request_body_in_check.unwrap().max_request_bytes, 100);
        assert_eq!(h.timeout.unwrap().to_string(), "2s");
        assert_eq!(providers.get("grpc").unwrap().port(), 9000);
    }

    #[test]
    fn istios_other_kinds_are_accepted_with_a_warning() {
        let text = "extensionProviders:\n- name: tracing\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n- name: authz\n  envoyExtAuthzGrpc: {service: a.b, port: 9000}\n";
        let providers = ExtensionProviders::parse("mesh.yaml", text).unwrap();
        assert_eq!(providers.names(), ["tracing", "authz"]);
        assert_eq!(providers.get("tracing").unwrap().kind(), None);
        let warnings = providers.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].starts_with("extensionProviders[0].zipkin: provider \"tracing\""),
            "{warnings:?}"
        );
    }

    #[test]
    fn no_section_is_no_provider() {
        assert!(
            ExtensionProviders::parse("mesh.yaml", "sidecarInjector: {}\n")
                .unwrap()
                .is_empty()
        );
        assert!(
            ExtensionProviders::parse("mesh.yaml", "extensionProviders:\n")
                .unwrap()
                .is_empty()
        );
        let error = ExtensionProviders::parse("mesh.yaml", "extensionProviders: {a: 1}\n").unwrap_err();
        assert!(error.contains("extensionProviders: must be a list"), "{error}");
    }

    /// Istio's invalid cases (`validation_test.go`, TestValidateMeshConfig
    /// extension providers), each refused naming its field.
    #[test]
    fn istios_invalid_providers_are_refused_naming_the_field() {
        let cases = [
            (
                "- envoyExtAuthzGrpc: {service: a.b, port: 1}",
                "extensionProviders[0].name",
                "must not be empty",
            ),
            (
                "- {name: a, envoyExtAuthzGrpc: {service: a.b, port: 1}}\n- {name: a, envoyExtAuthzHttp: {service: a.b, port: 1}}",
                "extensionProviders[1].name",
                "duplicate extension provider name",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 0}}",
                "envoyExtAuthzHttp.port",
                "[1, 65535]",
            ),
            (
                "- {name: a, envoyExtAuthzGrpc: {service: a.b, port: 65536}}",
                "envoyExtAuthzGrpc.port",
                "[1, 65535]",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {port: 80}}",
                "envoyExtAuthzHttp.service",
                "must not be empty",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: 'a b', port: 80}}",
                "envoyExtAuthzHttp.service",
                "not a hostname",
            ),
            (
                "- {name: a, envoyExtAuthzGrpc: {service: '*.foo.com', port: 80}}",
                "envoyExtAuthzGrpc.service",
                "not a hostname",
            ),
            (
                "- {name: a, envoyExtAuthzGrpc: {service: 'Bad_NS/a.b', port: 80}}",
                "envoyExtAuthzGrpc.service",
                "namespace",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, statusOnError: '999'}}",
                "statusOnError",
                "unsupported",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, statusOnError: abc}}",
                "statusOnError",
                "invalid",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, pathPrefix: check}}",
                "pathPrefix",
                "begin with `/`",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, timeout: 0s}}",
                "envoyExtAuthzHttp.timeout",
                "minimum",
            ),
            ("- {name: a}", "extensionProviders[0]", "needs its kind"),
            (
                "- {name: a, zipkn: {service: z, port: 9411}}",
                "extensionProviders[0].zipkn",
                "unknown field `zipkn`",
            ),
            (
                "- {name: a, zipkin: {service: z, port: 9411}, envoyExtAuthzGrpc: {service: a.b, port: 1}}",
                "extensionProviders[0]",
                "exactly one kind",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, includeHeaders: [x]}}",
                "envoyExtAuthzHttp",
                "unknown field",
            ),
            (
                "- {name: a, envoyExtAuthzGrpc: {service: a.b, port: 80, pathPrefix: /x}}",
                "envoyExtAuthzGrpc",
                "unknown field",
            ),
            (
                "- {name: a, envoyExtAuthzHttp: {service: a.b, port: 80, headersToUpstreamOnAllow: ['']}}",
                "headersToUpstreamOnAllow[0]",
                "header name",
            ),
        ];
        for (providers, field, message) in cases {
            let error = error(&format!("extensionProviders:\n{providers}\n"));
            assert!(error.starts_with("mesh.yaml: "), "{providers}: {error}");
            assert!(
                error.contains(field) && error.contains(message),
                "{providers}: {error}"
            );
        }
    }

    #[test]
    fn an_error_gives_its_line() {
        let error =
            error("extensionProviders:\n- name: a\n  envoyExtAuthzHttp:\n    service: a.b\n    port: 0\n");
        assert!(error.starts_with("mesh.yaml: 5:"), "{error}");
    }
}
