//! Validation primitives every API family shares: the checks of the
//! values Envoy refuses (header names and values, request-line text, CIDR
//! blocks, wildcard hosts, percentages, RE2 regular expressions) and
//! Istio's [`Duration`], with the OpenAPI schema helper of the feature
//! `schema`.

mod duration;

use std::net::IpAddr;

use pilot_model::{FieldErrors, dns1123_subdomain};

pub use duration::{Duration, ParseDurationError};
pub use pilot_re2::{MAX_PROGRAM_SIZE, check_regex, regex_program_size};

/// Checks a host an egress rule may allow, as Istio did and Envoy's
/// virtual host domains take it: a domain, `*.` or `*-` and a domain
/// (`*.foo.com`, `*-bar.foo.com`; the wildcard matches at least one
/// character), `*` and a domain, or `*` alone (any host).
///
/// ```
/// use pilot_api::primitives::wildcard_host;
/// for ok in ["*", "*.foo.com", "*-bar.foo.com", "*foo.com", "api.foo.com"] {
///     assert!(wildcard_host(ok).is_ok(), "{ok}");
/// }
/// for bad in ["", "foo.*.com", "*.", "**.foo.com", "*.-foo.com"] {
///     assert!(wildcard_host(bad).is_err(), "{bad}");
/// }
/// ```
pub fn wildcard_host(host: &str) -> Result<(), String> {
    let bad = || format!("{host:?} is not a domain, a wildcard domain (*.foo.com, *-bar.foo.com) or *");
    let rest = match host.strip_prefix('*') {
        Some("") => return Ok(()),
        Some(rest) => rest
            .strip_prefix('.')
            .or_else(|| rest.strip_prefix('-'))
            .unwrap_or(rest),
        None => host,
    };
    dns1123_subdomain(&rest.to_ascii_lowercase()).map_err(|_| bad())
}

/// Checks an HTTP header name as a routing rule uses it: a non-empty
/// lowercase token.
pub fn header_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("header name must not be empty".into());
    }
    if name.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(format!("header name {name:?} must be lowercase"));
    }
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if !name.chars().all(token) {
        return Err(format!(
            "header name {name:?} has characters not allowed in an HTTP header name"
        ));
    }
    Ok(())
}

/// The longest header name or value Envoy accepts (`max_bytes` on
/// `HeaderValue`).
pub const MAX_HEADER_BYTES: usize = 16384;

/// Checks a header value pilot sends (an appended header): no NUL, CR or
/// LF (Envoy's `HTTP_HEADER_VALUE` rule), at most [`MAX_HEADER_BYTES`].
pub fn header_value(value: &str) -> Result<(), String> {
    if value.len() > MAX_HEADER_BYTES {
        return Err(format!(
            "a header value may have at most {MAX_HEADER_BYTES} bytes, this has {}",
            value.len()
        ));
    }
    if value.contains(['\0', '\r', '\n']) {
        return Err(format!(
            "{value:?} has a NUL, carriage return or line feed, which a header value cannot hold"
        ));
    }
    Ok(())
}

/// Checks a path, prefix or host pilot puts into a route (matches,
/// redirects, rewrites): no control characters (Envoy refuses NUL, CR and
/// LF; the others cannot appear in a request line either).
pub fn uri_text(value: &str) -> Result<(), String> {
    if value.len() > MAX_HEADER_BYTES {
        return Err(format!(
            "may have at most {MAX_HEADER_BYTES} bytes, this has {}",
            value.len()
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!(
            "{value:?} has control characters (such as a line feed), which a request line cannot hold"
        ));
    }
    Ok(())
}

/// Checks an IP address or CIDR block (`10.0.0.0/8`, `10.1.2.3`,
/// `fd00::/8`).
///
/// ```
/// use pilot_api::primitives::cidr;
/// assert!(cidr("10.0.0.0/8").is_ok());
/// assert!(cidr("10.0.0.0/33").is_err());
/// ```
pub fn cidr(value: &str) -> Result<(), String> {
    let (address, prefix) = match value.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (value, None),
    };
    let address: IpAddr = address
        .parse()
        .map_err(|_| format!("{value:?} is not an IP address or CIDR block"))?;
    if let Some(prefix) = prefix {
        let max = if address.is_ipv4() { 32 } else { 128 };
        let ok = prefix.parse::<u8>().is_ok_and(|p| p <= max) && !prefix.starts_with('+');
        if !ok {
            return Err(format!(
                "{value:?} has a bad prefix length; it must be 0 to {max}"
            ));
        }
    }
    Ok(())
}

/// Records an error unless `percent` is in 0..=100.
pub fn check_percent(path: &str, percent: f64, errors: &mut FieldErrors) {
    if !(0.0..=100.0).contains(&percent) {
        errors.push(path, format!("percent must be between 0 and 100, got {percent}"));
    }
}

/// Records that a field asks for something the data plane cannot do.
pub(crate) fn not_supported(errors: &mut FieldErrors, path: &str, what: &str) {
    errors.push(
        path,
        format!("{what} is not supported by the data plane; remove this field"),
    );
}

/// The OpenAPI v3 schema of `T`, every subschema inlined (no `$ref`), as
/// Kubernetes CRDs need it.
#[cfg(feature = "schema")]
pub(crate) fn openapi_schema<T: schemars::JsonSchema>() -> serde_json::Value {
    let mut settings = schemars::generate::SchemaSettings::openapi3();
    settings.inline_subschemas = true;
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Some(map) = schema.as_object_mut() {
        for key in ["$schema", "title", "components", "$defs", "definitions"] {
            map.remove(key);
        }
    }
    schema
}
