//! The map invariants: what every ConfigStore promises about its contents
//! (the rules in [`ConfigStore`](pilot_model::ConfigStore)'s documentation).

use std::sync::Arc;

use pilot_model::{ConfigKey, ConfigMeta, ConfigWatch, DynConfig, StoreError, WatchEvent};

use super::check::{equal, holds, must_match, ok, some};
use super::{MockSealed, StoreFactory, mock, registry, registry_with_other_group, registry_with_sealed};

const KIND: &str = "MockConfig";

async fn fresh(factory: &dyn StoreFactory) -> Arc<dyn ConfigWatch> {
    factory.make(registry()).await
}

fn key(ns: &str, name: &str) -> ConfigKey {
    ConfigKey::new(KIND, ns, name)
}

/// The object with `key`, which the test wrote and did not delete.
#[track_caller]
fn present(got: Result<Option<Arc<DynConfig>>, StoreError>, key: &ConfigKey) -> Arc<DynConfig> {
    let rule = format!("get of {key}, created and not deleted, must find it");
    some(ok(got, &rule), &rule)
}

/// Create N objects in two namespaces and get each back as created, with a
/// resource version and a creation time; a missing key reads as `None` and
/// an unregistered kind as an error.
pub async fn map_create_get(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let mut versions = std::collections::HashMap::new();
    for i in 0..30 {
        let ns = if i % 2 == 0 { "default" } else { "istio-system" };
        let name = format!("config-{i}");
        let input = mock(ns, &name, &format!("value-{i}"));
        let stored = ok(
            store.create(input.clone()).await,
            "create of a new, valid object must succeed",
        );
        equal(&stored.spec, &input.spec, "create must return the spec as given");
        equal(
            stored.meta.group.as_str(),
            "test.pilot.io",
            "create must fill the group from the kind",
        );
        equal(
            stored.meta.version.as_str(),
            "v1",
            "create must fill the version from the kind",
        );
        holds(
            stored.meta.creation_timestamp.is_some(),
            "create must set creation_timestamp",
            &stored.meta,
        );
        let version = some(
            stored.meta.resource_version.clone(),
            "create must set a resource version",
        );
        if let Some(earlier) = versions.insert(version.clone(), name.clone()) {
            panic!(
                "every write must get a resource version no other write got: {name} got {version:?}, as {earlier} did"
            );
        }
    }
    for i in 0..30 {
        let ns = if i % 2 == 0 { "default" } else { "istio-system" };
        let key = key(ns, &format!("config-{i}"));
        let got = present(store.get(&key).await, &key);
        equal(
            &got.spec["key"],
            &serde_json::json!(format!("value-{i}")),
            "get must return the spec as created",
        );
        equal(
            got.meta.namespace.as_str(),
            ns,
            "get must return the object of the key's namespace",
        );
    }
    must_match!(
        store.get(&key("default", "missing")).await,
        Ok(None),
        "get of a key never created must be Ok(None)"
    );
    must_match!(
        store.get(&key("nowhere", "config-0")).await,
        Ok(None),
        "get of a name created in another namespace only must be Ok(None)"
    );
    must_match!(
        store.get(&ConfigKey::new("Nope", "default", "a")).await,
        Err(StoreError::UnknownKind { .. }),
        "get of an unregistered kind must fail with UnknownKind"
    );
}

/// A second create of the same key fails and leaves the first object.
pub async fn map_duplicate_create(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let first = ok(
        store.create(mock("default", "dup", "first")).await,
        "create of a new, valid object must succeed",
    );
    equal(
        store.create(mock("default", "dup", "second")).await.map(|_| ()),
        Err(StoreError::AlreadyExists {
            key: key("default", "dup"),
        }),
        "a second create of a key must fail with AlreadyExists naming the key",
    );
    let got = present(store.get(&key("default", "dup")).await, &key("default", "dup"));
    equal(
        &got.spec["key"],
        &serde_json::json!("first"),
        "a refused create must leave the first object's spec",
    );
    equal(
        &got.meta.resource_version,
        &first.meta.resource_version,
        "a refused create must leave the first object's resource version",
    );
    ok(
        store.create(mock("other", "dup", "third")).await,
        "the same name in another namespace is another object: its create must succeed",
    );
}

