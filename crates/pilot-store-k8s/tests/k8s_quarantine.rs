//! Validation on read with Kubernetes: a RouteRule written around pilot
//! (kubectl, another controller; a CRD schema cannot say "weights sum to
//! 100") is quarantined by the Controller, not cached, until it is fixed
//! or deleted in the cluster.

use std::sync::Arc;

use futures::stream::BoxStream;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::{ConfigKey, ConfigMeta, ConfigStore, DynConfig};
use pilot_store::testing::EVENT_TIMEOUT;
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_k8s::{KubeConfigStore, install_crds};

const KIND: &str = "RouteRule";

fn spec(weight: u32) -> serde_json::Value {
    serde_json::json!({"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v9"}, "weight": weight}]})
}

fn key(name: &str) -> ConfigKey {
    ConfigKey::new(KIND, "default", name)
}

async fn next(events: &mut BoxStream<'static, Notification<Arc<DynConfig>>>) -> (char, String) {
    pilot_store::testing::next_change(events, EVENT_TIMEOUT).await
}

fn quarantined(controller: &Controller) -> Vec<String> {
    controller
        .quarantine()
        .list()
        .iter()
        .map(|q| q.key.name.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_written_around_the_api_is_quarantined_until_fixed_in_the_cluster() {
    let fake = FakeApiServer::new();
    let client = fake.client();
    let registry = pilot_api::istio::registry();
    install_crds(client.clone(), &registry).await.unwrap();
    let store = Arc::new(KubeConfigStore::new(client.clone(), registry));
    let resource = ApiResource {
        group: "config.istio.io".into(),
        version: "v1alpha2".into(),
        api_version: "config.istio.io/v1alpha2".into(),
        kind: KIND.into(),
        plural: "routerules".into(),
    };
    let raw: Api<DynamicObject> = Api::namespaced_with(client, "default", &resource);
    let invalid =
        |name: &str| DynamicObject::new(name, &resource).data(serde_json::json!({"spec": spec(30)}));
    // Written before pilot starts: the Controller's list sees it.
    let before = raw
        .create(&PostParams::default(), &invalid("before"))
        .await
        .unwrap();

    let controller = Controller::with_options(store.clone(), {
        let mut value = ControllerOptions::default();
        value.kinds = Some(vec![KIND.to_string()]);
        value
    });
    let mut events = controller.subscribe(KIND).unwrap();
    controller.run();
    controller.wait_synced().await;
    let held = controller.quarantine().get(&key("before")).expect("quarantined");
    assert_eq!(held.resource_version, before.metadata.resource_version);
    assert!(
        held.errors
            .iter()
            .any(|e| e.path.starts_with("spec.route") && e.message == "weights must sum to 100, got 30"),
        "{:?}",
        held.errors
    );
    assert!(controller.get_cached(&key("before")).unwrap().is_none());
    assert_eq!(controller.quarantine().rejected().get(KIND), Some(&1));

    // Written while pilot watches: quarantined too. A write through the
    // Controller after it proves the watch got that far.
    raw.create(&PostParams::default(), &invalid("during"))
        .await
        .unwrap();
    let marker = DynConfig {
        meta: ConfigMeta::new(KIND, "default", "marker"),
        spec: serde_json::json!({"destination": {"name": "ratings"}}),
    };
    controller.create(marker).await.unwrap();
    assert_eq!(next(&mut events).await, ('+', "marker".to_string()));
    assert_eq!(quarantined(&controller), ["before", "during"]);
    assert!(controller.get_cached(&key("during")).unwrap().is_none());

    // Fixed in the cluster: the Controller adds it.
    let mut fixed = raw.get("during").await.unwrap();
    fixed.data["spec"] = spec(100);
    raw.replace("during", &PostParams::default(), &fixed)
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, ('+', "during".to_string()));
    assert_eq!(quarantined(&controller), ["before"]);

    // Deleted in the cluster: released, and nothing to announce.
    raw.delete("before", &DeleteParams::default()).await.unwrap();
    controller.delete(&key("marker"), None).await.unwrap();
    assert_eq!(next(&mut events).await, ('-', "marker".to_string()));
    assert!(quarantined(&controller).is_empty());
    assert_eq!(controller.quarantine().rejected().get(KIND), Some(&2));
}
