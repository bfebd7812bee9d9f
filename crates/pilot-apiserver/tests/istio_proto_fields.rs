//! The schema pilot serves for each of Istio's kinds (the OpenAPI schema
//! of its CRDs and of the REST API's discovery) has Istio's field names,
//! at Istio's places: every field path of a kind's spec is compared with
//! the paths of Istio's protos, listed in `data/istio-fields.tsv`
//! (written by `scripts/istio-proto-fields` from a checkout of istio/api;
//! the field names are the API's facts). A field named otherwise than
//! Istio names it, or put in another message (Sidecar's `labels` selector
//! against the policies' `matchLabels`), fails here; so does an Istio
//! field pilot does not know, unless [`NOT_READ`] says why.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// Istio's fields pilot's schema lacks on purpose: (kind, path, why).
const NOT_READ: &[(&str, &str, &str)] = &[
    (
        "AuthorizationPolicy",
        "targetRef",
        "selects Gateway API gateways and waypoints, kinds pilot does not serve yet: refused as an unknown field",
    ),
    (
        "AuthorizationPolicy",
        "targetRefs",
        "selects Gateway API gateways and waypoints, kinds pilot does not serve yet: refused as an unknown field",
    ),
];

/// pilot's fields Istio's protos of today no longer have: (kind, path, why).
const ONLY_HERE: &[(&str, &str, &str)] = &[(
    "VirtualService",
    "http.websocketUpgrade",
    "in configurations written for Istio before 1.0; Istio ignores it and so does pilot, with a warning",
)];

/// The field paths of Istio's kinds: kind → paths below `spec`.
fn istio_fields() -> BTreeMap<String, BTreeSet<String>> {
    let text = include_str!("data/istio-fields.tsv");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let mut parts = line.split('\t');
        let (Some(kind), Some(path)) = (parts.next(), parts.next()) else {
            panic!("a line without kind and path: {line:?}");
        };
        out.entry(kind.to_string()).or_default().insert(path.to_string());
    }
    out
}

/// Every field path of an OpenAPI schema: `a.b` for properties, `a.*.b`
/// below a map's values; a list's items add no segment.
fn schema_paths(schema: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, below) in properties {
            let path = if prefix.is_empty() {
                name.clone()
            } else {
                format!("{prefix}.{name}")
            };
            out.insert(path.clone());
            schema_paths(below, &path, out);
        }
    }
    if let Some(items) = object.get("items") {
        schema_paths(items, prefix, out);
    }
    if let Some(values) = object.get("additionalProperties").filter(|v| v.is_object()) {
        schema_paths(values, &format!("{prefix}.*"), out);
    }
    // A map whose keys are numbers (port numbers) has its values here.
    for values in object
        .get("patternProperties")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|p| p.values())
    {
        schema_paths(values, &format!("{prefix}.*"), out);
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for branch in object.get(key).and_then(Value::as_array).into_iter().flatten() {
            schema_paths(branch, prefix, out);
        }
    }
}

#[test]
fn every_kind_has_istios_field_names_at_istios_places() {
    let registry = pilot_api::default_registry();
    let istio = istio_fields();
    let mut wrong = Vec::new();
    let mut compared = 0;
    for (kind, expected) in &istio {
        let Some(schema) = registry.get(kind) else {
            wrong.push(format!("{kind}: Istio's kind is not served"));
            continue;
        };
        let openapi = schema
            .openapi_schema()
            .unwrap_or_else(|| panic!("{kind} has no OpenAPI schema"));
        let mut found = BTreeSet::new();
        schema_paths(openapi, "", &mut found);
        for path in found.difference(expected) {
            if !ONLY_HERE.iter().any(|(k, p, _)| k == kind && p == path) {
                wrong.push(format!("{kind}: spec.{path} is not a field of Istio's {kind}"));
            }
        }
        for path in expected.difference(&found) {
            // A field below one pilot does not read is counted once.
            let parent_missing = path
                .rsplit_once('.')
                .is_some_and(|(parent, _)| expected.contains(parent) && !found.contains(parent));
            let excused = NOT_READ.iter().any(|(k, p, _)| k == kind && p == path);
            if !parent_missing && !excused {
                wrong.push(format!("{kind}: Istio's spec.{path} is unknown to pilot"));
            }
        }
        compared += expected.len();
    }
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(compared > 700, "only {compared} fields compared");
}
