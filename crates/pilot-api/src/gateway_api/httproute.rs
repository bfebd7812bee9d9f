//! `HTTPRoute`: HTTP requests matched by path, headers, query and method,
//! filtered, and sent to weighted backends, for the parents it attaches
//! to.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{self, ParentReference};
use super::filters::{self, HttpMethod, HttpRouteFilter, HttpRouteFilterType, PathModifierType};
use super::patterns;
use super::session::{self, SessionPersistence};
#[cfg(feature = "schema")]
use super::shapes;

/// HTTP routing for the parents the route attaches to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRoute {
    /// The parents (Gateways, listeners) the route attaches to (at most
    /// 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic")))]
    pub parent_refs: Option<Vec<ParentReference>>,
    /// The hostnames matched (at most 16); the listeners' when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic"), inner(length(min = 1, max = 253), pattern(shapes::HOSTNAME))))]
    pub hostnames: Option<Vec<String>>,
    /// The rules (1 to 16; [`HttpRoute::rules`] gives the default, one
    /// rule matching every path).
    #[serde(default, rename = "rules", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub rules_written: Option<Vec<HttpRouteRule>>,
    /// Whether the route attaches to default Gateways (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<super::gateway::GatewayDefaultScope>,
}

impl HttpRoute {
    /// The rules: as written, or one rule matching every path (`PathPrefix
    /// /`) with no backend, as the CRD defaults them.
    pub fn rules(&self) -> Vec<HttpRouteRule> {
        self.rules_written
            .clone()
            .unwrap_or_else(|| vec![HttpRouteRule::default()])
    }
}

/// One rule: matches, filters and backends.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRule {
    /// The rule's name, unique in the route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub name: Option<String>,
    /// The requests matched (at most 64; [`HttpRouteRule::matches`] gives
    /// the default, `PathPrefix /`).
    #[serde(default, rename = "matches", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "atomic")))]
    pub matches_written: Option<Vec<HttpRouteMatch>>,
    /// Filters applied to every request matched (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub filters: Option<Vec<HttpRouteFilter>>,
    /// The backends (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub backend_refs: Option<Vec<HttpBackendRef>>,
    /// Request timeouts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<HttpRouteTimeouts>,
    /// Retries (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<HttpRouteRetry>,
    /// Session affinity (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<SessionPersistence>,
}

impl HttpRouteRule {
    /// The matches: as written, or one matching every path (`PathPrefix
    /// /`) when none are written.
    pub fn matches(&self) -> Vec<HttpRouteMatch> {
        self.matches_written
            .clone()
            .unwrap_or_else(|| vec![HttpRouteMatch::default()])
    }
}

/// What a request must have to match: all of it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteMatch {
    /// The path ([`HttpRouteMatch::path`] gives the default, `PathPrefix
    /// /`).
    #[serde(default, rename = "path", skip_serializing_if = "Option::is_none")]
    pub path_written: Option<HttpPathMatch>,
    /// Headers (at most 16, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub headers: Option<Vec<HttpHeaderMatch>>,
    /// Query parameters (at most 16, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub query_params: Option<Vec<HttpQueryParamMatch>>,
    /// The method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<HttpMethod>,
}

impl HttpRouteMatch {
    /// The path match: as written (its type and value defaulted), or
    /// `PathPrefix /`.
    pub fn path(&self) -> HttpPathMatch {
        self.path_written.clone().unwrap_or_default()
    }
}

/// A match of the request's path.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpPathMatch {
    /// How the value matches ([`HttpPathMatch::match_type`] gives the
    /// default, `PathPrefix`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<PathMatchType>,
    /// The path, prefix or expression ([`HttpPathMatch::value`] gives the
    /// default, `/`).
    #[serde(default, rename = "value", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub value_written: Option<String>,
}

impl HttpPathMatch {
    /// How the path matches, `PathPrefix` when not written.
    pub fn match_type(&self) -> PathMatchType {
        self.type_written.unwrap_or(PathMatchType::PathPrefix)
    }

    /// The value matched, `/` when not written.
    pub fn value(&self) -> &str {
        self.value_written.as_deref().unwrap_or("/")
    }
}

/// How a path is matched.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathMatchType {
    /// The whole path.
    Exact,
    /// A prefix of whole path segments.
    PathPrefix,
    /// A regular expression (its dialect is the implementation's).
    RegularExpression,
}

