//! The map invariants: what every ConfigStore promises about its contents.

use std::sync::Arc;

use pilot_model::{ConfigKey, ConfigMeta, ConfigWatch, DynConfig, StoreError};

use super::{StoreFactory, mock, registry};

const KIND: &str = "MockConfig";

async fn fresh(factory: &dyn StoreFactory) -> Arc<dyn ConfigWatch> {
    factory.make(registry()).await
}

fn key(ns: &str, name: &str) -> ConfigKey {
    ConfigKey::new(KIND, ns, name)
}

/// Create N objects in two namespaces and get each back as created, with a
/// resource version and a creation time; a missing key reads as `None` and
/// an unregistered kind as an error.
pub async fn map_create_get(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let mut versions = std::collections::HashSet::new();
    for i in 0..30 {
        let ns = if i % 2 == 0 { "default" } else { "istio-system" };
        let input = mock(ns, &format!("config-{i}"), &format!("value-{i}"));
        let stored = store.create(input.clone()).await.expect("create");
        assert_eq!(stored.spec, input.spec);
        assert_eq!(stored.meta.group, "test.pilot.io");
        assert_eq!(stored.meta.version, "v1");
        assert!(stored.meta.creation_timestamp.is_some(), "creation time set");
        let version = stored
            .meta
            .resource_version
            .clone()
            .expect("resource version set");
        assert!(
            versions.insert(version),
            "every write gets a distinct resource version"
        );
    }
    for i in 0..30 {
        let ns = if i % 2 == 0 { "default" } else { "istio-system" };
        let got = store
            .get(&key(ns, &format!("config-{i}")))
            .await
            .expect("get")
            .expect("object present");
        assert_eq!(got.spec["key"], format!("value-{i}"));
        assert_eq!(got.meta.namespace, ns);
    }
    assert!(
        store
            .get(&key("default", "missing"))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store
            .get(&key("nowhere", "config-0"))
            .await
            .expect("get")
            .is_none()
    );
    let unknown = store.get(&ConfigKey::new("Nope", "default", "a")).await;
    assert!(
        matches!(unknown, Err(StoreError::UnknownKind { .. })),
        "{unknown:?}"
    );
}

/// A second create of the same key fails and leaves the first object.
pub async fn map_duplicate_create(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let first = store
        .create(mock("default", "dup", "first"))
        .await
        .expect("create");
    let err = store.create(mock("default", "dup", "second")).await.unwrap_err();
    assert_eq!(
        err,
        StoreError::AlreadyExists {
            key: key("default", "dup")
        }
    );
    let got = store.get(&key("default", "dup")).await.unwrap().unwrap();
    assert_eq!(got.spec["key"], "first");
    assert_eq!(got.meta.resource_version, first.meta.resource_version);
    // The same name in another namespace is another object.
    store
        .create(mock("other", "dup", "third"))
        .await
        .expect("create in another namespace");
}

/// Invalid objects are refused with every field error and never stored;
/// a failed update leaves the stored object as it was.
pub async fn map_invalid_not_stored(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let mut bad = mock("default", "bad", "");
    bad.spec["pairs"][0]["key"] = "".into();
    let Err(StoreError::Invalid { key: bad_key, errors }) = store.create(bad).await else {
        panic!("an empty key must be invalid");
    };
    assert_eq!(bad_key, key("default", "bad"));
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["spec.key", "spec.pairs[0].key"]);

    let wrong_type = DynConfig {
        meta: ConfigMeta::new(KIND, "default", "bad"),
        spec: serde_json::json!({"key": 7}),
    };
    let Err(StoreError::Invalid { errors, .. }) = store.create(wrong_type).await else {
        panic!("a number where a string belongs must be invalid");
    };
    assert_eq!(errors[0].path, "spec.key");

    let Err(StoreError::Invalid { errors, .. }) = store.create(mock("Default", "Bad_Name", "x")).await else {
        panic!("bad name and namespace must be invalid");
    };
    let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(paths, ["metadata.name", "metadata.namespace"]);

    let unknown = DynConfig {
        meta: ConfigMeta::new("Nope", "default", "x"),
        spec: serde_json::json!({}),
    };
    assert!(matches!(
        store.create(unknown).await,
        Err(StoreError::UnknownKind { .. })
    ));
    assert!(store.get(&key("default", "bad")).await.unwrap().is_none());
    assert!(store.list(KIND, None).await.unwrap().is_empty());

    let good = store.create(mock("default", "good", "v")).await.unwrap();
    let mut broken = (*good).clone();
    broken.spec["key"] = "".into();
    assert!(matches!(
        store.update(broken).await,
        Err(StoreError::Invalid { .. })
    ));
    let got = store.get(&good.key()).await.unwrap().unwrap();
    assert_eq!(got.spec, good.spec);
    assert_eq!(got.meta.resource_version, good.meta.resource_version);
}

