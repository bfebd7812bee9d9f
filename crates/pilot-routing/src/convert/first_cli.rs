//! Documents of Istio's first istioctl (`type: route-rule`, `name:`,
//! `spec:`), whose specs are of Istio's first routing API, read as the
//! v1alpha2 objects they became: a destination given as a hostname is the
//! service of that hostname, `tags` are labels, `source_tags` the source's
//! labels, `http_headers` the request's headers, an egress rule's `domain`
//! its destination service.

use serde_json::{Map, Value};

use pilot_api::istio::{DestinationPolicy, EgressRule, RouteRule};
use pilot_model::document::FirstCliDocument;
use pilot_model::{Config, ConfigKind, DynConfig};

/// The v1alpha2 object a first-istioctl document became, in `namespace`;
/// the error says why it cannot be read (an unknown type, or a spec that
/// does not decode).
///
/// ```
/// use pilot_routing::convert::from_first_cli;
/// use pilot_model::document::first_cli_document;
/// let value = serde_json::json!({
///     "type": "route-rule",
///     "name": "reviews-default",
///     "spec": {"destination": "reviews.default.svc.cluster.local", "route": [{"tags": {"version": "v1"}}]},
/// });
/// let object = from_first_cli(&first_cli_document(&value).unwrap(), "default").unwrap();
/// assert_eq!((object.meta.kind.as_str(), object.meta.name.as_str()), ("RouteRule", "reviews-default"));
/// assert_eq!(object.spec["route"][0]["labels"]["version"], "v1");
/// ```
pub fn from_first_cli(document: &FirstCliDocument, namespace: &str) -> Result<DynConfig, String> {
    let Some(kind) = document.kind else {
        return Err(format!(
            "type {} is not one of the first istioctl's (route-rule, destination-policy, egress-rule, ingress-rule)",
            document.type_name
        ));
    };
    let spec = document.spec.as_object().cloned().unwrap_or_default();
    let spec = match kind {
        RouteRule::KIND => route_rule(spec),
        DestinationPolicy::KIND => destination_policy(spec),
        EgressRule::KIND => egress_rule(spec),
        _ => Value::Object(destinations(spec, &["destination"])),
    };
    let typed = |e: serde_json::Error| format!("{kind} {}: spec: {e}", document.name);
    let object = match kind {
        RouteRule::KIND => Config::new(
            namespace,
            &document.name,
            serde_json::from_value::<RouteRule>(spec).map_err(typed)?,
        )
        .to_dyn(),
        DestinationPolicy::KIND => Config::new(
            namespace,
            &document.name,
            serde_json::from_value::<DestinationPolicy>(spec).map_err(typed)?,
        )
        .to_dyn(),
        EgressRule::KIND => Config::new(
            namespace,
            &document.name,
            serde_json::from_value::<EgressRule>(spec).map_err(typed)?,
        )
        .to_dyn(),
        _ => Config::new(
            namespace,
            &document.name,
            serde_json::from_value::<pilot_api::istio::IngressRule>(spec).map_err(typed)?,
        )
        .to_dyn(),
    };
    object.map_err(|e| e.to_string())
}

fn route_rule(mut spec: Map<String, Value>) -> Value {
    spec = destinations(spec, &["destination"]);
    if let Some(Value::Array(route)) = spec.get_mut("route") {
        for target in route {
            if let Value::Object(target) = target {
                rename(target, "tags", "labels");
                *target = destinations(std::mem::take(target), &["destination"]);
            }
        }
    }
    if let Some(Value::Object(condition)) = spec.get_mut("match") {
        let labels = condition
            .remove("source_tags")
            .or_else(|| condition.remove("sourceTags"));
        if let Some(Value::String(source)) = condition.remove("source") {
            condition.insert("source".into(), service(source));
        }
        if let Some(labels) = labels {
            let source = condition
                .entry("source")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(source) = source {
                source.insert("labels".into(), labels);
            }
        }
        if let Some(headers) = condition
            .remove("http_headers")
            .or_else(|| condition.remove("httpHeaders"))
        {
            let mut request = Map::new();
            request.insert("headers".into(), headers);
            condition.insert("request".into(), Value::Object(request));
        }
    }
    if let Some(Value::Object(mirror)) = spec.get_mut("mirror") {
        rename(mirror, "tags", "labels");
    }
    Value::Object(spec)
}

fn destination_policy(spec: Map<String, Value>) -> Value {
    let mut spec = destinations(spec, &["destination", "source"]);
    if let Some(labels) = spec.remove("tags") {
        let destination = spec
            .entry("destination")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(destination) = destination {
            destination.insert("labels".into(), labels);
        }
    }
    Value::Object(spec)
}

fn egress_rule(mut spec: Map<String, Value>) -> Value {
    if let Some(Value::String(domain)) = spec.remove("domain") {
        spec.insert("destination".into(), service(domain));
    }
    Value::Object(destinations(spec, &["destination"]))
}

/// The named fields given as hostname strings, as services.
fn destinations(mut spec: Map<String, Value>, fields: &[&str]) -> Map<String, Value> {
    for field in fields {
        if let Some(Value::String(host)) = spec.get(*field).cloned() {
            spec.insert((*field).to_string(), service(host));
        }
    }
    spec
}

fn service(host: String) -> Value {
    let mut map = Map::new();
    map.insert("service".into(), Value::String(host));
    Value::Object(map)
}

fn rename(map: &mut Map<String, Value>, from: &str, to: &str) {
    if let Some(value) = map.remove(from) {
        map.insert(to.to_string(), value);
    }
}
