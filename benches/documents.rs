//! Documents parsed and validated per second, on a 1,000-document YAML file
//! built from the bookinfo examples, next to two floors measured in the same
//! group: the YAML parser's raw event stream over the same text, and
//! `serde_json` reading the same objects from JSON.
//!
//!     cargo bench --bench documents
// criterion_group! defines an undocumented `pub fn`.
#![allow(
    missing_docs,
    reason = "criterion's macros generate undocumented public items"
)]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pilot_api::istio;
use pilot_model::{DynConfig, document};

const DOCUMENTS: usize = 1_000;

/// 1,000 distinct objects cycling through the bookinfo examples.
fn objects() -> Vec<DynConfig> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/bookinfo");
    let examples = document::read_dir(&dir, &istio::registry()).expect("bookinfo validates");
    (0..DOCUMENTS)
        .map(|i| {
            let mut object = examples[i % examples.len()].clone();
            object.meta.name = format!("{}-{i}", object.meta.name);
            object
        })
        .collect()
}

fn parse(c: &mut Criterion) {
    let objects = objects();
    let yaml = document::to_yaml(&objects);
    let json: Vec<String> = objects
        .iter()
        .map(|o| serde_json::to_string(o).expect("serializes"))
        .collect();
    let registry = istio::registry();
    assert_eq!(
        document::parse("bench.yaml", &yaml, &registry)
            .expect("valid")
            .len(),
        DOCUMENTS
    );
    println!("input: {DOCUMENTS} documents, {} bytes of YAML", yaml.len());

    let mut group = c.benchmark_group("documents_1000");
    group.throughput(Throughput::Elements(DOCUMENTS as u64));
    group.bench_function("yaml_events_floor", |b| {
        b.iter(|| black_box(saphyr_parser::Parser::new_from_str(&yaml).count()))
    });
    group.bench_function("serde_json_values_floor", |b| {
        b.iter(|| {
            for text in &json {
                black_box(serde_json::from_str::<serde_json::Value>(text).expect("json"));
            }
        })
    });
    group.bench_function("pilot_parse_and_validate", |b| {
        b.iter(|| black_box(document::parse("bench.yaml", &yaml, &registry).expect("valid")))
    });
    group.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
