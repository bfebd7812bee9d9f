//! `RouteRule`: how requests to a service are routed, after Istio's
//! v1alpha1 routing API.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{IstioService, MatchCondition};
use super::{GROUP, VERSION};
use crate::primitives::{Duration, check_percent, header_name, header_value, not_supported, uri_text};
use pilot_model::{ConfigKind, FieldErrors, push_key};

/// Routes requests for a destination service: by match, to weighted
/// versions, with timeouts, retries, faults, redirects and rewrites.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteRule {
    /// The service whose traffic this rule routes (no labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<IstioService>,
    /// Higher precedence rules are evaluated first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub precedence: i32,
    /// Which requests the rule applies to.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_condition: Option<MatchCondition>,
    /// Weighted destinations (versions selected by labels).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<DestinationWeight>,
    /// Answer with a redirect instead of routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<HttpRedirect>,
    /// Rewrite the URI or authority before forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<HttpRewrite>,
    /// Allow WebSocket upgrades.
    #[serde(
        alias = "websocket_upgrade",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub websocket_upgrade: bool,
    /// Request timeout.
    #[serde(alias = "http_req_timeout", default, skip_serializing_if = "Option::is_none")]
    pub http_req_timeout: Option<HttpTimeout>,
    /// Retry policy.
    #[serde(alias = "http_req_retries", default, skip_serializing_if = "Option::is_none")]
    pub http_req_retries: Option<HttpRetry>,
    /// Fault injection (delays and aborts).
    #[serde(alias = "http_fault", default, skip_serializing_if = "Option::is_none")]
    pub http_fault: Option<HttpFaultInjection>,
    /// Layer-4 faults (not supported by the data plane).
    #[serde(alias = "l4_fault", default, skip_serializing_if = "Option::is_none")]
    pub l4_fault: Option<serde_json::Value>,
    /// Send a copy of each request to this service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<IstioService>,
    /// Cross-origin resource sharing policy.
    #[serde(alias = "cors_policy", default, skip_serializing_if = "Option::is_none")]
    pub cors_policy: Option<CorsPolicy>,
    /// Headers added to forwarded requests.
    #[serde(alias = "append_headers", default, skip_serializing_if = "BTreeMap::is_empty")]
    pub append_headers: BTreeMap<String, String>,
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

/// One weighted destination of a route.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationWeight {
    /// Another service to send to (defaults to the rule's destination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<IstioService>,
    /// The instances to send to, e.g. `version: v2`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Percent of traffic, 0 to 100; may be omitted on a single route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// A redirect answer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRedirect {
    /// The new path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// The new host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authority: String,
}

/// A rewrite before forwarding.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRewrite {
    /// Replaces the matched path prefix.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replaces the host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authority: String,
}

/// A request timeout.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTimeout {
    /// The timeout policy.
    #[serde(alias = "simple_timeout", default, skip_serializing_if = "Option::is_none")]
    pub simple_timeout: Option<SimpleTimeoutPolicy>,
    /// A custom policy (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

/// A timeout.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimpleTimeoutPolicy {
    /// How long to wait for the whole response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// A request header that overrides the timeout (not supported).
    #[serde(
        alias = "override_header_name",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub override_header_name: String,
}

/// A retry policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRetry {
    /// The retry policy.
    #[serde(alias = "simple_retry", default, skip_serializing_if = "Option::is_none")]
    pub simple_retry: Option<SimpleRetryPolicy>,
    /// A custom policy (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom: Option<serde_json::Value>,
}

/// Retries.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SimpleRetryPolicy {
    /// How many times to retry; at least 0.
    #[serde(default)]
    pub attempts: i32,
    /// Timeout of each try.
    #[serde(alias = "per_try_timeout", default, skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// A request header that overrides the policy (not supported).
    #[serde(
        alias = "override_header_name",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub override_header_name: String,
}

/// Faults to inject into HTTP requests.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpFaultInjection {
    /// Delay some requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<Delay>,
    /// Fail some requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<Abort>,
}

/// A delay fault.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delay {
    /// Percent of requests to delay, 0 to 100.
    #[serde(default)]
    pub percent: f64,
    /// How long to delay them.
    #[serde(alias = "fixed_delay", default, skip_serializing_if = "Option::is_none")]
    pub fixed_delay: Option<Duration>,
    /// Exponentially distributed delay (not supported).
    #[serde(alias = "exponential_delay", default, skip_serializing_if = "Option::is_none")]
    pub exponential_delay: Option<Duration>,
    /// A request header that overrides the fault (not supported).
    #[serde(
        alias = "override_header_name",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub override_header_name: String,
}

/// An abort fault.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Abort {
    /// Percent of requests to fail, 0 to 100.
    #[serde(default)]
    pub percent: f64,
    /// The HTTP status to answer with (200 to 599).
    #[serde(alias = "http_status", default, skip_serializing_if = "Option::is_none")]
    pub http_status: Option<i32>,
    /// A gRPC status (not supported).
    #[serde(alias = "grpc_status", default, skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<String>,
    /// An HTTP/2 error (not supported).
    #[serde(alias = "http2_error", default, skip_serializing_if = "Option::is_none")]
    pub http2_error: Option<String>,
    /// A request header that overrides the fault (not supported).
    #[serde(
        alias = "override_header_name",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    pub override_header_name: String,
}

