//! The document format of Istio's first command-line tool (istioctl 0.1):
//! `type: route-rule`, `name:` and `spec:` at the top, with no
//! `apiVersion`, `kind` or `metadata`. Its specs are of Istio's first
//! routing API (a destination given as a hostname string, `tags` for
//! labels), so pilot does not read them as they are; recognising the
//! format lets a reader say so once, instead of an error per missing or
//! unknown field, and lets a converter find the kind.
//!
//! ```
//! use pilot_model::document::first_cli_document;
//! let value = serde_json::json!({
//!     "type": "route-rule",
//!     "name": "reviews-default",
//!     "spec": {"destination": "reviews.default.svc.cluster.local", "route": [{"tags": {"version": "v1"}}]},
//! });
//! let document = first_cli_document(&value).unwrap();
//! assert_eq!((document.kind, document.name.as_str()), (Some("RouteRule"), "reviews-default"));
//! assert!(first_cli_document(&serde_json::json!({"kind": "RouteRule", "spec": {}})).is_none());
//! ```

use serde_json::Value;

/// The object types of the first istioctl and the kinds they became.
pub const FIRST_CLI_TYPES: [(&str, &str); 4] = [
    ("route-rule", "RouteRule"),
    ("destination-policy", "DestinationPolicy"),
    ("ingress-rule", "IngressRule"),
    ("egress-rule", "EgressRule"),
];

/// A document in the first istioctl's format.
#[derive(Debug, Clone, PartialEq)]
pub struct FirstCliDocument {
    /// The `type` as written (`route-rule`).
    pub type_name: String,
    /// The kind that type became (`RouteRule`), if it is one of
    /// [`FIRST_CLI_TYPES`].
    pub kind: Option<&'static str>,
    /// The object's `name` (empty if none).
    pub name: String,
    /// The spec, in Istio's first routing API.
    pub spec: Value,
}

/// `value` as a document of the first istioctl's format: a mapping with a
/// string `type`, no `apiVersion` or `kind`, and a `name` or `spec`.
pub fn first_cli_document(value: &Value) -> Option<FirstCliDocument> {
    let map = value.as_object()?;
    if map.contains_key("apiVersion") || map.contains_key("kind") {
        return None;
    }
    let type_name = map.get("type")?.as_str()?;
    if !map.contains_key("name") && !map.contains_key("spec") {
        return None;
    }
    Some(FirstCliDocument {
        type_name: type_name.to_string(),
        kind: FIRST_CLI_TYPES
            .iter()
            .find(|(t, _)| *t == type_name)
            .map(|(_, kind)| *kind),
        name: map
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        spec: map.get("spec").cloned().unwrap_or(Value::Null),
    })
}

impl FirstCliDocument {
    /// Why a reader of pilot's format does not take this document, and what
    /// to write instead.
    pub fn refusal(&self) -> String {
        let kind = self.kind.unwrap_or("<kind>");
        let name = if self.name.is_empty() {
            "<name>"
        } else {
            &self.name
        };
        format!(
            "`type: {}` with `name` and `spec` is the document format of Istio's first istioctl (0.1), \
             whose specs are of an earlier routing API (a destination given as a hostname, `tags` for labels); \
             write it as `apiVersion: config.istio.io/v1alpha2`, `kind: {kind}`, `metadata: {{name: {name}}}` \
             and a spec of that version",
            self.type_name
        )
    }
}
