//! The property of scoped pushes: for random meshes (services in three
//! namespaces, each namespace with or without a Sidecar importing a random
//! set of hosts) and random batches of changes (endpoints, destination
//! rules, virtual services), a push that keeps the scoped classes its
//! batch did not touch gives every proxy exactly what a generation from
//! scratch gives it, so the proxies sent anything (their configuration's
//! digests moved) are exactly those whose scoped configuration changed;
//! and a class whose scope holds no touched host is not generated again.

use std::net::IpAddr;
use std::sync::Arc;

use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery, document};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::{MeshConfig, Proxy};
use proptest::prelude::*;

use super::super::generation_cache::{Changes, GeneratedCache};
use super::super::proxy_config::{ORDER, ProxyConfig};
use super::{same_services, touched_hosts};

const NAMESPACES: [&str; 3] = ["a", "b", "c"];
const PER_NAMESPACE: usize = 2;
/// What a namespace's Sidecar may import.
const ENTRIES: [&str; 6] = [
    "./*",
    "*/s0.a.svc.cluster.local",
    "b/*",
    "~/*",
    "*/*",
    "c/s1.c.svc.cluster.local",
];

fn hosts() -> Vec<String> {
    NAMESPACES
        .iter()
        .flat_map(|ns| (0..PER_NAMESPACE).map(move |i| format!("s{i}.{ns}.svc.cluster.local")))
        .collect()
}

/// A mesh: per namespace, the Sidecar's entries (by index into
/// [`ENTRIES`], none: no Sidecar) and whether it is REGISTRY_ONLY.
#[derive(Debug, Clone)]
struct Mesh {
    sidecars: Vec<Option<(Vec<usize>, bool)>>,
}

/// A batch: endpoints added (by host index), destination rules and
/// virtual services written (by host index, with a number that makes the
/// write differ; a virtual service routes to the host that many places
/// on, less one, so it may add a host to the scopes importing its own).
#[derive(Debug, Clone)]
struct Batch {
    endpoints: Vec<usize>,
    rules: Vec<(usize, u32)>,
    routes: Vec<(usize, u32)>,
}

fn mesh_strategy() -> impl Strategy<Value = Mesh> {
    prop::collection::vec(
        prop::option::of((prop::collection::vec(0..ENTRIES.len(), 1..3), any::<bool>())),
        NAMESPACES.len(),
    )
    .prop_map(|sidecars| Mesh { sidecars })
}

fn batch_strategy() -> impl Strategy<Value = Batch> {
    let hosts = NAMESPACES.len() * PER_NAMESPACE;
    (
        prop::collection::vec(0..hosts, 0..3),
        prop::collection::vec((0..hosts, 1..4u32), 0..2),
        prop::collection::vec((0..hosts, 1..4u32), 0..2),
    )
        .prop_map(|(endpoints, rules, routes)| Batch {
            endpoints,
            rules,
            routes,
        })
}

fn yaml(mesh: &Mesh, rules: &[(usize, u32)], routes: &[(usize, u32)]) -> String {
    let hosts = hosts();
    let mut text = String::new();
    for (ns, sidecar) in NAMESPACES.iter().zip(&mesh.sidecars) {
        let Some((entries, registry_only)) = sidecar else {
            continue;
        };
        let entries: Vec<String> = entries.iter().map(|e| format!("{:?}", ENTRIES[*e])).collect();
        let mode = if *registry_only {
            "REGISTRY_ONLY"
        } else {
            "ALLOW_ANY"
        };
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: {ns}}}\nspec:\n  egress: [{{hosts: [{}]}}]\n  outboundTrafficPolicy: {{mode: {mode}}}\n",
            entries.join(", ")
        ));
    }
    for (i, n) in rules {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr{i}, namespace: a}}\nspec:\n  host: {}\n  subsets: [{{name: v{n}, labels: {{version: v{n}}}}}]\n",
            hosts[*i]
        ));
    }
    for (i, n) in routes {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: vs{i}, namespace: a}}\nspec:\n  hosts: [{}]\n  http: [{{route: [{{destination: {{host: {}}}}}], timeout: {n}s}}]\n",
            hosts[*i],
            hosts[(*i + *n as usize - 1) % hosts.len()]
        ));
    }
    text
}

fn compile(text: &str) -> MeshConfig {
    let objects = document::parse("mesh.yaml", text, &pilot_model::default_registry()).unwrap();
    let mesh = MeshConfig::from_configs(&objects).unwrap();
    mesh.model();
    mesh
}

