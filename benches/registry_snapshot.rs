//! What a push pays to freeze the registry: copying every
//! service and instance (`RegistrySnapshot::capture`, what the push
//! pipeline did before) next to the cache's own shared snapshot after one
//! instance changed (`ServiceDiscovery::snapshot`), and a whole desired
//! state re-applied with one change (`ServiceCache::apply`, the reconcile
//! every followed registry runs).
//!
//!     cargo bench --bench registry_snapshot

// criterion_group! defines an undocumented `pub fn benches`.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::hint::black_box;
use std::net::IpAddr;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, ServiceDiscovery};
use pilot_store::{DesiredState, ServiceCache};

const INSTANCES: usize = 4;

/// `services` services on two ports with `INSTANCES` instances each; the
/// first instance of the first service is labelled `version`.
fn desired(services: usize, version: &str) -> DesiredState {
    let mut desired = DesiredState::new();
    for s in 0..services {
        let service = desired.insert(Service::new(
            format!("svc-{s}.default.svc.cluster.local"),
            vec![
                Port::new("http", 9080, Protocol::Http),
                Port::new("grpc", 9090, Protocol::Grpc),
            ],
        ));
        for i in 0..INSTANCES {
            let address = IpAddr::from([10, (s / 250) as u8, (s % 250) as u8, i as u8 + 1]);
            let label = if s == 0 && i == 0 { version } else { "v1" };
            for (port, name) in [(9080, "http"), (9090, "grpc")] {
                service
                    .add_instance(address, port, name, Labels::from_pairs([("version", label)]))
                    .expect("a port of the service");
            }
        }
    }
    desired
}

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("registry_snapshot");
    for services in [1_000, 5_000] {
        let cache = ServiceCache::new();
        cache.apply(desired(services, "v1"));
        group.bench_with_input(BenchmarkId::new("capture_copy", services), &services, |b, _| {
            b.iter(|| black_box(RegistrySnapshot::capture(&cache, 1)))
        });
        let flip = std::cell::Cell::new(false);
        let one_changed = |flip: bool| desired(services, if flip { "v2" } else { "v1" });
        let (a, b_state) = (one_changed(true), one_changed(false));
        group.bench_with_input(
            BenchmarkId::new("shared_after_one_change", services),
            &services,
            |b, _| {
                b.iter(|| {
                    flip.set(!flip.get());
                    let host = "svc-0.default.svc.cluster.local";
                    let state = if flip.get() { &a } else { &b_state };
                    cache.apply_service(host, state.services.get(host).cloned());
                    black_box(cache.snapshot())
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("apply_whole_state", services),
            &services,
            |b, _| {
                b.iter_batched(
                    || {
                        flip.set(!flip.get());
                        if flip.get() { a.clone() } else { b_state.clone() }
                    },
                    |state| black_box(cache.apply(state)),
                    criterion::BatchSize::LargeInput,
                )
            },
        );
    }
    group.finish();
}

criterion_group!(benches, snapshot);
criterion_main!(benches);
