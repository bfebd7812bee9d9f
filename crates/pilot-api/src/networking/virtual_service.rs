//! `VirtualService`: how requests to a set of hosts are routed (HTTP, TLS
//! by SNI, TCP), on sidecars (`mesh`) and on gateways.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::{Destination, Headers, Percent, StringMatch};
use crate::primitives::Duration;

/// Routing for a set of hosts.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VirtualService {
    /// The hosts the routes apply to: short names (resolved in the rule's
    /// namespace), fully qualified names, `*.` wildcards, or IP addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The gateways and sidecars the routes apply to: `mesh` (every
    /// sidecar, the default) and gateways as `namespace/name` or `name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// HTTP routes, the first match wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<HttpRoute>,
    /// Routes for TLS and HTTPS passthrough traffic, by SNI.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tls: Vec<TlsRoute>,
    /// Routes for opaque TCP traffic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tcp: Vec<TcpRoute>,
    /// The namespaces this rule is visible to (`.` its own, `*` all).
    #[serde(default, alias = "export_to", skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
}

/// One HTTP route: conditions and what to do with matching requests.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRoute {
    /// A name for the route, in access logs and debug output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Conditions, any of which selects the route (all when empty).
    #[serde(default, rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<HttpMatchRequest>,
    /// Weighted destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<HttpRouteDestination>,
    /// Answer with a redirect instead of forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirect: Option<HttpRedirect>,
    /// Answer directly with a status and body instead of forwarding.
    #[serde(default, alias = "direct_response", skip_serializing_if = "Option::is_none")]
    pub direct_response: Option<HttpDirectResponse>,
    /// Hand the route to another VirtualService (not supported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegate: Option<Delegate>,
    /// Rewrite the URI or authority before forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewrite: Option<HttpRewrite>,
    /// Timeout for the whole request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    /// Retry policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<HttpRetry>,
    /// Fault injection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<HttpFaultInjection>,
    /// Send a copy of each request here too (responses ignored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<Destination>,
    /// Several mirror destinations, each with its own percentage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<HttpMirrorPolicy>,
    /// Deprecated: percentage of requests mirrored, as an integer.
    #[serde(default, alias = "mirror_percent", skip_serializing_if = "Option::is_none")]
    pub mirror_percent: Option<u32>,
    /// Percentage of requests mirrored to `mirror` (100 when absent).
    #[serde(default, alias = "mirror_percentage", skip_serializing_if = "Option::is_none")]
    pub mirror_percentage: Option<Percent>,
    /// Cross-origin resource sharing policy.
    #[serde(default, alias = "cors_policy", skip_serializing_if = "Option::is_none")]
    pub cors_policy: Option<CorsPolicy>,
    /// Header manipulation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
    /// Istio's deprecated `websocketUpgrade` of older configurations:
    /// accepted and ignored, as Istio does (every HTTP route upgrades to
    /// WebSocket when asked); validation warns.
    #[serde(default, alias = "websocket_upgrade", skip_serializing_if = "Option::is_none")]
    pub websocket_upgrade: Option<bool>,
}

/// Conditions on a request, all of which must hold.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMatchRequest {
    /// A name for the match, prefixed to the route's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The request path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    /// The URI scheme.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<StringMatch>,
    /// The HTTP method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<StringMatch>,
    /// The authority (Host header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authority: Option<StringMatch>,
    /// Request headers, by lowercase name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, StringMatch>,
    /// The port the request came in on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Labels of the workload sending the request.
    #[serde(default, alias = "source_labels", skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Only on these gateways (overrides the VirtualService's gateways).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Query parameters, by name.
    #[serde(default, alias = "query_params", skip_serializing_if = "BTreeMap::is_empty")]
    pub query_params: BTreeMap<String, StringMatch>,
    /// Match the URI without regard to case.
    #[serde(
        default,
        alias = "ignore_uri_case",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub ignore_uri_case: bool,
    /// Headers that must not match.
    #[serde(
        default,
        alias = "without_headers",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub without_headers: BTreeMap<String, StringMatch>,
    /// Namespace of the workload sending the request.
    #[serde(default, alias = "source_namespace", skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
    /// A prefix for the route's statistics.
    #[serde(default, alias = "stat_prefix", skip_serializing_if = "String::is_empty")]
    pub stat_prefix: String,
}

