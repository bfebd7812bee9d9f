//! A restart of the discovery server: Envoy keeps serving through the
//! outage, reconnects, and is sent nothing before the new server's cache has
//! synced, so it never sees empty endpoints.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use pilot_ads::{XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{ConfigStore, ConfigWatch, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::FlakyStore;
use support::envoy::{
    HOST, eventually, free_port, instance, request, route_reviews_to, rule, spread, start_envoy, upstream,
};

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// Starts a server over `backend` on `port`; returns it and its stop switch.
fn start_server(
    backend: Arc<dyn ConfigWatch>,
    registry: &MemoryServiceRegistry,
    port: u16,
) -> (XdsServer, tokio::sync::oneshot::Sender<()>) {
    let controller = Arc::new(Controller::new(backend));
    controller.run();
    let server = XdsServer::new(controller, Arc::new(registry.clone()), XdsOptions::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], port).into(), async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (server, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_serves_through_a_restart_and_gets_nothing_before_sync() {
    let store = MemoryConfigStore::new(istio::registry());
    store
        .create(rule("metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}}]\n"))
        .await
        .unwrap();
    let registry = MemoryServiceRegistry::new();
    let service_port = free_port();
    let service = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    for version in ["v1", "v2"] {
        let port = upstream(version, Arc::new(AtomicU64::new(0)));
        registry.add_instance(instance(&service, port, version)).unwrap();
    }
    let xds_port = free_port();
    let (first, stop_first) = start_server(Arc::new(store.clone()), &registry, xds_port);
    let envoy = start_envoy(xds_port, false);
    tokio::task::spawn_blocking(move || {
        eventually("v1 serves", || spread(service_port, 10, &[]).keys().eq(["v1"]))
    })
    .await
    .unwrap();

    // Sample traffic through the whole restart (stopped by the guard even
    // if an assertion fails first).
    let sampling = Arc::new(AtomicBool::new(true));
    let _stop_sampling = StopOnDrop(Arc::clone(&sampling));
    let sampler = {
        let sampling = Arc::clone(&sampling);
        tokio::task::spawn_blocking(move || {
            let mut samples = Vec::new();
            while sampling.load(Ordering::Relaxed) {
                samples.push(request(service_port, &[]));
                std::thread::sleep(Duration::from_millis(50));
            }
            samples
        })
    };

    // The server goes away; Envoy keeps its configuration.
    let _ = stop_first.send(());
    drop(first);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A new server on the same port, whose cache takes 3 s to sync.
    let slow = Arc::new(FlakyStore::new(store.clone()).slow_to_sync(Duration::from_secs(3)));
    let (second, _stop_second) = start_server(slow, &registry, xds_port);
    assert!(
        second.version().is_none(),
        "nothing published before the cache syncs"
    );
    second.wait_version(1).await;
    // Envoy reconnects and ACKs the new server's configuration.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !second.status().iter().any(|p| {
        pilot_ads::types_of(&p.node_id)
            .iter()
            .all(|t| p.types.get(t).is_some_and(|s| s.synced()))
    }) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "envoy never synced with the new server"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler.await.unwrap();
    assert!(
        samples.len() > 40,
        "sampled through the restart: {}",
        samples.len()
    );
    let failed: Vec<_> = samples
        .iter()
        .filter(|(status, body)| *status != 200 || body != "v1")
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed during the restart: {failed:?}"
    );

    // And the new server is in control.
    route_reviews_to(&store, "v2", service_port).await;
    drop(envoy);
}
