//! The same properties against a real cluster (ignored by default).
//!
//! They use the cluster `KUBECONFIG` (or the in-cluster config) points at,
//! install the conformance kinds' CRDs (`mockconfigs.test.pilot.io`,
//! `mockothers.test.pilot.io`), and delete every object of those kinds
//! before each store is handed out, so they must run one at a time:
//!
//! ```sh
//! KUBECONFIG=~/.kube/config cargo nextest run -p pilot-store-k8s \
//!     --run-ignored only --test-threads 1 -E 'binary(k8s_cluster)'
//! ```

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use pilot_model::{
    ConfigStore, ConfigWatch, Event, KindRegistry, Labels, Protocol, ServiceDiscovery, ServiceEvent,
};
use pilot_store::testing::{self as suite, EVENT_TIMEOUT};
use pilot_store_k8s::{DiscoveryOptions, KubeConfigStore, KubeServiceDiscovery, install_crds};
use serde_json::json;

/// A store on the cluster with no object of the suite's kinds left.
async fn cluster(registry: KindRegistry) -> Arc<dyn ConfigWatch> {
    let client = kube::Client::try_default()
        .await
        .expect("a cluster from KUBECONFIG");
    install_crds(client.clone(), &registry)
        .await
        .expect("install the CRDs");
    let store = KubeConfigStore::new(client, registry.clone()).create_missing_namespaces(true);
    for kind in registry.kinds() {
        // A CRD just applied may take a moment to be served.
        let items = loop {
            match store.list(&kind, None).await {
                Ok(items) => break items,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
            }
        };
        for item in items {
            store
                .delete(&item.key(), None)
                .await
                .expect("clean up an earlier run");
        }
    }
    Arc::new(store)
}

macro_rules! on_cluster {
    ($($name:ident),*) => {
        $(
            #[test]
            #[ignore = "needs a cluster"]
            fn $name() {
                suite::block_on(suite::$name(&cluster));
            }
        )*
    };
}

on_cluster!(
    map_create_get,
    map_duplicate_create,
    map_invalid_not_stored,
    map_update_versions,
    map_delete,
    map_list,
    map_delete_all,
    map_same_name_two_groups,
    watch_resumes_after_revision,
    cache_initial_list,
    cache_events_in_order,
    cache_freshness,
    cache_sync_backend_writes,
    cache_reads_its_own_writes
);

#[test]
#[ignore = "needs a cluster"]
fn model_based() {
    suite::model_based(&cluster);
}

/// A Service without a selector whose EndpointSlice the test writes, and a
/// Pod the slice points to (it need not run): the registry shows the Pod's
/// labels and account on the slice's addresses, and follows changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster"]
async fn registry_on_a_cluster() {
    let client = kube::Client::try_default()
        .await
        .expect("a cluster from KUBECONFIG");
    let ns = format!("pilot-k8s-test-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap();

    let registry = KubeServiceDiscovery::start(
        client.clone(),
        DiscoveryOptions {
            namespace: Some(ns.clone()),
            nodes: false,
            ..DiscoveryOptions::default()
        },
    );
    registry.wait_synced().await;
    let mut events = registry.subscribe();

    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "reviews-v2", "labels": {"app": "reviews", "version": "v2"}},
        "spec": {"serviceAccountName": "default", "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]},
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "reviews"},
        "spec": {"ports": [{"name": "http-web", "port": 9080}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &service).await.unwrap();
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), &ns);
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "reviews-manual", "labels": {
            "kubernetes.io/service-name": "reviews", "endpointslice.kubernetes.io/managed-by": "pilot-test"}},
        "addressType": "IPv4",
        "ports": [{"name": "http-web", "port": 8080}],
        "endpoints": [{"addresses": ["10.244.99.2"], "zone": "zone-x",
            "targetRef": {"kind": "Pod", "namespace": ns, "name": "reviews-v2"}}],
    }))
    .unwrap();
    slices.create(&PostParams::default(), &slice).await.unwrap();

    let host = format!("reviews.{ns}.svc.cluster.local");
    loop {
        let event = tokio::time::timeout(EVENT_TIMEOUT, events.next())
            .await
            .expect("an event in time");
        if let Some(ServiceEvent::Instance(Event::Added(_))) = event {
            break;
        }
    }
    let v2 = registry.instances(&host, &["http-web"], &[Labels::from_pairs([("version", "v2")])]);
    assert_eq!(v2.len(), 1, "{v2:?}");
    assert_eq!(v2[0].endpoint.port, 8080);
    assert_eq!(v2[0].endpoint.service_port.protocol, Protocol::Http);
    assert_eq!(v2[0].service_account.as_deref(), Some("default"));
    assert_eq!(v2[0].availability_zone.as_deref(), Some("zone-x"));

    services
        .delete("reviews", &DeleteParams::default())
        .await
        .unwrap();
    loop {
        let event = tokio::time::timeout(EVENT_TIMEOUT, events.next())
            .await
            .expect("an event in time");
        if let Some(ServiceEvent::Service(Event::Deleted(s))) = event {
            assert_eq!(s.hostname, host);
            break;
        }
    }
    assert!(registry.instances(&host, &[], &[]).is_empty());
    namespaces.delete(&ns, &DeleteParams::default()).await.unwrap();
}

/// The Istio CRDs (with their derived structural schemas) are accepted by
/// a real API server, and a RouteRule written through the store reads back
/// unchanged (nothing pruned by the schema).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster"]
async fn istio_crds_on_a_cluster() {
    let client = kube::Client::try_default()
        .await
        .expect("a cluster from KUBECONFIG");
    let registry = pilot_api::istio::registry();
    install_crds(client.clone(), &registry)
        .await
        .expect("the API server accepts the CRDs");
    let store = KubeConfigStore::new(client, registry);
    let rule: pilot_api::istio::RouteRule = serde_json::from_value(json!({
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
    let _ = store.delete(&config.key(), None).await;
    let key = config.key();
    let spec = config.spec.clone();
    let stored = loop {
        // A CRD just applied may take a moment to be served.
        match store.create(config.clone()).await {
            Ok(stored) => break stored,
            Err(pilot_model::StoreError::Unavailable { .. }) => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await
            }
            Err(other) => panic!("{other}"),
        }
    };
    let read = store.get(&key).await.unwrap().expect("the rule is stored");
    assert_eq!(read.spec, spec, "the API server kept every field");
    assert_eq!(read.meta.resource_version, stored.meta.resource_version);
    store.delete(&key, None).await.unwrap();
}
