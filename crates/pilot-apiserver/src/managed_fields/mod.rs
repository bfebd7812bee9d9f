//! Field ownership (`metadata.managedFields`), as kube-apiserver tracks it
//! for a custom resource without list-type annotations: every object field
//! is owned separately, every list and scalar is owned as a whole
//! (`x-kubernetes-list-type: atomic`, the default).
//!
//! The tracked fields are `metadata.labels`, `metadata.annotations` and
//! `spec`; a field path is the list of field names from the document's
//! root. [`record_update`] gives the fields a write (create, replace, merge
//! or JSON patch) changed to its manager; [`apply`] merges a server-side
//! apply configuration, with its conflicts.

use std::collections::{BTreeMap, BTreeSet};

use pilot_model::ManagedFieldsEntry;
use serde_json::{Map, Value, json};

/// A field: the field names from the document's root.
pub(crate) type FieldPath = Vec<String>;

/// A set of fields.
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// `Apply`, the operation of server-side apply.
pub(crate) const APPLY: &str = "Apply";
/// `Update`, the operation of every other write.
pub(crate) const UPDATE: &str = "Update";

/// The part of a document whose fields are owned: labels, annotations and
/// spec.
pub(crate) fn tracked(document: &Value) -> Value {
    let mut out = Map::new();
    let mut metadata = Map::new();
    for field in ["labels", "annotations"] {
        if let Some(value) = document.pointer(&format!("/metadata/{field}"))
            && !value.is_null()
        {
            metadata.insert(field.to_string(), value.clone());
        }
    }
    if !metadata.is_empty() {
        out.insert("metadata".into(), Value::Object(metadata));
    }
    if let Some(spec) = document.get("spec")
        && !spec.is_null()
    {
        out.insert("spec".into(), spec.clone());
    }
    Value::Object(out)
}

/// The fields `value` sets: its scalars, lists and empty objects.
pub(crate) fn leaves(value: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    collect(value, &mut Vec::new(), &mut set);
    set
}

fn collect(value: &Value, path: &mut FieldPath, set: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (key, child) in map {
                path.push(key.clone());
                collect(child, path, set);
                path.pop();
            }
        }
        _ if !path.is_empty() => {
            set.insert(path.clone());
        }
        _ => {}
    }
}

/// The value at `path`, if any.
pub(crate) fn at<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter()
        .try_fold(value, |value, field| value.as_object()?.get(field))
}

/// True when `path` is a field `document` sets (a scalar, a list or an
/// empty object there).
fn is_leaf(document: &Value, path: &[String]) -> bool {
    at(document, path).is_some_and(|v| v.as_object().is_none_or(Map::is_empty))
}

/// `.spec.http.route`, as Kubernetes prints a field.
pub(crate) fn display(path: &[String]) -> String {
    path.iter().map(|f| format!(".{f}")).collect()
}

/// A set in the `FieldsV1` form.
pub(crate) fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for field in path {
            let child = node
                .entry(format!("f:{field}"))
                .or_insert_with(|| Value::Object(Map::new()));
            if !child.is_object() {
                *child = Value::Object(Map::new());
            }
            let Some(map) = child.as_object_mut() else {
                unreachable!("made an object above")
            };
            node = map;
        }
    }
    // A field that is both owned and the parent of owned fields.
    mark_members(&mut root, set, &mut Vec::new());
    Value::Object(root)
}

fn mark_members(node: &mut Map<String, Value>, set: &FieldSet, path: &mut FieldPath) {
    for (key, child) in node.iter_mut() {
        let Some(field) = key.strip_prefix("f:") else {
            continue;
        };
        path.push(field.to_string());
        if let Some(map) = child.as_object_mut()
            && !map.is_empty()
        {
            if set.contains(path) {
                map.insert(".".into(), json!({}));
            }
            mark_members(map, set, path);
        }
        path.pop();
    }
}

/// A `FieldsV1` trie as a set (elements other than fields, which pilot does
/// not write, are left out).
pub(crate) fn from_fields_v1(value: &Value) -> FieldSet {
    let mut set = FieldSet::new();
    read_trie(value, &mut Vec::new(), &mut set);
    set
}

fn read_trie(value: &Value, path: &mut FieldPath, set: &mut FieldSet) {
    let Some(map) = value.as_object() else { return };
    if (map.is_empty() || map.contains_key(".")) && !path.is_empty() {
        set.insert(path.clone());
    }
    for (key, child) in map {
        if let Some(field) = key.strip_prefix("f:") {
            path.push(field.to_string());
            read_trie(child, path, set);
            path.pop();
        }
    }
}

