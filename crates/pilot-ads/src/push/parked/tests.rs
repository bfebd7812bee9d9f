//! The index of parked streams: a push wakes the streams of the classes it
//! does not keep and of the proxies leaving something out, records itself
//! in the others, and a stream leaves the index when woken or ended.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::FutureExt;
use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, ServiceDiscovery, document};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::Proxy;

use super::super::recompile::PushRules;

use super::super::generation_cache::{Changes, GeneratedCache, Held};
use super::super::inputs::PushObjects;
use super::super::snapshot::MeshSnapshot;
use super::{Parking, Ticket};

const HOSTS: [&str; 2] = ["a1.a.svc.cluster.local", "b1.b.svc.cluster.local"];

const SIDECARS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: b}
spec:
  egress: [{hosts: ["./*"]}]
"#;

fn mesh(text: &str) -> Arc<PushRules> {
    let objects = document::parse("mesh.yaml", text, &pilot_api::default_registry()).unwrap();
    Arc::new(PushRules::from_configs(&objects).unwrap())
}

fn proxy(namespace: &str, i: u8) -> Proxy {
    Proxy::from_node_id(&format!(
        "sidecar~10.9.0.{i}~client.{namespace}~{namespace}.svc.cluster.local"
    ))
    .unwrap()
}

fn snapshot(
    version: u64,
    mesh: &Arc<PushRules>,
    registry: &Arc<RegistrySnapshot>,
    generated: GeneratedCache,
) -> Arc<MeshSnapshot> {
    Arc::new(MeshSnapshot {
        version,
        revisions: Default::default(),
        objects: Arc::new(PushObjects::new(Vec::new())),
        rules: Arc::clone(mesh),
        registry: Arc::clone(registry),
        generated,
        reduced: Default::default(),
        incremental: true,
        rejected: Default::default(),
        published: crate::push::snapshot::PushClock::now(),
    })
}

/// The first push, and the configuration a proxy of `a` and one of `b`
/// hold at it.
struct First {
    mesh: Arc<PushRules>,
    registry: Arc<RegistrySnapshot>,
    snapshot: Arc<MeshSnapshot>,
    a: Held,
    b: Held,
}