/// How a header, query parameter or gRPC method is matched.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StringMatchType {
    /// The whole value.
    Exact,
    /// A regular expression (its dialect is the implementation's).
    RegularExpression,
}

/// A match of one request header.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name", "value"])))]
pub struct HttpHeaderMatch {
    /// How the value matches ([`HttpHeaderMatch::match_type`] gives the
    /// default, `Exact`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<StringMatchType>,
    /// The header's name (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 256), pattern(shapes::HEADER_NAME))
    )]
    pub name: String,
    /// The value matched (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 4096), pattern(shapes::HEADER_VALUE))
    )]
    pub value: String,
}

impl HttpHeaderMatch {
    /// How the value matches, `Exact` when not written.
    pub fn match_type(&self) -> StringMatchType {
        self.type_written.unwrap_or(StringMatchType::Exact)
    }
}

/// A match of one query parameter.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name", "value"])))]
pub struct HttpQueryParamMatch {
    /// How the value matches ([`HttpQueryParamMatch::match_type`] gives
    /// the default, `Exact`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<StringMatchType>,
    /// The parameter's name (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 256), pattern(shapes::HEADER_NAME))
    )]
    pub name: String,
    /// The value matched (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 1024)))]
    pub value: String,
}

impl HttpQueryParamMatch {
    /// How the value matches, `Exact` when not written.
    pub fn match_type(&self) -> StringMatchType {
        self.type_written.unwrap_or(StringMatchType::Exact)
    }
}

/// A backend of an HTTPRoute rule, with filters of its own.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct HttpBackendRef {
    /// The backend's group, the core group (`""`) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 253), pattern(shapes::GROUP)))]
    pub group: Option<String>,
    /// The backend's kind, `Service` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::KIND))
    )]
    pub kind: Option<String>,
    /// The backend's name (required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 253)))]
    pub name: String,
    /// The backend's namespace; the route's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 63), pattern(shapes::NAMESPACE))
    )]
    pub namespace: Option<String>,
    /// The port (required for a Service).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
    /// The share of requests ([`HttpBackendRef::weight`] gives the
    /// default, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1000000)))]
    pub weight: Option<i32>,
    /// Filters for requests sent to this backend (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub filters: Option<Vec<HttpRouteFilter>>,
}

impl HttpBackendRef {
    /// The backend's group, `""` (core) when not written.
    pub fn group(&self) -> &str {
        self.group.as_deref().unwrap_or("")
    }

    /// The backend's kind, `Service` when not written.
    pub fn kind(&self) -> &str {
        self.kind.as_deref().unwrap_or("Service")
    }

    /// The weight, 1 when not written.
    pub fn weight(&self) -> i32 {
        self.weight.unwrap_or(1)
    }
}

/// Timeouts of a rule's requests.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteTimeouts {
    /// From the request's start to the response's end (`0s`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(shapes::DURATION)))]
    pub request: Option<String>,
    /// One try at a backend; not longer than `request`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(shapes::DURATION)))]
    pub backend_request: Option<String>,
}

impl HttpRouteTimeouts {
    /// `request` as a duration (`0s`: no timeout); none when absent or
    /// not a Gateway API duration.
    pub fn request_duration(&self) -> Option<std::time::Duration> {
        self.request.as_deref().and_then(duration)
    }

    /// `backendRequest` as a duration; none when absent or not a Gateway
    /// API duration.
    pub fn backend_request_duration(&self) -> Option<std::time::Duration> {
        self.backend_request.as_deref().and_then(duration)
    }
}

fn duration(value: &str) -> Option<std::time::Duration> {
    patterns::duration_millis(value).map(std::time::Duration::from_millis)
}

/// Retries of a rule's requests (experimental).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpRouteRetry {
    /// Status codes retried (400 to 599, unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("x-kubernetes-list-type" = "set"), inner(range(min = 400, max = 599))))]
    pub codes: Option<Vec<i32>>,
    /// Tries after the first (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub attempts: Option<i64>,
    /// The wait between tries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(shapes::DURATION)))]
    pub backoff: Option<String>,
}

impl HttpRouteRetry {
    /// `backoff` as a duration; none when absent or not a Gateway API
    /// duration.
    pub fn backoff_duration(&self) -> Option<std::time::Duration> {
        self.backoff.as_deref().and_then(duration)
    }
}