/// Invalid objects are refused with every field error and never stored;
/// a failed update leaves the stored object as it was.
pub async fn map_invalid_not_stored(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let mut bad = mock("default", "bad", "");
    bad.spec["pairs"][0]["key"] = "".into();
    let refused = store.create(bad).await;
    must_match!(
        refused,
        Err(StoreError::Invalid { .. }),
        "create of an object its kind's validation rejects must fail with Invalid"
    );
    if let Err(StoreError::Invalid { key: bad_key, errors }) = refused {
        equal(
            bad_key,
            key("default", "bad"),
            "Invalid must name the object's key",
        );
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        equal(
            paths,
            vec!["spec.key", "spec.pairs[0].key"],
            "Invalid must carry every field error, with its path (KindRegistry::prepare)",
        );
    }

    let wrong_type = DynConfig {
        meta: ConfigMeta::new(KIND, "default", "bad"),
        spec: serde_json::json!({"key": 7}),
    };
    let refused = store.create(wrong_type).await;
    must_match!(
        refused,
        Err(StoreError::Invalid { .. }),
        "create of a spec with a number where a string belongs must fail with Invalid"
    );
    if let Err(StoreError::Invalid { errors, .. }) = refused {
        equal(
            errors.first().map(|e| e.path.as_str()),
            Some("spec.key"),
            "Invalid must name the mistyped field's path",
        );
    }

    let refused = store.create(mock("Default", "Bad_Name", "x")).await;
    must_match!(
        refused,
        Err(StoreError::Invalid { .. }),
        "create with a name and a namespace that are not DNS-1123 labels must fail with Invalid"
    );
    if let Err(StoreError::Invalid { errors, .. }) = refused {
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        equal(
            paths,
            vec!["metadata.name", "metadata.namespace"],
            "Invalid must name both bad metadata fields",
        );
    }

    let unknown = DynConfig {
        meta: ConfigMeta::new("Nope", "default", "x"),
        spec: serde_json::json!({}),
    };
    must_match!(
        store.create(unknown).await,
        Err(StoreError::UnknownKind { .. }),
        "create of an unregistered kind must fail with UnknownKind"
    );
    must_match!(
        store.get(&key("default", "bad")).await,
        Ok(None),
        "a refused create must store nothing: get must be Ok(None)"
    );
    let listed = ok(
        store.list(KIND, None).await,
        "list of a registered kind must succeed",
    );
    holds(
        listed.is_empty(),
        "refused creates must store nothing: list must be empty",
        &listed,
    );

    let good = ok(
        store.create(mock("default", "good", "v")).await,
        "create of a new, valid object must succeed",
    );
    let mut broken = (*good).clone();
    broken.spec["key"] = "".into();
    must_match!(
        store.update(broken).await,
        Err(StoreError::Invalid { .. }),
        "update to an object its kind's validation rejects must fail with Invalid"
    );
    let got = present(store.get(&good.key()).await, &good.key());
    equal(
        &got.spec,
        &good.spec,
        "a refused update must leave the stored spec",
    );
    equal(
        &got.meta.resource_version,
        &good.meta.resource_version,
        "a refused update must leave the stored resource version",
    );
}

/// Update needs the current resource version: without one, or with a stale
/// one, it fails with both versions named and changes nothing.
pub async fn map_update_versions(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let v1 = ok(
        store.create(mock("default", "u", "one")).await,
        "create of a new, valid object must succeed",
    );
    let v1_version = some(
        v1.meta.resource_version.clone(),
        "create must set a resource version",
    );

    let mut without = mock("default", "u", "two");
    without.meta.resource_version = None;
    equal(
        store.update(without).await.map(|_| ()),
        Err(StoreError::Conflict {
            key: key("default", "u"),
            expected: None,
            actual: v1_version.clone(),
        }),
        "update without a resource version must fail with Conflict naming the key, no version sent \
         and the current version",
    );

    let mut current = mock("default", "u", "two");
    current.meta.resource_version = Some(v1_version.clone());
    let v2 = ok(
        store.update(current).await,
        "update carrying the current resource version must succeed",
    );
    let v2_version = some(
        v2.meta.resource_version.clone(),
        "update must return the object with its new resource version",
    );
    holds(
        v2_version != v1_version,
        "update must give the object a new resource version",
        &v2_version,
    );
    equal(
        v2.meta.creation_timestamp,
        v1.meta.creation_timestamp,
        "update must keep creation_timestamp",
    );

    let mut stale = mock("default", "u", "three");
    stale.meta.resource_version = Some(v1_version.clone());
    equal(
        store.update(stale).await.map(|_| ()),
        Err(StoreError::Conflict {
            key: key("default", "u"),
            expected: Some(v1_version),
            actual: v2_version.clone(),
        }),
        "update with a stale resource version must fail with Conflict naming the key, the version \
         sent and the current version",
    );
    let got = present(store.get(&key("default", "u")).await, &key("default", "u"));
    equal(
        &got.spec["key"],
        &serde_json::json!("two"),
        "a refused update must leave the stored spec",
    );
    equal(
        got.meta.resource_version.clone(),
        Some(v2_version.clone()),
        "a refused update must leave the stored resource version",
    );

    let mut missing = mock("default", "missing", "x");
    missing.meta.resource_version = Some(v2_version);
    equal(
        store.update(missing).await.map(|_| ()),
        Err(StoreError::NotFound {
            key: key("default", "missing"),
        }),
        "update of a key that holds no object must fail with NotFound naming the key",
    );

    let mut unknown = DynConfig {
        meta: ConfigMeta::new("Nope", "default", "u"),
        spec: serde_json::json!({}),
    };
    unknown.meta.resource_version = v2.meta.resource_version.clone();
    must_match!(
        store.update(unknown).await,
        Err(StoreError::UnknownKind { .. }),
        "update of an unregistered kind must fail with UnknownKind"
    );
}

