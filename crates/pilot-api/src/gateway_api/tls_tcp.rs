//! `TLSRoute` and `TCPRoute`: streams routed by SNI (TLS) or by the
//! listener alone (TCP) to weighted backends.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{self, BackendRef, ParentReference};
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// TLS streams routed by SNI, for the parents the route attaches to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsRoute {
    /// The parents the route attaches to (at most 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic")))]
    pub parent_refs: Option<Vec<ParentReference>>,
    /// The SNI hostnames matched (1 to 1024, required at `v1`; optional
    /// at `v1alpha2`, whose objects keep their absence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024), extend("x-kubernetes-list-type" = "atomic"), inner(length(min = 1, max = 253), pattern(shapes::HOSTNAME))))]
    pub hostnames: Option<Vec<String>>,
    /// The rules (exactly one at `v1`; up to 16 at `v1alpha2`, of which a
    /// stream, having no request to match, takes the first).
    #[serde(default)]
    pub rules: Vec<StreamRouteRule>,
    /// Whether the route attaches to default Gateways (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<super::gateway::GatewayDefaultScope>,
}

/// TCP streams of a listener, for the parents the route attaches to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TcpRoute {
    /// The parents the route attaches to (at most 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic")))]
    pub parent_refs: Option<Vec<ParentReference>>,
    /// The rules (exactly one at `v1`).
    #[serde(default)]
    pub rules: Vec<StreamRouteRule>,
    /// Whether the route attaches to default Gateways (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<super::gateway::GatewayDefaultScope>,
}

/// The rule of a TLSRoute or TCPRoute: the backends a stream goes to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["backendRefs"])))]
pub struct StreamRouteRule {
    /// The rule's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub name: Option<String>,
    /// The backends (1 to 16, required).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub backend_refs: Vec<BackendRef>,
}

/// The version whose rules are the experimental channel's first: up to 16
/// rules, and a TLSRoute's hostnames optional (none matches every SNI
/// name of the listener) and checked by their pattern only.
pub(crate) const V1ALPHA2: &str = "v1alpha2";

/// The OpenAPI schema of a TLSRoute written at `version`: the CRD's
/// required fields and list bounds at that version (one rule and a
/// hostname required at `v1` and `v1alpha3`; up to 16 rules and optional
/// hostnames at `v1alpha2`).
#[cfg(feature = "schema")]
pub(crate) fn tls_schema_at(version: &str) -> serde_json::Value {
    let mut schema = crate::primitives::openapi_schema::<TlsRoute>();
    stream_bounds(&mut schema, version);
    if version != V1ALPHA2 {
        schema["properties"]["hostnames"]["minItems"] = 1.into();
        schema["required"] = serde_json::json!(["hostnames", "rules"]);
    }
    schema
}

/// The OpenAPI schema of a TCPRoute written at `version`: the CRD's
/// required fields and list bounds at that version (one rule at `v1`, up
/// to 16 at `v1alpha2`).
#[cfg(feature = "schema")]
pub(crate) fn tcp_schema_at(version: &str) -> serde_json::Value {
    let mut schema = crate::primitives::openapi_schema::<TcpRoute>();
    stream_bounds(&mut schema, version);
    schema
}

/// What both kinds' CRDs say differently by version: the number of rules
/// (the rest is on the types).
#[cfg(feature = "schema")]
fn stream_bounds(schema: &mut serde_json::Value, version: &str) {
    schema["required"] = serde_json::json!(["rules"]);
    let rules = &mut schema["properties"]["rules"];
    rules["minItems"] = 1.into();
    rules["maxItems"] = if version == V1ALPHA2 { 16 } else { 1 }.into();
    rules["x-kubernetes-list-type"] = "atomic".into();
}

pub(crate) fn validate_tls(route: &TlsRoute, errors: &mut FieldErrors) {
    validate_tls_at(route, "v1", errors)
}

pub(crate) fn validate_tls_at(route: &TlsRoute, version: &str, errors: &mut FieldErrors) {
    common::check_parent_refs(errors, "spec.parentRefs", checks::list(&route.parent_refs));
    let path = "spec.hostnames";
    let hostnames = checks::list(&route.hostnames);
    common::check_hostnames(errors, path, hostnames, 1024);
    if version == V1ALPHA2 {
        check_rules(errors, &route.rules, 16);
        return;
    }
    if hostnames.is_empty() {
        errors.push(path, "is required: a TLSRoute matches at least one SNI hostname");
    }
    if hostnames.iter().any(|h| patterns::is_ip(h)) {
        errors.push(path, "hostnames must not be IP addresses");
    }
    let label_shaped = |h: &str| patterns::is_dns_name(h);
    if hostnames.iter().any(|h| !h.contains('*') && !label_shaped(h)) {
        errors.push(
            path,
            "every hostname without wildcard must be RFC 1123 labels joined by dots",
        );
    }
    if hostnames
        .iter()
        .any(|h| h.contains('*') && !h.strip_prefix("*.").is_some_and(label_shaped))
    {
        errors.push(
            path,
            "a wildcard must be a hostname's whole first label (\"*.\"), the rest RFC 1123 labels joined by dots",
        );
    }
    check_rules(errors, &route.rules, 1);
}

pub(crate) fn validate_tcp(route: &TcpRoute, errors: &mut FieldErrors) {
    validate_tcp_at(route, "v1", errors)
}

pub(crate) fn validate_tcp_at(route: &TcpRoute, version: &str, errors: &mut FieldErrors) {
    common::check_parent_refs(errors, "spec.parentRefs", checks::list(&route.parent_refs));
    check_rules(errors, &route.rules, if version == V1ALPHA2 { 16 } else { 1 });
}

/// A TLSRoute or TCPRoute has 1 to `max` rules (exactly one at `v1` and
/// `v1alpha3`, up to 16 at `v1alpha2`), each with 1 to 16 backends.
fn check_rules(errors: &mut FieldErrors, rules: &[StreamRouteRule], max: usize) {
    let path = "spec.rules";
    checks::items(errors, path, rules.len(), 1, max);
    for (i, rule) in rules.iter().enumerate() {
        let path = index(path, i);
        if let Some(name) = &rule.name {
            checks::section_name(errors, &at(&path, "name"), name);
        }
        let backends = at(&path, "backendRefs");
        checks::items(errors, &backends, rule.backend_refs.len(), 1, 16);
        for (j, backend) in rule.backend_refs.iter().enumerate() {
            backend.check(errors, &index(&backends, j));
        }
    }
    common::check_rule_names(errors, path, rules.iter().map(|r| r.name.as_ref()));
}