/// At most 128 matches across a route's rules.
pub(crate) const MAX_MATCHES: usize = 128;

pub(crate) fn validate(route: &HttpRoute, errors: &mut FieldErrors) {
    common::check_parent_refs(errors, "spec.parentRefs", checks::list(&route.parent_refs));
    common::check_hostnames(errors, "spec.hostnames", checks::list(&route.hostnames), 16);
    let Some(rules) = &route.rules_written else { return };
    let path = "spec.rules";
    checks::items(errors, path, rules.len(), 1, 16);
    for (i, rule) in rules.iter().enumerate() {
        check_rule(errors, &index(path, i), rule);
    }
    let matches: usize = rules
        .iter()
        .take(16)
        .map(|r| r.matches_written.as_ref().map_or(1, Vec::len))
        .sum();
    if matches > MAX_MATCHES {
        errors.push(
            path,
            format!("the rules have {matches} matches in all: a route may have at most {MAX_MATCHES}"),
        );
    }
    common::check_rule_names(errors, path, rules.iter().map(|r| r.name.as_ref()));
}

fn check_rule(errors: &mut FieldErrors, path: &str, rule: &HttpRouteRule) {
    if let Some(name) = &rule.name {
        checks::section_name(errors, &at(path, "name"), name);
    }
    if let Some(matches) = &rule.matches_written {
        let at_matches = at(path, "matches");
        checks::items(errors, &at_matches, matches.len(), 0, 64);
        for (i, m) in matches.iter().enumerate() {
            check_match(errors, &index(&at_matches, i), m);
        }
    }
    filters::check_http_filters(errors, &at(path, "filters"), checks::list(&rule.filters));
    let backends = at(path, "backendRefs");
    checks::items(errors, &backends, checks::list(&rule.backend_refs).len(), 0, 16);
    for (i, backend) in checks::list(&rule.backend_refs).iter().enumerate() {
        let path = index(&backends, i);
        common::check_backend(
            errors,
            &path,
            (backend.group.as_deref(), backend.kind.as_deref(), &backend.name),
            backend.namespace.as_deref(),
            backend.port,
        );
        common::check_weight(errors, &path, backend.weight);
        filters::check_http_filters(errors, &at(&path, "filters"), checks::list(&backend.filters));
    }
    if !checks::list(&rule.backend_refs).is_empty()
        && checks::list(&rule.filters)
            .iter()
            .any(|f| f.request_redirect.is_some())
    {
        errors.push(
            path,
            "a rule with a RequestRedirect filter answers the request itself: it must not have backendRefs",
        );
    }
    check_prefix_rewrites(errors, path, rule);
    if let Some(timeouts) = &rule.timeouts {
        check_timeouts(errors, &at(path, "timeouts"), timeouts);
    }
    if let Some(retry) = &rule.retry {
        let path = at(path, "retry");
        for (i, code) in checks::list(&retry.codes).iter().enumerate() {
            checks::range(errors, &index(&at(&path, "codes"), i), (*code).into(), 400, 599);
        }
        checks::unique_items(errors, &at(&path, "codes"), checks::list(&retry.codes));
        if let Some(attempts) = retry.attempts {
            checks::range(errors, &at(&path, "attempts"), attempts, 1, i64::MAX);
        }
        if let Some(backoff) = &retry.backoff {
            checks::duration(errors, &at(&path, "backoff"), backoff);
        }
    }
    if let Some(persistence) = &rule.session_persistence {
        session::check(errors, &at(path, "sessionPersistence"), persistence);
    }
}