/// An HTTP destination with its weight and header manipulation.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteDestination {
    /// Where requests go.
    #[serde(default)]
    pub destination: Destination,
    /// Relative share of requests (weights of a route sum to 100; a single
    /// destination may omit it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    /// Header manipulation for requests sent to this destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<Headers>,
}

/// A TCP or TLS destination with its weight.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RouteDestination {
    /// Where connections go.
    #[serde(default)]
    pub destination: Destination,
    /// Relative share of connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

/// Delegation to another VirtualService.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Delegate {
    /// The delegate's name.
    #[serde(default)]
    pub name: String,
    /// The delegate's namespace (the rule's when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// Routing of TLS connections by SNI.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsRoute {
    /// Conditions, any of which selects the route (required).
    #[serde(default, rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<TlsMatchAttributes>,
    /// Weighted destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// Routing of opaque TCP connections.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRoute {
    /// Conditions, any of which selects the route (all when empty).
    #[serde(default, rename = "match", skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<L4MatchAttributes>,
    /// Weighted destinations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route: Vec<RouteDestination>,
}

/// Conditions on a TCP connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct L4MatchAttributes {
    /// Destination IP addresses or CIDR blocks.
    #[serde(default, alias = "destination_subnets", skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// The destination port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// The source IP address or CIDR block.
    #[serde(default, alias = "source_subnet", skip_serializing_if = "String::is_empty")]
    pub source_subnet: String,
    /// Labels of the workload opening the connection.
    #[serde(default, alias = "source_labels", skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Only on these gateways.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Namespace of the workload opening the connection.
    #[serde(default, alias = "source_namespace", skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// Conditions on a TLS connection.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsMatchAttributes {
    /// SNI values to match (required); `*.` wildcards allowed.
    #[serde(default, alias = "sni_hosts", skip_serializing_if = "Vec::is_empty")]
    pub sni_hosts: Vec<String>,
    /// Destination IP addresses or CIDR blocks.
    #[serde(default, alias = "destination_subnets", skip_serializing_if = "Vec::is_empty")]
    pub destination_subnets: Vec<String>,
    /// The destination port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Labels of the workload opening the connection.
    #[serde(default, alias = "source_labels", skip_serializing_if = "BTreeMap::is_empty")]
    pub source_labels: BTreeMap<String, String>,
    /// Only on these gateways.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gateways: Vec<String>,
    /// Namespace of the workload opening the connection.
    #[serde(default, alias = "source_namespace", skip_serializing_if = "String::is_empty")]
    pub source_namespace: String,
}

/// An HTTP redirect answer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRedirect {
    /// Replaces the whole path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replaces the authority.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// Replaces the port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Derives the port from the protocol or the request.
    #[serde(default, alias = "derive_port", skip_serializing_if = "Option::is_none")]
    pub derive_port: Option<RedirectPortSelection>,
    /// Replaces the scheme.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheme: String,
    /// The status code (301 when absent).
    #[serde(default, alias = "redirect_code", skip_serializing_if = "Option::is_none")]
    pub redirect_code: Option<u32>,
    /// Replaces the matched prefix of the path.
    #[serde(default, alias = "prefix_rewrite", skip_serializing_if = "String::is_empty")]
    pub prefix_rewrite: String,
}

/// Where a redirect's port comes from.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RedirectPortSelection {
    /// 80 for http, 443 for https.
    FromProtocolDefault,
    /// The port the request came in on.
    FromRequestPort,
}

/// A direct answer.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpDirectResponse {
    /// The status code (required).
    #[serde(default)]
    pub status: u32,
    /// The body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<HttpBody>,
}

/// A response body: exactly one of `string` or `bytes` (base64).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpBody {
    /// The body as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// The body as base64-encoded bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<String>,
}

/// Rewrites before forwarding.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRewrite {
    /// Replaces the matched part of the path (the prefix of a prefix
    /// match, the whole path otherwise).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uri: String,
    /// Replaces the authority (Host header).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub authority: String,
    /// Rewrites the path with a regular expression.
    #[serde(default, alias = "uri_regex_rewrite", skip_serializing_if = "Option::is_none")]
    pub uri_regex_rewrite: Option<RegexRewrite>,
}

/// A regular-expression rewrite.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RegexRewrite {
    /// The RE2 expression to match.
    #[serde(default, rename = "match")]
    pub pattern: String,
    /// The replacement, with `\1`-style group references.
    #[serde(default)]
    pub rewrite: String,
}