/// The managed fields as (manager, operation) to (entry, set).
type Owners = BTreeMap<(String, String), (ManagedFieldsEntry, FieldSet)>;

fn owners(entries: &[ManagedFieldsEntry]) -> Owners {
    entries
        .iter()
        .map(|e| {
            (
                (e.manager.clone(), e.operation.clone()),
                (e.clone(), from_fields_v1(&e.fields_v1)),
            )
        })
        .collect()
}

/// The entries of `owners`, each reduced to the fields `document` still
/// sets, without the empty ones, in their previous order with new ones last.
fn entries(previous: &[ManagedFieldsEntry], mut owners: Owners, document: &Value) -> Vec<ManagedFieldsEntry> {
    let mut out = Vec::new();
    let mut emit = |(mut entry, set): (ManagedFieldsEntry, FieldSet)| {
        let set: FieldSet = set.into_iter().filter(|p| is_leaf(document, p)).collect();
        if !set.is_empty() {
            entry.fields_type = "FieldsV1".into();
            entry.fields_v1 = to_fields_v1(&set);
            out.push(entry);
        }
    };
    for entry in previous {
        if let Some(owner) = owners.remove(&(entry.manager.clone(), entry.operation.clone())) {
            emit(owner);
        }
    }
    for owner in owners.into_values() {
        emit(owner);
    }
    out
}

/// `entries` reduced to the fields `document` sets, without the empty
/// ones.
pub(crate) fn retain_set(entries_in: &[ManagedFieldsEntry], document: &Value) -> Vec<ManagedFieldsEntry> {
    entries(entries_in, owners(entries_in), &tracked(document))
}

fn new_entry(manager: &str, operation: &str, api_version: &str, time: &str) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: manager.to_string(),
        operation: operation.to_string(),
        api_version: api_version.to_string(),
        time: Some(time.to_string()),
        fields_type: "FieldsV1".into(),
        fields_v1: json!({}),
    }
}

/// The managed fields after `manager` wrote `new` (a document) over `old`
/// (none for a create) with an `Update`: the fields whose value it changed
/// become its own and no one else's; fields no longer set are no one's.
pub(crate) fn record_update(
    previous: &[ManagedFieldsEntry],
    old: Option<&Value>,
    new: &Value,
    manager: &str,
    time: &str,
) -> Vec<ManagedFieldsEntry> {
    let new_tracked = tracked(new);
    let old_tracked = old.map(tracked).unwrap_or_else(|| json!({}));
    let changed: FieldSet = leaves(&new_tracked)
        .into_iter()
        .filter(|p| at(&old_tracked, p) != at(&new_tracked, p))
        .collect();
    let mut owners = owners(previous);
    if !changed.is_empty() {
        for (_, set) in owners.values_mut() {
            set.retain(|p| !changed.contains(p));
        }
        let api_version = new["apiVersion"].as_str().unwrap_or_default();
        let (entry, set) = owners
            .entry((manager.to_string(), UPDATE.to_string()))
            .or_insert_with(|| (new_entry(manager, UPDATE, api_version, time), FieldSet::new()));
        entry.time = Some(time.to_string());
        entry.api_version = api_version.to_string();
        set.extend(changed);
    }
    entries(previous, owners, &new_tracked)
}

/// A field another manager owns with a different value than an apply
/// configuration sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conflict {
    /// The field, as owned.
    pub path: FieldPath,
    /// The owner's entry.
    pub owner: ManagedFieldsEntry,
}

impl Conflict {
    /// The manager as kube-apiserver names it in a conflict: `"name"`, with
    /// `using apiVersion` for an `Update`.
    pub(crate) fn manager(&self) -> String {
        let name = format!("{:?}", self.owner.manager);
        if self.owner.operation == UPDATE {
            match &self.owner.time {
                Some(time) => format!("{name} using {} at {time}", self.owner.api_version),
                None => format!("{name} using {}", self.owner.api_version),
            }
        } else {
            name
        }
    }
}

