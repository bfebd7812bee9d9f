//! Checks shared by the networking kinds' validation, as Istio's
//! `pkg/config/validation` makes them (hostnames, ports, subnets,
//! durations, percentages, string matches, header operations, gateway
//! names, `exportTo`), plus what Envoy would refuse (RE2 program size,
//! header values, duration range).

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::common::{Destination, HeaderOperations, Headers, Percent, StringMatch};
use crate::primitives::{Duration, check_regex, cidr, header_value};
use pilot_model::{FieldErrors, dns1123_label, push_key};

/// `path.field`.
pub(crate) fn at(path: &str, field: &str) -> String {
    format!("{path}.{field}")
}

/// `path[i]`.
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The path of a map entry.
pub(crate) fn key(path: &str, key: &str) -> String {
    let mut at = path.to_string();
    push_key(&mut at, key);
    at
}

/// A label of a hostname or a port name as Istio's `IsDNS1123Label` reads
/// it: at most 63 letters, digits and `-`, starting and ending with a
/// letter or digit, upper case allowed (DNS names are case-insensitive;
/// Kubernetes' stricter rule is for object names, checked elsewhere).
fn istio_label(label: &str) -> Result<(), String> {
    let bytes = label.as_bytes();
    let edges_ok = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    if label.len() <= 63
        && edges_ok(bytes.first())
        && edges_ok(bytes.last())
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
    {
        Ok(())
    } else {
        Err(format!("{label:?} is not a DNS-1123 label"))
    }
}

/// A DNS-1123 label with an optional wildcard prefix (`*`, `*foo`,
/// `*-foo`), as Istio's `IsWildcardDNS1123Label`.
fn wildcard_label(label: &str) -> bool {
    if label == "*" {
        return true;
    }
    let rest = label
        .strip_prefix("*-")
        .or_else(|| label.strip_prefix('*'))
        .unwrap_or(label);
    label.len() <= 63 && istio_label(rest).is_ok()
}

/// Istio's `ValidateDNS1123Labels`: every label a DNS-1123 label (a final
/// empty label allowed), the top-level label not all digits.
fn dns1123_labels(domain: &str) -> Result<(), String> {
    let parts: Vec<&str> = domain.split('.').collect();
    let top = parts.last().copied().unwrap_or_default();
    if !top.is_empty() && top.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "domain name {domain:?} invalid (top level domain {top:?} cannot be all-numeric)"
        ));
    }
    for (i, label) in parts.iter().enumerate() {
        if i == parts.len() - 1 && label.is_empty() {
            return Ok(());
        }
        if istio_label(label).is_err() {
            return Err(format!(
                "domain name {domain:?} invalid (label {label:?} invalid)"
            ));
        }
    }
    Ok(())
}

fn dns_preconditions(name: &str) -> Result<(), String> {
    if name.len() > 255 {
        return Err(format!("domain name {name:?} too long (max 255)"));
    }
    if name.is_empty() {
        return Err("empty domain name not allowed".into());
    }
    Ok(())
}

/// Istio's `ValidateFQDN`: a domain name of DNS-1123 labels (a short name
/// is one label).
pub(crate) fn fqdn(name: &str) -> Result<(), String> {
    dns_preconditions(name)?;
    dns1123_labels(name)
}

