//! Field ownership, on documents.

use super::*;

const T: &str = "2026-01-01T00:00:00Z";

fn doc(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "K", "metadata": {"name": "a", "namespace": "ns"}, "spec": spec})
}

fn set_of(entry: &ManagedFieldsEntry) -> Vec<String> {
    from_fields_v1(&entry.fields_v1)
        .iter()
        .map(|p| display(p))
        .collect()
}

fn find<'a>(entries: &'a [ManagedFieldsEntry], manager: &str, operation: &str) -> &'a ManagedFieldsEntry {
    entries
        .iter()
        .find(|e| e.manager == manager && e.operation == operation)
        .unwrap_or_else(|| panic!("no {manager}/{operation} in {entries:#?}"))
}

#[test]
fn fields_v1_round_trips_and_marks_owned_parents() {
    let set: FieldSet = [
        vec!["spec".to_string(), "a".to_string()],
        vec!["spec".to_string(), "a".to_string(), "b".to_string()],
        vec!["metadata".to_string(), "labels".to_string(), "app".to_string()],
    ]
    .into_iter()
    .collect();
    let trie = to_fields_v1(&set);
    assert_eq!(
        trie,
        json!({"f:metadata": {"f:labels": {"f:app": {}}}, "f:spec": {"f:a": {".": {}, "f:b": {}}}})
    );
    assert_eq!(from_fields_v1(&trie), set);
}

#[test]
fn an_update_owns_what_it_changed_and_takes_it_from_others() {
    let created = record_update(&[], None, &doc(json!({"x": 1, "y": [1, 2]})), "alice", T);
    assert_eq!(set_of(find(&created, "alice", UPDATE)), [".spec.x", ".spec.y"]);
    assert_eq!(created[0].api_version, "example.com/v1");
    let old = doc(json!({"x": 1, "y": [1, 2]}));
    let new = doc(json!({"x": 2, "y": [1, 2], "z": {"w": true}}));
    let updated = record_update(&created, Some(&old), &new, "bob", T);
    assert_eq!(set_of(find(&updated, "alice", UPDATE)), [".spec.y"]);
    assert_eq!(set_of(find(&updated, "bob", UPDATE)), [".spec.x", ".spec.z.w"]);
    // A field removed is no one's; a manager left with nothing goes.
    let removed = record_update(
        &updated,
        Some(&new),
        &doc(json!({"x": 2, "z": {"w": true}})),
        "carol",
        T,
    );
    assert!(removed.iter().all(|e| e.manager != "alice"), "{removed:#?}");
    assert!(removed.iter().all(|e| e.manager != "carol"), "{removed:#?}");
}

#[test]
fn apply_creates_shares_equal_values_and_conflicts_on_different_ones() {
    let config = doc(json!({"x": 1, "y": "a"}));
    let first = apply(None, &[], &config, "alice", false, T).unwrap();
    assert_eq!(first.document["spec"], json!({"x": 1, "y": "a"}));
    assert_eq!(
        set_of(find(&first.managed_fields, "alice", APPLY)),
        [".spec.x", ".spec.y"]
    );

    // The same value: shared, no conflict.
    let same = apply(
        Some(&first.document),
        &first.managed_fields,
        &doc(json!({"x": 1})),
        "bob",
        false,
        T,
    )
    .unwrap();
    assert_eq!(set_of(find(&same.managed_fields, "bob", APPLY)), [".spec.x"]);
    assert_eq!(
        set_of(find(&same.managed_fields, "alice", APPLY)),
        [".spec.x", ".spec.y"]
    );

    // Another value: a conflict naming the field and its manager.
    let conflicts = apply(
        Some(&same.document),
        &same.managed_fields,
        &doc(json!({"y": "b"})),
        "bob",
        false,
        T,
    )
    .unwrap_err();
    assert_eq!(conflicts.len(), 1);
    assert_eq!(
        conflict_message(&conflicts),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.y"
    );

    // force takes it.
    let forced = apply(
        Some(&same.document),
        &same.managed_fields,
        &doc(json!({"y": "b"})),
        "bob",
        true,
        T,
    )
    .unwrap();
    assert_eq!(forced.document["spec"], json!({"x": 1, "y": "b"}));
    assert_eq!(set_of(find(&forced.managed_fields, "alice", APPLY)), [".spec.x"]);
    assert_eq!(set_of(find(&forced.managed_fields, "bob", APPLY)), [".spec.y"]);
}

#[test]
fn an_update_managers_fields_conflict_with_apply_and_name_the_api_version() {
    let created = record_update(&[], None, &doc(json!({"x": 1})), "kubectl-edit", T);
    let conflicts = apply(
        Some(&doc(json!({"x": 1}))),
        &created,
        &doc(json!({"x": 2})),
        "ci",
        false,
        T,
    )
    .unwrap_err();
    assert_eq!(
        conflict_message(&conflicts),
        format!(
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using example.com/v1 at {T}: .spec.x"
        )
    );
    let two = record_update(&[], None, &doc(json!({"x": 1, "y": 1})), "m", T);
    let conflicts = apply(
        Some(&doc(json!({"x": 1, "y": 1}))),
        &two,
        &doc(json!({"x": 2, "y": 2})),
        "ci",
        false,
        T,
    )
    .unwrap_err();
    assert_eq!(
        conflict_message(&conflicts),
        format!(
            "Apply failed with 2 conflicts: conflicts with \"m\" using example.com/v1 at {T}:\n- .spec.x\n- .spec.y"
        )
    );
}

#[test]
fn fields_left_out_of_a_new_apply_are_removed_unless_someone_else_owns_them() {
    let first = apply(
        None,
        &[],
        &doc(json!({"x": 1, "y": 2, "z": {"w": 3}})),
        "alice",
        false,
        T,
    )
    .unwrap();
    let shared = apply(
        Some(&first.document),
        &first.managed_fields,
        &doc(json!({"y": 2})),
        "bob",
        false,
        T,
    )
    .unwrap();
    let again = apply(
        Some(&shared.document),
        &shared.managed_fields,
        &doc(json!({"x": 1})),
        "alice",
        false,
        T,
    )
    .unwrap();
    // y stays (bob owns it too); z.w goes, and z with it.
    assert_eq!(again.document["spec"], json!({"x": 1, "y": 2}));
    assert_eq!(set_of(find(&again.managed_fields, "alice", APPLY)), [".spec.x"]);
    assert_eq!(set_of(find(&again.managed_fields, "bob", APPLY)), [".spec.y"]);
}

#[test]
fn labels_are_owned_one_by_one_and_lists_as_a_whole() {
    let mut config = doc(json!({"route": [{"weight": 100}]}));
    config["metadata"]["labels"] = json!({"app": "web", "tier": "front"});
    let first = apply(None, &[], &config, "alice", false, T).unwrap();
    assert_eq!(
        set_of(find(&first.managed_fields, "alice", APPLY)),
        [".metadata.labels.app", ".metadata.labels.tier", ".spec.route"]
    );
    let mut other = doc(json!({}));
    other["metadata"]["labels"] = json!({"app": "api"});
    let conflicts = apply(
        Some(&first.document),
        &first.managed_fields,
        &other,
        "bob",
        false,
        T,
    )
    .unwrap_err();
    assert_eq!(display(&conflicts[0].path), ".metadata.labels.app");
}
