//! Make before break with a real Envoy 1.40, state of the world and delta:
//! keep-alive clients send requests through Envoy without pause while
//! route rules are created, changed and deleted (subset clusters appear
//! and disappear), endpoints come and go, a DestinationPolicy changes the
//! cluster and another service is deleted. Not one request fails, and
//! Envoy never routes to a cluster it does not have (`no_cluster` 0):
//! a cluster's removal reaches Envoy only after the routes that named it
//! are gone.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore, DynConfig, Port, Protocol, Service, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use support::envoy::{HOST, admin, eventually, free_port, instance, serve_envoy, upstream};
use support::traffic::{Tally, http_client};

/// Keep-alive clients sending requests at the same time.
const CLIENTS: usize = 4;
const RATINGS: &str = "ratings.default.svc.cluster.local";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_churn_fails_no_request() {
    churn(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_churn_fails_no_request() {
    churn(true).await;
}

fn parse(kind: &str, text: &str) -> DynConfig {
    let header = format!("apiVersion: config.istio.io/v1alpha2\nkind: {kind}\n");
    document::parse("churn.yaml", &format!("{header}{text}"), &istio::registry())
        .unwrap()
        .remove(0)
}

fn split(v1: (&str, u32), v2: (&str, u32)) -> DynConfig {
    parse(
        "RouteRule",
        &format!(
            "metadata: {{name: reviews-split, namespace: default}}\nspec:\n  destination: {{name: reviews}}\n  route: [{{labels: {{version: {}}}, weight: {}}}, {{labels: {{version: {}}}, weight: {}}}]\n",
            v1.0, v1.1, v2.0, v2.1
        ),
    )
}

fn policy(name: &str, labels: &str, balancing: &str) -> DynConfig {
    parse(
        "DestinationPolicy",
        &format!(
            "metadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{name: reviews{labels}}}\n  loadBalancing: {{name: {balancing}}}\n"
        ),
    )
}

/// Writes `config` over whatever version of it the store holds (creates
/// it when absent).
async fn put(store: &MemoryConfigStore, mut config: DynConfig) {
    let key = ConfigKey::new(&config.meta.kind, &config.meta.namespace, &config.meta.name);
    match store.get(&key).await.unwrap() {
        Some(current) => {
            config.meta.resource_version = current.meta.resource_version.clone();
            store.update(config).await.unwrap();
        }
        None => {
            store.create(config).await.unwrap();
        }
    }
}

async fn delete(store: &MemoryConfigStore, kind: &str, name: &str) {
    store
        .delete(&ConfigKey::new(kind, "default", name), None)
        .await
        .unwrap();
}

async fn churn(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let service_port = free_port();
    let reviews = registry.add_service(Service::new(
        HOST,
        vec![Port::new("http", service_port, Protocol::Http)],
    ));
    let no_delay = Arc::new(AtomicU64::new(0));
    for version in ["v1", "v2", "v3"] {
        let port = upstream(version, Arc::clone(&no_delay));
        registry.add_instance(instance(&reviews, port, version)).unwrap();
    }
    let ratings = registry.add_service(Service::new(
        RATINGS,
        vec![Port::new("http", free_port(), Protocol::Http)],
    ));
    registry
        .add_instance(instance(
            &ratings,
            upstream("ratings", Arc::clone(&no_delay)),
            "v1",
        ))
        .unwrap();
    store.create(split(("v1", 80), ("v2", 20))).await.unwrap();

    let (server, envoy) = serve_envoy(controller, Arc::new(registry.clone()), delta);
    let admin_port = envoy.admin_port;
    tokio::task::spawn_blocking(move || {
        eventually("reviews answers through Envoy", || {
            support::envoy::request(service_port, &[]).0 == 200
        })
    })
    .await
    .unwrap();

    // The proxy has applied every push up to the current one.
    let settled = || {
        let server = &server;
        async move {
            let version = server.version().unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            while !server
                .status()
                .iter()
                .any(|p| p.incremental == delta && p.acked_push() >= Some(version))
            {
                assert!(Instant::now() < deadline, "{:?}", server.status());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    settled().await;

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            std::thread::spawn(move || http_client(service_port, stop, tally))
        })
        .collect();
    // Traffic flows before the churn starts.
    while tally.ok.load(Ordering::Relaxed) < 100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Failures per step, for the report.
    let mut seen = 0;
    let mut step = |what: &str| {
        let failed = tally.failed.load(Ordering::Relaxed);
        if failed > seen {
            eprintln!("{what}: {} failed", failed - seen);
        }
        seen = failed;
    };
    // The split deleted and applied again, each step applied by Envoy.
    for _ in 0..3 {
        delete(&store, "RouteRule", "reviews-split").await;
        settled().await;
        step("split deleted");
        put(&store, split(("v1", 80), ("v2", 20))).await;
        settled().await;
        step("split applied");
    }
    // Subsets appear and disappear: v1 goes, v3 comes, and back.
    put(&store, split(("v2", 50), ("v3", 50))).await;
    settled().await;
    step("v2/v3");
    put(&store, split(("v1", 80), ("v2", 20))).await;
    settled().await;
    step("v1/v2");
    // Endpoints come and go (every one of them serving).
    let extra = upstream("v1", Arc::clone(&no_delay));
    registry.add_instance(instance(&reviews, extra, "v1")).unwrap();
    settled().await;
    step("endpoint added");
    registry.remove_instances(HOST, "127.0.0.1".parse().unwrap(), Some(extra));
    settled().await;
    step("endpoint removed");
    // A DestinationPolicy changes the cluster, then a subset's.
    put(&store, policy("reviews-lb", "", "RANDOM")).await;
    settled().await;
    step("policy RANDOM");
    put(&store, policy("reviews-lb", "", "LEAST_CONN")).await;
    settled().await;
    step("policy LEAST_CONN");
    put(
        &store,
        policy("reviews-v1-lb", ", labels: {version: v1}", "RANDOM"),
    )
    .await;
    settled().await;
    step("subset policy");
    delete(&store, "DestinationPolicy", "reviews-v1-lb").await;
    delete(&store, "DestinationPolicy", "reviews-lb").await;
    settled().await;
    step("policies deleted");
    // Another service deleted (its listener and clusters go).
    registry.remove_service(RATINGS);
    settled().await;
    step("ratings deleted");
    // Changes one after another, without waiting for Envoy between them.
    for _ in 0..3 {
        delete(&store, "RouteRule", "reviews-split").await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        step("burst delete");
        put(&store, split(("v1", 80), ("v2", 20))).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        step("burst v1/v2");
        put(&store, split(("v2", 50), ("v3", 50))).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        step("burst v2/v3");
    }
    settled().await;
    step("burst");
    // The requests under way when the last change arrived are answered.
    let before = tally.ok.load(Ordering::Relaxed);
    while tally.ok.load(Ordering::Relaxed) < before + 100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.join().unwrap();
    }
    let no_cluster: u64 = admin(admin_port, "/stats?filter=no_cluster")
        .lines()
        .filter_map(|line| line.rsplit_once(": ")?.1.trim().parse::<u64>().ok())
        .sum();
    let (ok, failed) = (
        tally.ok.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    let samples = tally.samples.lock().unwrap().clone();
    eprintln!(
        "{} churn: {ok} requests answered 200, {failed} failed {samples:?}, Envoy no_cluster {no_cluster}",
        if delta { "delta" } else { "state of the world" }
    );
    assert_eq!(
        (failed, no_cluster),
        (0, 0),
        "failed requests (of {}): {samples:?}",
        ok + failed
    );
    drop(envoy);
}
