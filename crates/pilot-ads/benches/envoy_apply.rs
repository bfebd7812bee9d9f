//! Write-to-applied latency with one real Envoy: from a RouteRule write to
//! Envoy's `version_text` for the route configuration showing the version
//! the server pushed for it. Median (and spread) over 20 changes; the same
//! run measures the server side alone (write to the push being published)
//! as the baseline.
//!
//!     cargo bench -p pilot-ads --bench envoy_apply

use std::sync::Arc;
use std::time::{Duration, Instant};

use pilot_ads::{XdsOptions, XdsServer};
use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore, Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;

// The version-split rule, shared with pilot-xds's generation bench.
#[path = "../../pilot-xds/benches/common/mod.rs"]
mod common;

const CHANGES: usize = 20;

fn rule(v1: i32) -> pilot_model::DynConfig {
    common::split_rule("reviews", "reviews-split", v1)
        .to_dyn()
        .expect("serializes")
}

/// The version Envoy applied for route configuration `name`.
fn applied(envoy: &Envoy, name: &str) -> Option<u64> {
    let stats = envoy.admin(&format!("/stats?filter=rds.{name}.version_text"));
    stats
        .lines()
        .find_map(|line| line.split(": ").nth(1))
        .and_then(|v| v.trim_matches('"').parse().ok())
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    if std::env::args().any(|a| a == "--test") {
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = MemoryConfigStore::new(istio::registry());
        store.create(rule(50)).await.expect("create");
        let controller = Arc::new(Controller::new(Arc::new(store.clone())));
        controller.run();
        let registry = MemoryServiceRegistry::new();
        let port = pilot_test_support::free_port();
        registry.add_service(Service::new(
            "reviews.default.svc.cluster.local",
            vec![Port::new("http", port, Protocol::Http)],
        ));
        let server = XdsServer::new(controller, Arc::new(registry), XdsOptions::default());
        let xds_port = pilot_test_support::free_port();
        let serving = server.clone();
        tokio::spawn(async move {
            serving
                .serve(([127, 0, 0, 1], xds_port).into(), std::future::pending())
                .await
        });
        let envoy = Envoy::ads(
            "sidecar~10.99.0.2~bench.default~default.svc.cluster.local",
            &[("INTERCEPTION_MODE", "NONE")],
            xds_port,
            false,
        )
        .expect("envoy starts");
        let route = port.to_string();
        let deadline = Instant::now() + Duration::from_secs(30);
        while applied(&envoy, &route).is_none() {
            assert!(
                Instant::now() < deadline,
                "envoy never applied the first configuration"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (mut published, mut applied_times) = (Vec::new(), Vec::new());
        for change in 0..CHANGES {
            let current = store
                .get(&ConfigKey::new("RouteRule", "default", "reviews-split"))
                .await
                .unwrap()
                .unwrap();
            let mut next = rule(if change % 2 == 0 { 80 } else { 20 });
            next.meta.resource_version = current.meta.resource_version.clone();
            let target = server.version().unwrap() + 1;
            let start = Instant::now();
            store.update(next).await.unwrap();
            server.wait_version(target).await;
            published.push(start.elapsed());
            while applied(&envoy, &route).is_none_or(|v| v < target) {
                assert!(
                    start.elapsed() < Duration::from_secs(30),
                    "envoy never applied version {target}"
                );
                tokio::time::sleep(Duration::from_micros(500)).await;
            }
            applied_times.push(start.elapsed());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        published.sort();
        applied_times.sort();
        println!("write-to-applied, one real Envoy, {CHANGES} changes");
        println!("| what | min | median | max |");
        println!("| --- | --- | --- | --- |");
        for (name, times) in [
            ("write to push published (server alone)", &published),
            ("write to Envoy's version_text", &applied_times),
        ] {
            println!(
                "| {name} | {:.1} ms | {:.1} ms | {:.1} ms |",
                millis(times[0]),
                millis(times[times.len() / 2]),
                millis(times[times.len() - 1])
            );
        }
    });
}