/// Update needs the current resource version: without one, or with a stale
/// one, it fails with both versions named and changes nothing.
pub async fn map_update_versions(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let v1 = store.create(mock("default", "u", "one")).await.unwrap();
    let v1_version = v1.meta.resource_version.clone().unwrap();

    let mut without = mock("default", "u", "two");
    without.meta.resource_version = None;
    assert_eq!(
        store.update(without).await.unwrap_err(),
        StoreError::Conflict {
            key: key("default", "u"),
            expected: None,
            actual: v1_version.clone()
        }
    );

    let mut current = mock("default", "u", "two");
    current.meta.resource_version = Some(v1_version.clone());
    let v2 = store
        .update(current)
        .await
        .expect("update with the current version");
    let v2_version = v2.meta.resource_version.clone().unwrap();
    assert_ne!(v2_version, v1_version);
    assert_eq!(v2.meta.creation_timestamp, v1.meta.creation_timestamp);

    let mut stale = mock("default", "u", "three");
    stale.meta.resource_version = Some(v1_version.clone());
    assert_eq!(
        store.update(stale).await.unwrap_err(),
        StoreError::Conflict {
            key: key("default", "u"),
            expected: Some(v1_version),
            actual: v2_version.clone()
        }
    );
    let got = store.get(&key("default", "u")).await.unwrap().unwrap();
    assert_eq!(got.spec["key"], "two");
    assert_eq!(got.meta.resource_version, Some(v2_version.clone()));

    let mut missing = mock("default", "missing", "x");
    missing.meta.resource_version = Some(v2_version);
    assert_eq!(
        store.update(missing).await.unwrap_err(),
        StoreError::NotFound {
            key: key("default", "missing")
        }
    );
}

/// Delete of an unknown kind, name or namespace fails; a conditional delete
/// with a stale version fails and keeps the object; deletes take effect.
pub async fn map_delete(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    let a = store.create(mock("default", "a", "x")).await.unwrap();
    let b = store.create(mock("default", "b", "x")).await.unwrap();

    let unknown_kind = store.delete(&ConfigKey::new("Nope", "default", "a"), None).await;
    assert!(
        matches!(unknown_kind, Err(StoreError::UnknownKind { .. })),
        "{unknown_kind:?}"
    );
    assert_eq!(
        store.delete(&key("default", "zzz"), None).await.unwrap_err(),
        StoreError::NotFound {
            key: key("default", "zzz")
        }
    );
    assert_eq!(
        store.delete(&key("elsewhere", "a"), None).await.unwrap_err(),
        StoreError::NotFound {
            key: key("elsewhere", "a")
        }
    );

    let stale = b.meta.resource_version.clone().unwrap();
    let current = a.meta.resource_version.clone().unwrap();
    assert_eq!(
        store.delete(&a.key(), Some(&stale)).await.unwrap_err(),
        StoreError::Conflict {
            key: a.key(),
            expected: Some(stale),
            actual: current.clone()
        }
    );
    assert!(store.get(&a.key()).await.unwrap().is_some());
    store
        .delete(&a.key(), Some(&current))
        .await
        .expect("conditional delete");
    store.delete(&b.key(), None).await.expect("unconditional delete");
    assert!(store.get(&a.key()).await.unwrap().is_none());
    assert!(store.get(&b.key()).await.unwrap().is_none());
    assert!(matches!(
        store.delete(&a.key(), None).await,
        Err(StoreError::NotFound { .. })
    ));
    // A deleted name can be created again.
    store
        .create(mock("default", "a", "again"))
        .await
        .expect("re-create");
}

/// List by namespace and across all, ordered by namespace then name, and
/// never mixing kinds.
pub async fn map_list(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    for (ns, name) in [("b", "y"), ("a", "z"), ("a", "x"), ("b", "x"), ("a", "y")] {
        store.create(mock(ns, name, "v")).await.unwrap();
    }
    let other = DynConfig {
        meta: ConfigMeta::new("MockOther", "a", "x"),
        spec: serde_json::json!({"text": "other kind"}),
    };
    store.create(other).await.unwrap();

    let names = |items: Vec<Arc<DynConfig>>| -> Vec<String> {
        items
            .iter()
            .map(|c| format!("{}/{}", c.meta.namespace, c.meta.name))
            .collect()
    };
    assert_eq!(
        names(store.list(KIND, Some("a")).await.unwrap()),
        ["a/x", "a/y", "a/z"]
    );
    assert_eq!(names(store.list(KIND, Some("b")).await.unwrap()), ["b/x", "b/y"]);
    assert_eq!(
        names(store.list(KIND, None).await.unwrap()),
        ["a/x", "a/y", "a/z", "b/x", "b/y"]
    );
    assert!(store.list(KIND, Some("c")).await.unwrap().is_empty());
    assert_eq!(names(store.list("MockOther", None).await.unwrap()), ["a/x"]);
    assert!(matches!(
        store.list("Nope", None).await,
        Err(StoreError::UnknownKind { .. })
    ));
}

/// Deleting everything that is listed leaves the list empty.
pub async fn map_delete_all(factory: &dyn StoreFactory) {
    let store = fresh(factory).await;
    for i in 0..20 {
        store
            .create(mock(["a", "b", "c"][i % 3], &format!("n{i}"), "v"))
            .await
            .unwrap();
    }
    assert_eq!(store.list(KIND, None).await.unwrap().len(), 20);
    for config in store.list(KIND, None).await.unwrap() {
        store
            .delete(&config.key(), config.meta.resource_version.as_deref())
            .await
            .unwrap();
    }
    assert!(store.list(KIND, None).await.unwrap().is_empty());
    for ns in ["a", "b", "c"] {
        assert!(store.list(KIND, Some(ns)).await.unwrap().is_empty());
    }
}
