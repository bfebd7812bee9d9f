//! The maximum connection age with a real Envoy: the server ends the ADS
//! stream when it is old enough (after an HTTP/2 GOAWAY on its
//! connection), Envoy reconnects over a new connection, syncs again and
//! keeps serving traffic and following changes throughout.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use pilot_ads::{ServeOptions, XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{ConfigStore, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use support::envoy::{
    HOST, admin, eventually, instance, request, route_reviews_to, rule, spread, start_envoy, upstream,
};

/// The counter `name` of Envoy's `/stats`, 0 until it exists.
fn stat(admin_port: u16, name: &str) -> u64 {
    admin(admin_port, "/stats")
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}: "))?.trim().parse().ok())
        .unwrap_or(0)
}

async fn reconnects_and_stays_synced(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    store
        .create(rule("metadata: {name: reviews-default, namespace: default}\nspec:\n  destination: {name: reviews}\n  route: [{labels: {version: v1}}]\n"))
        .await
        .unwrap();
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let service_port = support::envoy::free_port();
    let service = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    for version in ["v1", "v2"] {
        let port = upstream(version, Arc::new(AtomicU64::new(0)));
        registry.add_instance(instance(&service, port, version)).unwrap();
    }
    let server = XdsServer::new(controller, Arc::new(registry), XdsOptions::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let xds_port = listener.local_addr().unwrap().port();
    let serving = server.clone();
    let options = {
        let mut value = ServeOptions::default();
        value.max_connection_age = Some(Duration::from_secs(2));
        value
    };
    tokio::spawn(async move {
        serving
            .serve_with(listener, options, std::future::pending())
            .await
            .unwrap()
    });
    let envoy = start_envoy(xds_port, delta);
    let admin_port = envoy.admin_port;
    tokio::task::spawn_blocking(move || {
        eventually("v1 serves", || spread(service_port, 10, &[]).keys().eq(["v1"]))
    })
    .await
    .unwrap();

    // Traffic through several reconnections: every request succeeds.
    let sampling = Arc::new(AtomicBool::new(true));
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while server.stream_ends().max_age < 3 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "streams not ended by age: {:?}",
            server.stream_ends()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sampling.store(false, Ordering::Relaxed);
    let samples = sampler.await.unwrap();
    let failed: Vec<_> = samples
        .iter()
        .filter(|(status, body)| *status != 200 || body != "v1")
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed across reconnections: {failed:?}"
    );
    let ends = server.stream_ends();
    assert_eq!(ends.transport_error + ends.response_dropped, 0, "{ends:?}");
    // Envoy is connected and synced again, and follows a change.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !server.status().iter().any(|p| {
        p.incremental == delta
            && pilot_ads::types_of(&p.node_id)
                .iter()
                .all(|t| p.types.get(t).is_some_and(|s| s.synced()))
    }) {
        assert!(tokio::time::Instant::now() < deadline, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each reconnection opened a new connection (at least four streams so
    // far: three ended, one synced) (the old one was told to
    // go away): the ADS cluster counts at least one per stream.
    let connections =
        tokio::task::spawn_blocking(move || stat(admin_port, "cluster.xds-grpc.upstream_cx_total"))
            .await
            .unwrap();
    assert!(connections > 3, "ADS connections: {connections}");

    route_reviews_to(&store, "v2", service_port).await;
    drop(envoy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_envoy_reconnects_at_the_maximum_age() {
    reconnects_and_stays_synced(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_envoy_reconnects_at_the_maximum_age() {
    reconnects_and_stays_synced(true).await;
}