/// A CORS policy.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorsPolicy {
    /// Allowed origins.
    #[serde(alias = "allow_origin", default, skip_serializing_if = "Vec::is_empty")]
    pub allow_origin: Vec<String>,
    /// Allowed methods (from the HTTP method set).
    #[serde(alias = "allow_methods", default, skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    /// Allowed request headers.
    #[serde(alias = "allow_headers", default, skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Response headers exposed to the browser.
    #[serde(alias = "expose_headers", default, skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a preflight answer may be cached (whole seconds).
    #[serde(alias = "max_age", default, skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Duration>,
    /// Whether credentials are allowed.
    #[serde(alias = "allow_credentials", default, skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
}

/// The methods a CORS policy may allow.
pub const HTTP_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
];

impl ConfigKind for RouteRule {
    const KIND: &'static str = "RouteRule";
    const PLURAL: &'static str = "routerules";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        match &self.destination {
            Some(destination) => destination.validate_destination_without_labels("spec.destination", errors),
            None => errors.push("spec.destination", "a route rule needs a destination service"),
        }
        if let Some(condition) = &self.match_condition {
            condition.validate("spec.match", errors);
        }
        self.validate_routes(errors);
        self.validate_exclusions(errors);
        if let Some(redirect) = &self.redirect {
            if redirect.uri.is_empty() && redirect.authority.is_empty() {
                errors.push("spec.redirect", "a redirect needs a uri or an authority");
            }
            check_uri_and_authority("spec.redirect", &redirect.uri, &redirect.authority, errors);
        }
        if let Some(rewrite) = &self.rewrite {
            if rewrite.uri.is_empty() && rewrite.authority.is_empty() {
                errors.push("spec.rewrite", "a rewrite needs a uri or an authority");
            }
            check_uri_and_authority("spec.rewrite", &rewrite.uri, &rewrite.authority, errors);
        }
        if let Some(timeout) = &self.http_req_timeout {
            validate_timeout(timeout, errors);
        }
        if let Some(retries) = &self.http_req_retries {
            validate_retries(retries, errors);
        }
        if let Some(fault) = &self.http_fault {
            validate_fault(fault, errors);
        }
        if self.l4_fault.is_some() {
            not_supported(errors, "spec.l4Fault", "layer-4 fault injection");
        }
        if let Some(mirror) = &self.mirror {
            mirror.validate("spec.mirror", errors);
        }
        if let Some(cors) = &self.cors_policy {
            validate_cors(cors, errors);
        }
        for (name, value) in &self.append_headers {
            let mut at = "spec.appendHeaders".to_string();
            push_key(&mut at, name);
            if let Err(message) = header_name(name) {
                errors.push(at.clone(), message);
            } else if name == "host" {
                errors.push(
                    at.clone(),
                    "the host header cannot be appended (Envoy refuses it); use rewrite.authority",
                );
            }
            if value.is_empty() {
                errors.push(at, "an appended header needs a value");
            } else if let Err(message) = header_value(value) {
                errors.push(at, message);
            }
        }
    }
}

impl RouteRule {
    fn validate_routes(&self, errors: &mut FieldErrors) {
        let mut total = 0i64;
        let mut last_weight_path = None;
        for (i, route) in self.route.iter().enumerate() {
            let path = format!("spec.route[{i}]");
            if let Some(destination) = &route.destination {
                destination.validate(&format!("{path}.destination"), errors);
            }
            errors.check_labels(&format!("{path}.labels"), &route.labels);
            let weight = match route.weight {
                Some(weight) => weight,
                None if self.route.len() == 1 => 100,
                None => 0,
            };
            if !(0..=100).contains(&weight) {
                errors.push(
                    format!("{path}.weight"),
                    format!("weight must be between 0 and 100, got {weight}"),
                );
            }
            total += i64::from(weight);
            last_weight_path = Some(format!("{path}.weight"));
        }
        if let Some(path) = last_weight_path
            && total != 100
        {
            errors.push(path, format!("weights must sum to 100, got {total}"));
        }
    }

    fn validate_exclusions(&self, errors: &mut FieldErrors) {
        if self.redirect.is_none() {
            return;
        }
        if !self.route.is_empty() {
            errors.push("spec.redirect", "a rule cannot have both route and redirect");
        }
        if self.http_fault.is_some() {
            errors.push("spec.redirect", "a rule cannot have both httpFault and redirect");
        }
        if self.rewrite.is_some() {
            errors.push("spec.redirect", "a rule cannot have both rewrite and redirect");
        }
        if self.websocket_upgrade {
            errors.push("spec.websocketUpgrade", "a redirect cannot upgrade to WebSocket");
        }
    }
}

