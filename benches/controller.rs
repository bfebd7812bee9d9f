//! The Controller's fan-out: write-to-subscriber latency (p50, p99) with 1
//! and 16 subscribers, and sustained events per second, next to a raw
//! `tokio::sync::broadcast` channel, the baseline, measured in the same run.
//!
//!     cargo bench --bench controller
//!
//! Latency is from the start of a backend write to each subscriber's receipt
//! of the event; it includes validation, the write, the watch wake-up, the
//! cache update and the fan-out. Percentiles are printed as a table after
//! criterion's groups.
// criterion_group! defines an undocumented `pub fn`.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::future::Future;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use futures::StreamExt;
use pilot_model::{ConfigStore, DynConfig};
use pilot_store::testing::{mock, registry};
use pilot_store::{Controller, ControllerOptions, Notification};
use pilot_store_memory::MemoryConfigStore;
use tokio::runtime::Runtime;
use tokio::sync::{broadcast, mpsc};

const KIND: &str = "MockConfig";
const LATENCY_SAMPLES: usize = 5_000;
const THROUGHPUT_EVENTS: usize = 10_000;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// Receipt times from every subscriber, through one channel.
type Receipts = mpsc::UnboundedReceiver<Instant>;

/// A running Controller over a fresh memory store with `subscribers`
/// readers that report when each event arrives.
async fn controller_with(subscribers: usize) -> (MemoryConfigStore, Controller, Receipts) {
    let store = MemoryConfigStore::new(registry());
    let options = {
        let mut value = ControllerOptions::default();
        value.event_buffer = THROUGHPUT_EVENTS * 2;
        value
    };
    let controller = Controller::with_options(Arc::new(store.clone()), options);
    let (tx, rx) = mpsc::unbounded_channel();
    for _ in 0..subscribers {
        let mut events = controller.subscribe(KIND).unwrap();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Some(n) = events.next().await {
                assert!(matches!(n, Notification::Event(_)), "a bench subscriber lagged");
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
    }
    controller.run();
    controller.wait_synced().await;
    (store, controller, rx)
}

/// The raw baseline: a broadcast channel with `subscribers` readers.
fn broadcast_with(subscribers: usize) -> (broadcast::Sender<u64>, Receipts) {
    let (sender, _) = broadcast::channel(THROUGHPUT_EVENTS * 2);
    let (tx, rx) = mpsc::unbounded_channel();
    for _ in 0..subscribers {
        let mut receiver = sender.subscribe();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(value) = receiver.recv().await {
                black_box(value);
                if tx.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
    }
    (sender, rx)
}

/// Runs a bench driver as a task on the runtime's workers, as a writer in a
/// server would run, rather than on the thread that called `block_on`.
fn drive<T: Send + 'static>(rt: &Runtime, driver: impl Future<Output = T> + Send + 'static) -> T {
    rt.block_on(rt.spawn(driver)).expect("bench driver")
}

/// `count` distinct objects to write, built before the clock starts.
fn inputs(prefix: &str, count: usize) -> Vec<DynConfig> {
    (0..count)
        .map(|i| mock("default", &format!("{prefix}{i}"), "v"))
        .collect()
}

/// Per-receipt latencies of `samples` sequential writes.
fn controller_latencies(rt: &Runtime, subscribers: usize, samples: usize) -> Vec<Duration> {
    drive(rt, async move {
        let (store, _controller, mut receipts) = controller_with(subscribers).await;
        let mut latencies = Vec::with_capacity(samples * subscribers);
        for input in inputs("l", samples) {
            let start = Instant::now();
            store.create(input).await.expect("create");
            for _ in 0..subscribers {
                latencies.push(receipts.recv().await.expect("receipt") - start);
            }
        }
        latencies
    })
}

fn broadcast_latencies(rt: &Runtime, subscribers: usize, samples: usize) -> Vec<Duration> {
    drive(rt, async move {
        let (sender, mut receipts) = broadcast_with(subscribers);
        let mut latencies = Vec::with_capacity(samples * subscribers);
        for i in 0..samples {
            let start = Instant::now();
            sender.send(i as u64).expect("subscribers");
            for _ in 0..subscribers {
                latencies.push(receipts.recv().await.expect("receipt") - start);
            }
        }
        latencies
    })
}

fn latency(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("write_to_subscriber_latency");
    for subscribers in [1, 16] {
        group.bench_function(BenchmarkId::new("broadcast_baseline", subscribers), |b| {
            b.iter_custom(|iters| {
                let all = broadcast_latencies(&rt, subscribers, iters as usize);
                all.iter().sum::<Duration>() / subscribers as u32
            })
        });
        group.bench_function(BenchmarkId::new("controller", subscribers), |b| {
            b.iter_custom(|iters| {
                let all = controller_latencies(&rt, subscribers, iters as usize);
                all.iter().sum::<Duration>() / subscribers as u32
            })
        });
    }
    group.finish();
}

fn throughput(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("sustained_events");
    group.throughput(Throughput::Elements(THROUGHPUT_EVENTS as u64));
    group.sample_size(10);
    for subscribers in [1, 16] {
        group.bench_function(BenchmarkId::new("broadcast_baseline", subscribers), |b| {
            b.iter_custom(|iters| {
                drive(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (sender, mut receipts) = broadcast_with(subscribers);
                        let start = Instant::now();
                        for i in 0..THROUGHPUT_EVENTS {
                            sender.send(i as u64).expect("subscribers");
                        }
                        for _ in 0..THROUGHPUT_EVENTS * subscribers {
                            receipts.recv().await.expect("receipt");
                        }
                        total += start.elapsed();
                    }
                    total
                })
            })
        });
        group.bench_function(BenchmarkId::new("controller", subscribers), |b| {
            b.iter_custom(|iters| {
                drive(&rt, async move {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let (store, controller, mut receipts) = controller_with(subscribers).await;
                        let batch = inputs("t", THROUGHPUT_EVENTS);
                        let start = Instant::now();
                        for input in batch {
                            store.create(input).await.expect("create");
                        }
                        for _ in 0..THROUGHPUT_EVENTS * subscribers {
                            receipts.recv().await.expect("receipt");
                        }
                        total += start.elapsed();
                        drop(controller);
                    }
                    total
                })
            })
        });
    }
    group.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Prints p50 and p99 of write-to-subscriber latency as a Markdown table.
fn latency_percentiles() {
    let rt = runtime();
    println!("\nwrite-to-subscriber latency, {LATENCY_SAMPLES} sequential writes");
    println!("| path | subscribers | p50 | p99 | max |");
    println!("| --- | --- | --- | --- | --- |");
    for subscribers in [1, 16] {
        for (name, mut latencies) in [
            (
                "broadcast baseline",
                broadcast_latencies(&rt, subscribers, LATENCY_SAMPLES),
            ),
            (
                "controller",
                controller_latencies(&rt, subscribers, LATENCY_SAMPLES),
            ),
        ] {
            latencies.sort();
            println!(
                "| {name} | {subscribers} | {:.1} us | {:.1} us | {:.1} us |",
                percentile(&latencies, 0.50).as_secs_f64() * 1e6,
                percentile(&latencies, 0.99).as_secs_f64() * 1e6,
                latencies.last().copied().unwrap_or_default().as_secs_f64() * 1e6,
            );
        }
    }
}

criterion_group!(benches, latency, throughput);

fn main() {
    benches();
    // Under `cargo test --benches` criterion runs each bench once; the
    // percentile pass is for real bench runs only.
    if !std::env::args().any(|a| a == "--test") {
        latency_percentiles();
    }
    Criterion::default().configure_from_args().final_summary();
}
