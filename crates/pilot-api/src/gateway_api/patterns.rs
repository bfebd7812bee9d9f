//! The string shapes the Gateway API's CRDs require of their fields (their
//! OpenAPI `pattern`s and the regular expressions of their CEL rules),
//! each written out by hand as the set of strings the expression matches.

use std::net::IpAddr;

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`: one lower-case DNS label (no length
/// limit of its own; the field's `maxLength` bounds it).
pub(crate) fn is_dns_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

/// Labels joined by dots (`label(\.label)*`): the Gateway API's
/// `PreciseHostname`, `SectionName` and listener names.
pub(crate) fn is_dns_name(name: &str) -> bool {
    name.split('.').all(is_dns_label)
}

/// A `Hostname`: a DNS name, optionally behind a leading `*.` wildcard.
pub(crate) fn is_hostname(host: &str) -> bool {
    is_dns_name(host.strip_prefix("*.").unwrap_or(host))
}

/// A `Group`: empty (the core group) or a DNS name.
pub(crate) fn is_group(group: &str) -> bool {
    group.is_empty() || is_dns_name(group)
}

/// A `Kind`: a letter, then letters, digits and dashes, ending in a letter
/// or digit.
pub(crate) fn is_kind(kind: &str) -> bool {
    let bytes = kind.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphabetic()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// An HTTP header name (RFC 7230 `token`): letters, digits and
/// ``!#$%&'*+-.^_`|~``.
pub(crate) fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value as the HTTPRoute CRD allows it: visible ASCII
/// characters in words separated by at most one space or tab, with no
/// whitespace at either end (`^[!-~]+([\t ]?[!-~]+)*$`).
pub(crate) fn is_header_value(value: &str) -> bool {
    let visible = |b: u8| (b'!'..=b'~').contains(&b);
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) if visible(first) && visible(last) => {
            bytes.windows(2).all(|w| visible(w[0]) || visible(w[1]))
                && bytes.iter().all(|&b| visible(b) || b == b' ' || b == b'\t')
        }
        _ => false,
    }
}

/// A path of the characters RFC 3986 allows in one, with `%` only as the
/// start of a two-digit hex escape
/// (`^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`).
pub(crate) fn is_path_chars(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else if b.is_ascii_alphanumeric() || b"-/._~!$&'()*+,;=:@".contains(&b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// A Gateway API `Duration`: one to four groups of one to five digits and
/// a unit `h`, `m`, `s` or `ms` (`^([0-9]{1,5}(h|m|s|ms)){1,4}$`). Returns
/// its length in milliseconds.
pub(crate) fn duration_millis(value: &str) -> Option<u64> {
    let bytes = value.as_bytes();
    let (mut i, mut groups, mut total) = (0, 0, 0u64);
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let digits = i - start;
        if !(1..=5).contains(&digits) {
            return None;
        }
        let number: u64 = value[start..i].parse().ok()?;
        let scale = match (bytes.get(i), bytes.get(i + 1)) {
            (Some(b'm'), Some(b's')) => {
                i += 2;
                1
            }
            (Some(b'h'), _) => {
                i += 1;
                3_600_000
            }
            (Some(b'm'), _) => {
                i += 1;
                60_000
            }
            (Some(b's'), _) => {
                i += 1;
                1_000
            }
            _ => return None,
        };
        total += number * scale;
        groups += 1;
    }
    (1..=4).contains(&groups).then_some(total)
}

/// A domain-prefixed path, `example.com/some-path` (a GatewayClass's
/// `controllerName`): a DNS name, `/`, then one or more of
/// ``A-Za-z0-9/-._~%!$&'()*+,;=:``.
pub(crate) fn is_domain_prefixed_path(value: &str) -> bool {
    value
        .split_once('/')
        .is_some_and(|(domain, path)| is_dns_name(domain) && !path.is_empty() && path.bytes().all(path_char))
}

fn path_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"/-._~%!$&'()*+,;=:".contains(&b)
}