/// Delete of an unknown kind, name or namespace fails; a conditional delete
/// with a stale version fails and keeps the object; deletes take effect.
pub async fn map_delete(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let created = "create of a new, valid object must succeed";
    let a = ok(store.create(mock("default", "a", "x")).await, created);
    let b = ok(store.create(mock("default", "b", "x")).await, created);

    must_match!(
        store.delete(&ConfigKey::new("Nope", "default", "a"), None).await,
        Err(StoreError::UnknownKind { .. }),
        "delete of an unregistered kind must fail with UnknownKind"
    );
    equal(
        store.delete(&key("default", "zzz"), None).await,
        Err(StoreError::NotFound {
            key: key("default", "zzz"),
        }),
        "delete of a key never created must fail with NotFound naming the key",
    );
    equal(
        store.delete(&key("elsewhere", "a"), None).await,
        Err(StoreError::NotFound {
            key: key("elsewhere", "a"),
        }),
        "delete of a name created in another namespace only must fail with NotFound naming the key",
    );

    let stale = some(
        b.meta.resource_version.clone(),
        "create must set a resource version",
    );
    let current = some(
        a.meta.resource_version.clone(),
        "create must set a resource version",
    );
    equal(
        store.delete(&a.key(), Some(&stale)).await,
        Err(StoreError::Conflict {
            key: a.key(),
            expected: Some(stale),
            actual: current.clone(),
        }),
        "delete carrying a version the object does not have must fail with Conflict naming the \
         key, the version sent and the current version",
    );
    holds(
        matches!(store.get(&a.key()).await, Ok(Some(_))),
        "a refused delete must keep the object",
        "get found nothing",
    );
    ok(
        store.delete(&a.key(), Some(&current)).await,
        "delete carrying the current version must succeed",
    );
    ok(
        store.delete(&b.key(), None).await,
        "delete without a version must succeed",
    );
    for deleted in [&a, &b] {
        must_match!(
            store.get(&deleted.key()).await,
            Ok(None),
            "get of a deleted object must be Ok(None)"
        );
    }
    must_match!(
        store.delete(&a.key(), None).await,
        Err(StoreError::NotFound { .. }),
        "a second delete must fail with NotFound"
    );
    ok(
        store.create(mock("default", "a", "again")).await,
        "create of a deleted name must succeed",
    );
}

