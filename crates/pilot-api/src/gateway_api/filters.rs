//! The filters of HTTPRoute rules and backends (header modifiers, mirror,
//! redirect, rewrite and extension here; CORS and external authorization
//! in their own files), with the CRD's rules that a filter's `type` and
//! fields agree and which filters a list may repeat. GRPCRoute's filters
//! reuse the header modifier and mirror.

use pilot_model::FieldErrors;
use serde::{Deserialize, Serialize};

use super::checks::{self, at, index};
use super::common::{BackendObjectReference, LocalObjectReference};
use super::cors::Cors;
use super::external_auth::ExternalAuth;
use super::patterns;
#[cfg(feature = "schema")]
use super::shapes;

/// One filter of an HTTPRoute rule or backend.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["type"])))]
pub struct HttpRouteFilter {
    /// Which filter this is (required); its field of the same name holds
    /// its configuration.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<HttpRouteFilterType>,
    /// Headers changed on the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_header_modifier: Option<HeaderModifier>,
    /// Headers changed on the response.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_header_modifier: Option<HeaderModifier>,
    /// Requests copied to another backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_mirror: Option<RequestMirror>,
    /// A redirect answered instead of forwarding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_redirect: Option<RequestRedirect>,
    /// The request's host and path rewritten.
    #[serde(default, rename = "urlRewrite", skip_serializing_if = "Option::is_none")]
    pub url_rewrite: Option<UrlRewrite>,
    /// Cross-origin resource sharing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cors: Option<Cors>,
    /// External authorization (experimental).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_auth: Option<ExternalAuth>,
    /// An implementation-specific filter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_ref: Option<LocalObjectReference>,
}

/// The kinds of HTTPRoute filter.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HttpRouteFilterType {
    /// `requestHeaderModifier`.
    RequestHeaderModifier,
    /// `responseHeaderModifier`.
    ResponseHeaderModifier,
    /// `requestMirror`.
    RequestMirror,
    /// `requestRedirect`.
    RequestRedirect,
    /// `urlRewrite`.
    #[serde(rename = "URLRewrite")]
    UrlRewrite,
    /// `extensionRef`.
    ExtensionRef,
    /// `cors`.
    #[serde(rename = "CORS")]
    Cors,
    /// `externalAuth`.
    ExternalAuth,
}

impl HttpRouteFilterType {
    /// The type's name as written, and the field holding its
    /// configuration.
    pub fn names(self) -> (&'static str, &'static str) {
        match self {
            Self::RequestHeaderModifier => ("RequestHeaderModifier", "requestHeaderModifier"),
            Self::ResponseHeaderModifier => ("ResponseHeaderModifier", "responseHeaderModifier"),
            Self::RequestMirror => ("RequestMirror", "requestMirror"),
            Self::RequestRedirect => ("RequestRedirect", "requestRedirect"),
            Self::UrlRewrite => ("URLRewrite", "urlRewrite"),
            Self::ExtensionRef => ("ExtensionRef", "extensionRef"),
            Self::Cors => ("CORS", "cors"),
            Self::ExternalAuth => ("ExternalAuth", "externalAuth"),
        }
    }
}

/// Headers set, added and removed.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderModifier {
    /// Headers replaced (at most 16, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub set: Option<Vec<HttpHeader>>,
    /// Headers appended to (at most 16, unique by name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "map"), extend("x-kubernetes-list-map-keys" = ["name"])))]
    pub add: Option<Vec<HttpHeader>>,
    /// Header names removed (at most 16, unique).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 16), extend("x-kubernetes-list-type" = "set")))]
    pub remove: Option<Vec<String>>,
}

/// A header name and value.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["name", "value"])))]
pub struct HttpHeader {
    /// The header's name (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 256), pattern(shapes::HEADER_NAME))
    )]
    pub name: String,
    /// The header's value (required).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 4096), pattern(shapes::HEADER_VALUE))
    )]
    pub value: String,
}