/// A listener's `protocol`: a name of letters, digits and inner dashes
/// (`HTTP`, `TLS`, ...), or a string ending in a domain-prefixed name
/// (`example.com/Proto`).
///
/// The CRD's pattern anchors its second alternative at the end only, so
/// any string whose last `/` is preceded by a lower-case letter or digit
/// and followed by letters and digits matches it.
pub(crate) fn is_listener_protocol(protocol: &str) -> bool {
    let bytes = protocol.as_bytes();
    let plain = match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    };
    plain
        || protocol.rsplit_once('/').is_some_and(|(head, name)| {
            !name.is_empty()
                && name.bytes().all(|b| b.is_ascii_alphanumeric())
                && head
                    .bytes()
                    .last()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// A Gateway address `type`. The CRD's pattern
/// (`^Hostname|IPAddress|NamedAddress|<domain>/<path>$`) binds its anchors
/// to the first and last alternatives only: a type starting with
/// `Hostname`, containing `IPAddress` or `NamedAddress`, or ending in a
/// domain-prefixed path matches.
pub(crate) fn is_address_type(value: &str) -> bool {
    value.starts_with("Hostname")
        || value.contains("IPAddress")
        || value.contains("NamedAddress")
        || value.match_indices('/').any(|(i, _)| {
            let path = &value[i + 1..];
            !path.is_empty()
                && path.bytes().all(path_char)
                && value[..i]
                    .bytes()
                    .last()
                    .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// An IPv4 or IPv6 address, as the CRDs' `ipv4`/`ipv6` formats and CEL's
/// `isIP` read one.
pub(crate) fn is_ip(value: &str) -> bool {
    value.parse::<IpAddr>().is_ok()
}

/// A Kubernetes label or annotation key: an optional DNS name prefix and
/// `/`, then a name of up to 63 letters, digits, `-`, `_` and `.`,
/// starting and ending with a letter or digit.
pub(crate) fn is_qualified_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    prefix.is_none_or(is_dns_name) && is_qualified_name(name)
}

fn is_qualified_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 63
                && first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
        }
        _ => false,
    }
}

/// A Kubernetes label value: empty, or letters, digits, `-`, `_` and `.`
/// starting and ending with a letter or digit.
pub(crate) fn is_label_value(value: &str) -> bool {
    value.is_empty() || is_qualified_name_unbounded(value)
}

fn is_qualified_name_unbounded(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
        }
        _ => false,
    }
}

/// A CORS origin: `*`, or `http://` / `https://` and a host (DNS-like
/// labels of letters, digits and dashes, optionally behind `*.`, or `*`
/// alone) with an optional port of one to five digits; nothing after.
pub(crate) fn is_cors_origin(origin: &str) -> bool {
    if origin == "*" {
        return true;
    }
    let Some(rest) = origin
        .strip_prefix("https://")
        .or_else(|| origin.strip_prefix("http://"))
    else {
        return false;
    };
    let (host, port) = match rest.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (rest, None),
    };
    let label = |l: &str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    let host_ok = host == "*" || host.strip_prefix("*.").unwrap_or(host).split('.').all(label);
    let port_ok = port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()));
    host_ok && port_ok
}

/// A BackendTLSPolicy's `wellKnownCACertificates`: `System`, or a
/// domain-prefixed name (`example.com/name`, the name as a label key's).
pub(crate) fn is_well_known_ca(value: &str) -> bool {
    value == "System"
        || value.split_once('/').is_some_and(|(domain, name)| {
            is_dns_name(domain) && is_qualified_name_unbounded(name) && name.len() <= 63
        })
}

/// A subject alternative name URI as the BackendTLSPolicy CRD's pattern
/// reads one: a scheme (no `:`, `/`, `?` or `#`), `:`, then `//`.
pub(crate) fn is_san_uri(uri: &str) -> bool {
    uri.split_once(':').is_some_and(|(scheme, rest)| {
        !scheme.is_empty() && !scheme.contains(['/', '?', '#']) && rest.starts_with("//")
    })
}

/// A gRPC service name: optionally a leading dot, then identifiers of
/// letters, digits and `_` (not starting with a digit) joined by dots;
/// letters of either case.
pub(crate) fn is_grpc_service(service: &str) -> bool {
    let service = service.strip_prefix('.').unwrap_or(service);
    service.split('.').all(is_identifier)
}

