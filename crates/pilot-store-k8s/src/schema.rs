//! OpenAPI schemas as Kubernetes structural schemas.
//!
//! A CRD's schema must be *structural*: every node has a `type` (or
//! `x-kubernetes-preserve-unknown-fields`), no `additionalProperties` next
//! to `properties`, no `$ref`, and `anyOf`/`oneOf` only as extra checks on
//! a typed node. The schemas pilot derives from its Rust types (schemars)
//! use `anyOf` for optional fields, `oneOf` for enums with documented
//! variants, `additionalProperties: false` for `deny_unknown_fields` and
//! `default` for serde defaults; this turns them into the structural form.

use serde_json::{Map, Value, json};

/// Keys a structural schema keeps; anything else is dropped.
const KEPT: [&str; 15] = [
    "type",
    "format",
    "description",
    "properties",
    "items",
    "additionalProperties",
    "enum",
    "nullable",
    "required",
    "minimum",
    "maximum",
    "pattern",
    "minItems",
    "maxItems",
    "minLength",
];

/// The structural form of an OpenAPI v3 schema.
pub(crate) fn structural(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return preserve();
    };
    let description = object.get("description").cloned();
    for key in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = object.get(key) {
            return alternatives(branches, description);
        }
    }
    let mut out = Map::new();
    for (key, value) in object {
        if key.starts_with("x-kubernetes-") || KEPT.contains(&key.as_str()) {
            out.insert(key.clone(), value.clone());
        }
    }
    // Defaults would be written into stored objects by the API server:
    // pilot's own defaults apply when it reads them instead (not kept).
    if let Some(Value::Object(properties)) = out.get_mut("properties") {
        for value in properties.values_mut() {
            *value = structural(value);
        }
        out.remove("additionalProperties");
    }
    match out.get("additionalProperties") {
        Some(Value::Object(_)) => {
            let inner = structural(&out["additionalProperties"]);
            out.insert("additionalProperties".into(), inner);
        }
        Some(_) => {
            out.remove("additionalProperties");
        }
        None => {}
    }
    if let Some(items) = out.get("items") {
        let inner = structural(items);
        out.insert("items".into(), inner);
    }
    let typed = out.get("type").is_some_and(Value::is_string);
    let open_object = out.get("type") == Some(&json!("object"))
        && !out.contains_key("properties")
        && !out.contains_key("additionalProperties");
    if !typed || open_object {
        out.remove("type");
        out.insert("type".into(), json!("object"));
        out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    Value::Object(out)
}

/// `anyOf`/`oneOf`: one typed branch (plus `null`) becomes that branch,
/// nullable; string enum branches become one enum; anything else keeps
/// unknown fields (pilot still validates it on every write).
fn alternatives(branches: &[Value], description: Option<Value>) -> Value {
    let is_null = |b: &Value| b.get("enum") == Some(&json!([null])) || b.get("type") == Some(&json!("null"));
    let nullable = branches.iter().any(is_null);
    let typed: Vec<&Value> = branches.iter().filter(|b| !is_null(b)).collect();
    let mut out = if let [single] = typed.as_slice() {
        structural(single)
    } else if !typed.is_empty()
        && typed
            .iter()
            .all(|b| b.get("type") == Some(&json!("string")) && b.get("enum").is_some())
    {
        let values: Vec<Value> = typed
            .iter()
            .filter_map(|b| b.get("enum")?.as_array().cloned())
            .flatten()
            .collect();
        json!({"type": "string", "enum": values})
    } else {
        preserve()
    };
    if let Some(map) = out.as_object_mut() {
        if let Some(description) = description {
            map.insert("description".into(), description);
        }
        if nullable {
            map.insert("nullable".into(), json!(true));
        }
    }
    out
}

fn preserve() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every problem that makes a schema non-structural, with its path.
    pub(crate) fn violations(schema: &Value, path: &str, found: &mut Vec<String>) {
        let Some(object) = schema.as_object() else {
            found.push(format!("{path}: not an object"));
            return;
        };
        for key in ["anyOf", "oneOf", "allOf", "$ref", "default", "$schema", "title"] {
            if object.contains_key(key) {
                found.push(format!("{path}: has {key}"));
            }
        }
        if !object.get("type").is_some_and(Value::is_string) {
            found.push(format!("{path}: no type"));
        }
        if object.contains_key("properties") && object.contains_key("additionalProperties") {
            found.push(format!("{path}: properties and additionalProperties"));
        }
        if object.get("additionalProperties") == Some(&json!(false)) {
            found.push(format!("{path}: additionalProperties false"));
        }
        for (name, value) in object
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            violations(value, &format!("{path}.{name}"), found);
        }
        if let Some(items) = object.get("items") {
            violations(items, &format!("{path}[]"), found);
        }
        if let Some(value @ Value::Object(_)) = object.get("additionalProperties") {
            violations(value, &format!("{path}[*]"), found);
        }
    }

    #[test]
    fn optional_fields_enums_and_closed_objects() {
        let schema = json!({
            "type": "object", "additionalProperties": false, "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "child": {"anyOf": [{"type": "object", "additionalProperties": false,
                    "properties": {"n": {"type": "integer", "format": "int32", "default": 0}}},
                    {"enum": [null], "nullable": true}], "description": "A child."},
                "policy": {"oneOf": [{"type": "string", "enum": ["A"]}, {"type": "string", "enum": ["B"]}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "anything": {},
            },
        });
        let out = structural(&schema);
        let mut found = Vec::new();
        violations(&out, "spec", &mut found);
        assert!(found.is_empty(), "{found:?}");
        assert_eq!(out["required"], json!(["name"]));
        assert_eq!(out["properties"]["child"]["nullable"], true);
        assert_eq!(out["properties"]["child"]["description"], "A child.");
        assert_eq!(
            out["properties"]["child"]["properties"]["n"],
            json!({"type": "integer", "format": "int32"})
        );
        assert_eq!(
            out["properties"]["policy"],
            json!({"type": "string", "enum": ["A", "B"]})
        );
        assert_eq!(
            out["properties"]["labels"]["additionalProperties"],
            json!({"type": "string"})
        );
        assert_eq!(
            out["properties"]["anything"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
    }

    #[test]
    fn every_istio_schema_becomes_structural() {
        let registry = pilot_api::istio::registry();
        for kind in registry.kinds() {
            let schema = registry.schema(&kind).unwrap();
            let out = structural(schema.openapi_schema().expect("the Istio kinds have schemas"));
            let mut found = Vec::new();
            violations(&out, "spec", &mut found);
            assert!(found.is_empty(), "{kind}: {found:?}");
        }
    }
}