/// Requests copied to another backend, all or a share of them.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["backendRef"])))]
pub struct RequestMirror {
    /// The backend the copies go to (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_ref: Option<BackendObjectReference>,
    /// The share of requests copied, 0 to 100; one of this and `fraction`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = 100)))]
    pub percent: Option<i32>,
    /// The share of requests copied as a fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fraction: Option<Fraction>,
}

/// A fraction, `numerator` out of `denominator`.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["numerator"])))]
pub struct Fraction {
    /// The numerator (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub numerator: Option<i32>,
    /// The denominator ([`Fraction::denominator`] gives the default, 100).
    #[serde(default, rename = "denominator", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub denominator_written: Option<i32>,
}

impl Fraction {
    /// The denominator, 100 when not written.
    pub fn denominator(&self) -> i32 {
        self.denominator_written.unwrap_or(100)
    }
}

/// A redirect answered instead of forwarding the request.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RequestRedirect {
    /// The scheme of the location; the request's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheme: Option<RedirectScheme>,
    /// The hostname of the location; the request's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub hostname: Option<String>,
    /// The path of the location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpPathModifier>,
    /// The port of the location.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 65535)))]
    pub port: Option<i32>,
    /// The status code ([`RequestRedirect::status_code`] gives the
    /// default, 302).
    #[serde(default, rename = "statusCode", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("enum" = [301, 302, 303, 307, 308])))]
    pub status_code_written: Option<i32>,
}

impl RequestRedirect {
    /// The redirect's status code, 302 when not written.
    pub fn status_code(&self) -> i32 {
        self.status_code_written.unwrap_or(302)
    }
}

/// The schemes of a redirect.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedirectScheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
}

/// The request's hostname and path rewritten before forwarding.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UrlRewrite {
    /// The new hostname.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 253), pattern(shapes::SUBDOMAIN))
    )]
    pub hostname: Option<String>,
    /// The new path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HttpPathModifier>,
}

/// A path replaced whole or by the prefix matched.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[cfg_attr(feature = "schema", schemars(extend("required" = ["type"])))]
pub struct HttpPathModifier {
    /// Which replacement (required).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<PathModifierType>,
    /// The whole new path, for `ReplaceFullPath`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub replace_full_path: Option<String>,
    /// What replaces the matched prefix, for `ReplacePrefixMatch`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(max = 1024)))]
    pub replace_prefix_match: Option<String>,
}

/// The kinds of path replacement.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PathModifierType {
    /// The whole path is replaced.
    ReplaceFullPath,
    /// The prefix matched is replaced.
    ReplacePrefixMatch,
}

/// An HTTP method as a match or CORS names one.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// CONNECT.
    Connect,
    /// OPTIONS.
    Options,
    /// TRACE.
    Trace,
    /// PATCH.
    Patch,
}

/// Checks an HTTPRoute `filters` list (of a rule or a backend): at most 16,
/// each filter, then the list's rules.
pub(crate) fn check_http_filters(errors: &mut FieldErrors, path: &str, filters: &[HttpRouteFilter]) {
    checks::items(errors, path, filters.len(), 0, 16);
    for (i, filter) in filters.iter().enumerate() {
        check_http_filter(errors, &index(path, i), filter);
    }
    let count = |kind: HttpRouteFilterType| filters.iter().filter(|f| f.kind == Some(kind)).count();
    if count(HttpRouteFilterType::RequestRedirect) > 0 && count(HttpRouteFilterType::UrlRewrite) > 0 {
        errors.push(
            path,
            "a RequestRedirect filter and a URLRewrite filter exclude each other: use one of them",
        );
    }
    for kind in [
        HttpRouteFilterType::Cors,
        HttpRouteFilterType::RequestHeaderModifier,
        HttpRouteFilterType::ResponseHeaderModifier,
        HttpRouteFilterType::RequestRedirect,
        HttpRouteFilterType::UrlRewrite,
    ] {
        if count(kind) > 1 {
            errors.push(
                path,
                format!("the {} filter must not be repeated", kind.names().0),
            );
        }
    }
}

