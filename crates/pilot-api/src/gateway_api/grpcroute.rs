//! `GRPCRoute`: gRPC requests matched by service, method and headers,
//! filtered, and sent to weighted backends.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{self, LocalObjectReference, ParentReference};
use super::filters::{self, HeaderModifier, RequestMirror};
use super::httproute::{MAX_MATCHES, StringMatchType};
use super::patterns;
use super::session::{self, SessionPersistence};
#[cfg(feature = "schema")]
use super::shapes;

/// gRPC routing for the parents the route attaches to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRoute {
    /// The parents the route attaches to (at most 32).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 32), extend("x-kubernetes-list-type" = "atomic")))]
    pub parent_refs: Option<Vec<ParentReference>>,
    /// The hostnames matched (at most 16); the listeners' when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic"), inner(length(min = 1, max = 253), pattern(shapes::HOSTNAME))))]
    pub hostnames: Option<Vec<String>>,
    /// The rules (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub rules: Option<Vec<GrpcRouteRule>>,
    /// Whether the route attaches to default Gateways (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_default_gateways: Option<super::gateway::GatewayDefaultScope>,
}

/// One rule: matches, filters and backends.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteRule {
    /// The rule's name, unique in the route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub name: Option<String>,
    /// The requests matched (at most 64); every request when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 64), extend("x-kubernetes-list-type" = "atomic")))]
    pub matches: Option<Vec<GrpcRouteMatch>>,
    /// Filters applied to every request matched (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub filters: Option<Vec<GrpcRouteFilter>>,
    /// The backends (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub backend_refs: Option<Vec<GrpcBackendRef>>,
    /// Session affinity (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_persistence: Option<SessionPersistence>,
}

/// What a request must have to match: all of it.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcRouteMatch {
    /// The service and method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<GrpcMethodMatch>,
    /// Headers (at most 16, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub headers: Option<Vec<GrpcHeaderMatch>>,
}

/// A match of the gRPC service and method.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GrpcMethodMatch {
    /// How service and method match ([`GrpcMethodMatch::match_type`]
    /// gives the default, `Exact`).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_written: Option<StringMatchType>,
    /// The service (`package.Service`); every one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub service: Option<String>,
    /// The method; every one when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub method: Option<String>,
}

impl GrpcMethodMatch {
    /// How service and method match, `Exact` when not written.
    pub fn match_type(&self) -> StringMatchType {
        self.type_written.unwrap_or(StringMatchType::Exact)
    }
}

/// A match of one request header (metadata).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name", "value"])))]
pub struct GrpcHeaderMatch {
    /// How the value matches ([`GrpcHeaderMatch::match_type`] gives the
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
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 4096)))]
    pub value: String,
}

impl GrpcHeaderMatch {
    /// How the value matches, `Exact` when not written.
    pub fn match_type(&self) -> StringMatchType {
        self.type_written.unwrap_or(StringMatchType::Exact)
    }
}

/// One filter of a GRPCRoute rule or backend.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["type"])))]
pub struct GrpcRouteFilter {
    /// Which filter this is (required).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<GrpcRouteFilterType>,
    /// Headers changed on the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    /// Headers changed on the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    /// Requests copied to another backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
    /// An implementation-specific filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<LocalObjectReference>,
}

/// The kinds of GRPCRoute filter.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GrpcRouteFilterType {
    /// `requestHeaderModifier`.
    RequestHeaderModifier,
    /// `responseHeaderModifier`.
    ResponseHeaderModifier,
    /// `requestMirror`.
    RequestMirror,
    /// `extensionRef`.
    ExtensionRef,
}

impl GrpcRouteFilterType {
    fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::RequestHeaderModifier => ("RequestHeaderModifier", "requestHeaderModifier"),
            Self::ResponseHeaderModifier => ("ResponseHeaderModifier", "responseHeaderModifier"),
            Self::RequestMirror => ("RequestMirror", "requestMirror"),
            Self::ExtensionRef => ("ExtensionRef", "extensionRef"),
        }
    }
}

/// A backend of a GRPCRoute rule, with filters of its own.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name"])))]
pub struct GrpcBackendRef {
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
    /// The share of requests ([`GrpcBackendRef::weight`] gives the
    /// default, 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 1000000)))]
    pub weight: Option<i32>,
    /// Filters for requests sent to this backend (at most 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic")))]
    pub filters: Option<Vec<GrpcRouteFilter>>,
}

