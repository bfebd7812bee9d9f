//! How a route's matches read (`header end-user=jason, port 9080`), for
//! describing routes.

use pilot_routing::{HttpMatch, L4Match, StringMatch};

use super::labels_text;

fn string_match(field: &str, m: &StringMatch) -> String {
    match m {
        StringMatch::Exact(v) => format!("{field}={v}"),
        StringMatch::Prefix(v) => format!("{field} prefix {v}"),
        StringMatch::Regex(v) => format!("{field}~/{v}/"),
        other => format!("{field} {other:?}"),
    }
}

/// `uri prefix /api, end-user=jason` (every condition of one match).
pub(super) fn http_match_text(m: &HttpMatch) -> String {
    let mut parts = Vec::new();
    for (field, value) in [
        ("uri", &m.uri),
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ] {
        if let Some(value) = value {
            parts.push(string_match(field, value));
        }
    }
    parts.extend(
        m.headers
            .iter()
            .map(|(k, v)| string_match(&format!("header {k}"), v)),
    );
    parts.extend(
        m.query_params
            .iter()
            .map(|(k, v)| string_match(&format!("query {k}"), v)),
    );
    parts.extend(
        m.without_headers
            .iter()
            .map(|(k, v)| format!("not {}", string_match(&format!("header {k}"), v))),
    );
    if let Some(port) = m.port {
        parts.push(format!("port {port}"));
    }
    if let Some(service) = &m.source_service {
        parts.push(format!("from {service}"));
    }
    if !m.source_labels.is_empty() {
        parts.push(format!("from labels {}", labels_text(&m.source_labels.0)));
    }
    if let Some(namespace) = &m.source_namespace {
        parts.push(format!("from namespace {namespace}"));
    }
    if !m.gateways.is_empty() {
        parts.push(format!("gateways {}", m.gateways.join(",")));
    }
    if parts.is_empty() {
        "any request".to_string()
    } else {
        parts.join(", ")
    }
}

pub(super) fn l4_match_text(m: &L4Match) -> String {
    let mut parts = Vec::new();
    if !m.sni_hosts.is_empty() {
        parts.push(format!("sni {}", m.sni_hosts.join(",")));
    }
    if !m.destination_subnets.is_empty() {
        parts.push(format!("to {}", m.destination_subnets.join(",")));
    }
    if let Some(port) = m.port {
        parts.push(format!("port {port}"));
    }
    if !m.source_labels.is_empty() {
        parts.push(format!("from labels {}", labels_text(&m.source_labels.0)));
    }
    if let Some(namespace) = &m.source_namespace {
        parts.push(format!("from namespace {namespace}"));
    }
    if !m.gateways.is_empty() {
        parts.push(format!("gateways {}", m.gateways.join(",")));
    }
    if parts.is_empty() {
        "any connection".to_string()
    } else {
        parts.join(", ")
    }
}