/// A redirect's or rewrite's path and host: text a request line can hold.
fn check_uri_and_authority(path: &str, uri: &str, authority: &str, errors: &mut FieldErrors) {
    for (field, value) in [("uri", uri), ("authority", authority)] {
        if let Err(message) = uri_text(value) {
            errors.push(format!("{path}.{field}"), message);
        }
    }
    if authority.contains(|c: char| c.is_whitespace() || c == '/') {
        errors.push(
            format!("{path}.authority"),
            format!("{authority:?} is not a host (it has a space or a /)"),
        );
    }
}

fn validate_timeout(timeout: &HttpTimeout, errors: &mut FieldErrors) {
    if timeout.custom.is_some() {
        not_supported(errors, "spec.httpReqTimeout.custom", "custom timeout policies");
    }
    let Some(simple) = &timeout.simple_timeout else {
        return;
    };
    match simple.timeout {
        Some(d) => d.check_millis("spec.httpReqTimeout.simpleTimeout.timeout", errors),
        None => errors.push(
            "spec.httpReqTimeout.simpleTimeout.timeout",
            "a timeout needs a duration",
        ),
    }
    if !simple.override_header_name.is_empty() {
        not_supported(
            errors,
            "spec.httpReqTimeout.simpleTimeout.overrideHeaderName",
            "overriding by header",
        );
    }
}

fn validate_retries(retries: &HttpRetry, errors: &mut FieldErrors) {
    if retries.custom.is_some() {
        not_supported(errors, "spec.httpReqRetries.custom", "custom retry policies");
    }
    let Some(simple) = &retries.simple_retry else {
        return;
    };
    if simple.attempts < 0 {
        errors.push(
            "spec.httpReqRetries.simpleRetry.attempts",
            format!("attempts must be 0 or more, got {}", simple.attempts),
        );
    }
    if let Some(d) = simple.per_try_timeout {
        d.check_millis("spec.httpReqRetries.simpleRetry.perTryTimeout", errors);
    }
    if !simple.override_header_name.is_empty() {
        not_supported(
            errors,
            "spec.httpReqRetries.simpleRetry.overrideHeaderName",
            "overriding by header",
        );
    }
}

fn validate_fault(fault: &HttpFaultInjection, errors: &mut FieldErrors) {
    if fault.delay.is_none() && fault.abort.is_none() {
        errors.push("spec.httpFault", "a fault needs a delay or an abort");
    }
    if let Some(delay) = &fault.delay {
        check_percent("spec.httpFault.delay.percent", delay.percent, errors);
        match delay.fixed_delay {
            Some(d) => d.check_millis("spec.httpFault.delay.fixedDelay", errors),
            None if delay.exponential_delay.is_none() => {
                errors.push("spec.httpFault.delay.fixedDelay", "a delay needs a fixedDelay")
            }
            None => {}
        }
        if delay.exponential_delay.is_some() {
            not_supported(
                errors,
                "spec.httpFault.delay.exponentialDelay",
                "exponential delays",
            );
        }
        if !delay.override_header_name.is_empty() {
            not_supported(
                errors,
                "spec.httpFault.delay.overrideHeaderName",
                "overriding by header",
            );
        }
    }
    if let Some(abort) = &fault.abort {
        check_percent("spec.httpFault.abort.percent", abort.percent, errors);
        match abort.http_status {
            Some(status) if !(200..=599).contains(&status) => errors.push(
                "spec.httpFault.abort.httpStatus",
                format!("{status} is not an HTTP status an abort can answer with (200 to 599)"),
            ),
            Some(_) => {}
            None if abort.grpc_status.is_none() && abort.http2_error.is_none() => {
                errors.push("spec.httpFault.abort.httpStatus", "an abort needs an httpStatus")
            }
            None => {}
        }
        if abort.grpc_status.is_some() {
            not_supported(errors, "spec.httpFault.abort.grpcStatus", "gRPC status aborts");
        }
        if abort.http2_error.is_some() {
            not_supported(errors, "spec.httpFault.abort.http2Error", "HTTP/2 error aborts");
        }
        if !abort.override_header_name.is_empty() {
            not_supported(
                errors,
                "spec.httpFault.abort.overrideHeaderName",
                "overriding by header",
            );
        }
    }
}

fn validate_cors(cors: &CorsPolicy, errors: &mut FieldErrors) {
    if let Some(max_age) = cors.max_age
        && max_age.as_std().subsec_nanos() != 0
    {
        errors.push(
            "spec.corsPolicy.maxAge",
            format!("maxAge must be whole seconds, got {max_age}"),
        );
    }
    for (i, method) in cors.allow_methods.iter().enumerate() {
        if !HTTP_METHODS.contains(&method.as_str()) {
            errors.push(
                format!("spec.corsPolicy.allowMethods[{i}]"),
                format!(
                    "{method:?} is not an HTTP method; use one of {}",
                    HTTP_METHODS.join(", ")
                ),
            );
        }
    }
    for (field, headers) in [
        ("allowHeaders", &cors.allow_headers),
        ("exposeHeaders", &cors.expose_headers),
    ] {
        for (i, header) in headers.iter().enumerate() {
            if let Err(message) = header_name(&header.to_ascii_lowercase()) {
                errors.push(format!("spec.corsPolicy.{field}[{i}]"), message);
            }
        }
    }
}