impl GrpcBackendRef {
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

pub(crate) fn validate(route: &GrpcRoute, errors: &mut FieldErrors) {
    common::check_parent_refs(errors, "spec.parentRefs", checks::list(&route.parent_refs));
    common::check_hostnames(errors, "spec.hostnames", checks::list(&route.hostnames), 16);
    let path = "spec.rules";
    checks::items(errors, path, checks::list(&route.rules).len(), 0, 16);
    for (i, rule) in checks::list(&route.rules).iter().enumerate() {
        check_rule(errors, &index(path, i), rule);
    }
    let matches: usize = checks::list(&route.rules)
        .iter()
        .take(16)
        .map(|r| checks::list(&r.matches).len())
        .sum();
    if matches > MAX_MATCHES {
        errors.push(
            path,
            format!("the rules have {matches} matches in all: a route may have at most {MAX_MATCHES}"),
        );
    }
    common::check_rule_names(
        errors,
        path,
        checks::list(&route.rules).iter().map(|r| r.name.as_ref()),
    );
}

fn check_rule(errors: &mut FieldErrors, path: &str, rule: &GrpcRouteRule) {
    if let Some(name) = &rule.name {
        checks::section_name(errors, &at(path, "name"), name);
    }
    let matches = at(path, "matches");
    checks::items(errors, &matches, checks::list(&rule.matches).len(), 0, 64);
    for (i, m) in checks::list(&rule.matches).iter().enumerate() {
        check_match(errors, &index(&matches, i), m);
    }
    check_filters(errors, &at(path, "filters"), checks::list(&rule.filters));
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
        check_filters(errors, &at(&path, "filters"), checks::list(&backend.filters));
    }
    if let Some(persistence) = &rule.session_persistence {
        session::check(errors, &at(path, "sessionPersistence"), persistence);
    }
}

fn check_match(errors: &mut FieldErrors, path: &str, m: &GrpcRouteMatch) {
    if let Some(method) = &m.method {
        let path = at(path, "method");
        for (field, value) in [("service", &method.service), ("method", &method.method)] {
            if let Some(value) = value {
                checks::length(errors, &at(&path, field), value, 0, 1024);
            }
        }
        if method.service.is_none() && method.method.is_none() {
            errors.push(&path, "needs a service, a method or both");
        }
        if method.match_type() == StringMatchType::Exact {
            if let Some(service) = method
                .service
                .as_deref()
                .filter(|s| !patterns::is_grpc_service(s))
            {
                errors.push(
                    &path,
                    format!("service {service:?} is not a gRPC service name (identifiers joined by dots) for an Exact match"),
                );
            }
            if let Some(name) = method.method.as_deref().filter(|m| !patterns::is_identifier(m)) {
                errors.push(
                    &path,
                    format!("method {name:?} is not a gRPC method name (letters, digits and '_', not starting with a digit) for an Exact match"),
                );
            }
        }
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
        filters::header_value(errors, &at(&path, "value"), &header.value, false);
    }
}

fn check_filters(errors: &mut FieldErrors, path: &str, list: &[GrpcRouteFilter]) {
    use GrpcRouteFilterType as T;
    checks::items(errors, path, list.len(), 0, 16);
    for (i, filter) in list.iter().enumerate() {
        let path = index(path, i);
        checks::required(errors, &at(&path, "type"), filter.kind.as_ref());
        let present = [
            (T::RequestHeaderModifier, filter.request_header_modifier.is_some()),
            (
                T::ResponseHeaderModifier,
                filter.response_header_modifier.is_some(),
            ),
            (T::RequestMirror, filter.request_mirror.is_some()),
            (T::ExtensionRef, filter.extension_ref.is_some()),
        ];
        if let Some(kind) = filter.kind {
            filters::type_and_fields(errors, &path, kind, kind.names(), &present, T::names);
        }
        if let Some(m) = &filter.request_header_modifier {
            filters::check_header_modifier(errors, &at(&path, "requestHeaderModifier"), m, true);
        }
        if let Some(m) = &filter.response_header_modifier {
            filters::check_header_modifier(errors, &at(&path, "responseHeaderModifier"), m, true);
        }
        if let Some(mirror) = &filter.request_mirror {
            filters::check_mirror(errors, &at(&path, "requestMirror"), mirror);
        }
        if let Some(reference) = &filter.extension_ref {
            reference.check(errors, &at(&path, "extensionRef"));
        }
    }
    for kind in [T::RequestHeaderModifier, T::ResponseHeaderModifier] {
        if list.iter().filter(|f| f.kind == Some(kind)).count() > 1 {
            errors.push(
                path,
                format!("the {} filter must not be repeated", kind.names().0),
            );
        }
    }
}