/// A `ReplacePrefixMatch` path modifier (of a redirect or rewrite, of the
/// rule or of one backend) replaces the prefix matched: the rule has
/// exactly one match, of type `PathPrefix`.
fn check_prefix_rewrites(errors: &mut FieldErrors, path: &str, rule: &HttpRouteRule) {
    let replaces_prefix = |filter: &HttpRouteFilter, kind: HttpRouteFilterType| {
        let modifier = match kind {
            HttpRouteFilterType::RequestRedirect => {
                filter.request_redirect.as_ref().and_then(|r| r.path.as_ref())
            }
            _ => filter.url_rewrite.as_ref().and_then(|r| r.path.as_ref()),
        };
        modifier.is_some_and(|m| {
            m.kind == Some(PathModifierType::ReplacePrefixMatch) && m.replace_prefix_match.is_some()
        })
    };
    let matches = rule.matches();
    let one_prefix = matches.len() == 1
        && matches[0]
            .path_written
            .as_ref()
            .is_none_or(|p| p.match_type() == PathMatchType::PathPrefix);
    if one_prefix {
        return;
    }
    for kind in [
        HttpRouteFilterType::RequestRedirect,
        HttpRouteFilterType::UrlRewrite,
    ] {
        let name = kind.names().0;
        let in_rule = checks::list(&rule.filters)
            .iter()
            .filter(|f| replaces_prefix(f, kind))
            .count()
            == 1;
        if in_rule {
            errors.push(
                path,
                format!(
                    "a {name} filter with path.replacePrefixMatch needs exactly one match, of type PathPrefix"
                ),
            );
        }
        let in_backends = checks::list(&rule.backend_refs)
            .iter()
            .filter(|b| {
                checks::list(&b.filters)
                    .iter()
                    .filter(|f| replaces_prefix(f, kind))
                    .count()
                    == 1
            })
            .count()
            == 1;
        if in_backends {
            errors.push(
                path,
                format!("a backend's {name} filter with path.replacePrefixMatch needs the rule to have exactly one match, of type PathPrefix"),
            );
        }
    }
}

fn check_match(errors: &mut FieldErrors, path: &str, m: &HttpRouteMatch) {
    if let Some(path_match) = &m.path_written {
        check_path_match(errors, &at(path, "path"), path_match);
    }
    let headers = at(path, "headers");
    checks::items(errors, &headers, checks::list(&m.headers).len(), 0, 16);
    checks::unique_keys(
        errors,
        &headers,
        checks::list(&m.headers),
        |h| h.name.as_str(),
        "header name",
    );
    for (i, header) in checks::list(&m.headers).iter().enumerate() {
        let path = index(&headers, i);
        checks::header_name(errors, &at(&path, "name"), &header.name);
        filters::header_value(errors, &at(&path, "value"), &header.value, true);
    }
    let params = at(path, "queryParams");
    checks::items(errors, &params, checks::list(&m.query_params).len(), 0, 16);
    checks::unique_keys(
        errors,
        &params,
        checks::list(&m.query_params),
        |q| q.name.as_str(),
        "query parameter name",
    );
    for (i, param) in checks::list(&m.query_params).iter().enumerate() {
        let path = index(&params, i);
        checks::header_name(errors, &at(&path, "name"), &param.name);
        checks::length(errors, &at(&path, "value"), &param.value, 1, 1024);
    }
}

fn check_path_match(errors: &mut FieldErrors, path: &str, m: &HttpPathMatch) {
    let value = m.value();
    checks::length(errors, &at(path, "value"), value, 0, 1024);
    if m.match_type() == PathMatchType::RegularExpression {
        return;
    }
    let mut broken = Vec::new();
    if !value.starts_with('/') {
        broken.push("must be an absolute path, starting with '/'".to_string());
    }
    for part in ["//", "/./", "/../", "%2f", "%2F", "#"] {
        if value.contains(part) {
            broken.push(format!("must not contain {part:?}"));
        }
    }
    for end in ["/..", "/."] {
        if value.ends_with(end) {
            broken.push(format!("must not end with {end:?}"));
        }
    }
    if !patterns::is_path_chars(value) {
        broken.push("must only contain letters, digits, -/._~!$&'()*+,;=:@ and %-escapes".to_string());
    }
    for message in broken {
        errors.push(
            path,
            format!("{value:?} {message} (for types Exact and PathPrefix)"),
        );
    }
}

fn check_timeouts(errors: &mut FieldErrors, path: &str, timeouts: &HttpRouteTimeouts) {
    let request = timeouts
        .request
        .as_ref()
        .and_then(|r| checks::duration(errors, &at(path, "request"), r));
    let backend = timeouts
        .backend_request
        .as_ref()
        .and_then(|b| checks::duration(errors, &at(path, "backendRequest"), b));
    if let (Some(request), Some(backend)) = (request, backend)
        && request != 0
        && backend > request
    {
        errors.push(
            path,
            format!(
                "backendRequest ({}) is longer than request ({}): one try cannot outlast the whole request",
                timeouts.backend_request.as_deref().unwrap_or_default(),
                timeouts.request.as_deref().unwrap_or_default()
            ),
        );
    }
}
