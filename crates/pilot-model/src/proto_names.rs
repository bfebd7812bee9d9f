//! Protobuf's JSON field names: a field may be written with its proto name
//! (`simple_retry`) or its lowerCamel JSON name (`simpleRetry`), as
//! protobuf's JSON mapping reads them. Kinds accept both (serde aliases);
//! this module keeps what follows consistent: stored objects use the
//! lowerCamel name, and errors name the field as it was written.

use serde_json::Value;

/// The proto (snake_case) name of a lowerCamel field name: `simpleRetry` is
/// `simple_retry`, `http2Error` is `http2_error`.
pub(crate) fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The lowerCamel JSON name of a proto field name: `per_try_timeout` is
/// `perTryTimeout`.
pub(crate) fn camel_case(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' && !out.is_empty() {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Renames, in `written`, every object key that `canonical` (the same
/// object decoded and written again) does not have to its lowerCamel name.
/// Keys the canonical form keeps (map keys such as labels and header names,
/// free-form values) are left as they are.
pub(crate) fn use_json_names(written: &mut Value, canonical: &Value) {
    match (written, canonical) {
        (Value::Object(map), Value::Object(canonical)) => {
            let renamed: Vec<String> = map
                .keys()
                .filter(|k| !canonical.contains_key(*k) && camel_case(k) != **k)
                .cloned()
                .collect();
            for key in renamed {
                if let Some(value) = map.remove(&key) {
                    map.insert(camel_case(&key), value);
                }
            }
            for (key, value) in map.iter_mut() {
                if let Some(canonical) = canonical.get(key) {
                    use_json_names(value, canonical);
                }
            }
        }
        (Value::Array(items), Value::Array(canonical)) => {
            for (item, canonical) in items.iter_mut().zip(canonical) {
                use_json_names(item, canonical);
            }
        }
        _ => {}
    }
}

/// Whether any object key in `value` has an underscore (only such a key
/// can be a proto name that [`use_json_names`] renames).
pub(crate) fn has_underscore_key(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('_') || has_underscore_key(v)),
        Value::Array(items) => items.iter().any(has_underscore_key),
        _ => false,
    }
}

/// `path` (pilot's form, e.g. `spec.httpReqRetries.simpleRetry.attempts`)
/// with each field named as `root` (the object the path starts in) writes
/// it: a field written with its proto name is named so
/// (`spec.http_req_retries.simple_retry.attempts`).
pub(crate) fn path_as_written(path: &str, root: &Value) -> String {
    let mut out = String::with_capacity(path.len());
    let mut node = Some(root);
    let mut rest = path;
    while !rest.is_empty() {
        if let Some(inner) = rest.strip_prefix('[') {
            let (key, after) = inner.split_once(']').unwrap_or((inner, ""));
            out.push('[');
            out.push_str(key);
            out.push(']');
            node = node.and_then(|n| match n {
                Value::Array(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
                Value::Object(map) => map.get(key),
                _ => None,
            });
            rest = after;
            continue;
        }
        let body = rest.strip_prefix('.').unwrap_or(rest);
        if body.len() != rest.len() {
            out.push('.');
        }
        let end = body.find(['.', '[']).unwrap_or(body.len());
        let field = &body[..end];
        let (written, next) = match node {
            Some(Value::Object(map)) if !map.contains_key(field) => {
                let proto = snake_case(field);
                match map.get(&proto) {
                    Some(next) => (proto, Some(next)),
                    None => (field.to_string(), None),
                }
            }
            Some(Value::Object(map)) => (field.to_string(), map.get(field)),
            _ => (field.to_string(), None),
        };
        out.push_str(&written);
        node = next;
        rest = &body[end..];
    }
    out
}

/// serde's "duplicate field `simpleRetry`", from a kind whose field has a
/// proto alias: the proto spelling and a message naming both spellings.
pub(crate) fn duplicate_spellings(message: &str) -> Option<(String, String)> {
    let field = message.strip_prefix("duplicate field `")?.strip_suffix('`')?;
    let proto = snake_case(field);
    (proto != field).then(|| {
        let message = format!("`{field}` and `{proto}` are two spellings of one field; give only one");
        (proto, message)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_convert_both_ways() {
        for (camel, snake) in [
            ("simpleRetry", "simple_retry"),
            ("http2Error", "http2_error"),
            ("l4Fault", "l4_fault"),
            ("simpleCb", "simple_cb"),
            ("httpMaxRequestsPerConnection", "http_max_requests_per_connection"),
            ("port", "port"),
        ] {
            assert_eq!(snake_case(camel), snake);
            assert_eq!(camel_case(snake), camel);
        }
    }

    #[test]
    fn keys_the_canonical_form_keeps_are_not_renamed() {
        let mut written = json!({
            "http_req_retries": {"simple_retry": {"attempts": 3}},
            "append_headers": {"x_user_id": "1"},
            "route": [{"labels": {"app_version": "v1"}}],
            "websocket_upgrade": false,
        });
        let canonical = json!({
            "httpReqRetries": {"simpleRetry": {"attempts": 3}},
            "appendHeaders": {"x_user_id": "1"},
            "route": [{"labels": {"app_version": "v1"}}],
        });
        use_json_names(&mut written, &canonical);
        assert_eq!(
            written,
            json!({
                "httpReqRetries": {"simpleRetry": {"attempts": 3}},
                "appendHeaders": {"x_user_id": "1"},
                "route": [{"labels": {"app_version": "v1"}}],
                "websocketUpgrade": false,
            })
        );
    }

    #[test]
    fn paths_name_fields_as_written() {
        let spec = json!({"spec": {
            "http_req_retries": {"simple_retry": {"attempts": -1}},
            "route": [{"labels": {"app_version": "v1"}}],
            "appendHeaders": {"x.y": "z"},
        }});
        assert_eq!(
            path_as_written("spec.httpReqRetries.simpleRetry.attempts", &spec),
            "spec.http_req_retries.simple_retry.attempts"
        );
        assert_eq!(
            path_as_written("spec.route[0].labels.app_version", &spec),
            "spec.route[0].labels.app_version"
        );
        assert_eq!(
            path_as_written("spec.appendHeaders[x.y]", &spec),
            "spec.appendHeaders[x.y]"
        );
        assert_eq!(
            path_as_written("spec.httpFault.delay", &spec),
            "spec.httpFault.delay"
        );
        assert_eq!(path_as_written("", &spec), "");
    }

    #[test]
    fn duplicate_message_names_both() {
        assert_eq!(
            duplicate_spellings("duplicate field `simpleRetry`"),
            Some((
                "simple_retry".to_string(),
                "`simpleRetry` and `simple_retry` are two spellings of one field; give only one".to_string()
            ))
        );
        assert_eq!(duplicate_spellings("duplicate field `port`"), None);
    }
}
