//! The etcd backend next to the raw `etcd-client` doing the same
//! transactions, against a real single-member etcd started for the run.
//!
//!     cargo bench -p pilot-store-etcd --bench etcd
//!
//! - `etcd_ops`: create, update and get, one at a time, through
//!   `EtcdConfigStore` and through the raw client;
//! - latency from a raw `put` to the event reaching a Controller subscriber,
//!   next to the same `put` reaching a raw etcd watch (p50/p99 table printed
//!   after criterion's groups).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::Criterion;
use etcd_client::{Client, Compare, CompareOp, EventType, Txn, TxnOp, WatchOptions};
use futures::StreamExt;
use pilot_model::{ConfigStore, DynConfig};
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, Notification};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::EtcdServer;
use tokio::runtime::Runtime;

const LATENCY_SAMPLES: usize = 1_000;
const PREFIX: &str = "/pilot/config/test.pilot.io/MockConfig/default";

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The stored body of an object, as the store writes it.
fn body(config: &DynConfig) -> Vec<u8> {
    let mut config = config.clone();
    config.meta.resource_version = None;
    serde_json::to_vec(&config).expect("serializes")
}

fn ops(c: &mut Criterion, server: &EtcdServer) {
    let rt = runtime();
    let (store, raw) = rt.block_on(async {
        let store = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
            .await
            .expect("connect");
        (
            store,
            Client::connect([server.endpoint()], None).await.expect("connect"),
        )
    });
    let counter = Arc::new(AtomicU64::new(0));
    let fresh = |prefix: &str| {
        mock(
            "default",
            &format!("{prefix}-{}", counter.fetch_add(1, Ordering::Relaxed)),
            "v",
        )
    };

    let mut group = c.benchmark_group("etcd_ops");
    group.bench_function("create/raw_client", |b| {
        b.to_async(&rt).iter_batched(
            || {
                let config = fresh("raw");
                (format!("{PREFIX}/{}", config.meta.name), body(&config))
            },
            |(key, value)| {
                let mut raw = raw.clone();
                async move {
                    let txn = Txn::new()
                        .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
                        .and_then([TxnOp::put(key, value, None)]);
                    assert!(raw.txn(txn).await.expect("txn").succeeded());
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });
    group.bench_function("create/etcd_config_store", |b| {
        b.to_async(&rt).iter_batched(
            || fresh("store"),
            |config| {
                let store = store.clone();
                async move {
                    store.create(config).await.expect("create");
                }
            },
            criterion::BatchSize::SmallInput,
        )
    });

    // Updates: the same object again and again, each with its current version.
    let target = rt.block_on(store.create(fresh("updated"))).expect("create");
    let key = format!("{PREFIX}/{}", target.meta.name);
    let version = Arc::new(AtomicU64::new(
        target.meta.resource_version.as_deref().unwrap().parse().unwrap(),
    ));
    let stored_body = body(&target);
    group.bench_function("update/raw_client", |b| {
        b.to_async(&rt).iter(|| {
            let (mut raw, key, value, version) = (
                raw.clone(),
                key.clone(),
                stored_body.clone(),
                Arc::clone(&version),
            );
            async move {
                let current = version.load(Ordering::Relaxed) as i64;
                let txn = Txn::new()
                    .when([Compare::mod_revision(key.clone(), CompareOp::Equal, current)])
                    .and_then([TxnOp::put(key.clone(), value, None)])
                    .or_else([TxnOp::get(key, None)]);
                let response = raw.txn(txn).await.expect("txn");
                assert!(response.succeeded());
                version.store(response.header().unwrap().revision() as u64, Ordering::Relaxed);
            }
        })
    });
    group.bench_function("update/etcd_config_store", |b| {
        b.to_async(&rt).iter(|| {
            let (store, version) = (store.clone(), Arc::clone(&version));
            let mut next = (*target).clone();
            async move {
                next.meta.resource_version = Some(version.load(Ordering::Relaxed).to_string());
                let stored = store.update(next).await.expect("update");
                version.store(
                    stored.meta.resource_version.as_deref().unwrap().parse().unwrap(),
                    Ordering::Relaxed,
                );
            }
        })
    });
    let object_key = target.key();
    group.bench_function("get/raw_client", |b| {
        b.to_async(&rt).iter(|| {
            let (mut raw, key) = (raw.clone(), key.clone());
            async move {
                assert_eq!(raw.get(key, None).await.expect("get").kvs().len(), 1);
            }
        })
    });
    group.bench_function("get/etcd_config_store", |b| {
        b.to_async(&rt).iter(|| {
            let (store, key) = (store.clone(), object_key.clone());
            async move {
                assert!(store.get(&key).await.expect("get").is_some());
            }
        })
    });
    group.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// Put-to-event latency through a raw watch and through a Controller.
fn latencies(server: &EtcdServer) {
    let rt = runtime();
    let (raw_watch, controller) = rt.block_on(async {
        let prefix = format!("/latency/{}", std::process::id());
        let mut raw = Client::connect([server.endpoint()], None).await.expect("connect");
        let mut raw_latencies = Vec::with_capacity(LATENCY_SAMPLES);
        let mut watch = raw
            .watch(prefix.clone(), Some(WatchOptions::new().with_prefix()))
            .await
            .expect("watch");
        watch.message().await.expect("created");
        for i in 0..LATENCY_SAMPLES {
            let start = Instant::now();
            raw.put(format!("{prefix}/k{i}"), "v", None).await.expect("put");
            loop {
                let response = watch.message().await.expect("watch").expect("open");
                if response.events().iter().any(|e| e.event_type() == EventType::Put) {
                    break;
                }
            }
            raw_latencies.push(start.elapsed());
        }

        let store = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
            .await
            .expect("connect");
        let controller = Controller::new(Arc::new(store));
        controller.run();
        controller.wait_synced().await;
        // Subscribed after the initial list, so the objects the throughput
        // group left behind are not in the way.
        let mut events = controller.subscribe("MockConfig").unwrap();
        let inputs: Vec<(String, Vec<u8>)> = (0..LATENCY_SAMPLES)
            .map(|i| {
                let config = mock("default", &format!("latency-{i}"), "v");
                (format!("{PREFIX}/{}", config.meta.name), body(&config))
            })
            .collect();
        let mut controller_latencies = Vec::with_capacity(LATENCY_SAMPLES);
        for (key, value) in inputs {
            let start = Instant::now();
            raw.put(key, value, None).await.expect("put");
            match events.next().await.expect("open") {
                Notification::Event(_) => controller_latencies.push(start.elapsed()),
                Notification::Lagged { .. } => panic!("lagged"),
            }
        }
        (raw_latencies, controller_latencies)
    });
    println!("\nput-to-event latency, {LATENCY_SAMPLES} sequential puts");
    println!("| path | p50 | p99 | max |");
    println!("| --- | --- | --- | --- |");
    for (name, mut samples) in [
        ("raw etcd watch", raw_watch),
        ("Controller subscriber", controller),
    ] {
        samples.sort();
        println!(
            "| {name} | {:.0} us | {:.0} us | {:.0} us |",
            percentile(&samples, 0.5).as_secs_f64() * 1e6,
            percentile(&samples, 0.99).as_secs_f64() * 1e6,
            samples.last().unwrap().as_secs_f64() * 1e6
        );
    }
}

fn main() {
    let server = EtcdServer::start().expect("etcd starts (install etcd-server)");
    let mut criterion = Criterion::default().configure_from_args();
    ops(&mut criterion, &server);
    if !std::env::args().any(|a| a == "--test") {
        latencies(&server);
    }
    criterion.final_summary();
}
