//! An endpoint change with a real Envoy 1.40, state of the world and
//! delta: an endpoint added to one service reaches Envoy (traffic reaches
//! it) while Envoy keeps every other cluster's endpoints (traffic to the
//! other service still works), and Envoy's EDS subscription of the other
//! cluster sees no update at all: the response carried only the changed
//! load assignment.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_model::{Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use support::envoy::{admin, eventually, free_port, instance, serve_envoy, upstream};

const REVIEWS: &str = "reviews.default.svc.cluster.local";
const RATINGS: &str = "ratings.default.svc.cluster.local";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_endpoint_added_reaches_envoy_alone() {
    endpoint_added(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_endpoint_added_reaches_envoy_alone() {
    endpoint_added(true).await;
}

/// One request to Envoy's listener on `port` for `host`: the body of a
/// 200 answer, or `status N`.
fn get(port: u16, host: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return "no connection".into();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(
        stream,
        "GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n"
    );
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    let status = response.split(' ').nth(1).unwrap_or("0").to_string();
    match response.split_once("\r\n\r\n") {
        Some((_, body)) if status == "200" => body.to_string(),
        _ => format!("status {status}"),
    }
}

/// Envoy's counter `name` (0 before it exists).
fn counter(admin_port: u16, name: &str) -> u64 {
    let stats = admin(
        admin_port,
        &format!("/stats?filter=^{}$", name.replace('|', "\\|")),
    );
    stats
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn endpoint_added(delta: bool) {
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let reviews_port = free_port();
    let ratings_port = free_port();
    let reviews = registry.add_service(Service::new(
        REVIEWS,
        vec![Port::new("http", reviews_port, Protocol::Http)],
    ));
    let ratings = registry.add_service(Service::new(
        RATINGS,
        vec![Port::new("http", ratings_port, Protocol::Http)],
    ));
    let no_delay = Arc::new(AtomicU64::new(0));
    registry
        .add_instance(instance(
            &reviews,
            upstream("reviews-1", Arc::clone(&no_delay)),
            "v1",
        ))
        .unwrap();
    registry
        .add_instance(instance(
            &ratings,
            upstream("ratings-1", Arc::clone(&no_delay)),
            "v1",
        ))
        .unwrap();
    let (server, envoy) = serve_envoy(controller, Arc::new(registry.clone()), delta);
    let admin_port = envoy.admin_port;
    let reviews_cluster = format!("outbound|{reviews_port}||{REVIEWS}");
    let ratings_cluster = format!("outbound|{ratings_port}||{RATINGS}");

    tokio::task::spawn_blocking(move || {
        eventually("both services answer through Envoy", || {
            get(reviews_port, "reviews") == "reviews-1" && get(ratings_port, "ratings") == "ratings-1"
        });
    })
    .await
    .unwrap();
    // Synced on every type, so no response is still in flight.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !server.status().iter().any(|p| {
        pilot_ads::types_of(&p.node_id)
            .iter()
            .all(|t| p.types.get(t).is_some_and(|s| s.synced()))
    }) {
        assert!(Instant::now() < deadline, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let updates = |cluster: &str| counter(admin_port, &format!("cluster.{cluster}.update_success"));
    let reviews_updates = updates(&reviews_cluster);
    let ratings_updates = updates(&ratings_cluster);
    assert!(reviews_updates > 0 && ratings_updates > 0, "EDS stats exist");

    // One endpoint added to ratings.
    let version = server.version().unwrap();
    registry
        .add_instance(instance(&ratings, upstream("ratings-2", no_delay), "v2"))
        .unwrap();
    server.wait_version(version + 1).await;
    tokio::task::spawn_blocking(move || {
        eventually("the new ratings endpoint gets traffic", || {
            (0..20).any(|_| get(ratings_port, "ratings") == "ratings-2")
        });
        // The other cluster kept its endpoint: traffic to reviews works,
        // and Envoy still lists it.
        for _ in 0..10 {
            assert_eq!(get(reviews_port, "reviews"), "reviews-1");
        }
    })
    .await
    .unwrap();
    let clusters = admin(admin_port, "/clusters");
    let reviews_hosts: Vec<&str> = clusters
        .lines()
        .filter(|l| l.starts_with(&format!("{reviews_cluster}::127.0.0.1:")) && l.contains("::cx_total::"))
        .collect();
    assert_eq!(reviews_hosts.len(), 1, "reviews keeps its endpoint: {clusters}");
    let ratings_hosts = clusters
        .lines()
        .filter(|l| l.starts_with(&format!("{ratings_cluster}::127.0.0.1:")) && l.contains("::cx_total::"))
        .count();
    assert_eq!(ratings_hosts, 2, "{clusters}");
    // Envoy applied one update to ratings and none to reviews: the EDS
    // response held ratings' assignment only.
    assert_eq!(updates(&ratings_cluster), ratings_updates + 1);
    assert_eq!(
        updates(&reviews_cluster),
        reviews_updates,
        "reviews' assignment was sent again"
    );
    drop(envoy);
}