fn first() -> First {
    let registry = MemoryServiceRegistry::new();
    for (i, host) in HOSTS.iter().enumerate() {
        registry.add_service(Service::new(*host, vec![Port::new("http", 80, Protocol::Http)]));
        registry
            .add_endpoints(
                host,
                format!("10.0.{i}.1").parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    let registry = registry.snapshot();
    let mesh = mesh(SIDECARS);
    let everything = Changes {
        full: true,
        rules: true,
        ..Default::default()
    };
    let generated = GeneratedCache::new(None, &everything, true);
    let held = |namespace| {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(generated.get(&proxy(namespace, 1), &registry, &mesh))
            .held
            .expect("a scoped class")
    };
    let (a, b) = (held("a"), held("b"));
    let snapshot = snapshot(1, &mesh, &registry, generated);
    First {
        mesh,
        registry,
        snapshot,
        a,
        b,
    }
}

/// The push after `first` whose batch touched `b1` only: it keeps `a`'s
/// class, not `b`'s.
fn touching_b(first: &First) -> GeneratedCache {
    let changes = Changes {
        touched: Some([HOSTS[1].to_string()].into()),
        steady: true,
        same_services: true,
        ..Default::default()
    };
    GeneratedCache::new(Some(&first.snapshot.generated), &changes, true)
}

fn woken(ticket: &Ticket) -> bool {
    ticket.woken().now_or_never().is_some()
}

#[test]
fn a_push_wakes_only_the_streams_of_the_classes_it_does_not_keep() {
    let first = first();
    let parking = Parking::default();
    let park = |held, id, node: &str| {
        parking
            .park(held, id, node, &first.snapshot, || false)
            .expect("no newer push")
    };
    let a = [park(&first.a, 1, "a-1"), park(&first.a, 2, "a-2")];
    let b = park(&first.b, 3, "b-1");
    assert_eq!(parking.count(), (3, 2));

    let second = snapshot(2, &first.mesh, &first.registry, touching_b(&first));
    parking.published(&second);
    assert!(woken(&b), "b1 is in b's scope");
    assert!(a.iter().all(|t| !woken(t)), "a's class is kept");
    // Recorded once for the class: its streams are at the push.
    for ticket in &a {
        assert_eq!(ticket.kept.version.load(Ordering::Acquire), 2);
        assert!(Arc::ptr_eq(&ticket.kept.snapshot(), &second));
    }
    assert_eq!(parking.count(), (2, 1), "the woken stream left the index");

    // A push that leaves something out for a-2 wakes it alone.
    let mut third = Arc::into_inner(snapshot(3, &first.mesh, &first.registry, touching_b(&first))).unwrap();
    third.rejected = Arc::new([("a-2".to_string(), Default::default())].into());
    parking.published(&Arc::new(third));
    assert!(!woken(&a[0]) && woken(&a[1]));
    assert_eq!(parking.count(), (1, 1));
}

#[test]
fn a_push_that_keeps_no_class_wakes_every_stream() {
    let first = first();
    let parking = Parking::default();
    let tickets: Vec<_> = [(&first.a, 1), (&first.b, 2)]
        .into_iter()
        .map(|(held, id)| parking.park(held, id, "n", &first.snapshot, || false).unwrap())
        .collect();
    // Not steady (a Sidecar or the registry state changed): every class
    // may be another.
    let everything = Changes {
        full: true,
        rules: true,
        ..Default::default()
    };
    let generated = GeneratedCache::new(Some(&first.snapshot.generated), &everything, true);
    parking.published(&snapshot(2, &first.mesh, &first.registry, generated));
    assert!(tickets.iter().all(woken));
    assert_eq!(parking.count(), (0, 0));
}

#[test]
fn a_stream_leaves_the_index_when_it_ends() {
    let first = first();
    let parking = Parking::default();
    let a = parking
        .park(&first.a, 1, "a-1", &first.snapshot, || false)
        .unwrap();
    let b = parking
        .park(&first.b, 2, "b-1", &first.snapshot, || false)
        .unwrap();
    drop(a);
    assert_eq!(parking.count(), (1, 1));
    // Woken (out of the index already), then ended.
    parking.published(&snapshot(2, &first.mesh, &first.registry, touching_b(&first)));
    assert!(woken(&b));
    drop(b);
    assert_eq!(parking.count(), (0, 0));
    // A stream parking again under the same id, its old ticket dropped
    // after: the new place stays.
    let old = parking
        .park(&first.a, 1, "a-1", &first.snapshot, || false)
        .unwrap();
    parking.published(&snapshot(3, &first.mesh, &first.registry, touching_b(&first)));
    let new = parking
        .park(&first.a, 1, "a-1", &first.snapshot, || false)
        .unwrap();
    drop(old);
    assert_eq!(parking.count(), (1, 1));
    drop(new);
    assert_eq!(parking.count(), (0, 0));
}

#[test]
fn a_stream_behind_a_newer_push_does_not_park() {
    let first = first();
    let parking = Parking::default();
    assert!(
        parking
            .park(&first.a, 1, "a-1", &first.snapshot, || true)
            .is_none()
    );
    assert_eq!(parking.count(), (0, 0));
}

#[test]
fn a_push_that_moved_a_proxys_own_instances_wakes_it_alone_in_a_kept_class() {
    let first = first();
    let parking = Parking::default();
    let other = Held {
        address: "10.9.0.2".parse().unwrap(),
        ..first.a.clone()
    };
    let moved = park_at(&parking, &first, &first.a, 1);
    let stays = park_at(&parking, &first, &other, 2);
    // Endpoint changes of b1, one at a's first proxy's address: a's class
    // is kept, but that proxy's class may be another.
    let changes = Changes {
        touched: Some([HOSTS[1].to_string()].into()),
        steady: true,
        same_services: true,
        moved: [first.a.address].into(),
        ..Default::default()
    };
    let generated = GeneratedCache::new(Some(&first.snapshot.generated), &changes, true);
    assert!(!generated.holds(&first.a, &first.registry) && generated.holds(&other, &first.registry));
    parking.published(&snapshot(2, &first.mesh, &first.registry, generated));
    assert!(woken(&moved), "its own instances moved");
    assert!(!woken(&stays), "its class is kept");
    assert_eq!(stays.kept.version.load(Ordering::Acquire), 2);
    assert_eq!(parking.count(), (1, 1));
}

fn park_at(parking: &Parking, first: &First, held: &Held, id: u64) -> Ticket {
    parking
        .park(held, id, &format!("n-{id}"), &first.snapshot, || false)
        .expect("no newer push")
}