fn check_http_filter(errors: &mut FieldErrors, path: &str, filter: &HttpRouteFilter) {
    use HttpRouteFilterType as T;
    checks::required(errors, &at(path, "type"), filter.kind.as_ref());
    let present = [
        (T::RequestHeaderModifier, filter.request_header_modifier.is_some()),
        (
            T::ResponseHeaderModifier,
            filter.response_header_modifier.is_some(),
        ),
        (T::RequestMirror, filter.request_mirror.is_some()),
        (T::RequestRedirect, filter.request_redirect.is_some()),
        (T::UrlRewrite, filter.url_rewrite.is_some()),
        (T::ExtensionRef, filter.extension_ref.is_some()),
        (T::Cors, filter.cors.is_some()),
        (T::ExternalAuth, filter.external_auth.is_some()),
    ];
    if let Some(kind) = filter.kind {
        type_and_fields(errors, path, kind, kind.names(), &present, |k| k.names());
    }
    if let Some(m) = &filter.request_header_modifier {
        check_header_modifier(errors, &at(path, "requestHeaderModifier"), m, true);
    }
    if let Some(m) = &filter.response_header_modifier {
        check_header_modifier(errors, &at(path, "responseHeaderModifier"), m, true);
    }
    if let Some(mirror) = &filter.request_mirror {
        check_mirror(errors, &at(path, "requestMirror"), mirror);
    }
    if let Some(redirect) = &filter.request_redirect {
        let path = at(path, "requestRedirect");
        if let Some(host) = &redirect.hostname {
            checks::precise_hostname(errors, &at(&path, "hostname"), host);
        }
        if let Some(modifier) = &redirect.path {
            check_path_modifier(errors, &at(&path, "path"), modifier);
        }
        if let Some(port) = redirect.port {
            checks::port(errors, &at(&path, "port"), port);
        }
        if let Some(code) = redirect.status_code_written
            && ![301, 302, 303, 307, 308].contains(&code)
        {
            errors.push(
                at(&path, "statusCode"),
                format!("must be 301, 302, 303, 307 or 308, not {code}"),
            );
        }
    }
    if let Some(rewrite) = &filter.url_rewrite {
        let path = at(path, "urlRewrite");
        if let Some(host) = &rewrite.hostname {
            checks::precise_hostname(errors, &at(&path, "hostname"), host);
        }
        if let Some(modifier) = &rewrite.path {
            check_path_modifier(errors, &at(&path, "path"), modifier);
        }
    }
    if let Some(reference) = &filter.extension_ref {
        reference.check(errors, &at(path, "extensionRef"));
    }
    if let Some(cors) = &filter.cors {
        super::cors::check(errors, &at(path, "cors"), cors);
    }
    if let Some(auth) = &filter.external_auth {
        super::external_auth::check(errors, &at(path, "externalAuth"), auth);
    }
}

/// A filter's `type` names the one field it configures: that field is
/// present and no other filter's field is.
pub(crate) fn type_and_fields<K: Copy + PartialEq>(
    errors: &mut FieldErrors,
    path: &str,
    kind: K,
    (type_name, field): (&str, &str),
    present: &[(K, bool)],
    names: impl Fn(K) -> (&'static str, &'static str),
) {
    for &(other, is_present) in present {
        if other == kind && !is_present {
            errors.push(
                path,
                format!("a filter of type {type_name} needs its {field} field"),
            );
        } else if other != kind && is_present {
            let (other_type, other_field) = names(other);
            errors.push(
                path,
                format!("a filter of type {type_name} must not have {other_field} (that field is for type {other_type})"),
            );
        }
    }
}

