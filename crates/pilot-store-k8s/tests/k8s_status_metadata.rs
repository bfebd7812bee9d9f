//! A label or annotation edit by another client (kubectl) after a status
//! write: Kubernetes does not move `metadata.generation` for it, so pilot
//! must not keep showing the version from before the edit, and a stale
//! update (carrying that version) must conflict rather than silently
//! overwrite the edit.

use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigStatus, ConfigStore, StoreError, now_seconds};
use pilot_store::testing::{mock, registry};
use pilot_store_k8s::{KubeConfigStore, install_crds};

use kube::api::{Api, ApiResource, DynamicObject, PostParams};

fn status(observed: &str) -> ConfigStatus {
    ConfigStatus {
        observed_version: observed.to_string(),
        proxies: 2,
        acked: 2,
        nacked: 0,
        withheld: 0,
        nacks: Vec::new(),
        last_update: now_seconds(),
        conditions: Vec::new(),
        validation_messages: Vec::new(),
        parents: Vec::new(),
        listeners: Vec::new(),
        addresses: Vec::new(),
        ancestors: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_label_edit_after_a_status_write_is_a_new_version_and_not_overwritten() {
    let fake = FakeApiServer::new();
    let registry = registry();
    install_crds(fake.client(), &registry).await.expect("CRDs");
    let store = KubeConfigStore::new(fake.client(), registry.clone());
    let created = store.create(mock("default", "r", "1")).await.expect("create");
    let key = created.key();
    let v1 = created.meta.resource_version.clone().expect("version");
    store
        .update_status(&key, &v1, status(&v1))
        .await
        .expect("status write");
    let after_status = store.get(&key).await.expect("get").expect("present");
    assert_eq!(
        after_status.meta.resource_version.as_deref(),
        Some(v1.as_str()),
        "a status write keeps pilot's version"
    );

    // Another client adds a label (kubectl label): generation stays.
    let schema = registry.schema("MockConfig").expect("schema");
    let resource = ApiResource {
        group: schema.group.clone(),
        version: schema.version.clone(),
        api_version: format!("{}/{}", schema.group, schema.version),
        kind: schema.kind.clone(),
        plural: schema.plural.clone(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(fake.client(), "default", &resource);
    let mut object = raw.get("r").await.expect("raw get");
    let generation = object.metadata.generation;
    object
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("team".into(), "payments".into());
    let edited = raw
        .replace("r", &PostParams::default(), &object)
        .await
        .expect("label edit");
    assert_eq!(
        edited.metadata.generation, generation,
        "a label edit does not move generation"
    );

    // pilot shows the edit as a new version, with the label.
    let now = store.get(&key).await.expect("get").expect("present");
    assert_eq!(now.meta.labels.get("team").map(String::as_str), Some("payments"));
    let v2 = now.meta.resource_version.clone().expect("version");
    assert_ne!(v2, v1, "the edited object is a new version for pilot");
    // The status is about the old version and says so.
    assert_eq!(
        now.meta.status.as_ref().map(|s| s.observed_version.as_str()),
        Some(v1.as_str())
    );

    // A stale update (read before the edit) conflicts and loses nothing.
    let mut stale = (*created).clone();
    stale.spec["key"] = "2".into();
    let refused = store.update(stale).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict { actual, .. }) if *actual == v2),
        "{refused:?}"
    );
    let kept = store.get(&key).await.expect("get").expect("present");
    assert_eq!(kept.meta.labels.get("team").map(String::as_str), Some("payments"));
    assert_eq!(kept.spec["key"], "1");

    // A status write for the new version, then an update carrying it,
    // works as before (and keeps the label it carries).
    store
        .update_status(&key, &v2, status(&v2))
        .await
        .expect("status write for v2");
    assert_eq!(
        store
            .get(&key)
            .await
            .expect("get")
            .expect("present")
            .meta
            .resource_version
            .as_deref(),
        Some(v2.as_str())
    );
    let mut fresh = (*kept).clone();
    fresh.spec["key"] = "3".into();
    let updated = store
        .update(fresh)
        .await
        .expect("update with the current version");
    assert_eq!(updated.spec["key"], "3");
    assert_eq!(
        updated.meta.labels.get("team").map(String::as_str),
        Some("payments")
    );
}