/// List by namespace and across all, ordered by namespace then name, and
/// never mixing kinds.
pub async fn map_list(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    for (ns, name) in [("b", "y"), ("a", "z"), ("a", "x"), ("b", "x"), ("a", "y")] {
        ok(
            store.create(mock(ns, name, "v")).await,
            "create of a new, valid object must succeed",
        );
    }
    let other = DynConfig {
        meta: ConfigMeta::new("MockOther", "a", "x"),
        spec: serde_json::json!({"text": "other kind"}),
    };
    ok(
        store.create(other).await,
        "create of another kind's object must succeed",
    );

    let names = |items: Vec<Arc<DynConfig>>| -> Vec<String> {
        items
            .iter()
            .map(|c| format!("{}/{}", c.meta.namespace, c.meta.name))
            .collect()
    };
    let listed = "list of a registered kind must succeed";
    equal(
        names(ok(store.list(KIND, Some("a")).await, listed)),
        vec!["a/x".to_string(), "a/y".into(), "a/z".into()],
        "list of one namespace must hold its objects of the kind, ordered by name",
    );
    equal(
        names(ok(store.list(KIND, Some("b")).await, listed)),
        vec!["b/x".to_string(), "b/y".into()],
        "list of one namespace must hold its objects of the kind, ordered by name",
    );
    equal(
        names(ok(store.list(KIND, None).await, listed)),
        vec![
            "a/x".to_string(),
            "a/y".into(),
            "a/z".into(),
            "b/x".into(),
            "b/y".into(),
        ],
        "list of all namespaces must hold every object of the kind, ordered by namespace then name",
    );
    equal(
        names(ok(store.list(KIND, Some("c")).await, listed)),
        Vec::<String>::new(),
        "list of a namespace with no objects must be Ok([])",
    );
    equal(
        names(ok(store.list("MockOther", None).await, listed)),
        vec!["a/x".to_string()],
        "list of a kind must hold that kind's objects only",
    );
    must_match!(
        store.list("Nope", None).await,
        Err(StoreError::UnknownKind { .. }),
        "list of an unregistered kind must fail with UnknownKind"
    );
}

/// Deleting everything that is listed leaves the list empty.
pub async fn map_delete_all(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    for i in 0..20 {
        ok(
            store
                .create(mock(["a", "b", "c"][i % 3], &format!("n{i}"), "v"))
                .await,
            "create of a new, valid object must succeed",
        );
    }
    let listed = "list of a registered kind must succeed";
    let all = ok(store.list(KIND, None).await, listed);
    equal(all.len(), 20, "list must hold every object created");
    for config in all {
        ok(
            store
                .delete(&config.key(), config.meta.resource_version.as_deref())
                .await,
            "delete carrying the listed version must succeed",
        );
    }
    for ns in [None, Some("a"), Some("b"), Some("c")] {
        let left = ok(store.list(KIND, ns).await, listed);
        holds(
            left.is_empty(),
            "after deleting every listed object, list must be empty",
            &left,
        );
    }
}

/// Two groups' kinds of one name (`MockConfig` of `test.pilot.io` and of
/// `other.pilot.io`, whose id is `MockConfig.other.pilot.io`) live side by
/// side: an object of each with the same namespace and name is stored,
/// read back, listed, watched and deleted without touching the other, and
/// each reads back with its own group and the kind's name.
pub async fn map_same_name_two_groups(factory: &dyn StoreFactory) {
    const OTHER: &str = "MockConfig.other.pilot.io";
    let store = factory.make(registry_with_other_group()).await;
    let snapshot = ok(
        store.snapshot(OTHER).await,
        "snapshot of a registered kind must succeed",
    );
    let mut events = ok(
        store.watch(OTHER, snapshot.revision).await,
        "watch after a snapshot's revision must succeed",
    );
    let created = "create of a new, valid object must succeed";
    let ours = ok(store.create(mock("default", "same", "v")).await, created);
    // Written as a document writes it: the kind's name and the group.
    let mut meta = ConfigMeta::new("MockConfig", "default", "same");
    meta.group = "other.pilot.io".into();
    let theirs = ok(
        store
            .create(DynConfig {
                meta,
                spec: serde_json::json!({"note": "the other group's"}),
            })
            .await,
        "create of an object of another group's kind of the same name must succeed",
    );
    equal(
        theirs.key(),
        ConfigKey::new(OTHER, "default", "same"),
        "an object of a qualified kind must be keyed by the kind's id",
    );
    equal(
        (theirs.meta.group.as_str(), theirs.meta.version.as_str()),
        ("other.pilot.io", "v2"),
        "create must keep the other group and fill its kind's version",
    );
    let got = present(store.get(&theirs.key()).await, &theirs.key());
    equal(
        &got.spec,
        &theirs.spec,
        "get by the qualified key must find the other group's object",
    );
    let document = serde_json::to_value(&*got).expect("an object serializes");
    equal(
        (&document["kind"], &document["apiVersion"]),
        (
            &serde_json::json!("MockConfig"),
            &serde_json::json!("other.pilot.io/v2"),
        ),
        "an object of a qualified kind must read back as a document with the kind's name and its group",
    );
    let got = present(store.get(&ours.key()).await, &ours.key());
    equal(
        &got.spec,
        &ours.spec,
        "get by the bare key must still find the first group's object",
    );
    let listed = "list of a registered kind must succeed";
    let ids =
        |items: Vec<Arc<DynConfig>>| -> Vec<String> { items.iter().map(|c| c.key().to_string()).collect() };
    equal(
        ids(ok(store.list(OTHER, None).await, listed)),
        vec![format!("{OTHER} default/same")],
        "list of the qualified kind must hold its objects only",
    );
    equal(
        ids(ok(store.list(KIND, None).await, listed)),
        vec!["MockConfig default/same".to_string()],
        "list of the first group's kind must hold its objects only",
    );
    ok(
        store.delete(&theirs.key(), None).await,
        "delete of an existing object must succeed",
    );
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let item = tokio::time::timeout(super::EVENT_TIMEOUT, futures::StreamExt::next(&mut events))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "a watch must deliver every write of its kind: after {seen:?}, none came within {:?}",
                    super::EVENT_TIMEOUT
                )
            })
            .expect("a watch must stay open while the store runs");
        match ok(
            item,
            "a watch whose history is kept must deliver events, not errors",
        ) {
            WatchEvent::Put { config, .. } => seen.push(('+', config.key())),
            WatchEvent::Delete { key, .. } => seen.push(('-', key)),
            WatchEvent::Progress { .. } => {}
            WatchEvent::Undecodable(u) => {
                panic!("a watch must decode every object the store itself wrote, got Undecodable({u:?})")
            }
        }
    }
    equal(
        seen,
        vec![('+', theirs.key()), ('-', theirs.key())],
        "a watch of the qualified kind must see its object's writes only, keyed by the kind's id",
    );
    equal(
        ids(ok(store.list(OTHER, None).await, listed)),
        Vec::<String>::new(),
        "after delete, the qualified kind must hold nothing",
    );
    present(store.get(&ours.key()).await, &ours.key());
    // A spec of one group's kind is not the other's.
    let mut meta = ConfigMeta::new("MockConfig", "default", "wrong");
    meta.group = "other.pilot.io".into();
    must_match!(
        store
            .create(DynConfig {
                meta,
                spec: serde_json::json!({"key": "the first group's field"}),
            })
            .await,
        Err(StoreError::Invalid { .. }),
        "create of a spec of the other group's kind must be validated by that kind"
    );
}

