//! The networking.istio.io kinds on the Kubernetes store: their CRDs
//! (three served versions, v1 stored) install on the API server, an object
//! written at v1alpha3 is stored at v1, and an invalid one is refused with
//! its field path before it reaches the API server.

use kube::api::{Api, DynamicObject};
use kube::discovery::ApiResource;
use pilot_api::default_registry;
use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigKey, ConfigMeta, ConfigStore, DynConfig, StoreError};
use pilot_store_k8s::{KubeConfigStore, install_crds};
use serde_json::json;

fn virtual_service(name: &str, version: &str, weight: i32) -> DynConfig {
    let mut meta = ConfigMeta::new("VirtualService", "default", name);
    meta.group = "networking.istio.io".into();
    meta.version = version.into();
    DynConfig {
        meta,
        spec: json!({
            "hosts": ["reviews"],
            "http": [{"route": [{"destination": {"host": "reviews", "subset": "v1"}, "weight": weight}]}],
        }),
    }
}

#[tokio::test]
async fn networking_kinds_round_trip_at_their_storage_version() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    install_crds(client.clone(), &default_registry()).await.unwrap();
    let store = KubeConfigStore::new(client.clone(), default_registry());

    let stored = store
        .create(virtual_service("reviews", "v1alpha3", 100))
        .await
        .unwrap();
    assert_eq!(stored.meta.version, "v1");
    let read = store
        .get(&ConfigKey::new("VirtualService", "default", "reviews"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read.spec["http"][0]["route"][0]["destination"]["subset"], "v1");

    // On the API server, at v1.
    let resource = ApiResource {
        group: "networking.istio.io".into(),
        version: "v1".into(),
        api_version: "networking.istio.io/v1".into(),
        kind: "VirtualService".into(),
        plural: "virtualservices".into(),
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let object = api.get("reviews").await.unwrap();
    assert_eq!(object.types.unwrap().api_version, "networking.istio.io/v1");

    let Err(StoreError::Invalid { errors, .. }) = store.create(virtual_service("bad", "v1", -1)).await else {
        panic!("a negative weight must be refused");
    };
    assert_eq!(errors[0].path, "spec.http[0].route[0].weight");
    assert!(api.get_opt("bad").await.unwrap().is_none());
}