/// Retries.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRetry {
    /// Number of retries (0 disables retries).
    #[serde(default)]
    pub attempts: i32,
    /// Timeout of each attempt.
    #[serde(default, alias = "per_try_timeout", skip_serializing_if = "Option::is_none")]
    pub per_try_timeout: Option<Duration>,
    /// Conditions to retry on, comma separated (Envoy's `x-envoy-retry-on`
    /// and `x-envoy-retry-grpc-on` values, or status codes).
    #[serde(default, alias = "retry_on", skip_serializing_if = "String::is_empty")]
    pub retry_on: String,
    /// Retry in other localities.
    #[serde(
        default,
        alias = "retry_remote_localities",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_remote_localities: Option<bool>,
    /// Retry on a different host than the ones tried.
    #[serde(
        default,
        alias = "retry_ignore_previous_hosts",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry_ignore_previous_hosts: Option<bool>,
    /// Base interval between retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff: Option<Duration>,
}

/// Cross-origin resource sharing.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CorsPolicy {
    /// Deprecated: exact origins allowed.
    #[serde(default, alias = "allow_origin", skip_serializing_if = "Vec::is_empty")]
    pub allow_origin: Vec<String>,
    /// Origins allowed.
    #[serde(default, alias = "allow_origins", skip_serializing_if = "Vec::is_empty")]
    pub allow_origins: Vec<StringMatch>,
    /// Methods allowed.
    #[serde(default, alias = "allow_methods", skip_serializing_if = "Vec::is_empty")]
    pub allow_methods: Vec<String>,
    /// Request headers allowed.
    #[serde(default, alias = "allow_headers", skip_serializing_if = "Vec::is_empty")]
    pub allow_headers: Vec<String>,
    /// Response headers the browser may read.
    #[serde(default, alias = "expose_headers", skip_serializing_if = "Vec::is_empty")]
    pub expose_headers: Vec<String>,
    /// How long a preflight answer may be cached.
    #[serde(default, alias = "max_age", skip_serializing_if = "Option::is_none")]
    pub max_age: Option<Duration>,
    /// Whether credentials are allowed.
    #[serde(default, alias = "allow_credentials", skip_serializing_if = "Option::is_none")]
    pub allow_credentials: Option<bool>,
    /// What to do with preflight requests that match no origin.
    #[serde(
        default,
        alias = "unmatched_preflights",
        skip_serializing_if = "Option::is_none"
    )]
    pub unmatched_preflights: Option<UnmatchedPreflights>,
}

/// Handling of preflight requests that match no allowed origin.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum UnmatchedPreflights {
    /// The default (forward).
    Unspecified,
    /// Forward to the upstream.
    Forward,
    /// Answer without CORS headers.
    Ignore,
}

/// Faults injected into requests.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpFaultInjection {
    /// Delay requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay: Option<FaultDelay>,
    /// Abort requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abort: Option<FaultAbort>,
}

/// A delay fault.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultDelay {
    /// Deprecated: percentage of requests delayed, as an integer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percent: Option<i32>,
    /// The delay.
    #[serde(default, alias = "fixed_delay", skip_serializing_if = "Option::is_none")]
    pub fixed_delay: Option<Duration>,
    /// An exponential delay (not supported).
    #[serde(default, alias = "exponential_delay", skip_serializing_if = "Option::is_none")]
    pub exponential_delay: Option<Duration>,
    /// Percentage of requests delayed (100 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// An abort fault.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FaultAbort {
    /// The HTTP status returned.
    #[serde(default, alias = "http_status", skip_serializing_if = "Option::is_none")]
    pub http_status: Option<i32>,
    /// The gRPC status returned (not supported).
    #[serde(default, alias = "grpc_status", skip_serializing_if = "Option::is_none")]
    pub grpc_status: Option<String>,
    /// An HTTP/2 error (not supported).
    #[serde(default, alias = "http2_error", skip_serializing_if = "Option::is_none")]
    pub http2_error: Option<String>,
    /// Percentage of requests aborted (100 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}

/// A mirror destination with its percentage.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpMirrorPolicy {
    /// Where copies go.
    #[serde(default)]
    pub destination: Destination,
    /// Percentage of requests mirrored (100 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<Percent>,
}
