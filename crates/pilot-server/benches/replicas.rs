//! Write through one replica, proxies of another: the time
//! from a RouteRule write through replica A's store to every ADS client
//! connected to replica B having ACKed the new route configuration, beside
//! the single-replica figure (clients on A, writes through A), same run.
//!
//!     cargo bench -p pilot-server --bench replicas -- [--writes W] [CLIENTS]
//!
//! (default: 500 clients, 5 rule writes per case.) With `--spread N
//! [--services S] [--namespaces K] [--writes W]`, the other scenario: N
//! proxies spread over three real replicas, one killed under load
//! (`replicas/spread.rs`).
//!
//! The default scenario: A real etcd
//! (`pilot_test_support::EtcdServer`), two replicas in this process: each
//! its own `EtcdConfigStore` (own client and watch), its own `Controller`
//! and `XdsServer` on its own port; one memory service registry shared by
//! both. The mesh is the `status` bench's (1,000 services, 4 instances, a
//! 50/50 RouteRule each). The clients are the `ads` bench's
//! (`pilot_test_support::ads::proxies`, state of the world) in a child
//! process, connected first to B, then (afresh) to A.

use std::sync::Arc;
use std::time::Duration;

use pilot_ads::XdsOptions;
use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore};
use pilot_store::Controller;
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::EtcdServer;
use pilot_test_support::ads::proxies::{self, Proxies};
use pilot_test_support::measure::{now_micros, percentile};
use serving::Serving;

#[path = "../../pilot-xds/benches/common/mod.rs"]
mod common;
#[path = "../../pilot-ads/benches/common/mesh.rs"]
mod mesh;
#[path = "../../pilot-ads/benches/common/serving.rs"]
mod serving;
#[path = "replicas/spread.rs"]
mod spread;

const SERVICES: usize = 1_000;

/// One replica: its own etcd store, Controller and ADS server.
struct Replica {
    store: EtcdConfigStore,
    ads: Serving,
}

async fn replica(endpoint: &str, registry: &Arc<MemoryServiceRegistry>) -> Replica {
    let options = EtcdOptions::new([endpoint.to_string()]);
    let store = EtcdConfigStore::connect(&options, istio::registry())
        .await
        .expect("connects to etcd");
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let ads = Serving::start(
        controller,
        Arc::clone(registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        XdsOptions::default(),
    )
    .await;
    Replica { store, ads }
}

/// Per write: (p50, p99, max) of write → all ACKed.
type Writes = Vec<(Duration, Duration, Duration)>;

/// Connects `clients` to `serving`, then writes `writes` times through
/// `writer`'s store, each time waiting for every client to ACK.
async fn measure(clients: usize, writer: &Replica, serving: &Replica, writes: usize, first: usize) -> Writes {
    let start = now_micros();
    let version = serving.ads.server.version().unwrap_or(1);
    let mut child = Proxies::start(clients, serving.ads.port, 1, false);
    tokio::task::block_in_place(|| child.wait_acked(version, start));
    let mut measured = Vec::new();
    for round in 0..writes {
        let key = ConfigKey::new("RouteRule", "default", "svc-1-split");
        let current = writer.store.get(&key).await.unwrap().unwrap();
        let mut next = mesh::service_split(1, [80, 20][(first + round) % 2]);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = serving.ads.server.version().unwrap() + 1;
        let start = now_micros();
        writer.store.update(next).await.unwrap();
        let times = tokio::task::block_in_place(|| child.wait_acked(version, start));
        measured.push((
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            *times.last().unwrap(),
        ));
    }
    child.stop();
    measured
}

async fn run(clients: usize, writes: usize) -> [Writes; 2] {
    let etcd = EtcdServer::start().expect("etcd starts (the etcd package is installed)");
    let registry = Arc::new(MemoryServiceRegistry::new());
    let seed = EtcdConfigStore::connect(&EtcdOptions::new([etcd.endpoint()]), istio::registry())
        .await
        .expect("connects to etcd");
    mesh::populate(SERVICES, &registry, &seed).await;
    let a = replica(&etcd.endpoint(), &registry).await;
    let b = replica(&etcd.endpoint(), &registry).await;
    let across = measure(clients, &a, &b, writes, 0).await;
    let single = measure(clients, &a, &a, writes, writes).await;
    for r in [a, b] {
        r.ads.stop().await;
    }
    drop(etcd);
    [across, single]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if proxies::child_main(&args) {
        return;
    }
    if args.iter().any(|a| a == "--test") {
        return;
    }
    let flag = |name: &str| -> Option<usize> {
        args.iter()
            .position(|a| a == name)
            .and_then(|at| args.get(at + 1)?.parse().ok())
    };
    if let Some(clients) = flag("--spread") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(spread::run(spread::Spread {
            clients,
            services: flag("--services").unwrap_or(1_000),
            namespaces: flag("--namespaces").unwrap_or(100),
            writes: flag("--writes").unwrap_or(3),
        }));
        return;
    }
    let writes = args
        .iter()
        .position(|a| a == "--writes")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(5);
    let clients = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| args[i - 1] != "--writes")
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(500);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let cases = runtime.block_on(run(clients, writes));
    println!(
        "| clients | case | write → all ACKed p50 (median of writes) | p99 (median) | p99 (each write) | max |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e3);
    for (case, m) in [
        "write via A, clients on B",
        "write via A, clients on A (single replica)",
    ]
    .iter()
    .zip(&cases)
    {
        let mut p50: Vec<Duration> = m.iter().map(|w| w.0).collect();
        let mut p99: Vec<Duration> = m.iter().map(|w| w.1).collect();
        let each: Vec<String> = p99.iter().map(|d| ms(*d)).collect();
        p50.sort();
        p99.sort();
        let max = m.iter().map(|w| w.2).max().unwrap_or_default();
        println!(
            "| {clients} | {case} | {} ms | {} ms | {} | {} ms |",
            ms(p50[p50.len() / 2]),
            ms(p99[p99.len() / 2]),
            each.join(" / "),
            ms(max),
        );
    }
}
