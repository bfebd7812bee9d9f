//! Whether the Gateway API's precedence keeps Istio's order.
//!
//! Istio takes a request's first matching route, in the order written.
//! The Gateway API ranks every match of every rule (an exact path, then a
//! regular expression in pilot, then the longest path prefix; then a
//! method match, the most header matches, the most query parameter
//! matches; then the rule's order), and the first match in that ranking
//! takes the request. The two choose the same route for every request if
//! every pair of matches the ranking puts in the other order (a later
//! route's match ranked before an earlier route's) can match no request
//! together: of the matches a request meets, the one ranked first then
//! belongs to the first route Istio would take.
//!
//! Disjointness is decided conservatively: two matches are known apart
//! when their paths cannot take one path (two exact paths, an exact path
//! outside a prefix, two prefixes neither inside the other), their methods
//! differ, or one header or query parameter is matched exactly to two
//! different values. Anything else (regular expressions) may overlap, and
//! is reported.

use std::cmp::Reverse;

use pilot_api::gateway_api::{HttpRouteMatch, PathMatchType, StringMatchType};

use super::Out;

/// One match of the converted rules, with where it came from.
pub(super) struct Entry {
    /// The Istio route's index (`spec.http[route]`).
    pub(super) route: usize,
    /// The match's index in it, none for a route without matches.
    pub(super) at: Option<usize>,
    /// The rule's index in the converted route.
    pub(super) rule: usize,
    /// The match's index in the rule.
    pub(super) index: usize,
    /// The match, converted.
    pub(super) request: HttpRouteMatch,
}

/// Notes, for each route some earlier route's requests would go to
/// instead, the first such pair.
pub(super) fn check(entries: &[Entry], out: &mut Out) {
    let mut noted = std::collections::BTreeSet::new();
    for later in entries {
        for earlier in entries.iter().filter(|e| e.route < later.route) {
            if key(later) >= key(earlier) || !overlap(&earlier.request, &later.request) {
                continue;
            }
            if !noted.insert(later.route) {
                continue;
            }
            out.note(
                location(later),
                format!(
                    "the Gateway API ranks this match ({}) before {} ({}), and a request can match \
                     both: Istio sends such a request to spec.http[{}], the HTTPRoute to \
                     spec.http[{}]'s rule",
                    describe(&later.request),
                    location(earlier),
                    describe(&earlier.request),
                    earlier.route,
                    later.route
                ),
            );
        }
    }
}

fn location(entry: &Entry) -> String {
    match entry.at {
        Some(at) => format!("spec.http[{}].match[{at}]", entry.route),
        None => format!("spec.http[{}]", entry.route),
    }
}

/// What ranks a match, as `kind path-length ...`, for a note.
fn describe(request: &HttpRouteMatch) -> String {
    let path = request.path();
    let mut parts = vec![format!("{:?} {}", path.match_type(), path.value())];
    if let Some(method) = request.method {
        parts.push(
            format!("method {method:?}")
                .to_uppercase()
                .replace("METHOD", "method"),
        );
    }
    let headers = request.headers.as_ref().map_or(0, Vec::len);
    if headers > 0 {
        parts.push(format!("{headers} header{}", if headers == 1 { "" } else { "s" }));
    }
    let params = request.query_params.as_ref().map_or(0, Vec::len);
    if params > 0 {
        parts.push(format!(
            "{params} query parameter{}",
            if params == 1 { "" } else { "s" }
        ));
    }
    parts.join(", ")
}

type Key = (
    u8,
    Reverse<usize>,
    bool,
    Reverse<usize>,
    Reverse<usize>,
    usize,
    usize,
);

/// The match's rank among the route's, smallest first: pilot's order of
/// the Gateway API's precedence (`crate::gamma`), within one route.
fn key(entry: &Entry) -> Key {
    let request = &entry.request;
    let path = request.path();
    (
        match path.match_type() {
            PathMatchType::Exact => 0,
            PathMatchType::RegularExpression => 1,
            PathMatchType::PathPrefix => 2,
        },
        Reverse(path.value().len()),
        request.method.is_none(),
        Reverse(request.headers.as_ref().map_or(0, Vec::len)),
        Reverse(request.query_params.as_ref().map_or(0, Vec::len)),
        entry.rule,
        entry.index,
    )
}

/// Whether some request may match both (false only when none can).
pub(super) fn overlap(a: &HttpRouteMatch, b: &HttpRouteMatch) -> bool {
    if let (Some(x), Some(y)) = (a.method, b.method)
        && x != y
    {
        return false;
    }
    let exact_apart = |x: Option<Vec<(String, StringMatchType, String)>>,
                       y: Option<Vec<(String, StringMatchType, String)>>| {
        let (x, y) = (x.unwrap_or_default(), y.unwrap_or_default());
        x.iter().any(|(name, kind, value)| {
            *kind == StringMatchType::Exact
                && y.iter().any(|(other, other_kind, other_value)| {
                    other.eq_ignore_ascii_case(name)
                        && *other_kind == StringMatchType::Exact
                        && other_value != value
                })
        })
    };
    let headers = |m: &HttpRouteMatch| {
        m.headers.as_ref().map(|h| {
            h.iter()
                .map(|h| (h.name.clone(), h.match_type(), h.value.clone()))
                .collect()
        })
    };
    let params = |m: &HttpRouteMatch| {
        m.query_params.as_ref().map(|q| {
            q.iter()
                .map(|q| (q.name.clone(), q.match_type(), q.value.clone()))
                .collect::<Vec<_>>()
        })
    };
    if exact_apart(headers(a), headers(b)) {
        return false;
    }
    // Query parameter names are case-sensitive.
    let (pa, pb) = (params(a).unwrap_or_default(), params(b).unwrap_or_default());
    if pa.iter().any(|(name, kind, value)| {
        *kind == StringMatchType::Exact
            && pb
                .iter()
                .any(|(n, k, v)| n == name && *k == StringMatchType::Exact && v != value)
    }) {
        return false;
    }
    let (x, y) = (a.path(), b.path());
    use PathMatchType::{Exact, PathPrefix};
    match (x.match_type(), y.match_type()) {
        (Exact, Exact) => x.value() == y.value(),
        (Exact, PathPrefix) => within(y.value(), x.value()),
        (PathPrefix, Exact) => within(x.value(), y.value()),
        (PathPrefix, PathPrefix) => within(x.value(), y.value()) || within(y.value(), x.value()),
        _ => true,
    }
}

/// Whether the Gateway API's `PathPrefix` `prefix` takes `path` (or every
/// path `path`, a prefix itself, takes).
fn within(prefix: &str, path: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    prefix.is_empty() || path == prefix || path.starts_with(&format!("{prefix}/"))
}