/// Istio's `ValidateWildcardDomain`: a domain name whose first label may be
/// a wildcard (`*`, `*.example.com`, `*-foo.example.com`).
pub(crate) fn wildcard_domain(name: &str) -> Result<(), String> {
    dns_preconditions(name)?;
    let (first, rest) = match name.split_once('.') {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    if !wildcard_label(first) {
        return Err(format!("domain name {name:?} invalid (label {first:?} invalid)"));
    }
    match rest {
        Some(rest) => dns1123_labels(rest),
        None => Ok(()),
    }
}

/// Istio's `ValidatePartialWildCard`: a `*` only as the whole first label.
pub(crate) fn partial_wildcard(name: &str) -> Result<(), String> {
    if name.contains('*') && !(name == "*" || (name.starts_with("*.") && !name[1..].contains('*'))) {
        return Err(format!("partial wildcard {name:?} not allowed"));
    }
    Ok(())
}

/// True for an IP address (v4 or v6).
pub(crate) fn is_ip(value: &str) -> bool {
    value.parse::<IpAddr>().is_ok()
}

/// Records an error unless `port` is 1 to 65535.
pub(crate) fn check_port(path: &str, port: u32, errors: &mut FieldErrors) {
    if !(1..=65535).contains(&port) {
        errors.push(path, format!("port number {port} must be in the range 1..65535"));
    }
}

/// Records an error unless `subnet` is an IP address or CIDR block.
pub(crate) fn check_subnet(path: &str, subnet: &str, errors: &mut FieldErrors) {
    if let Err(message) = cidr(subnet) {
        errors.push(path, message);
    }
}

/// Istio's `ValidateDuration` (at least 1ms, millisecond precision) and
/// Envoy's maximum.
pub(crate) fn check_duration(path: &str, duration: Option<Duration>, errors: &mut FieldErrors) {
    if let Some(duration) = duration {
        duration.check_millis(path, errors);
    }
}

/// Istio's `validatePercentage`: 0, or 0.0001 to 100.
pub(crate) fn check_percentage(path: &str, percentage: Option<Percent>, errors: &mut FieldErrors) {
    if let Some(Percent { value }) = percentage
        && (!(0.0..=100.0).contains(&value) || (value > 0.0 && value < 0.0001) || value.is_nan())
    {
        errors.push(
            at(path, "value"),
            format!("percentage {value} is neither 0.0, nor in range [0.0001, 100.0]"),
        );
    }
}

/// Istio's `validateStringMatch`: at most one of exact, prefix, regex; no
/// empty prefix or regex; a regex RE2 (within Envoy's program size).
/// With `required`, an empty match is an error too.
pub(crate) fn check_string_match(path: &str, m: &StringMatch, required: bool, errors: &mut FieldErrors) {
    let given = [m.exact.is_some(), m.prefix.is_some(), m.regex.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given > 1 {
        errors.push(path, "give only one of exact, prefix or regex");
        return;
    }
    if given == 0 && required {
        errors.push(path, "give one of exact, prefix or regex");
    }
    if m.prefix.as_deref() == Some("") {
        errors.push(at(path, "prefix"), "prefix string match should not be empty");
    }
    if let Some(regex) = &m.regex {
        check_regex_at(&at(path, "regex"), regex, errors);
    }
    for (field, value) in [("exact", &m.exact), ("prefix", &m.prefix)] {
        if let Some(value) = value
            && value.contains(['\0', '\r', '\n'])
        {
            errors.push(
                at(path, field),
                format!("{value:?} has a NUL, carriage return or line feed"),
            );
        }
    }
}

/// Records an error unless `regex` is non-empty RE2 Envoy accepts.
pub(crate) fn check_regex_at(path: &str, regex: &str, errors: &mut FieldErrors) {
    if regex.is_empty() {
        errors.push(path, "regex string match should not be empty");
    } else if let Err(message) = check_regex(regex) {
        errors.push(
            path,
            format!("{regex:?} is not a regular expression Envoy accepts: {message}; use RE2 syntax"),
        );
    }
}

/// Istio's header name check for matches: a token of letters, digits,
/// `-` and `_`, or an HTTP/2 pseudo-header.
pub(crate) fn check_match_header_name(path: &str, name: &str, errors: &mut FieldErrors) {
    const PSEUDO: [&str; 5] = [":method", ":scheme", ":authority", ":path", ":status"];
    if name.is_empty() {
        errors.push(path, "header name cannot be empty");
    } else if !PSEUDO.contains(&name)
        && !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        errors.push(path, format!("header name {name} is not a valid header name"));
    }
}

fn is_internal_header(name: &str) -> bool {
    name.starts_with(':') || name.eq_ignore_ascii_case("host")
}

fn is_authority_header(name: &str) -> bool {
    name.eq_ignore_ascii_case(":authority") || name.eq_ignore_ascii_case("host")
}

/// Istio's checks on header operations: no pseudo-headers (request
/// set/add may set the authority), no Host in removals or responses;
/// values Envoy accepts.
pub(crate) fn check_headers(path: &str, headers: Option<&Headers>, errors: &mut FieldErrors) {
    let Some(headers) = headers else { return };
    if let Some(request) = &headers.request {
        check_operations(&at(path, "request"), request, true, errors);
    }
    if let Some(response) = &headers.response {
        check_operations(&at(path, "response"), response, false, errors);
    }
}

fn check_operations(path: &str, ops: &HeaderOperations, request: bool, errors: &mut FieldErrors) {
    let name_of = |errors: &mut FieldErrors, at: &str, name: &str, allow_authority: bool| {
        if name.is_empty() {
            errors.push(at, "header name cannot be empty");
        } else if allow_authority && is_internal_header(name) && !is_authority_header(name) {
            errors.push(
                at,
                format!("invalid header {name:?}: header cannot have \":\" prefix"),
            );
        } else if !allow_authority && name.eq_ignore_ascii_case("host") {
            errors.push(at, format!("invalid header {name:?}: cannot set Host header"));
        } else if !allow_authority && is_internal_header(name) {
            errors.push(
                at,
                format!("invalid header {name:?}: header cannot have \":\" prefix"),
            );
        } else if !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~:".contains(c))
        {
            errors.push(
                at,
                format!("header name {name:?} has characters not allowed in an HTTP header name"),
            );
        }
    };
    for (field, map) in [("set", &ops.set), ("add", &ops.add)] {
        for (name, value) in map {
            let entry = key(&at(path, field), name);
            name_of(errors, &entry, name, request);
            if let Err(message) = header_value(value) {
                errors.push(entry, message);
            }
        }
    }
    for (i, name) in ops.remove.iter().enumerate() {
        name_of(errors, &index(&at(path, "remove"), i), name, false);
    }
}

/// Istio's `validateGatewayNames`: `namespace/name` of DNS-1123 labels, or
/// a (legacy) FQDN name such as `mesh` or `gw.ns.svc.cluster.local`.
pub(crate) fn check_gateway_names(path: &str, names: &[String], errors: &mut FieldErrors) {
    for (i, name) in names.iter().enumerate() {
        let at = index(path, i);
        match name.split_once('/') {
            None => {
                if let Err(message) = fqdn(name) {
                    errors.push(at, message);
                }
            }
            Some((namespace, gateway)) => {
                if namespace.is_empty() || gateway.is_empty() {
                    errors.push(&at, "config namespace and gateway name cannot be empty");
                } else {
                    if dns1123_label(namespace).is_err() {
                        errors.push(&at, format!("invalid value for namespace: {namespace:?}"));
                    }
                    if dns1123_label(gateway).is_err() {
                        errors.push(&at, format!("invalid value for gateway name: {gateway:?}"));
                    }
                }
            }
        }
    }
}

/// Istio's `validateExportTo`: `.`, `*`, `~` (service entries) or
/// namespaces, no duplicates, `*` and `~` alone.
pub(crate) fn check_export_to(
    path: &str,
    export_to: &[String],
    service_entry: bool,
    errors: &mut FieldErrors,
) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, entry) in export_to.iter().enumerate() {
        let at = index(path, i);
        if !seen.insert(entry.as_str()) {
            errors.push(&at, format!("duplicate entries in exportTo for entry {entry}"));
            continue;
        }
        let valid =
            entry == "." || entry == "*" || (entry == "~" && service_entry) || dns1123_label(entry).is_ok();
        if !valid {
            errors.push(
                &at,
                format!("only . or * or a valid DNS 1123 label is allowed as exportTo entry, not {entry:?}"),
            );
        }
    }
    if seen.contains("*") && export_to.len() > 1 {
        errors.push(
            path,
            "cannot have both public (*) and non-public exportTo values for a resource",
        );
    }
    if seen.contains("~") && export_to.len() > 1 {
        errors.push(path, "cannot export service entry to no one (~) and someone");
    }
}