/// Checks a header modifier: at most 16 of each, names unique within
/// `set`, `add` and `remove`; values shaped as HTTPRoute's header values
/// when `strict_values`.
pub(crate) fn check_header_modifier(
    errors: &mut FieldErrors,
    path: &str,
    m: &HeaderModifier,
    strict_values: bool,
) {
    for (field, headers) in [("set", checks::list(&m.set)), ("add", checks::list(&m.add))] {
        let path = at(path, field);
        checks::items(errors, &path, headers.len(), 0, 16);
        checks::unique_keys(errors, &path, headers, |h| h.name.as_str(), "header name");
        for (i, header) in headers.iter().enumerate() {
            let path = index(&path, i);
            checks::header_name(errors, &at(&path, "name"), &header.name);
            header_value(errors, &at(&path, "value"), &header.value, strict_values);
        }
    }
    let remove = at(path, "remove");
    checks::items(errors, &remove, checks::list(&m.remove).len(), 0, 16);
    checks::unique_items(errors, &remove, checks::list(&m.remove));
}

/// A header value: 1 to 4096 characters, and, where the CRD says so,
/// visible characters with single spaces or tabs between words.
pub(crate) fn header_value(errors: &mut FieldErrors, path: &str, value: &str, strict: bool) {
    checks::length(errors, path, value, 1, 4096);
    if strict && !value.is_empty() && !patterns::is_header_value(value) {
        errors.push(
            path,
            format!("{value:?} is not a valid header value: visible ASCII characters, words separated by one space or tab, no line breaks and no whitespace at either end"),
        );
    }
}

/// Checks a mirror filter: its backend, and `percent` or `fraction` (not
/// both) in range.
pub(crate) fn check_mirror(errors: &mut FieldErrors, path: &str, mirror: &RequestMirror) {
    match &mirror.backend_ref {
        Some(backend) => backend.check(errors, &at(path, "backendRef")),
        None => errors.push(at(path, "backendRef"), "is required"),
    }
    if let Some(percent) = mirror.percent {
        checks::range(errors, &at(path, "percent"), percent.into(), 0, 100);
    }
    if let Some(fraction) = &mirror.fraction {
        let at_fraction = at(path, "fraction");
        match fraction.numerator {
            Some(numerator) => {
                checks::range(
                    errors,
                    &at(&at_fraction, "numerator"),
                    numerator.into(),
                    0,
                    i64::MAX,
                );
                if numerator > fraction.denominator() {
                    errors.push(&at_fraction, "numerator must not be greater than denominator");
                }
            }
            None => errors.push(at(&at_fraction, "numerator"), "is required"),
        }
        if let Some(denominator) = fraction.denominator_written {
            checks::range(
                errors,
                &at(&at_fraction, "denominator"),
                denominator.into(),
                1,
                i64::MAX,
            );
        }
    }
    if mirror.percent.is_some() && mirror.fraction.is_some() {
        errors.push(path, "percent and fraction exclude each other: give only one");
    }
}

fn check_path_modifier(errors: &mut FieldErrors, path: &str, modifier: &HttpPathModifier) {
    checks::required(errors, &at(path, "type"), modifier.kind.as_ref());
    if let Some(full) = &modifier.replace_full_path {
        checks::length(errors, &at(path, "replaceFullPath"), full, 0, 1024);
    }
    if let Some(prefix) = &modifier.replace_prefix_match {
        checks::length(errors, &at(path, "replacePrefixMatch"), prefix, 0, 1024);
    }
    let full = modifier.replace_full_path.is_some();
    let prefix = modifier.replace_prefix_match.is_some();
    match modifier.kind {
        Some(PathModifierType::ReplaceFullPath) if !full => {
            errors.push(path, "type ReplaceFullPath needs replaceFullPath")
        }
        Some(PathModifierType::ReplacePrefixMatch) if !prefix => {
            errors.push(path, "type ReplacePrefixMatch needs replacePrefixMatch")
        }
        _ => {}
    }
    if full && modifier.kind != Some(PathModifierType::ReplaceFullPath) {
        errors.push(path, "replaceFullPath is only for type ReplaceFullPath");
    }
    if prefix && modifier.kind != Some(PathModifierType::ReplacePrefixMatch) {
        errors.push(path, "replacePrefixMatch is only for type ReplacePrefixMatch");
    }
}
