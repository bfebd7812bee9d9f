//! The fake API server's discovery documents, so that kubectl can map a
//! manifest's kind to its resource: `/version`, `/api` (`APIVersions`),
//! `/apis` (`APIGroupList`), `/api/v1` and `/apis/<group>/<version>`
//! (`APIResourceList`), from the resources served at the time (a CRD's
//! included once created). Only the legacy (unaggregated) form is served:
//! clients that ask for aggregated discovery read the plain JSON answer as
//! the legacy form, as they do with an older API server. The OpenAPI
//! documents are not served (`kubectl apply --validate=false`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::state::{Resource, State};

/// The discovery document at `path`, if it is one.
pub(crate) fn answer(state: &State, path: &str) -> Option<Value> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["version"] => Some(json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-pilot-kube-fake",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
            "goVersion": "", "compiler": "", "platform": "linux/amd64",
        })),
        ["api"] => Some(json!({
            "kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": ""}],
        })),
        ["apis"] => Some(groups(state)),
        ["api", "v1"] => Some(resource_list(state, "", "v1")),
        ["apis", group, version] => {
            let list = resource_list(state, group, version);
            (!list["resources"].as_array().is_none_or(Vec::is_empty)).then_some(list)
        }
        _ => None,
    }
}

fn served(state: &State) -> Vec<&Resource> {
    let mut resources: Vec<&Resource> = state.resources.values().collect();
    resources.sort_by(|a, b| (&a.group, &a.version, &a.plural).cmp(&(&b.group, &b.version, &b.plural)));
    resources
}

fn groups(state: &State) -> Value {
    let mut versions: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for resource in served(state) {
        if resource.group.is_empty() {
            continue;
        }
        let list = versions.entry(&resource.group).or_default();
        if !list.contains(&resource.version.as_str()) {
            list.push(&resource.version);
        }
    }
    let groups: Vec<Value> = versions
        .into_iter()
        .map(|(group, versions)| {
            let listed: Vec<Value> = versions
                .iter()
                .map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v}))
                .collect();
            json!({"name": group, "versions": listed, "preferredVersion": listed[0].clone()})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(state: &State, group: &str, version: &str) -> Value {
    let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
    let mut resources = Vec::new();
    for resource in served(state) {
        if resource.group != group || resource.version != version {
            continue;
        }
        resources.push(json!({
            "name": resource.plural, "singularName": resource.kind.to_lowercase(),
            "namespaced": resource.namespaced, "kind": resource.kind, "verbs": verbs,
        }));
        if resource.status {
            resources.push(json!({
                "name": format!("{}/status", resource.plural), "singularName": "",
                "namespaced": resource.namespaced, "kind": resource.kind, "verbs": ["get", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources})
}