/// An update is checked against the object it replaces: a change its
/// kind's transition rules forbid ([`KindRegistry::check_update`], a
/// [`MockSealed`]'s `class`) fails with Invalid naming the field, and
/// leaves the stored object as it was; other changes are written.
///
/// [`KindRegistry::check_update`]: pilot_model::KindRegistry::check_update
pub async fn map_update_checks_transition_rules(factory: &dyn StoreFactory) {
    let store = factory.make(registry_with_sealed()).await;
    let sealed = |class: &str, note: &str, version: Option<String>| {
        let mut config = pilot_model::Config::new(
            "default",
            "s",
            MockSealed {
                class: class.into(),
                note: note.into(),
            },
        )
        .to_dyn()
        .expect("MockSealed serializes");
        config.meta.resource_version = version;
        config
    };
    let key = ConfigKey::new("MockSealed", "default", "s");
    let v1 = ok(
        store.create(sealed("gold", "first", None)).await,
        "create of a new object of a kind with transition rules must succeed",
    );
    let v2 = ok(
        store
            .update(sealed("gold", "second", v1.meta.resource_version.clone()))
            .await,
        "an update that keeps what the transition rules seal must succeed",
    );
    let refused = store
        .update(sealed("silver", "third", v2.meta.resource_version.clone()))
        .await;
    must_match!(
        refused,
        Err(StoreError::Invalid { .. }),
        "an update that changes what a transition rule seals must fail with Invalid"
    );
    if let Err(StoreError::Invalid {
        key: refused_key,
        errors,
    }) = refused
    {
        equal(&refused_key, &key, "Invalid must name the object's key");
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        equal(
            paths,
            vec!["spec.class"],
            "Invalid must name the sealed field (KindRegistry::check_update)",
        );
    }
    let got = present(store.get(&key).await, &key);
    equal(
        (&got.spec["class"], &got.spec["note"]),
        (&serde_json::json!("gold"), &serde_json::json!("second")),
        "a refused update must leave the stored spec",
    );
    equal(
        got.meta.resource_version.clone(),
        v2.meta.resource_version.clone(),
        "a refused update must leave the stored resource version",
    );
}
