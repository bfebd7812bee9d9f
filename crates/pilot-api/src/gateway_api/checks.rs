//! The checks every Gateway API kind makes of its fields: required values,
//! lengths, counts, ranges, the common string shapes and the uniqueness of
//! `x-kubernetes-list-type: map` and `set` lists. Each records its error at
//! the field's path.

use std::collections::{BTreeMap, HashSet};
use std::hash::Hash;

use pilot_model::FieldErrors;

use super::patterns;

pub(crate) fn at(path: &str, field: &str) -> String {
    format!("{path}.{field}")
}

pub(crate) fn key_path(path: &str, key: &str) -> String {
    let mut at = path.to_string();
    pilot_model::push_key(&mut at, key);
    at
}

pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// A required field that is absent.
pub(crate) fn required<T>(errors: &mut FieldErrors, path: &str, value: Option<&T>) {
    if value.is_none() {
        errors.push(path, "is required");
    }
}

/// A string's length in characters, between `min` and `max`; empty and
/// `min` 1 reads as a missing required value.
pub(crate) fn length(errors: &mut FieldErrors, path: &str, value: &str, min: usize, max: usize) {
    let count = value.chars().count();
    if count == 0 && min > 0 {
        errors.push(path, "is required and must not be empty");
    } else if count < min {
        errors.push(
            path,
            format!("must be at least {min} characters long, not {count}"),
        );
    } else if count > max {
        errors.push(
            path,
            format!("must be at most {max} characters long, not {count}"),
        );
    }
}

/// A list's length between `min` and `max` items.
pub(crate) fn items(errors: &mut FieldErrors, path: &str, count: usize, min: usize, max: usize) {
    if count < min {
        if min == 1 {
            errors.push(path, "is required and must have at least one item");
        } else {
            errors.push(path, format!("must have at least {min} items, not {count}"));
        }
    } else if count > max {
        errors.push(path, format!("must have at most {max} items, not {count}"));
    }
}

/// A number between `min` and `max`.
pub(crate) fn range(errors: &mut FieldErrors, path: &str, value: i64, min: i64, max: i64) {
    if value < min || value > max {
        if max == i64::MAX {
            errors.push(path, format!("must be at least {min}, not {value}"));
        } else {
            errors.push(path, format!("must be between {min} and {max}, not {value}"));
        }
    }
}

/// A port number (1 to 65535).
pub(crate) fn port(errors: &mut FieldErrors, path: &str, value: i32) {
    range(errors, path, value.into(), 1, 65535);
}

/// An object's name in a reference (1 to 253 characters).
pub(crate) fn object_name(errors: &mut FieldErrors, path: &str, name: &str) {
    length(errors, path, name, 1, 253);
}

/// An API group: empty (the core group) or a DNS name of up to 253
/// characters.
pub(crate) fn group(errors: &mut FieldErrors, path: &str, group: &str) {
    length(errors, path, group, 0, 253);
    if !patterns::is_group(group) {
        errors.push(
            path,
            format!("{group:?} is not an API group: empty (the core group) or lower-case DNS labels joined by dots"),
        );
    }
}

/// A kind: a letter, then letters, digits and inner dashes, up to 63
/// characters.
pub(crate) fn kind(errors: &mut FieldErrors, path: &str, kind: &str) {
    length(errors, path, kind, 1, 63);
    if !kind.is_empty() && !patterns::is_kind(kind) {
        errors.push(
            path,
            format!("{kind:?} is not a kind: a letter, then letters, digits and dashes, ending in a letter or digit"),
        );
    }
}

/// A namespace: a DNS-1123 label of up to 63 characters.
pub(crate) fn namespace(errors: &mut FieldErrors, path: &str, namespace: &str) {
    length(errors, path, namespace, 1, 63);
    if !namespace.is_empty() && !patterns::is_dns_label(namespace) {
        errors.push(
            path,
            format!("{namespace:?} is not a namespace: lower-case letters, digits and dashes, starting and ending with a letter or digit"),
        );
    }
}

