//! Write latency of the journaled store while the journal is folded into a
//! snapshot, against the same writes with no compaction running and with
//! a compaction that blocks writes (the naive design, kept for comparison), in one run:
//!
//! ```text
//! cargo bench -p pilot-store-memory --bench journal
//! JOURNAL_BENCH_OBJECTS=100000 cargo bench -p pilot-store-memory --bench journal
//! ```
//!
//! The store starts from a snapshot of `JOURNAL_BENCH_OBJECTS` objects
//! (default 50,000) of about 1.4 KB of JSON each. Each measured write updates
//! one of them (one journal record, one fsync). After each scenario the
//! p50, p99 and maximum of every write it timed are printed, as criterion
//! reports means only.
// criterion_group! generates an undocumented public function.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use objects::{object, registry};
use pilot_model::{ConfigKey, ConfigStore};
use pilot_store_memory::journal::{self, JournalOptions, JournaledStore};

#[path = "support/objects.rs"]
mod objects;

fn objects() -> usize {
    std::env::var("JOURNAL_BENCH_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000)
}

/// A data directory whose snapshot holds `count` objects (written
/// directly: journaling them one fsync each would take minutes).
fn populate(dir: &Path, count: usize) -> u64 {
    let mut file = std::io::BufWriter::new(std::fs::File::create(dir.join("snapshot.json")).unwrap());
    write!(file, "{{\"revision\":{count},\"objects\":[").unwrap();
    for i in 0..count {
        if i > 0 {
            file.write_all(b",").unwrap();
        }
        serde_json::to_writer(&mut file, &object(i)).unwrap();
    }
    file.write_all(b"]}").unwrap();
    file.flush().unwrap();
    std::fs::metadata(dir.join("snapshot.json")).unwrap().len()
}

struct Scenario {
    store: JournaledStore,
    keys: Vec<ConfigKey>,
    next: usize,
    latencies: Arc<Mutex<Vec<Duration>>>,
    _dir: tempfile::TempDir,
}

fn scenario(count: usize, blocking: bool) -> Scenario {
    let dir = tempfile::tempdir().unwrap();
    let bytes = populate(dir.path(), count);
    let started = Instant::now();
    let options = JournalOptions {
        compact_after: usize::MAX,
        blocking_compaction: blocking,
        ..JournalOptions::default()
    };
    let store = journal::open(dir.path(), registry(), options).unwrap();
    store.wait_for_compaction();
    eprintln!(
        "journal bench: {count} objects, snapshot {:.1} MB, opened in {:.2?}",
        bytes as f64 / 1e6,
        started.elapsed()
    );
    Scenario {
        store,
        keys: (0..count).map(|i| object(i).key()).collect(),
        next: 0,
        latencies: Arc::default(),
        _dir: dir,
    }
}

/// Updates the next object; its latency.
fn write(runtime: &tokio::runtime::Runtime, scenario: &mut Scenario) -> Duration {
    let key = &scenario.keys[scenario.next % scenario.keys.len()];
    scenario.next += 1;
    let store = &scenario.store;
    let current = store.get_now(key).unwrap().unwrap();
    let mut changed = (*current).clone();
    changed.spec["precedence"] = (scenario.next % 1000).into();
    let started = Instant::now();
    runtime.block_on(store.update(changed)).unwrap();
    let elapsed = started.elapsed();
    scenario.latencies.lock().unwrap().push(elapsed);
    elapsed
}

fn report(name: &str, latencies: &Mutex<Vec<Duration>>) {
    let mut all = latencies.lock().unwrap().clone();
    all.sort();
    if all.is_empty() {
        return;
    }
    let at = |q: f64| all[((all.len() - 1) as f64 * q).round() as usize];
    eprintln!(
        "journal bench: {name}: {} writes, p50 {:.2?}, p99 {:.2?}, max {:.2?}",
        all.len(),
        at(0.50),
        at(0.99),
        all[all.len() - 1]
    );
}

fn bench(c: &mut Criterion) {
    let count = objects();
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut group = c.benchmark_group(format!("journal_write_{count}_objects"));
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(8));

    // Baseline: no compaction runs.
    let mut idle = scenario(count, false);
    group.bench_function("no_compaction", |b| {
        b.iter_custom(|iters| (0..iters).map(|_| write(&runtime, &mut idle)).sum())
    });
    report("no compaction", &idle.latencies);
    drop(idle);

    // Every write while a background compaction runs (one is started
    // whenever none does).
    let mut background = scenario(count, false);
    let compactions = Arc::new(Mutex::new(0u32));
    group.bench_function("during_background_compaction", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    if background.store.compact_now() {
                        *compactions.lock().unwrap() += 1;
                    }
                    write(&runtime, &mut background)
                })
                .sum()
        })
    });
    report("during a background compaction", &background.latencies);
    eprintln!(
        "journal bench: {} background compactions",
        compactions.lock().unwrap()
    );
    drop(background);

    // The naive design: the compaction holds the write lock, so a
    // write issued while it runs waits for the whole snapshot.
    let mut blocking = scenario(count, true);
    group.bench_function("during_blocking_compaction", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let store = blocking.store.clone();
                    let compaction = std::thread::spawn(move || store.compact_now());
                    // Let it take the lock first, as the write that
                    // triggered it did.
                    while !blocking.store.compacting() && !compaction.is_finished() {
                        std::thread::yield_now();
                    }
                    let elapsed = write(&runtime, &mut blocking);
                    compaction.join().unwrap();
                    elapsed
                })
                .sum()
        })
    });
    report("during a blocking compaction (naive design)", &blocking.latencies);
    drop(blocking);
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