/// A gRPC method name: letters, digits and `_`, not starting with a digit.
pub(crate) fn is_identifier(name: &str) -> bool {
    let bytes = name.as_bytes();
    bytes
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_read_as_the_crds_regular_expressions() {
        assert!(
            is_header_value("a b\tc")
                && !is_header_value("a  b")
                && !is_header_value(" a")
                && !is_header_value("a\u{e9}")
        );
        assert!(
            is_path_chars("/a%2Fb") && !is_path_chars("/a%2") && !is_path_chars("/a b") && !is_path_chars("")
        );
        assert!(
            is_domain_prefixed_path("example.net/gateway-controller")
                && !is_domain_prefixed_path("Example.net/x")
        );
        assert!(is_grpc_service(".Foo.bar_1") && !is_grpc_service("foo..bar") && !is_grpc_service("1foo"));
        assert!(
            is_qualified_key("example.com/name")
                && !is_qualified_key("example.com/")
                && !is_qualified_key("a/b/c")
        );
        assert!(
            is_well_known_ca("System")
                && is_well_known_ca("example.com/bundle")
                && !is_well_known_ca("system")
        );
        assert!(is_san_uri("spiffe://cluster.local/ns/a") && !is_san_uri("spiffe:/x") && !is_san_uri("://x"));
        assert!(
            is_cors_origin("https://*")
                && is_cors_origin("http://a-b.c:1")
                && !is_cors_origin("http://a:123456")
        );
        assert_eq!(duration_millis("1h2m3s4ms"), Some(3_723_004));
        assert_eq!(duration_millis("99999ms"), Some(99_999));
        // Characters of several bytes are read, never split.
        assert!(!is_address_type("é/x") && is_address_type("é.a/x") && !is_address_type("aé"));
        assert!(!is_hostname("é.com") && !is_listener_protocol("é/P") && !is_cors_origin("http://é"));
    }

    /// Every string the CRDs' regular expressions describe is accepted by the
    /// hand-written check of the same field (the expressions below are the
    /// CRDs', anchors dropped: proptest generates from them).
    #[test]
    fn checks_accept_what_the_crds_patterns_generate() {
        use proptest::strategy::{Strategy, ValueTree};
        use proptest::test_runner::TestRunner;
        const LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
        let dns = format!("{LABEL}(\\.{LABEL})*");
        type Check = fn(&str) -> bool;
        let cases: Vec<(String, Check)> = vec![
            (format!("(\\*\\.)?{dns}"), is_hostname),
            (dns.clone(), is_dns_name),
            ("[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?".into(), is_kind),
            ("[A-Za-z0-9!#$%&'*+\\-.^_`|~]+".into(), is_header_name),
            ("[!-~]+([\\t ]?[!-~]+)*".into(), is_header_value),
            (
                "(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+".into(),
                is_path_chars,
            ),
            ("([0-9]{1,5}(h|m|s|ms)){1,4}".into(), |s| {
                duration_millis(s).is_some()
            }),
            (
                format!("{dns}/[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"),
                is_domain_prefixed_path,
            ),
            (
                "[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?".into(),
                is_listener_protocol,
            ),
            (format!("{dns}/[A-Za-z0-9]+"), is_listener_protocol),
            (format!("{dns}/[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+"), is_address_type),
            (
                "https?://((\\*\\.)?([a-zA-Z0-9\\-]+\\.)*[a-zA-Z0-9-]+|\\*)(:[0-9]{1,5})?".into(),
                is_cors_origin,
            ),
            (
                format!("({dns}/)?([A-Za-z0-9][-A-Za-z0-9_.]{{0,61}})?[A-Za-z0-9]"),
                is_qualified_key,
            ),
            (
                "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?".into(),
                is_label_value,
            ),
            (
                format!("{dns}/([A-Za-z0-9][-A-Za-z0-9_.]{{0,61}})?[A-Za-z0-9]"),
                is_well_known_ca,
            ),
            (
                "([^:/?#]+):(//([^/?#]*))([^?#]*)(\\?([^#]*))?(#(.*))?".into(),
                is_san_uri,
            ),
            (
                "\\.?[a-zA-Z_][a-zA-Z_0-9]*(\\.[a-zA-Z_][a-zA-Z_0-9]*)*".into(),
                is_grpc_service,
            ),
            ("[A-Za-z_][A-Za-z_0-9]*".into(), is_identifier),
        ];
        let mut runner = TestRunner::deterministic();
        for (pattern, check) in cases {
            let strategy = proptest::string::string_regex(&pattern).unwrap();
            for _ in 0..300 {
                let value = strategy.new_tree(&mut runner).unwrap().current();
                assert!(check(&value), "{value:?} matches {pattern} but is refused");
            }
        }
    }
}