/// Istio's `validateDestination`: a host (not `*`; wildcards allowed), a
/// DNS-1123 label subset, a port in range.
pub(crate) fn check_destination(path: &str, destination: &Destination, errors: &mut FieldErrors) {
    let host = &destination.host;
    if host.is_empty() {
        errors.push(at(path, "host"), "a destination host is required");
    } else if host == "*" {
        errors.push(at(path, "host"), format!("invalid destination host {host}"));
    } else if let Err(message) = wildcard_domain(host) {
        errors.push(at(path, "host"), message);
    }
    if !destination.subset.is_empty() && dns1123_label(&destination.subset).is_err() {
        errors.push(
            at(path, "subset"),
            format!("subset name is invalid: {}", destination.subset),
        );
    }
    if let Some(port) = destination.port {
        check_port(&at(&at(path, "port"), "number"), port.number, errors);
    }
}

/// Records label syntax errors (Kubernetes' rules) at `path`.
pub(crate) fn check_labels(path: &str, labels: &BTreeMap<String, String>, errors: &mut FieldErrors) {
    errors.check_labels(path, labels);
}

/// Protocols Istio knows on a port (`protocol.Parse`), upper case.
const PROTOCOLS: [&str; 12] = [
    "HTTP",
    "HTTPS",
    "GRPC",
    "GRPC-WEB",
    "HTTP2",
    "HTTP_PROXY",
    "MONGO",
    "MYSQL",
    "REDIS",
    "TCP",
    "TLS",
    "UDP",
];

/// A port protocol as Istio parses it: its upper-case name, or `None`
/// when Istio does not know it.
pub(crate) fn protocol(name: &str) -> Option<String> {
    let upper = name.to_ascii_uppercase();
    PROTOCOLS.contains(&upper.as_str()).then_some(upper)
}

/// True for the protocols Istio treats as HTTP.
pub(crate) fn is_http(protocol: &str) -> bool {
    matches!(protocol, "HTTP" | "HTTP2" | "GRPC" | "GRPC-WEB" | "HTTP_PROXY")
}

/// True for the protocols Istio treats as TLS.
pub(crate) fn is_tls(protocol: &str) -> bool {
    matches!(protocol, "HTTPS" | "TLS")
}

/// Istio's `ValidatePortName`: a DNS-1123 label (upper case allowed).
pub(crate) fn check_port_name(path: &str, name: &str, errors: &mut FieldErrors) {
    if istio_label(name).is_err() {
        errors.push(path, format!("invalid port name: {name:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_as_istio_checks_them() {
        for ok in [
            "reviews",
            "reviews.default.svc.cluster.local",
            "*.example.com",
            "*",
            "*-bar.foo.com",
            "istio.io.",
        ] {
            assert!(wildcard_domain(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "foo.*.com",
            "a..b",
            "-a.com",
            "foo.123",
            "*.*.com",
            "foo_bar.com",
        ] {
            assert!(wildcard_domain(bad).is_err(), "{bad}");
        }
        assert!(fqdn("*.example.com").is_err());
        assert!(partial_wildcard("*foo.com").is_err());
        assert!(partial_wildcard("*.foo.com").is_ok());
    }
}
