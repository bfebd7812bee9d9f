//! Status reporting on vs off: the time from a RouteRule write
//! to every connected ADS client having ACKed the new route
//! configuration, with the status writer (`StatusWriter::run`, the task
//! pilot-discovery runs at `--status-interval`) running and not, and the
//! store writes it made per push.
//!
//!     cargo bench -p pilot-distribution --bench status -- [--interval MS] [--writes W] [--rounds R] [CLIENTS]
//!
//! (default: 2,000 clients, 1 s interval, 5 rule writes per mode, 2
//! rounds of off/on alternated in one process.) The mesh is the `ads`
//! bench's (1,000 services, 4 instances, a 50/50 RouteRule each) on the
//! memory store, which keeps status; the ADS server, the Controller and
//! the writer run in this process, the clients (the `ads` bench's,
//! `pilot_test_support::ads::proxies`, state of the world) in a child
//! process. Each mode connects the clients afresh; with the writer
//! on, the first rounds write every object's status (1,000+ writes), so
//! the writes are timed after it settled (no write for two intervals).
//! After each rule write the bench waits for every ACK, then for the
//! writer to settle again (same wait with the writer off), and counts the
//! status writes since the rule write: the store writes that push cost
//! (one object changed).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use pilot_ads::XdsOptions;
use pilot_api::istio;
use pilot_distribution::{StatusWriter, WriterCounts};
use pilot_model::{ConfigKey, ConfigStore};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::proxies::{self, Proxies};
use pilot_test_support::measure::{cpu_time, now_micros, percentile, rss_mb};
use serving::Serving;

#[path = "../../pilot-xds/benches/common/mod.rs"]
mod common;
#[path = "../../pilot-ads/benches/common/mesh.rs"]
mod mesh;
#[path = "../../pilot-ads/benches/common/serving.rs"]
mod serving;

const SERVICES: usize = 1_000;

/// What one mode measured.
struct Measured {
    /// Write → all ACKed, per write, sorted per write: (p50, p99, max).
    writes: Vec<(Duration, Duration, Duration)>,
    /// Status writes counted after each rule write, until settled.
    status_writes: Vec<u64>,
    /// Status writes before the first timed write (the initial status).
    initial_writes: u64,
    /// This process's CPU over the timed writes.
    cpu: Duration,
    rss: f64,
}

/// Waits until the writer has written nothing for two intervals.
async fn settle(counts: &WriterCounts, interval: Duration) {
    let mut last = counts.written.load(Ordering::Relaxed);
    let mut quiet = 0;
    while quiet < 2 {
        tokio::time::sleep(interval).await;
        let now = counts.written.load(Ordering::Relaxed);
        quiet = if now == last { quiet + 1 } else { 0 };
        last = now;
    }
}

async fn run(clients: usize, status: bool, interval: Duration, writes: usize) -> Measured {
    let store = MemoryConfigStore::new(istio::registry());
    let registry = MemoryServiceRegistry::new();
    mesh::populate(SERVICES, &registry, &store).await;
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let serving = Serving::start(
        Arc::clone(&controller),
        Arc::new(registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        XdsOptions::default(),
    )
    .await;
    let (server, port) = (serving.server.clone(), serving.port);
    let counts = Arc::new(WriterCounts::default());
    let (shutdown, mut shutdown_rx) = tokio::sync::watch::channel(false);
    let writer = status.then(|| {
        let writer = StatusWriter::new(
            Arc::clone(&controller),
            Arc::new(store.clone()),
            Arc::new(server.clone()),
        )
        .interval(interval)
        .with_counts(Arc::clone(&counts));
        tokio::spawn(writer.run(async move {
            let _ = shutdown_rx.wait_for(|stop| *stop).await;
        }))
    });
    let start = now_micros();
    let mut child = Proxies::start(clients, port, 1, false);
    tokio::task::block_in_place(|| child.wait_acked(1, start));
    settle(&counts, interval).await;
    let initial_writes = counts.written.load(Ordering::Relaxed);

    let mut measured = Measured {
        writes: Vec::new(),
        status_writes: Vec::new(),
        initial_writes,
        cpu: Duration::ZERO,
        rss: 0.0,
    };
    let cpu = cpu_time();
    for round in 0..writes {
        let key = ConfigKey::new("RouteRule", "default", "svc-1-split");
        let current = store.get(&key).await.unwrap().unwrap();
        let mut next = mesh::service_split(1, [80, 20][round % 2]);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = server.version().unwrap() + 1;
        let written = counts.written.load(Ordering::Relaxed);
        let start = now_micros();
        store.update(next).await.unwrap();
        let times = tokio::task::block_in_place(|| child.wait_acked(version, start));
        measured.writes.push((
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            *times.last().unwrap(),
        ));
        settle(&counts, interval).await;
        measured
            .status_writes
            .push(counts.written.load(Ordering::Relaxed) - written);
    }
    measured.cpu = cpu_time().saturating_sub(cpu);
    measured.rss = rss_mb();
    assert_eq!(counts.failed.load(Ordering::Relaxed), 0, "status writes failed");
    child.stop();
    let _ = shutdown.send(true);
    if let Some(writer) = writer {
        let _ = writer.await;
    }
    serving.stop().await;
    measured
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if proxies::child_main(&args) {
        return;
    }
    if args.iter().any(|a| a == "--test") {
        return;
    }
    const VALUED: [&str; 3] = ["--interval", "--writes", "--rounds"];
    let value = |flag: &str, default: u64| -> u64 {
        args.iter()
            .position(|a| a == flag)
            .and_then(|at| args.get(at + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let clients = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| !VALUED.contains(&args[i - 1].as_str()))
        .find_map(|(_, a)| a.parse().ok())
        .unwrap_or(2_000);
    let interval = Duration::from_millis(value("--interval", 1_000));
    let writes = value("--writes", 5) as usize;
    let rounds = value("--rounds", 2);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| clients | status writer | write → all ACKed p50 (median of writes) | p99 (median) | p99 (each write) | max | status writes per push | initial status writes | server CPU over the writes | RSS |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut p99s: [Vec<Duration>; 2] = Default::default();
    for _ in 0..rounds {
        for status in [false, true] {
            let m = runtime.block_on(run(clients, status, interval, writes));
            let ms = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e3);
            let mut p50: Vec<Duration> = m.writes.iter().map(|w| w.0).collect();
            let mut p99: Vec<Duration> = m.writes.iter().map(|w| w.1).collect();
            let each: Vec<String> = p99.iter().map(|d| ms(*d)).collect();
            p50.sort();
            p99.sort();
            let max = m.writes.iter().map(|w| w.2).max().unwrap_or_default();
            p99s[status as usize].extend(p99.iter().copied());
            println!(
                "| {clients} | {} | {} ms | {} ms | {} | {} ms | {:?} | {} | {} ms | {:.0} MB |",
                if status {
                    format!("on ({} ms)", interval.as_millis())
                } else {
                    "off".to_string()
                },
                ms(p50[p50.len() / 2]),
                ms(p99[p99.len() / 2]),
                each.join(" / "),
                ms(max),
                m.status_writes,
                m.initial_writes,
                ms(m.cpu),
                m.rss,
            );
        }
    }
    for p in &mut p99s {
        p.sort();
    }
    let median = |p: &[Duration]| p[p.len() / 2].as_secs_f64();
    println!(
        "\np99 over every write: median {:.0} ms off, {:.0} ms on: ratio on/off {:.2}",
        median(&p99s[0]) * 1e3,
        median(&p99s[1]) * 1e3,
        median(&p99s[1]) / median(&p99s[0])
    );
}
