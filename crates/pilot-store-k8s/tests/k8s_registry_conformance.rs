//! The Kubernetes service registry passes the registry conformance suite
//! against the fake API server: the suite's services become Services,
//! EndpointSlices and Pods; a gap is every watch closed and refused, then
//! the history expired, so the registry relists (410 Gone) when watches are
//! served again.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Resource;
use kube::api::{Api, DeleteParams, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::ServiceDiscovery;
use pilot_store::testing::{RegistrySource, SourceService};
use pilot_store_k8s::{DiscoveryOptions, KubeServiceDiscovery};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Objects by name, per resource.
#[derive(Default, Clone, PartialEq)]
struct Objects {
    pods: BTreeMap<String, Value>,
    services: BTreeMap<String, Value>,
    slices: BTreeMap<String, Value>,
}

fn objects(services: &[SourceService]) -> Objects {
    let mut objects = Objects::default();
    for source in services {
        let (name, _) = source.name_and_namespace();
        let ports: Vec<Value> = source
            .ports
            .iter()
            .map(|p| json!({"name": p.name, "port": p.port}))
            .collect();
        objects.services.insert(
            name.to_string(),
            json!({"metadata": {"name": name}, "spec": {"ports": ports}}),
        );
        let mut endpoints = Vec::new();
        for instance in &source.instances {
            let pod = format!("{name}-{}", instance.address.to_string().replace('.', "-"));
            objects.pods.insert(
                pod.clone(),
                json!({
                    "metadata": {"name": pod, "labels": instance.labels},
                    "spec": {"containers": []},
                    "status": {"podIP": instance.address},
                }),
            );
            endpoints.push(json!({
                "addresses": [instance.address], "conditions": {"ready": true},
                "targetRef": {"kind": "Pod", "namespace": "default", "name": pod},
            }));
        }
        objects.slices.insert(
            name.to_string(),
            json!({
                "metadata": {"name": name, "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": ports,
                "endpoints": endpoints,
            }),
        );
    }
    objects
}

struct KubeSource {
    fake: FakeApiServer,
    written: Objects,
    registry: Option<KubeServiceDiscovery>,
}

/// Creates or replaces the objects of `wanted` that differ from `written`.
async fn put<K>(api: &Api<K>, written: &BTreeMap<String, Value>, wanted: &BTreeMap<String, Value>)
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    for (name, value) in wanted {
        if written.get(name) == Some(value) {
            continue;
        }
        let mut object: K = serde_json::from_value(value.clone()).unwrap();
        match api.get_opt(name).await.unwrap() {
            None => {
                api.create(&PostParams::default(), &object).await.unwrap();
            }
            Some(existing) => {
                object.meta_mut().resource_version = existing.meta().resource_version.clone();
                api.replace(name, &PostParams::default(), &object).await.unwrap();
            }
        }
    }
}

/// Deletes the objects of `written` that `wanted` lacks.
async fn delete<K>(api: &Api<K>, written: &BTreeMap<String, Value>, wanted: &BTreeMap<String, Value>)
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    for name in written.keys().filter(|n| !wanted.contains_key(*n)) {
        api.delete(name, &DeleteParams::default()).await.unwrap();
    }
}

#[async_trait::async_trait]
impl RegistrySource for KubeSource {
    async fn write(&mut self, services: &[SourceService]) {
        let wanted = objects(services);
        let client = self.fake.client();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let kube_services: Api<Service> = Api::namespaced(client.clone(), "default");
        let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
        // As a cluster does it: Pods before the Services and slices that
        // point to them, slices gone before their Pods.
        put(&pods, &self.written.pods, &wanted.pods).await;
        put(&kube_services, &self.written.services, &wanted.services).await;
        put(&slices, &self.written.slices, &wanted.slices).await;
        delete(&slices, &self.written.slices, &wanted.slices).await;
        delete(&kube_services, &self.written.services, &wanted.services).await;
        delete(&pods, &self.written.pods, &wanted.pods).await;
        self.written = wanted;
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        let fake = &self.fake;
        let registry = self
            .registry
            .get_or_insert_with(|| KubeServiceDiscovery::start(fake.client(), DiscoveryOptions::default()));
        Arc::new(registry.clone())
    }

    async fn disconnect(&mut self) -> bool {
        self.fake.refuse_watches(true);
        self.fake.close_watches();
        true
    }

    async fn reconnect(&mut self) {
        // What was written in the gap is no longer in the history: the
        // registry's watchers get 410 Gone and list again.
        self.fake.expire_history();
        self.fake.refuse_watches(false);
    }
}

pilot_store::registry_conformance_suite!(|| async {
    Box::new(KubeSource {
        fake: FakeApiServer::new(),
        written: Objects::default(),
        registry: None,
    }) as Box<dyn RegistrySource>
});