/// kube-apiserver's message for conflicts: `Apply failed with 1 conflict:
/// conflict with "m" using v1: .spec.x`.
pub(crate) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [one] = conflicts {
        return format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager(),
            display(&one.path)
        );
    }
    let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for conflict in conflicts {
        by_manager
            .entry(conflict.manager())
            .or_default()
            .push(display(&conflict.path));
    }
    let mut lines = Vec::new();
    for (manager, paths) in by_manager {
        lines.push(format!("conflicts with {manager}:"));
        lines.extend(paths.into_iter().map(|p| format!("- {p}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

/// What a server-side apply makes of the live object.
#[derive(Debug)]
pub(crate) struct Applied {
    /// The object to write (a document).
    pub document: Value,
    /// Its managed fields.
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// `config` (an apply configuration, a document) applied by `manager` to
/// `live` (the stored document, none when absent): the conflicts with other
/// managers, unless `force` takes their fields; otherwise the merged object
/// (fields the manager applied before and no longer does are removed when
/// no one else owns them) and the new managed fields.
pub(crate) fn apply(
    live: Option<&Value>,
    previous: &[ManagedFieldsEntry],
    config: &Value,
    manager: &str,
    force: bool,
    time: &str,
) -> Result<Applied, Vec<Conflict>> {
    let applied = tracked(config);
    let live_tracked = live.map(tracked).unwrap_or_else(|| json!({}));
    let fields = leaves(&applied);
    let mut owners = owners(previous);
    let me = (manager.to_string(), APPLY.to_string());

    let overlaps = |a: &FieldPath, b: &FieldPath| a.starts_with(b) || b.starts_with(a);
    let mut conflicts = Vec::new();
    for (who, (entry, set)) in &owners {
        if *who == me {
            continue;
        }
        for owned in set {
            let differs = fields
                .iter()
                .filter(|p| overlaps(p, owned))
                .any(|p| at(&applied, p) != at(&live_tracked, p));
            if differs {
                conflicts.push(Conflict {
                    path: owned.clone(),
                    owner: entry.clone(),
                });
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflicts);
        }
        for conflict in &conflicts {
            let who = (conflict.owner.manager.clone(), conflict.owner.operation.clone());
            if let Some((_, set)) = owners.get_mut(&who) {
                set.remove(&conflict.path);
            }
        }
    }

    let mut document = live.cloned().unwrap_or_else(|| json!({}));
    for key in ["apiVersion", "kind"] {
        if let Some(value) = config.get(key) {
            document[key] = value.clone();
        }
    }
    // The rest of the configuration's metadata goes to the decoding as
    // sent: name and namespace, and anything else for it to refuse or
    // drop as any write's (labels and annotations are merged below; what
    // the server sets is the server's).
    for (key, value) in config["metadata"].as_object().into_iter().flatten() {
        if !matches!(
            key.as_str(),
            "labels"
                | "annotations"
                | "resourceVersion"
                | "uid"
                | "generation"
                | "creationTimestamp"
                | "managedFields"
                | "selfLink"
        ) {
            document["metadata"][key] = value.clone();
        }
    }
    merge(&mut document, &applied);

    let before = owners.get(&me).map(|(_, set)| set.clone()).unwrap_or_default();
    for removed in before.difference(&fields) {
        let owned_elsewhere = owners
            .iter()
            .any(|(who, (_, set))| *who != me && set.iter().any(|p| overlaps(p, removed)));
        if !owned_elsewhere {
            remove(&mut document, removed, &owners);
        }
    }

    let api_version = config["apiVersion"].as_str().unwrap_or_default();
    let (entry, set) = owners
        .entry(me)
        .or_insert_with(|| (new_entry(manager, APPLY, api_version, time), FieldSet::new()));
    entry.time = Some(time.to_string());
    entry.api_version = api_version.to_string();
    *set = fields;
    let managed_fields = entries(previous, owners, &tracked(&document));
    Ok(Applied {
        document,
        managed_fields,
    })
}

/// `patch`'s fields set in `target`: objects merged field by field,
/// anything else replaced.
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) if !patch.is_empty() => {
            for (key, value) in patch {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        _ => *target = patch.clone(),
    }
}

/// Removes the field at `path`, and the objects it leaves empty that no one
/// owns.
fn remove(document: &mut Value, path: &[String], owners: &Owners) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let Some(parent) = at_mut(document, parent_path).and_then(Value::as_object_mut) else {
        return;
    };
    parent.remove(last);
    let now_empty = parent.is_empty();
    let owned = owners
        .values()
        .any(|(_, set)| set.iter().any(|p| p == parent_path));
    // `spec` stays, empty if need be: every object has one.
    if now_empty && !owned && parent_path.len() > 1 {
        remove(document, parent_path, owners);
    }
}

fn at_mut<'a>(value: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter()
        .try_fold(value, |value, field| value.as_object_mut()?.get_mut(field))
}

#[cfg(test)]
mod tests;