fn proxies() -> Vec<Proxy> {
    NAMESPACES
        .iter()
        .enumerate()
        .map(|(i, ns)| {
            Proxy::from_node_id(&format!("sidecar~10.9.0.{i}~client.{ns}~{ns}.svc.cluster.local")).unwrap()
        })
        .collect()
}

/// Every (type, name, version) of a configuration.
fn contents(config: &ProxyConfig) -> Vec<(&'static str, String, u64)> {
    let mut all: Vec<_> = ORDER
        .iter()
        .flat_map(|(short, _)| {
            config
                .entries(short)
                .map(move |e| (*short, e.name.to_string(), e.version))
        })
        .collect();
    all.sort();
    all
}

fn check(mesh: Mesh, batch: Batch) -> Result<(), TestCaseError> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let registry = MemoryServiceRegistry::new();
    for (i, host) in hosts().iter().enumerate() {
        registry.add_service(Service::new(
            host.clone(),
            vec![Port::new("http", 80, Protocol::Http)],
        ));
        registry
            .add_endpoints(
                host,
                format!("10.0.{i}.1").parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    let before_registry = registry.snapshot();
    let before_mesh = compile(&yaml(&mesh, &[], &[]));
    let everything = Changes {
        full: true,
        rules: true,
        ..Default::default()
    };
    let first = GeneratedCache::new(None, &everything, true);
    let proxies = proxies();
    let held: Vec<ProxyConfig> = runtime.block_on(async {
        let mut held = Vec::new();
        for proxy in &proxies {
            held.push(first.get(proxy, &before_registry, &before_mesh).await);
        }
        held
    });

    for (n, i) in batch.endpoints.iter().enumerate() {
        registry
            .add_endpoints(
                &hosts()[*i],
                format!("10.1.{i}.{}", n + 1).parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    let after_registry = registry.snapshot();
    let after_mesh = if batch.rules.is_empty() && batch.routes.is_empty() {
        before_mesh.clone()
    } else {
        compile(&yaml(&mesh, &batch.rules, &batch.routes))
    };
    let touched = touched_hosts((&before_mesh, &before_registry), (&after_mesh, &after_registry));
    let changes = Changes {
        full: true,
        rules: true,
        touched: touched.clone(),
        same_services: same_services(&before_registry, &after_registry),
        ..Default::default()
    };
    let incremental = GeneratedCache::new(Some(&first), &changes, true);
    let fresh = GeneratedCache::new(None, &everything, true);
    runtime.block_on(async {
        for (proxy, held) in proxies.iter().zip(&held) {
            let kept = incremental.get(proxy, &after_registry, &after_mesh).await;
            let scratch = fresh.get(proxy, &after_registry, &after_mesh).await;
            prop_assert_eq!(
                contents(&kept),
                contents(&scratch),
                "{} after {:?}",
                proxy.id,
                batch
            );
            let sent = contents(held) != contents(&kept);
            let changed = contents(held) != contents(&scratch);
            prop_assert_eq!(sent, changed);
            let scope = incremental
                .scopes
                .scope(proxy, &[], &after_registry, &after_mesh)
                .expect("Sidecars or none, the mesh is scoped: some namespace has one or none do");
            let scope_before = first
                .scopes
                .scope(proxy, &[], &before_registry, &before_mesh)
                .expect("the same Sidecars");
            if let Some(touched) = &touched
                && touched.iter().all(|h| !scope_before.contains(h))
            {
                prop_assert!(
                    Arc::ptr_eq(&scope, &scope_before),
                    "{}: no touched host in scope, the scope is kept",
                    proxy.id
                );
            }
            if let Some(touched) = &touched
                && touched.iter().all(|h| !scope.contains(h))
            {
                prop_assert!(
                    Arc::ptr_eq(&kept.shared, &held.shared),
                    "{}: no touched host in scope, kept",
                    proxy.id
                );
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_scoped_push_reaches_exactly_the_proxies_whose_configuration_changed(
        mesh in mesh_strategy(),
        batch in batch_strategy(),
    ) {
        // At least one Sidecar, so scoping applies.
        let mut mesh = mesh;
        if mesh.sidecars.iter().all(Option::is_none) {
            mesh.sidecars[0] = Some((vec![0], true));
        }
        check(mesh, batch)?;
    }
}
