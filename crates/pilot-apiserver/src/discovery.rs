//! API discovery, as kube-apiserver serves it, so that kubectl and the
//! Kubernetes clients find every registered kind (including kinds
//! registered while the server runs; each answer is built from the
//! registry at the time of the request):
//!
//! - `/version`: the server's version info;
//! - `/api`: no core group (`APIVersions` without versions);
//! - `/apis`: the `APIGroupList`, or the aggregated
//!   `APIGroupDiscoveryList` (`apidiscovery.k8s.io/v2` and `v2beta1`) when
//!   the client's `Accept` asks for it first, as kubectl does;
//! - `/apis/{group}`: the `APIGroup`;
//! - `/apis/{group}/{version}`: the `APIResourceList`: each kind's
//!   resource, singular, kind, verbs, short name and category.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use pilot_model::{KindRegistry, KindSchema};
use serde_json::{Value, json};

use crate::ApiError;
use crate::server::ApiState;

/// What every kind's resource allows.
pub(crate) const VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The category every kind is in: `kubectl get pilot` lists them all.
pub(crate) const CATEGORY: &str = "pilot";

/// `GET /version`.
pub(crate) async fn version() -> Json<Value> {
    Json(json!({
        "major": "1",
        "minor": "37",
        "gitVersion": concat!("v1.37.0+pilot-", env!("CARGO_PKG_VERSION")),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    }))
}

/// `GET /api`: the core group is not served.
pub(crate) async fn core(headers: HeaderMap) -> Response {
    if let Some(version) = aggregated(&headers) {
        return aggregated_response(version, Vec::new());
    }
    Json(json!({"kind": "APIVersions", "versions": [], "serverAddressByClientCIDRs": []})).into_response()
}

