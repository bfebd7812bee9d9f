//! Every rule that keeps out what Envoy would refuse, with a valid case at
//! the edge and an invalid one past it, each naming the field path.

use serde_json::{Value, json};

use super::registry;
use pilot_model::{ConfigMeta, DynConfig, StoreError, document};

fn errors(kind: &str, spec: Value) -> Vec<String> {
    let config = DynConfig {
        meta: ConfigMeta::new(kind, "default", "rule"),
        spec,
    };
    match registry().prepare(config) {
        Ok(_) => Vec::new(),
        Err(StoreError::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("unexpected {other}"),
    }
}

fn rule(extra: Value) -> Value {
    let mut spec = json!({"destination": {"name": "reviews"}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

/// (case, kind, spec, None for valid or Some((path, message fragment))).
type Case = (
    &'static str,
    &'static str,
    Value,
    Option<(&'static str, &'static str)>,
);

fn table(cases: Vec<Case>) {
    for (name, kind, spec, expected) in cases {
        let got = errors(kind, spec);
        match expected {
            None => assert!(got.is_empty(), "{name}: expected valid, got {got:?}"),
            Some((path, fragment)) => {
                assert_eq!(got.len(), 1, "{name}: {got:?}");
                assert!(
                    got[0].starts_with(&format!("{path}: ")) && got[0].contains(fragment),
                    "{name}: {got:?} lacks {path}: ...{fragment}"
                );
            }
        }
    }
}

const RR: &str = "RouteRule";
const DP: &str = "DestinationPolicy";

fn header(name: &str, matcher: Value) -> Value {
    rule(json!({"match": {"request": {"headers": {name: matcher}}}}))
}

#[test]
fn regexes_are_checked_as_envoys_re2() {
    let at = "spec.match.request.headers.cookie.regex";
    table(vec![
        (
            "bookinfo's cookie",
            RR,
            header("cookie", json!({"regex": "^(.*?;)?(user=jason)(;.*)?$"})),
            None,
        ),
        (
            "at the size limit",
            RR,
            header("cookie", json!({"regex": "[0-9a-f]{48}"})),
            None,
        ),
        (
            "over the size limit",
            RR,
            header("cookie", json!({"regex": "[0-9a-f]{49}"})),
            Some((at, "program size is 102")),
        ),
        (
            "unclosed group",
            RR,
            header("cookie", json!({"regex": "("})),
            Some((at, "missing )")),
        ),
        (
            "look-ahead",
            RR,
            header("cookie", json!({"regex": "(?=x)a"})),
            Some((at, "invalid perl operator")),
        ),
        (
            "look-behind",
            RR,
            header("cookie", json!({"regex": "(?<!x)a"})),
            Some((at, "invalid perl operator")),
        ),
        (
            "backreference",
            RR,
            header("cookie", json!({"regex": "(a)\\1"})),
            Some((at, "invalid escape")),
        ),
        (
            "repeat over 1000",
            RR,
            header("cookie", json!({"regex": "a{1001}"})),
            Some((at, "invalid repetition size")),
        ),
        (
            "nested repeats over 1000",
            RR,
            header("cookie", json!({"regex": "(a{10}){101}"})),
            Some((at, "invalid repetition size")),
        ),
        (
            "a path regex",
            RR,
            header("uri", json!({"regex": "/v[0-9]+/("})),
            Some(("spec.match.request.headers.uri.regex", "missing )")),
        ),
    ]);
}

#[test]
fn header_matches_paths_rewrites_and_redirects_hold_what_envoy_takes() {
    table(vec![
        (
            "empty exact header",
            RR,
            header("x-a", json!({"exact": ""})),
            None,
        ),
        (
            "empty header prefix",
            RR,
            header("x-a", json!({"prefix": ""})),
            Some(("spec.match.request.headers[x-a].prefix", "must not be empty")),
        ),
        (
            "path with a newline",
            RR,
            header("uri", json!({"prefix": "/a\nb"})),
            Some(("spec.match.request.headers.uri.prefix", "control characters")),
        ),
        (
            "exact path with NUL",
            RR,
            header("uri", json!({"exact": "/a\u{0}"})),
            Some(("spec.match.request.headers.uri.exact", "control characters")),
        ),
        (
            "rewrite uri with a newline",
            RR,
            rule(json!({"rewrite": {"uri": "/a\nb"}})),
            Some(("spec.rewrite.uri", "control characters")),
        ),
        (
            "rewrite authority with a space",
            RR,
            rule(json!({"rewrite": {"authority": "a b"}})),
            Some(("spec.rewrite.authority", "not a host")),
        ),
        (
            "redirect uri with CR",
            RR,
            rule(json!({"redirect": {"uri": "/a\rb"}})),
            Some(("spec.redirect.uri", "control characters")),
        ),
        (
            "redirect with query",
            RR,
            rule(json!({"redirect": {"uri": "/a?b=1", "authority": "x.example:80"}})),
            None,
        ),
    ]);
}

#[test]
fn appended_headers_are_ones_envoy_adds() {
    table(vec![
        (
            "a percent sign",
            RR,
            rule(json!({"appendHeaders": {"x-a": "100%"}})),
            None,
        ),
        (
            "host",
            RR,
            rule(json!({"appendHeaders": {"host": "x"}})),
            Some(("spec.appendHeaders.host", "cannot be appended")),
        ),
        (
            "a line feed",
            RR,
            rule(json!({"appendHeaders": {"x-a": "a\nb"}})),
            Some(("spec.appendHeaders[x-a]", "line feed")),
        ),
        (
            "too long",
            RR,
            rule(json!({"appendHeaders": {"x-a": "a".repeat(16385)}})),
            Some(("spec.appendHeaders[x-a]", "at most 16384 bytes")),
        ),
    ]);
}

#[test]
fn durations_stay_within_envoys_range() {
    let timeout = |d: &str| rule(json!({"httpReqTimeout": {"simpleTimeout": {"timeout": d}}}));
    let cb = |d: &str| json!({"destination": {"name": "reviews"}, "circuitBreaker": {"simpleCb": {"sleepWindow": d}}});
    let at = "spec.httpReqTimeout.simpleTimeout.timeout";
    table(vec![
        ("longest timeout", RR, timeout("9223372035s"), None),
        (
            "timeout past it",
            RR,
            timeout("9223372036s"),
            Some((at, "longer than the maximum")),
        ),
        (
            "retry timeout past it",
            RR,
            rule(json!({"httpReqRetries": {"simpleRetry": {"attempts": 1, "perTryTimeout": "9999999999s"}}})),
            Some((
                "spec.httpReqRetries.simpleRetry.perTryTimeout",
                "longer than the maximum",
            )),
        ),
        (
            "sleep window past it",
            DP,
            cb("9223372036s"),
            Some((
                "spec.circuitBreaker.simpleCb.sleepWindow",
                "longer than the maximum",
            )),
        ),
    ]);
}

#[test]
fn a_refused_regex_is_reported_with_line_and_column() {
    let text = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {name: r, namespace: default}\nspec:\n  destination: {name: reviews}\n  match: {request: {headers: {cookie: {regex: \"(\"}}}}\n";
    let err = document::parse("rule.yaml", text, &registry())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rule.yaml:6:")
            && err.contains("spec.match.request.headers.cookie.regex")
            && err.contains("missing )"),
        "{err}"
    );
}
