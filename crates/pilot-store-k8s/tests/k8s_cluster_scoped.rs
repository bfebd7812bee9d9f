//! A cluster-scoped kind on Kubernetes: the Gateway API's GatewayClass,
//! whose CRD (upstream's and the one pilot installs where it is missing)
//! has `scope: Cluster`. Its objects have no namespace: written by
//! another client (kubectl, a Helm chart), they are read; written by
//! pilot, they are created at the kind's cluster path; a store limited to
//! one namespace reads them too, and its status is written back.

use std::sync::Arc;
use std::time::SystemTime;

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigKey, ConfigMeta, ConfigStatus, ConfigStore, DynConfig, StoreError};
use pilot_store_k8s::{KubeConfigStore, install_crds};

const ID: &str = "GatewayClass.gateway.networking.k8s.io";

fn class(namespace: &str, name: &str, controller: &str) -> DynConfig {
    let mut meta = ConfigMeta::new("GatewayClass", namespace, name);
    meta.group = "gateway.networking.k8s.io".into();
    meta.version = "v1".into();
    DynConfig {
        meta,
        spec: serde_json::json!({"controllerName": controller}),
    }
}

fn resource() -> ApiResource {
    ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "GatewayClass".into(),
        plural: "gatewayclasses".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_classes_live_in_no_namespace() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let registry = pilot_api::default_registry();
    install_crds(client.clone(), &registry).await.unwrap();
    let cluster: Api<DynamicObject> = Api::all_with(client.clone(), &resource());

    // Written by another client at the cluster path: read by pilot.
    let written = DynamicObject::new("theirs", &resource())
        .data(serde_json::json!({"spec": {"controllerName": "example.com/theirs"}}));
    cluster.create(&PostParams::default(), &written).await.unwrap();
    let store = KubeConfigStore::new(client.clone(), registry.clone());
    let listed = store.list(ID, None).await.unwrap();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].key(), ConfigKey::new(ID, "", "theirs"));
    let got = store.get(&ConfigKey::new(ID, "", "theirs")).await.unwrap();
    assert_eq!(got.unwrap().spec["controllerName"], "example.com/theirs");
    // A namespace holds none.
    assert!(store.list(ID, Some("default")).await.unwrap().is_empty());

    // Written through pilot, even with a namespace (dropped, as
    // kube-apiserver drops it): created at the cluster path.
    let created = store
        .create(class("default", "ours", "pilot.io/gateway-controller"))
        .await
        .unwrap();
    assert_eq!(created.key(), ConfigKey::new(ID, "", "ours"));
    let raw = cluster.get("ours").await.unwrap();
    assert_eq!(raw.metadata.namespace, None, "{raw:?}");

    // The transition rule holds on Kubernetes too.
    let mut moved = class("", "ours", "example.com/another");
    moved.meta.resource_version = created.meta.resource_version.clone();
    let refused = store.update(moved).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid { errors, .. }) if errors[0].path == "spec.controllerName"),
        "{refused:?}"
    );

    // A store limited to one namespace reads (and writes) them too: a
    // namespaced pilot still needs its GatewayClasses.
    let limited = Arc::new(KubeConfigStore::namespaced(client.clone(), registry, "edge"));
    let mut names: Vec<String> = limited
        .list(ID, None)
        .await
        .unwrap()
        .iter()
        .map(|c| c.meta.name.clone())
        .collect();
    names.sort();
    assert_eq!(names, ["ours", "theirs"]);

    // Its status is written back on the cluster-scoped object.
    let key = ConfigKey::new(ID, "", "ours");
    let version = created.meta.resource_version.clone().unwrap();
    let status = ConfigStatus {
        observed_version: version.clone(),
        proxies: 1,
        acked: 1,
        nacked: 0,
        withheld: 0,
        nacks: Vec::new(),
        last_update: SystemTime::now(),
        conditions: Vec::new(),
        validation_messages: Vec::new(),
        parents: Vec::new(),
        listeners: Vec::new(),
        addresses: Vec::new(),
        ancestors: Vec::new(),
    };
    limited.update_status(&key, &version, status).await.unwrap();
    let raw = cluster.get("ours").await.unwrap();
    assert!(raw.data.get("status").is_some(), "{raw:?}");
    let read = store.get(&key).await.unwrap().unwrap();
    assert_eq!(read.meta.status.as_ref().map(|s| s.acked), Some(1), "{read:?}");

    limited.delete(&key, None).await.unwrap();
    assert!(store.get(&key).await.unwrap().is_none());
}
