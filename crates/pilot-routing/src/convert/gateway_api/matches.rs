//! An Istio request match as a Gateway API one, where it means the same
//! requests:
//!
//! - `uri`: `exact` is an `Exact` path and `regex` a `RegularExpression`
//!   (both matched whole, RE2, in pilot as in Istio); `prefix` is a
//!   `PathPrefix`, exact only for `/`: Istio's prefix is one of characters
//!   (`/api` takes `/apis`), the Gateway API's one of whole segments.
//! - `headers` and `queryParams`: `exact` is `Exact`, `regex` a
//!   `RegularExpression`, and `prefix` (or presence, no value) a
//!   `RegularExpression` of the prefix's characters then anything.
//! - `method`: one of the nine methods, exactly.
//!
//! A match with a condition the Gateway API cannot express (authority,
//! scheme, port, source, per-match gateways, headers that must be absent,
//! a case-insensitive path) is left out, with a note: dropping only the
//! condition would take requests the route did not.

use pilot_api::gateway_api::{
    HttpHeaderMatch, HttpMethod, HttpPathMatch, HttpQueryParamMatch, HttpRouteMatch, PathMatchType,
    StringMatchType,
};
use pilot_api::networking::{HttpMatchRequest, StringMatch};

use super::Out;

/// `request` (at `path`, `spec.http[i].match[j]`) as a Gateway API
/// match; none, with a note, when some condition has no equivalent.
pub(super) fn request_match(request: &HttpMatchRequest, path: &str, out: &mut Out) -> Option<HttpRouteMatch> {
    let mut converted = HttpRouteMatch::default();
    let mut expressible = true;
    let mut refuse = |field: &str, what: &str| {
        out.note(
            format!("{path}.{field}"),
            format!("{what}: the Gateway API has no such match; the match is left out"),
        );
        expressible = false;
    };
    if request.authority.is_some() {
        refuse(
            "authority",
            "a match on the authority (the route's hostnames match the Host header, for a whole route)",
        );
    }
    if request.scheme.is_some() {
        refuse("scheme", "a match on the scheme");
    }
    if request.port.is_some() {
        refuse("port", "a match on the port the request came in on");
    }
    if !request.source_labels.is_empty() {
        refuse("sourceLabels", "a match on the client's labels");
    }
    if !request.source_namespace.is_empty() {
        refuse("sourceNamespace", "a match on the client's namespace");
    }
    if !request.gateways.is_empty() {
        refuse("gateways", "a match restricted to some gateways");
    }
    if !request.without_headers.is_empty() {
        refuse("withoutHeaders", "a match on headers that must not match");
    }
    if request.ignore_uri_case {
        refuse("ignoreUriCase", "a path matched without regard to case");
    }
    if let Some(method) = &request.method {
        match method.exact.as_deref().and_then(method_of) {
            Some(method) => converted.method = Some(method),
            None => refuse(
                "method",
                "a method match other than one of the nine methods, exactly",
            ),
        }
    }
    let mut path_note = None;
    if let Some(uri) = &request.uri {
        match uri_match(uri) {
            Ok((path_match, note)) => {
                converted.path_written = Some(path_match);
                path_note = note;
            }
            Err(why) => refuse("uri", &why),
        }
    }
    let mut headers = Vec::new();
    for (name, value) in &request.headers {
        match value_match(value) {
            Some((kind, value)) => headers.push(HttpHeaderMatch {
                type_written: Some(kind),
                name: name.clone(),
                value,
            }),
            None => refuse(&format!("headers.{name}"), "an empty exact value"),
        }
    }
    let mut params = Vec::new();
    for (name, value) in &request.query_params {
        match value_match(value) {
            Some((kind, value)) => params.push(HttpQueryParamMatch {
                type_written: Some(kind),
                name: name.clone(),
                value,
            }),
            None => refuse(&format!("queryParams.{name}"), "an empty exact value"),
        }
    }
    if !expressible {
        return None;
    }
    if let Some(note) = path_note {
        out.note(format!("{path}.uri.prefix"), note);
    }
    if !request.stat_prefix.is_empty() {
        out.note(
            format!("{path}.statPrefix"),
            "statistics by route have no equivalent: left out (routing is the same)",
        );
    }
    converted.headers = (!headers.is_empty()).then_some(headers);
    converted.query_params = (!params.is_empty()).then_some(params);
    Some(converted)
}

/// The path match of `uri`, with a note when it is not the same; an error
/// saying why when there is none.
fn uri_match(uri: &StringMatch) -> Result<(HttpPathMatch, Option<String>), String> {
    let path = |kind, value: &str| HttpPathMatch {
        type_written: Some(kind),
        value_written: Some(value.to_string()),
    };
    if let Some(exact) = &uri.exact {
        if !exact.starts_with('/') {
            return Err(format!("the path {exact:?} does not start with /"));
        }
        return Ok((path(PathMatchType::Exact, exact), None));
    }
    if let Some(regex) = &uri.regex {
        return Ok((path(PathMatchType::RegularExpression, regex), None));
    }
    match uri.prefix.as_deref() {
        Some("/") => Ok((path(PathMatchType::PathPrefix, "/"), None)),
        Some(prefix) if prefix.starts_with('/') => {
            let segments = prefix.trim_end_matches('/');
            let note = if prefix.ends_with('/') {
                format!(
                    "Istio's prefix {prefix:?} takes the paths starting with those characters; the \
                     Gateway API's PathPrefix {segments:?} takes {segments:?} itself too"
                )
            } else {
                format!(
                    "Istio's prefix {prefix:?} takes every path starting with those characters \
                     ({prefix}x too); the Gateway API's PathPrefix takes whole segments only \
                     ({prefix} and {prefix}/...)"
                )
            };
            Ok((path(PathMatchType::PathPrefix, segments), Some(note)))
        }
        Some(prefix) => Err(format!("the prefix {prefix:?} does not start with /")),
        // No value: any path, as Istio reads it.
        None => Ok((path(PathMatchType::PathPrefix, "/"), None)),
    }
}

/// A header or query-parameter match as the Gateway API's: `exact` as
/// is, `regex` as is, `prefix` (or presence) as a regular expression.
fn value_match(value: &StringMatch) -> Option<(StringMatchType, String)> {
    if let Some(exact) = &value.exact {
        return (!exact.is_empty()).then(|| (StringMatchType::Exact, exact.clone()));
    }
    if let Some(regex) = &value.regex {
        return Some((StringMatchType::RegularExpression, regex.clone()));
    }
    let prefix = value.prefix.as_deref().unwrap_or("");
    Some((
        StringMatchType::RegularExpression,
        format!("{}.*", escape(prefix)),
    ))
}

/// `text` as an RE2 expression matching exactly it.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn method_of(name: &str) -> Option<HttpMethod> {
    Some(match name {
        "GET" => HttpMethod::Get,
        "HEAD" => HttpMethod::Head,
        "POST" => HttpMethod::Post,
        "PUT" => HttpMethod::Put,
        "DELETE" => HttpMethod::Delete,
        "CONNECT" => HttpMethod::Connect,
        "OPTIONS" => HttpMethod::Options,
        "TRACE" => HttpMethod::Trace,
        "PATCH" => HttpMethod::Patch,
        _ => return None,
    })
}
