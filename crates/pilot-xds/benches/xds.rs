//! Time to generate the whole CDS+EDS+LDS+RDS set for one sidecar in a mesh
//! of 1,000 services, each with 2 versions and 4 instances (2 per version)
//! and a route rule splitting its traffic 50/50 between the versions; and
//! the size of the encoded result.
//!
//!     cargo bench -p pilot-xds --bench xds
//!
//! In the same group: the same mesh without route rules (no subsets), and
//! protobuf-encoding the generated set (the floor any server pays to send it).
// criterion_group! defines an undocumented `pub fn`.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use criterion::{Criterion, criterion_group, criterion_main};
use pilot_model::{Labels, Port, Protocol, Service};
use pilot_routing::RoutingConfigs;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::{MeshConfig, Proxy, Resources, generate};
use prost::Message;

mod common;

const SERVICES: usize = 1_000;

fn mesh() -> (MemoryServiceRegistry, MeshConfig) {
    let registry = MemoryServiceRegistry::new();
    let mut configs = RoutingConfigs::default();
    for s in 0..SERVICES {
        let name = format!("svc-{s}");
        let host = format!("{name}.default.svc.cluster.local");
        let port = if s % 10 == 0 {
            Port::new("tcp", 9000, Protocol::Tcp)
        } else {
            Port::new("http", 9080, Protocol::Http)
        };
        registry.add_service(Service::new(&host, vec![port]));
        for i in 0..4u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i));
            let version = if i < 2 { "v1" } else { "v2" };
            registry
                .add_endpoints(
                    &host,
                    ip,
                    Labels::from_pairs([("app", name.as_str()), ("version", version)]),
                )
                .expect("service exists");
        }
        configs.route_rules.push(std::sync::Arc::new(common::split_rule(
            &name,
            &format!("{name}-split"),
            50,
        )));
    }
    (registry, MeshConfig::new(configs.compile()))
}

fn encoded_bytes(resources: &Resources) -> usize {
    resources.clusters.iter().map(Message::encoded_len).sum::<usize>()
        + resources
            .endpoints
            .iter()
            .map(Message::encoded_len)
            .sum::<usize>()
        + resources
            .listeners
            .iter()
            .map(Message::encoded_len)
            .sum::<usize>()
        + resources.routes.iter().map(Message::encoded_len).sum::<usize>()
}

fn generation(c: &mut Criterion) {
    let (registry, mesh) = mesh();
    // A sidecar of svc-1 v1, with traffic capture.
    let proxy =
        Proxy::from_node_id("sidecar~10.0.0.4~svc-1-v1.default~default.svc.cluster.local").expect("node id");
    let resources = generate(&proxy, &registry, &mesh);
    resources.check().expect("consistent");
    println!(
        "one sidecar in {SERVICES} services: {} clusters, {} load assignments, {} listeners, {} route configurations, {} bytes encoded",
        resources.clusters.len(),
        resources.endpoints.len(),
        resources.listeners.len(),
        resources.routes.len(),
        encoded_bytes(&resources)
    );
    let no_rules = MeshConfig::default();
    let mut group = c.benchmark_group("xds_generate_1000_services");
    group.sample_size(20);
    group.bench_function("generate_with_rules", |b| {
        b.iter(|| black_box(generate(&proxy, &registry, &mesh)))
    });
    group.bench_function("generate_without_rules", |b| {
        b.iter(|| black_box(generate(&proxy, &registry, &no_rules)))
    });
    group.bench_function("encode_generated_set", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for c in &resources.clusters {
                bytes += c.encode_to_vec().len();
            }
            for e in &resources.endpoints {
                bytes += e.encode_to_vec().len();
            }
            for l in &resources.listeners {
                bytes += l.encode_to_vec().len();
            }
            for r in &resources.routes {
                bytes += r.encode_to_vec().len();
            }
            black_box(bytes)
        })
    });
    group.finish();
}

criterion_group!(benches, generation);
criterion_main!(benches);