/// `GET /apis`: every group, aggregated when asked for.
pub(crate) async fn groups(State(state): State<ApiState>, headers: HeaderMap) -> Response {
    let groups = by_group(&state.registry);
    if let Some(version) = aggregated(&headers) {
        let items = groups
            .iter()
            .map(|(group, versions)| {
                json!({
                    "metadata": {"name": group, "creationTimestamp": null},
                    "versions": versions.iter().map(|(version, kinds)| json!({
                        "version": version,
                        "resources": kinds.iter().map(|s| aggregated_resource(&state.registry, s, version)).collect::<Vec<_>>(),
                        "freshness": "Current",
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        return aggregated_response(version, items);
    }
    let groups: Vec<Value> = groups
        .iter()
        .map(|(group, versions)| api_group(group, versions))
        .collect();
    Json(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})).into_response()
}

/// `GET /apis/{group}`.
pub(crate) async fn group(
    State(state): State<ApiState>,
    Path(group): Path<String>,
) -> Result<Response, ApiError> {
    let groups = by_group(&state.registry);
    let versions = groups
        .get(&group)
        .ok_or_else(|| not_found(&format!("/apis/{group}")))?;
    Ok(Json(api_group(&group, versions)).into_response())
}

/// `GET /apis/{group}/{version}`.
pub(crate) async fn resources(
    State(state): State<ApiState>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let groups = by_group(&state.registry);
    let kinds = groups
        .get(&group)
        .and_then(|versions| versions.iter().find(|(v, _)| *v == version))
        .map(|(_, kinds)| kinds)
        .ok_or_else(|| not_found(&format!("/apis/{group}/{version}")))?;
    let resources: Vec<Value> = kinds
        .iter()
        .map(|schema| {
            json!({
                "name": schema.plural,
                "singularName": singular(schema),
                "namespaced": !schema.cluster_scoped,
                "kind": schema.kind,
                "verbs": VERBS,
                "shortNames": short_names(&state.registry, schema),
                "categories": categories(schema),
            })
        })
        .collect();
    Ok(Json(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{group}/{version}"),
        "resources": resources,
    }))
    .into_response())
}

/// A kind's categories: `pilot` (`kubectl get pilot` lists every kind
/// pilot serves) and the kind's own ([`KindSchema::categories`], e.g.
/// `gateway-api`).
pub(crate) fn categories(schema: &KindSchema) -> Vec<&str> {
    std::iter::once(CATEGORY)
        .chain(schema.categories.iter().map(String::as_str))
        .collect()
}

/// A kind's singular resource name: `routerule`.
pub(crate) fn singular(schema: &KindSchema) -> String {
    schema.kind.to_ascii_lowercase()
}

/// A kind's short names ([`KindRegistry::short_names`]: declared, or the
/// initials of its words, `rr` for `RouteRule`).
pub(crate) fn short_names(registry: &KindRegistry, schema: &KindSchema) -> Vec<String> {
    registry.short_names(schema)
}

/// The kinds of each group, by version (a kind under every version it
/// serves), the preferred version first.
type Groups = BTreeMap<String, Vec<(String, Vec<Arc<KindSchema>>)>>;

fn by_group(registry: &KindRegistry) -> Groups {
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<Arc<KindSchema>>>> = BTreeMap::new();
    for kind in registry.kinds() {
        if let Some(schema) = registry.get(&kind) {
            let versions = groups.entry(schema.group.clone()).or_default();
            for version in &schema.versions {
                versions
                    .entry(version.clone())
                    .or_default()
                    .push(Arc::clone(&schema));
            }
        }
    }
    groups
        .into_iter()
        .map(|(group, versions)| {
            let mut versions: Vec<(String, Vec<Arc<KindSchema>>)> = versions.into_iter().collect();
            versions.sort_by_key(|(version, _)| std::cmp::Reverse(priority(version)));
            (group, versions)
        })
        .collect()
}

/// Kubernetes' version priority: GA above beta above alpha, higher numbers
/// first; other names last.
fn priority(version: &str) -> (u8, u64, u64) {
    let Some(rest) = version.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    let level = |prefix: &str| tail.strip_prefix(prefix).and_then(|n| n.parse::<u64>().ok());
    match (tail.is_empty(), level("beta"), level("alpha")) {
        (true, _, _) => (3, major, 0),
        (_, Some(minor), _) => (2, major, minor),
        (_, _, Some(minor)) => (1, major, minor),
        _ => (0, 0, 0),
    }
}

fn api_group(group: &str, versions: &[(String, Vec<Arc<KindSchema>>)]) -> Value {
    let versions: Vec<Value> = versions
        .iter()
        .map(|(version, _)| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions.first().cloned().unwrap_or(Value::Null),
    })
}

fn aggregated_resource(registry: &KindRegistry, schema: &KindSchema, version: &str) -> Value {
    json!({
        "resource": schema.plural,
        "responseKind": {"group": schema.group, "version": version, "kind": schema.kind},
        "scope": if schema.cluster_scoped { "Cluster" } else { "Namespaced" },
        "singularResource": singular(schema),
        "verbs": VERBS,
        "shortNames": short_names(registry, schema),
        "categories": categories(schema),
    })
}

/// The aggregated discovery version the client asks for first, if any.
fn aggregated(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    accept.split(',').find_map(|media| {
        let parameters: Vec<&str> = media.split(';').map(str::trim).collect();
        let has = |p: &str| parameters.iter().any(|q| q.replace(' ', "") == p);
        if !has("g=apidiscovery.k8s.io") || !has("as=APIGroupDiscoveryList") {
            return None;
        }
        if has("v=v2") {
            Some("v2")
        } else if has("v=v2beta1") {
            Some("v2beta1")
        } else {
            None
        }
    })
}

fn aggregated_response(version: &'static str, items: Vec<Value>) -> Response {
    let content_type = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    let mut response = Json(json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    }))
    .into_response();
    if let Ok(value) = HeaderValue::from_str(&content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn not_found(path: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("the server could not find the requested resource ({path})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_in_kubernetes_priority() {
        let mut versions = vec!["v1alpha2", "v1", "v1beta1", "v2alpha1", "foo", "v1alpha3"];
        versions.sort_by_key(|v| std::cmp::Reverse(priority(v)));
        assert_eq!(
            versions,
            ["v1", "v1beta1", "v2alpha1", "v1alpha3", "v1alpha2", "foo"]
        );
    }

    #[test]
    fn istio_short_names() {
        let registry = pilot_api::istio::registry();
        let names: Vec<Vec<String>> = ["RouteRule", "DestinationPolicy", "EgressRule", "IngressRule"]
            .iter()
            .map(|k| short_names(&registry, &registry.get(k).unwrap()))
            .collect();
        assert_eq!(names, [["rr"], ["dp"], ["er"], ["ir"]]);
    }

    #[test]
    fn networking_kinds_under_every_served_version() {
        let registry = pilot_api::istio::registry();
        pilot_api::networking::register(&registry).unwrap();
        let groups = by_group(&registry);
        let versions: Vec<&str> = groups["networking.istio.io"]
            .iter()
            .map(|(v, _)| v.as_str())
            .collect();
        assert_eq!(versions, ["v1", "v1beta1", "v1alpha3"]);
        for (_, kinds) in &groups["networking.istio.io"] {
            let names: Vec<&str> = kinds.iter().map(|s| s.kind.as_str()).collect();
            assert_eq!(
                names,
                [
                    "DestinationRule",
                    "Gateway",
                    "ServiceEntry",
                    "Sidecar",
                    "VirtualService",
                    "WorkloadEntry"
                ]
            );
        }
        let names: Vec<Vec<String>> = [
            "VirtualService",
            "DestinationRule",
            "ServiceEntry",
            "Gateway",
            "WorkloadEntry",
        ]
        .iter()
        .map(|k| short_names(&registry, &registry.get(k).unwrap()))
        .collect();
        assert_eq!(names, [["vs"], ["dr"], ["se"], ["gw"], ["we"]]);
    }
}
