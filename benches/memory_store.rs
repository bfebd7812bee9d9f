//! The in-memory store's read path next to a raw `DashMap<ConfigKey,
//! Arc<DynConfig>>`, the baseline, in the same groups.
//!
//!     cargo bench --bench memory_store
// criterion_group! defines an undocumented `pub fn`.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dashmap::DashMap;
use futures::FutureExt;
use pilot_model::{ConfigKey, ConfigStore, DynConfig};
use pilot_store::testing::{mock, registry};
use pilot_store_memory::MemoryConfigStore;

const OBJECTS: usize = 10_000;
const KIND: &str = "MockConfig";

/// The store and the raw map holding the same objects, spread over
/// `namespaces` namespaces.
fn populate(
    namespaces: usize,
) -> (
    MemoryConfigStore,
    DashMap<ConfigKey, Arc<DynConfig>>,
    Vec<ConfigKey>,
) {
    let store = MemoryConfigStore::new(registry());
    let raw = DashMap::new();
    let mut keys = Vec::with_capacity(OBJECTS);
    for i in 0..OBJECTS {
        let ns = format!("ns-{}", i % namespaces);
        let stored = store
            .create(mock(&ns, &format!("config-{i}"), "value"))
            .now_or_never()
            .expect("the memory store completes at once")
            .expect("create");
        raw.insert(stored.key(), Arc::clone(&stored));
        keys.push(stored.key());
    }
    (store, raw, keys)
}

fn get(c: &mut Criterion) {
    let (store, raw, keys) = populate(10);
    let mut group = c.benchmark_group("get");
    let mut i = 0;
    group.bench_function("raw_dashmap", |b| {
        b.iter(|| {
            i = (i + 1) % OBJECTS;
            black_box(raw.get(&keys[i]).map(|e| Arc::clone(e.value())))
        })
    });
    group.bench_function("memory_store_get_now", |b| {
        b.iter(|| {
            i = (i + 1) % OBJECTS;
            black_box(store.get_now(&keys[i]).expect("get"))
        })
    });
    let dyn_store: &dyn ConfigStore = &store;
    group.bench_function("memory_store_get_async_trait", |b| {
        b.iter(|| {
            i = (i + 1) % OBJECTS;
            black_box(
                dyn_store
                    .get(&keys[i])
                    .now_or_never()
                    .expect("ready")
                    .expect("get"),
            )
        })
    });
    group.finish();
}

/// The baseline for listing: one pass over the raw map collecting the
/// objects of a kind (and namespace), sorted as the store returns them.
fn raw_list(raw: &DashMap<ConfigKey, Arc<DynConfig>>, ns: Option<&str>) -> Vec<Arc<DynConfig>> {
    let mut items: Vec<Arc<DynConfig>> = raw
        .iter()
        .filter(|e| e.key().kind == KIND && ns.is_none_or(|ns| e.key().namespace == ns))
        .map(|e| Arc::clone(e.value()))
        .collect();
    items.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    items
}

/// Iterating the raw map with no ordering at all: the cheapest possible
/// listing.
fn raw_iterate(raw: &DashMap<ConfigKey, Arc<DynConfig>>, ns: Option<&str>) -> Vec<Arc<DynConfig>> {
    raw.iter()
        .filter(|e| e.key().kind == KIND && ns.is_none_or(|ns| e.key().namespace == ns))
        .map(|e| Arc::clone(e.value()))
        .collect()
}

fn list(c: &mut Criterion) {
    let mut group = c.benchmark_group("list");
    // 10,000 objects in one namespace: the list returns all of them.
    // 10,000 objects over 10 namespaces: the list returns 1,000.
    for namespaces in [1, 10] {
        let (store, raw, _) = populate(namespaces);
        let id = |name: &str| BenchmarkId::new(name, format!("{OBJECTS}_objects_{namespaces}_namespaces"));
        group.bench_function(id("raw_dashmap_iterate"), |b| {
            b.iter(|| black_box(raw_iterate(&raw, Some("ns-0"))))
        });
        group.bench_function(id("raw_dashmap_iterate_sorted"), |b| {
            b.iter(|| black_box(raw_list(&raw, Some("ns-0"))))
        });
        group.bench_function(id("memory_store_list"), |b| {
            b.iter(|| black_box(store.list_now(KIND, Some("ns-0")).expect("list")))
        });
    }
    group.finish();
}

criterion_group!(benches, get, list);
criterion_main!(benches);
