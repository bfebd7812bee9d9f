//! The JWT parts of an AuthorizationPolicy as RBAC principals:
//! `requestPrincipals`/`notRequestPrincipals` and the `request.auth.*`
//! conditions, matched against the payload of the token the
//! `envoy.filters.http.jwt_authn` filter verified (see
//! [`crate::build::jwt_authn`]): it writes the payload into the request's
//! dynamic metadata, filter `envoy.filters.http.jwt_authn`, key
//! [`JWT_PAYLOAD_KEY`](crate::build::jwt_authn::JWT_PAYLOAD_KEY), a
//! struct of the token's claims.
//!
//! - A request principal is `iss/sub`, as Istio's. Envoy has no matcher
//!   on two joined claims, so `A/B` is matched as "for one of the `/` in
//!   the value, `iss` is what is before it and `sub` what is after"; a
//!   prefix (`A*`) or suffix (`*B`) likewise; `*` is "a token was
//!   verified".
//! - `request.auth.audiences` reads `aud`, `request.auth.presenter`
//!   `azp`, `request.auth.principal` as a request principal,
//!   `request.auth.claims[a][b]` the claim at that path: a string claim
//!   equal to the value, or a list of strings holding it (`groups`
//!   containing `admin`). Claims of other types (numbers, booleans) never
//!   match.
//!
//! A request without a verified token has no payload: it matches no
//! principal nor condition here, and matches every `not` list.

use envoy_types::pb::envoy::config::rbac::v3::{MetadataSource, Principal, SourcedMetadata, principal};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    ListMatcher, MetadataMatcher, StringMatcher, ValueMatcher, list_matcher, metadata_matcher,
    string_matcher, value_matcher,
};
use pilot_routing::authorization::AuthAttribute;

use super::{all_ids, any_id, not_id, string_match};
use crate::build::jwt_authn::{JWT_AUTHN_FILTER, JWT_PAYLOAD_KEY};

/// A request principal `iss/sub`, with Istio's `*` forms.
pub(super) fn request_principal(value: &str) -> Principal {
    if value == "*" {
        return claim_present(&[]);
    }
    let slashes = || value.match_indices('/').map(|(i, _)| i);
    if let Some(suffix) = value.strip_prefix('*') {
        // All in `sub`, or `iss` ends with what is before a `/`.
        let mut any = vec![claim(&["sub"], &text(Pattern::Suffix(suffix)))];
        for at in suffix.match_indices('/').map(|(i, _)| i) {
            any.push(all_ids(vec![
                claim(&["iss"], &text(Pattern::Suffix(&suffix[..at]))),
                claim(&["sub"], &text(Pattern::Exact(&suffix[at + 1..]))),
            ]));
        }
        return any_or_never(any);
    }
    if let Some(prefix) = value.strip_suffix('*') {
        // All in `iss`, or `sub` starts with what is after a `/`.
        let mut any = vec![claim(&["iss"], &text(Pattern::Prefix(prefix)))];
        for at in prefix.match_indices('/').map(|(i, _)| i) {
            any.push(all_ids(vec![
                claim(&["iss"], &text(Pattern::Exact(&prefix[..at]))),
                claim(&["sub"], &text(Pattern::Prefix(&prefix[at + 1..]))),
            ]));
        }
        return any_or_never(any);
    }
    any_or_never(
        slashes()
            .map(|at| {
                all_ids(vec![
                    claim(&["iss"], &text(Pattern::Exact(&value[..at]))),
                    claim(&["sub"], &text(Pattern::Exact(&value[at + 1..]))),
                ])
            })
            .collect(),
    )
}

/// A `request.auth.*` condition's value.
pub(super) fn condition(attribute: &AuthAttribute, value: &str) -> Principal {
    match attribute {
        AuthAttribute::Principal => request_principal(value),
        AuthAttribute::Audiences => string_or_list(&["aud"], value),
        AuthAttribute::Presenter => string_or_list(&["azp"], value),
        AuthAttribute::Claims(path) => {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            string_or_list(&path, value)
        }
    }
}

/// The claim at `path` is the string `value` (Istio's `*` forms) or a list
/// holding it.
fn string_or_list(path: &[&str], value: &str) -> Principal {
    let matcher = string_match(value, "", false);
    any_id(vec![
        metadata(path, value_matcher::MatchPattern::StringMatch(matcher.clone())),
        metadata(
            path,
            value_matcher::MatchPattern::ListMatch(Box::new(ListMatcher {
                match_pattern: Some(list_matcher::MatchPattern::OneOf(Box::new(ValueMatcher {
                    match_pattern: Some(value_matcher::MatchPattern::StringMatch(matcher)),
                }))),
            })),
        ),
    ])
}

enum Pattern<'a> {
    Exact(&'a str),
    Prefix(&'a str),
    Suffix(&'a str),
}

/// A string matcher; `None` for an empty prefix or suffix (anything:
/// Envoy refuses empty ones).
fn text(pattern: Pattern<'_>) -> Option<StringMatcher> {
    let pattern = match pattern {
        Pattern::Exact(value) => string_matcher::MatchPattern::Exact(value.to_string()),
        Pattern::Prefix("") | Pattern::Suffix("") => return None,
        Pattern::Prefix(value) => string_matcher::MatchPattern::Prefix(value.to_string()),
        Pattern::Suffix(value) => string_matcher::MatchPattern::Suffix(value.to_string()),
    };
    Some(StringMatcher {
        match_pattern: Some(pattern),
        ignore_case: false,
    })
}

/// The claim at `path` matches `matcher` (is present, for `None`).
fn claim(path: &[&str], matcher: &Option<StringMatcher>) -> Principal {
    match matcher {
        Some(matcher) => metadata(path, value_matcher::MatchPattern::StringMatch(matcher.clone())),
        None => claim_present(path),
    }
}

fn claim_present(path: &[&str]) -> Principal {
    metadata(path, value_matcher::MatchPattern::PresentMatch(true))
}

/// The payload's value at `path` (the payload itself, for an empty path)
/// matches `pattern`.
fn metadata(path: &[&str], pattern: value_matcher::MatchPattern) -> Principal {
    let segments = std::iter::once(JWT_PAYLOAD_KEY)
        .chain(path.iter().copied())
        .map(|key| metadata_matcher::PathSegment {
            segment: Some(metadata_matcher::path_segment::Segment::Key(key.to_string())),
        })
        .collect();
    Principal {
        identifier: Some(principal::Identifier::SourcedMetadata(SourcedMetadata {
            metadata_matcher: Some(MetadataMatcher {
                filter: JWT_AUTHN_FILTER.to_string(),
                path: segments,
                value: Some(ValueMatcher {
                    match_pattern: Some(pattern),
                }),
                invert: false,
            }),
            metadata_source: MetadataSource::Dynamic as i32,
        })),
    }
}

/// Any of `ids`; with none, a principal nothing matches (a value without a
/// `/` is no `iss/sub`).
fn any_or_never(ids: Vec<Principal>) -> Principal {
    if ids.is_empty() {
        return not_id(Principal {
            identifier: Some(principal::Identifier::Any(true)),
        });
    }
    any_id(ids)
}