/// A section name, listener name or rule name: lower-case DNS labels
/// joined by dots, up to 253 characters.
pub(crate) fn section_name(errors: &mut FieldErrors, path: &str, name: &str) {
    length(errors, path, name, 1, 253);
    if !name.is_empty() && !patterns::is_dns_name(name) {
        errors.push(
            path,
            format!("{name:?} is not a valid name here: lower-case DNS labels (letters, digits, inner dashes) joined by dots"),
        );
    }
}

/// A hostname, optionally with a leading `*.` wildcard label.
pub(crate) fn hostname(errors: &mut FieldErrors, path: &str, host: &str) {
    length(errors, path, host, 1, 253);
    if !host.is_empty() && !patterns::is_hostname(host) {
        errors.push(
            path,
            format!("{host:?} is not a hostname: lower-case DNS labels joined by dots, optionally behind a leading \"*.\" (no IP, port or scheme)"),
        );
    }
}

/// A hostname without wildcard.
pub(crate) fn precise_hostname(errors: &mut FieldErrors, path: &str, host: &str) {
    length(errors, path, host, 1, 253);
    if !host.is_empty() && !patterns::is_dns_name(host) {
        errors.push(
            path,
            format!(
                "{host:?} is not a precise hostname: lower-case DNS labels joined by dots, without wildcard"
            ),
        );
    }
}

/// An HTTP header name (1 to 256 token characters).
pub(crate) fn header_name(errors: &mut FieldErrors, path: &str, name: &str) {
    length(errors, path, name, 1, 256);
    if !name.is_empty() && !patterns::is_header_name(name) {
        errors.push(
            path,
            format!("{name:?} is not a header name: letters, digits and !#$%&'*+-.^_`|~ only"),
        );
    }
}

/// A Gateway API duration (`1h`, `500ms`, `1m30s`).
pub(crate) fn duration(errors: &mut FieldErrors, path: &str, value: &str) -> Option<u64> {
    let millis = patterns::duration_millis(value);
    if millis.is_none() {
        errors.push(
            path,
            format!("{value:?} is not a duration: one to four groups of 1-5 digits each followed by h, m, s or ms (e.g. 1m30s)"),
        );
    }
    millis
}

/// The entries of a `x-kubernetes-list-type: map` list are unique by their
/// key: the second of two with the same key is refused, at its index.
pub(crate) fn unique_keys<'a, T, K: Hash + Eq + std::fmt::Debug + 'a>(
    errors: &mut FieldErrors,
    path: &str,
    list: &'a [T],
    key: impl Fn(&'a T) -> K,
    what: &str,
) {
    let mut seen = HashSet::new();
    for (i, entry) in list.iter().enumerate() {
        let k = key(entry);
        if seen.contains(&k) {
            errors.push(
                index(path, i),
                format!("duplicate {what} {k:?}: each entry of this list needs its own"),
            );
        } else {
            seen.insert(k);
        }
    }
}

/// The items of a `x-kubernetes-list-type: set` list are unique.
pub(crate) fn unique_items<T: Hash + Eq + std::fmt::Debug>(errors: &mut FieldErrors, path: &str, list: &[T]) {
    unique_keys(errors, path, list, |item| item, "value");
}

/// A map of at most `max` entries whose values are at most 4096
/// characters (a listener's or BackendTLSPolicy's TLS `options`). pilot
/// defines no option: each is accepted, as the CRDs accept it, with a
/// warning that it is not applied.
pub(crate) fn options(
    errors: &mut FieldErrors,
    path: &str,
    map: Option<&BTreeMap<String, String>>,
    max: usize,
) {
    let Some(map) = map else { return };
    if map.len() > max {
        errors.push(
            path,
            format!("must have at most {max} entries, not {}", map.len()),
        );
    }
    for (key, value) in map {
        let at = key_path(path, key);
        length(errors, &at, value, 0, 4096);
        errors.warn(at, "pilot defines no TLS option: this one is not applied");
    }
}

/// The items of an optional list; none when absent.
pub(crate) fn list<T>(list: &Option<Vec<T>>) -> &[T] {
    list.as_deref().unwrap_or_default()
}
