//! What KubeConfigStore adds to the conformance suite: namespace scope,
//! missing CRDs and namespaces, objects written around pilot.

use std::sync::Arc;

use kube::api::{Api, DynamicObject, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigKey, ConfigStore, ConfigWatch, StoreError};
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, ControllerOptions};
use pilot_store_k8s::{KubeConfigStore, install_crds};

const KIND: &str = "MockConfig";

async fn installed() -> (FakeApiServer, kube::Client) {
    let fake = FakeApiServer::new();
    let client = fake.client();
    install_crds(client.clone(), &registry()).await.unwrap();
    (fake, client)
}

#[tokio::test]
async fn a_namespaced_store_sees_and_writes_its_namespace_only() {
    let (_fake, client) = installed().await;
    let everywhere = KubeConfigStore::new(client.clone(), registry()).create_missing_namespaces(true);
    everywhere.create(mock("default", "a", "1")).await.unwrap();
    everywhere.create(mock("prod", "b", "1")).await.unwrap();

    let prod = KubeConfigStore::namespaced(client, registry(), "prod");
    let names: Vec<_> = prod
        .list(KIND, None)
        .await
        .unwrap()
        .iter()
        .map(|c| c.key())
        .collect();
    assert_eq!(names, [ConfigKey::new(KIND, "prod", "b")]);
    assert!(prod.list(KIND, Some("default")).await.unwrap().is_empty());
    assert!(
        prod.get(&ConfigKey::new(KIND, "default", "a"))
            .await
            .unwrap()
            .is_none()
    );
    let Err(StoreError::Invalid { errors, .. }) = prod.create(mock("default", "c", "1")).await else {
        panic!("a write outside the store's namespace must fail");
    };
    assert_eq!(errors[0].path, "metadata.namespace");
    assert_eq!(errors[0].message, "this store serves namespace \"prod\" only");
    assert_eq!(prod.snapshot(KIND).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn missing_crds_and_namespaces_are_named() {
    let fake = FakeApiServer::new();
    let store = KubeConfigStore::new(fake.client(), registry());
    let err = store.list(KIND, None).await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable { .. }), "{err:?}");
    assert!(err.to_string().contains("mockconfigs.test.pilot.io/v1"), "{err}");
    assert!(err.to_string().contains("install_crds"), "{err}");

    install_crds(fake.client(), &registry()).await.unwrap();
    let Err(StoreError::Invalid { key, errors }) = store.create(mock("nowhere", "a", "1")).await else {
        panic!("a missing namespace must be reported");
    };
    assert_eq!(key, ConfigKey::new(KIND, "nowhere", "a"));
    assert_eq!(errors[0].path, "metadata.namespace");
    assert!(
        errors[0].message.contains("namespace \"nowhere\" does not exist"),
        "{}",
        errors[0].message
    );
}

#[tokio::test]
async fn installing_twice_is_harmless() {
    let (_fake, client) = installed().await;
    install_crds(client.clone(), &registry())
        .await
        .expect("apply is idempotent");
    let store = KubeConfigStore::new(client, registry());
    store.create(mock("default", "a", "1")).await.unwrap();
    assert_eq!(store.list(KIND, None).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_written_around_pilot_without_a_spec_are_treated_as_absent() {
    let (_fake, client) = installed().await;
    let store = Arc::new(KubeConfigStore::new(client.clone(), registry()));
    let kept = store.create(mock("default", "kept", "1")).await.unwrap();
    let broken = store.create(mock("default", "broken", "1")).await.unwrap();
    let controller = Controller::with_options(store.clone(), {
        let mut value = ControllerOptions::default();
        value.kinds = Some(vec![KIND.to_string()]);
        value
    });
    controller.run();
    controller.wait_synced().await;
    assert!(controller.get_cached(&broken.key()).unwrap().is_some());

    // kubectl edits the object and drops its spec.
    let resource = kube::api::ApiResource {
        group: "test.pilot.io".into(),
        version: "v1".into(),
        api_version: "test.pilot.io/v1".into(),
        kind: KIND.into(),
        plural: "mockconfigs".into(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let mut object = raw.get("broken").await.unwrap();
    object.data = serde_json::json!({"notspec": true});
    let written = raw
        .replace("broken", &PostParams::default(), &object)
        .await
        .unwrap();
    let written_version: u64 = written.metadata.resource_version.unwrap().parse().unwrap();

    assert!(
        store
            .list(KIND, None)
            .await
            .unwrap()
            .iter()
            .all(|c| c.key() != broken.key())
    );
    // A write through the Controller waits until its cache has caught up
    // with this store's writes; wait for the raw one by writing after it.
    let mut next = (*kept).clone();
    next.spec["key"] = "2".into();
    let after = controller.update(next).await.unwrap();
    let after_version: u64 = after.meta.resource_version.clone().unwrap().parse().unwrap();
    assert!(after_version > written_version);
    assert!(
        controller.get_cached(&broken.key()).unwrap().is_none(),
        "the cache no longer holds it"
    );
    assert_eq!(
        controller.get_cached(&kept.key()).unwrap().as_deref(),
        Some(&*after)
    );
}

#[tokio::test]
async fn an_istio_rule_round_trips() {
    let fake = FakeApiServer::new();
    let registry = pilot_api::istio::registry();
    install_crds(fake.client(), &registry).await.unwrap();
    let store = KubeConfigStore::new(fake.client(), registry);
    let rule: pilot_api::istio::RouteRule = serde_json::from_value(serde_json::json!({
        "destination": {"name": "reviews"},
        "precedence": 2,
        "match": {"request": {"headers": {"end-user": {"exact": "jason"}}}},
        "route": [{"labels": {"version": "v3"}, "weight": 100}],
        "httpReqTimeout": {"simpleTimeout": {"timeout": "1.5s"}},
    }))
    .unwrap();
    let config = pilot_model::Config::new("default", "reviews-jason", rule)
        .to_dyn()
        .unwrap();
    let stored = store.create(config.clone()).await.unwrap();
    let read = store.get(&config.key()).await.unwrap().unwrap();
    assert_eq!(read.spec, config.spec);
    assert_eq!(read, stored);
    let typed = pilot_model::Config::<pilot_api::istio::RouteRule>::from_dyn(&read).unwrap();
    assert_eq!(typed.spec.precedence, 2);
}

/// The crate documentation's example, on the fake instead of a cluster.
#[tokio::test]
async fn the_crate_example_runs_on_the_fake() {
    use pilot_api::istio;
    use pilot_model::Config;

    let fake = FakeApiServer::new();
    let client = fake.client();
    let registry = istio::registry();
    install_crds(client.clone(), &registry).await.unwrap();
    let store = KubeConfigStore::new(client, registry);

    let rule: istio::RouteRule = serde_json::from_value(serde_json::json!({
        "destination": {"name": "reviews"},
        "route": [{"labels": {"version": "v2"}}],
    }))
    .unwrap();
    let stored = store
        .create(Config::new("default", "reviews-v2", rule).to_dyn().unwrap())
        .await
        .unwrap();
    assert!(stored.meta.resource_version.is_some());
    assert_eq!(store.list("RouteRule", Some("default")).await.unwrap().len(), 1);
}
