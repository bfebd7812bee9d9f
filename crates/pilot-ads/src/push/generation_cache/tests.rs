//! The shared and incremental generation against a full regeneration from
//! the same snapshot; one registry state per push.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use pilot_api::istio;
use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, document};
use pilot_store_memory::MemoryServiceRegistry;

use pilot_xds::serving::{generate_inbound, generate_outbound};
use pilot_xds::{Generator, Proxy};

use super::super::recompile::PushRules;

use super::{Changes, Generated, GeneratedCache, ORDER, ProxyConfig};

const SERVICES: usize = 4;

fn host(i: usize) -> String {
    format!("svc{i}.a.svc.cluster.local")
}

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for i in 0..SERVICES {
        registry.add_service(Service::new(
            host(i),
            vec![
                Port::new("http", 80, Protocol::Http),
                Port::new("tcp", 90, Protocol::Tcp),
            ],
        ));
        registry
            .add_endpoints(
                &host(i),
                ip(&format!("10.0.{i}.1")),
                Labels::from_pairs([("version", "v1")]),
            )
            .unwrap();
    }
    registry
}

/// Rules: a v1/v2 split on svc0, a source-matched rule from svc1 to svc2,
/// and a policy on svc3's v2 subset; `extra` adds a rule on svc1.
fn mesh(extra: bool) -> PushRules {
    mesh_weighted(extra, 80)
}

/// [`mesh`] with svc0's split at `weight` to v1 (the rest to v2).
fn mesh_weighted(extra: bool, weight: u32) -> PushRules {
    PushRules::from_configs(&rules(extra, weight)).unwrap()
}

/// The objects [`mesh_weighted`] is compiled from.
fn rules(extra: bool, weight: u32) -> Vec<pilot_model::DynConfig> {
    let mut text = String::from(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: split, namespace: a}
spec:
  destination: {name: svc0}
  route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: from-svc1, namespace: a}
spec:
  destination: {name: svc2}
  match: {source: {name: svc1}}
  route: [{labels: {version: v2}}]
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: svc3-v2, namespace: a}
spec:
  destination: {name: svc3, labels: {version: v2}}
  loadBalancing: {name: RANDOM}
"#,
    );
    text = text.replace(
        "weight: 80}, {labels: {version: v2}, weight: 20}",
        &format!(
            "weight: {weight}}}, {{labels: {{version: v2}}, weight: {}}}",
            100 - weight
        ),
    );
    if extra {
        text.push_str(
            r#"---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: svc1-v2, namespace: a}
spec:
  destination: {name: svc1}
  route: [{labels: {version: v2}}]
"#,
        );
    }
    document::parse("rules.yaml", &text, &istio::registry()).unwrap()
}

/// Proxies of several classes: two namespaces, no capture, an instance of
/// a source-matched service, an ingress, a proxyless gRPC client.
fn proxies() -> Vec<Proxy> {
    let mut proxies: Vec<Proxy> = [
        "sidecar~10.9.0.1~client.a~a.svc.cluster.local",
        "sidecar~10.9.0.2~client.b~b.svc.cluster.local",
        "sidecar~10.0.1.1~svc1.a~a.svc.cluster.local",
        "ingress~10.9.0.3~ingress.istio-system~istio-system.svc.cluster.local",
    ]
    .iter()
    .map(|id| Proxy::from_node_id(id).unwrap())
    .collect();
    let no_capture: BTreeMap<String, String> = [("INTERCEPTION_MODE".to_string(), "NONE".to_string())].into();
    proxies.push(
        Proxy::from_node_id("sidecar~10.9.0.4~client.c~c.svc.cluster.local")
            .unwrap()
            .with_metadata(&no_capture)
            .unwrap(),
    );
    let mut grpc = Proxy::from_node_id("sidecar~10.9.0.5~client.b~b.svc.cluster.local").unwrap();
    grpc.generator = Generator::Grpc;
    proxies.push(grpc);
    proxies
}

/// Every (type, name, version) of a proxy's configuration.
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

/// What a full regeneration from the same snapshot gives `proxy`.
fn full(proxy: &Proxy, registry: &RegistrySnapshot, rules: &PushRules) -> Vec<(&'static str, String, u64)> {
    let mesh = &rules.mesh;
    let own = pilot_model::ServiceDiscovery::host_instances(registry, &[proxy.ip]);
    let mut resources = generate_outbound(proxy, registry, mesh, &own);
    resources.extend(generate_inbound(proxy, &own, mesh));
    let generated = Generated::encode(&resources);
    let mut all: Vec<_> = ORDER
        .iter()
        .flat_map(|(short, _)| {
            generated.types[short]
                .entries
                .iter()
                .map(move |e| (*short, e.name.to_string(), e.version))
        })
        .collect();
    all.sort();
    all
}

fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(future)
}

#[test]
fn every_class_of_a_push_sees_the_registry_state_it_was_built_from() {
    let live = registry();
    let mesh = mesh(false);
    for incremental in [true, false] {
        let frozen = RegistrySnapshot::capture(&live, 1);
        let cache = GeneratedCache::new(None, &Changes::default(), incremental);
        let proxies = proxies();
        let first = block_on(cache.get(&proxies[0], &frozen, &mesh));
        // The live registry moves while the push is being generated.
        live.add_endpoints(&host(0), ip("10.0.0.99"), Labels::new())
            .unwrap();
        live.remove_instances(&host(2), ip("10.0.2.1"), None);
        for proxy in &proxies[1..] {
            let config = block_on(cache.get(proxy, &frozen, &mesh));
            assert_eq!(
                contents(&config),
                full(proxy, &frozen, &mesh),
                "{} at the frozen state",
                proxy.node_id()
            );
            if proxy.generator == Generator::Envoy {
                let eds = |c: &ProxyConfig| {
                    c.entries("EDS")
                        .map(|e| (e.name.to_string(), e.version))
                        .collect::<Vec<_>>()
                };
                assert_eq!(
                    eds(&config),
                    eds(&first),
                    "{}: same load assignments",
                    proxy.node_id()
                );
            }
        }
        // Put the live registry back for the other mode.
        live.remove_instances(&host(0), ip("10.0.0.99"), None);
        live.add_endpoints(&host(2), ip("10.0.2.1"), Labels::from_pairs([("version", "v1")]))
            .unwrap();
    }
}

#[test]
fn envoy_clusters_and_load_assignments_are_built_once_per_push_for_every_class() {
    let live = registry();
    let mesh = mesh(false);
    let frozen = RegistrySnapshot::capture(&live, 1);
    let cache = GeneratedCache::new(None, &Changes::default(), true);
    let envoys: Vec<Proxy> = proxies()
        .into_iter()
        .filter(|p| p.generator == Generator::Envoy)
        .collect();
    let configs: Vec<ProxyConfig> = envoys
        .iter()
        .map(|p| block_on(cache.get(p, &frozen, &mesh)))
        .collect();
    // 4 services x 2 ports, and on both ports subsets v1 and v2 of svc0,
    // v2 of svc2 (the source-matched rule) and v2 of svc3 (the policy).
    let eds = SERVICES * 2 + 2 * (2 + 1 + 1);
    assert_eq!(configs[0].entries("EDS").count(), eds);
    assert_eq!(
        cache.assignments_built.load(Ordering::Relaxed),
        eds,
        "built once, not per class"
    );
    for config in &configs[1..] {
        assert!(Arc::ptr_eq(
            &config.shared.types["EDS"],
            &configs[0].shared.types["EDS"]
        ));
    }
    // Sidecars in two namespaces (both capturing) share their clusters too.
    assert!(Arc::ptr_eq(
        &configs[0].shared.types["CDS"],
        &configs[1].shared.types["CDS"]
    ));
}

#[test]
fn an_endpoint_change_rebuilds_only_the_load_assignments_of_its_service() {
    let live = registry();
    let mesh = mesh(false);
    let proxies = proxies();
    let first = RegistrySnapshot::capture(&live, 1);
    let before = GeneratedCache::new(None, &Changes::default(), true);
    let old: Vec<ProxyConfig> = proxies
        .iter()
        .map(|p| block_on(before.get(p, &first, &mesh)))
        .collect();

    live.add_endpoints(&host(2), ip("10.0.2.2"), Labels::from_pairs([("version", "v2")]))
        .unwrap();
    let second = RegistrySnapshot::capture(&live, 2);
    let changes = Changes {
        endpoints: [host(2)].into(),
        ..Default::default()
    };
    let after = GeneratedCache::new(Some(&before), &changes, true);
    for (proxy, old) in proxies.iter().zip(&old) {
        let new = block_on(after.get(proxy, &second, &mesh));
        assert_eq!(contents(&new), full(proxy, &second, &mesh), "{}", proxy.node_id());
        if proxy.generator == Generator::Envoy {
            for short in ["CDS", "LDS", "RDS"] {
                assert!(
                    Arc::ptr_eq(&new.shared.types[short], &old.shared.types[short]),
                    "{short} of {} kept",
                    proxy.node_id()
                );
            }
            let changed: Vec<String> = new
                .entries("EDS")
                .zip(old.entries("EDS"))
                .filter(|(n, o)| n.version != o.version)
                .map(|(n, _)| n.name.to_string())
                .collect();
            assert_eq!(
                changed,
                vec![
                    "outbound|80||svc2.a.svc.cluster.local".to_string(),
                    "outbound|80|version=v2|svc2.a.svc.cluster.local".to_string(),
                    "outbound|90||svc2.a.svc.cluster.local".to_string(),
                    "outbound|90|version=v2|svc2.a.svc.cluster.local".to_string(),
                ]
            );
        }
    }
    // svc2's whole service and its v2 subset, on two ports.
    assert_eq!(after.assignments_built.load(Ordering::Relaxed), 4);
}

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn random_changes_generate_incrementally_what_a_full_regeneration_does() {
    for seed in 1..=8u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let live = registry();
        let mut extra = false;
        let mut weight = 80;
        let proxies = proxies();
        let mut previous: Option<GeneratedCache> = None;
        let mut changes = Changes {
            full: true,
            ..Default::default()
        };
        for step in 0..12u64 {
            let frozen = RegistrySnapshot::capture(&live, step);
            let mesh = mesh_weighted(extra, weight);
            let cache = GeneratedCache::new(previous.as_ref(), &changes, true);
            // Not every class asks in every push.
            for proxy in proxies.iter().filter(|_| rng.below(4) != 0) {
                let config = block_on(cache.get(proxy, &frozen, &mesh));
                assert_eq!(
                    contents(&config),
                    full(proxy, &frozen, &mesh),
                    "seed {seed} step {step}: {}",
                    proxy.node_id()
                );
            }
            previous = Some(cache);
            changes = Changes::default();
            for _ in 0..=rng.below(3) {
                let service = rng.below(SERVICES as u64) as usize;
                let address = ip(&format!("10.0.{service}.{}", 2 + rng.below(3)));
                match rng.below(8) {
                    0 => {
                        extra = !extra;
                        changes.full = true;
                    }
                    // A rule's weights.
                    6 => {
                        weight = 10 * rng.below(11) as u32;
                        changes.full = true;
                    }
                    // A service appears or goes (with its instances).
                    7 => {
                        let extra_host = host(SERVICES);
                        if live.remove_service(&extra_host).is_none() {
                            live.add_service(Service::new(
                                extra_host.clone(),
                                vec![Port::new("http", 80, Protocol::Http)],
                            ));
                            live.add_endpoints(&extra_host, ip("10.0.9.1"), Labels::new())
                                .unwrap();
                        }
                        changes.full = true;
                    }
                    1 => {
                        live.remove_instances(&host(service), address, None);
                        changes.endpoints.insert(host(service));
                    }
                    // Also an instance of svc1 on the source-matched proxy.
                    2 => {
                        live.add_endpoints(&host(1), ip("10.0.1.1"), Labels::from_pairs([("version", "v2")]))
                            .unwrap();
                        changes.endpoints.insert(host(1));
                    }
                    _ => {
                        let version = if rng.below(2) == 0 { "v1" } else { "v2" };
                        live.add_endpoints(
                            &host(service),
                            address,
                            Labels::from_pairs([("version", version)]),
                        )
                        .unwrap();
                        changes.endpoints.insert(host(service));
                    }
                }
            }
        }
    }
}

#[test]
fn classes_of_other_namespaces_share_listeners_and_virtual_hosts_routes() {
    let live = registry();
    let mesh = mesh(false);
    let frozen = RegistrySnapshot::capture(&live, 1);
    let cache = GeneratedCache::new(None, &Changes::default(), true);
    let proxies = proxies();
    // Sidecars of namespaces a and b, and svc1's (a source-matched class).
    let configs: Vec<ProxyConfig> = proxies[..3]
        .iter()
        .map(|p| block_on(cache.get(p, &frozen, &mesh)))
        .collect();
    for config in &configs[1..] {
        assert!(Arc::ptr_eq(
            &config.shared.types["LDS"],
            &configs[0].shared.types["LDS"]
        ));
    }
    // Their route configurations differ (short names of namespace a)...
    assert_ne!(
        configs[0].entries("RDS").map(|e| e.version).collect::<Vec<_>>(),
        configs[1].entries("RDS").map(|e| e.version).collect::<Vec<_>>()
    );
    // ...but the 4 services' HTTP virtual hosts were encoded once for the
    // two classes of namespace a (with short names) and once for b, plus
    // svc2's once more for svc1's proxy (the source-matched rule applies to
    // it only).
    assert_eq!(cache.virtual_hosts.len(), 2 * SERVICES + 1);
    for (proxy, config) in proxies.iter().zip(&configs) {
        assert_eq!(
            contents(config),
            full(proxy, &frozen, &mesh),
            "{}",
            proxy.node_id()
        );
    }
}

#[test]
fn a_rule_change_re_encodes_only_the_virtual_hosts_of_its_host() {
    let live = registry();
    let proxies = proxies();
    let frozen = RegistrySnapshot::capture(&live, 1);
    let before = GeneratedCache::new(None, &Changes::default(), true);
    let old_mesh = mesh(false);
    for proxy in &proxies {
        block_on(before.get(proxy, &frozen, &old_mesh));
    }
    // Namespace a with and without svc1's source-matched rule to svc2, and
    // namespaces b and c: 4 services, svc2 twice in namespace a.
    assert_eq!(
        before.virtual_hosts.built.load(Ordering::Relaxed),
        2 * SERVICES + 1
    );

    // A new rule on svc1: the pipeline calls that a full change.
    let new_mesh = mesh(true);
    let changes = Changes {
        full: true,
        ..Default::default()
    };
    let after = GeneratedCache::new(Some(&before), &changes, true);
    for proxy in &proxies {
        let config = block_on(after.get(proxy, &frozen, &new_mesh));
        assert_eq!(
            contents(&config),
            full(proxy, &frozen, &new_mesh),
            "{}",
            proxy.node_id()
        );
    }
    // svc1's virtual host with its short name (namespace a) and without.
    assert_eq!(after.virtual_hosts.built.load(Ordering::Relaxed), 2);
}

#[test]
fn classes_with_equal_route_configurations_share_one_copy() {
    let live = registry();
    let mesh = mesh(false);
    let frozen = RegistrySnapshot::capture(&live, 1);
    let cache = GeneratedCache::new(None, &Changes::default(), true);
    // Namespaces b and d have no services: the same route configurations,
    // assembled once; namespace a's sidecars see short names.
    let b = Proxy::from_node_id("sidecar~10.9.0.2~client.b~b.svc.cluster.local").unwrap();
    let d = Proxy::from_node_id("sidecar~10.9.0.6~client.d~d.svc.cluster.local").unwrap();
    let a = Proxy::from_node_id("sidecar~10.9.0.1~client.a~a.svc.cluster.local").unwrap();
    let configs = [&b, &d, &a].map(|p| block_on(cache.get(p, &frozen, &mesh)));
    for (proxy, config) in [&b, &d, &a].iter().zip(&configs) {
        assert_eq!(
            contents(config),
            full(proxy, &frozen, &mesh),
            "{}",
            proxy.node_id()
        );
    }
    let [b, d, a] = configs;
    assert!(Arc::ptr_eq(&b.shared.types["RDS"], &d.shared.types["RDS"]));
    assert!(!Arc::ptr_eq(&b.shared.types["RDS"], &a.shared.types["RDS"]));
    assert_eq!(cache.routes_assembled.load(Ordering::Relaxed), 2);
}

#[test]
fn a_proxy_that_rejected_an_object_is_generated_as_if_it_were_not_there() {
    use crate::push::{LeftOut, MeshSnapshot, ObjectVersion, PushObjects};
    let configs: Vec<_> = rules(true, 80).into_iter().map(Arc::new).collect();
    let extra = configs.iter().find(|c| c.meta.name == "svc1-v2").unwrap();
    let left_out: LeftOut = Arc::new([ObjectVersion::of(extra)].into_iter().collect());
    let registry = Arc::new(RegistrySnapshot::capture(&registry(), 1));
    let snapshot = MeshSnapshot {
        version: 1,
        revisions: Default::default(),
        objects: Arc::new(PushObjects::new(configs)),
        rules: Arc::new(mesh(true)),
        registry: Arc::clone(&registry),
        generated: GeneratedCache::new(None, &Changes::default(), true),
        reduced: Default::default(),
        incremental: true,
        rejected: Default::default(),
        published: crate::push::snapshot::PushClock::now(),
    };
    for proxy in proxies() {
        let reduced = block_on(snapshot.config(&proxy, &left_out));
        assert_eq!(
            contents(&reduced),
            full(&proxy, &registry, &mesh(false)),
            "{} without the object",
            proxy.node_id()
        );
        let whole = block_on(snapshot.config(&proxy, &Default::default()));
        assert_eq!(contents(&whole), full(&proxy, &registry, &mesh(true)));
        assert_ne!(contents(&whole), contents(&reduced), "{}", proxy.node_id());
        // Proxies of the class that left out the same objects share one
        // generation.
        let same: LeftOut = Arc::new((*left_out).clone());
        let again = block_on(snapshot.config(&proxy, &same));
        assert!(Arc::ptr_eq(&again.shared, &reduced.shared), "{}", proxy.node_id());
    }
    assert_eq!(snapshot.reduced.lock().unwrap().len(), 1);
}

/// A Gateway with `routes` HTTPRoutes, one host each, all to `v1` but
/// route `to_v2`'s.
fn edge_rules(routes: usize, to_v2: usize) -> PushRules {
    let mut text = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
         spec: {controllerName: pilot.io/gateway-controller}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: web}\n\
         spec:\n  gatewayClassName: pilot\n  listeners: [{name: http, protocol: HTTP, port: 80}]\n",
    );
    for i in 0..routes {
        let backend = if i == to_v2 { "v2" } else { "v1" };
        text.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: route-{i}, namespace: web}}\n\
             spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [route-{i}.example.com]\n  \
             rules: [{{backendRefs: [{{name: {backend}, port: 8080}}]}}]\n"
        ));
    }
    let objects = document::parse("edge.yaml", &text, &pilot_api::default_registry()).unwrap();
    PushRules::from_configs(&objects).unwrap()
}

#[test]
fn a_change_to_one_gateway_route_patches_the_routers_route_configurations() {
    let live = MemoryServiceRegistry::new();
    for name in ["v1", "v2"] {
        live.add_service(Service::new(
            format!("{name}.web.svc.cluster.local"),
            vec![Port::new("http", 8080, Protocol::Http)],
        ));
    }
    let frozen = RegistrySnapshot::capture(&live, 1);
    let mut router = Proxy::from_node_id("router~10.9.0.2~edge-7d9f.web~web.svc.cluster.local").unwrap();
    router.labels = Labels::from_pairs([("gateway.networking.k8s.io/gateway-name", "edge")]);
    let sidecar = Proxy::from_node_id("sidecar~10.9.0.1~client.web~web.svc.cluster.local").unwrap();
    let routes = pilot_xds::serving::SCOPED_MIN_HOSTS + 5;
    let first = edge_rules(routes, usize::MAX);
    let before = GeneratedCache::new(None, &Changes::default(), true);
    let old = block_on(before.get(&router, &frozen, &first));
    assert_eq!(
        contents(&old),
        full(&router, &frozen, &first),
        "the first push: a full generation"
    );
    block_on(before.get(&sidecar, &frozen, &first));

    let second = edge_rules(routes, 3);
    let hosts = second.model().changed_edge_hosts(first.model());
    assert_eq!(
        hosts.as_ref().map(|h| h.iter().cloned().collect::<Vec<_>>()),
        Some(vec!["route-3.example.com".to_string()])
    );
    let changes = Changes {
        full: true,
        rules: true,
        same_services: true,
        edge_hosts: hosts.map(Arc::new),
        ..Default::default()
    };
    let after = GeneratedCache::new(Some(&before), &changes, true);
    let new = block_on(after.get(&router, &frozen, &second));
    assert_eq!(
        contents(&new),
        full(&router, &frozen, &second),
        "what a full generation gives"
    );
    assert_eq!(after.edge_patched.load(Ordering::Relaxed), 1);
    for short in ["LDS", "SRDS"] {
        assert!(
            Arc::ptr_eq(&new.shared.types[short], &old.shared.types[short]),
            "{short} kept"
        );
    }
    let (rds, old_rds) = (&new.shared.types["RDS"], &old.shared.types["RDS"]);
    assert_eq!(rds.entries.len(), routes);
    let patched = rds
        .patched_from(old_rds)
        .expect("the old route configurations patched");
    assert_eq!(
        patched,
        [old_rds.position("http.80/route-3.example.com").unwrap()]
    );
    let differing: Vec<&str> = rds
        .entries
        .iter()
        .zip(&old_rds.entries)
        .filter(|(n, o)| n.version != o.version)
        .map(|(n, _)| &*n.name)
        .collect();
    assert_eq!(differing, ["http.80/route-3.example.com"]);
    // A sidecar is generated as before, whole.
    let config = block_on(after.get(&sidecar, &frozen, &second));
    assert_eq!(contents(&config), full(&sidecar, &frozen, &second));
    assert_eq!(after.edge_patched.load(Ordering::Relaxed), 1);
}

/// Gateway API Gateways named `edge` in namespaces `a` (an HTTP listener
/// on 80, an HTTPS one on 443 ending TLS with the Secret `a/cert`) and
/// `b` (an HTTP listener on 8080), each with a route to `v1`.
fn two_namespaces_gateways() -> PushRules {
    let mut text = String::from(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
         spec: {controllerName: pilot.io/gateway-controller}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: a}\n\
         spec:\n  gatewayClassName: pilot\n  listeners:\n  - {name: http, protocol: HTTP, port: 80}\n  \
         - {name: https, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: cert}]}}\n---\n\
         apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: b}\n\
         spec:\n  gatewayClassName: pilot\n  listeners: [{name: http, protocol: HTTP, port: 8080}]\n",
    );
    for namespace in ["a", "b"] {
        text.push_str(&format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\n\
             metadata: {{name: route, namespace: {namespace}}}\n\
             spec:\n  parentRefs: [{{name: edge}}]\n  \
             rules: [{{backendRefs: [{{name: v1, namespace: web, port: 8080}}]}}]\n---\n\
             apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
             metadata: {{name: from-{namespace}, namespace: web}}\n\
             spec:\n  from: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: {namespace}}}]\n  \
             to: [{{group: \"\", kind: Service}}]\n"
        ));
    }
    let objects = document::parse("edge.yaml", &text, &pilot_api::default_registry()).unwrap();
    PushRules::from_configs(&objects).unwrap()
}

/// The listeners' names of a configuration.
fn listener_names(config: &ProxyConfig) -> Vec<String> {
    config.entries("LDS").map(|e| e.name.to_string()).collect()
}

#[test]
fn a_credential_change_generates_the_edge_classes_again_and_keeps_the_sidecars() {
    use pilot_store_memory::MemoryCredentials;

    let live = MemoryServiceRegistry::new();
    live.add_service(Service::new(
        "v1.web.svc.cluster.local",
        vec![Port::new("http", 8080, Protocol::Http)],
    ));
    let frozen = RegistrySnapshot::capture(&live, 1);
    // Two routers with the same labels in two namespaces: each serves its
    // own namespace's Gateway `edge`.
    let router = |namespace: &str, ip: &str| {
        let mut proxy = Proxy::from_node_id(&format!(
            "router~{ip}~edge-7d9f.{namespace}~{namespace}.svc.cluster.local"
        ))
        .unwrap();
        proxy.labels = Labels::from_pairs([("gateway.networking.k8s.io/gateway-name", "edge")]);
        proxy
    };
    let (router_a, router_b) = (router("a", "10.9.0.2"), router("b", "10.9.0.3"));
    let sidecar = Proxy::from_node_id("sidecar~10.9.0.1~client.web~web.svc.cluster.local").unwrap();
    let rules = Arc::new(two_namespaces_gateways());
    let source = Arc::new(MemoryCredentials::new());
    let certificates = || -> Arc<dyn pilot_xds::ServerCertificates> {
        Arc::new(super::super::certificates::SdsCertificates {
            source: Some(Arc::clone(&source) as Arc<dyn pilot_model::CredentialSource>),
            rules: Arc::clone(&rules),
        })
    };
    let full_with_certificates = |proxy: &Proxy| {
        let mut with = (*rules).clone();
        with.mesh = with.mesh.with_server_certificates(certificates());
        full(proxy, &frozen, &with)
    };

    // The Secret `a/cert` is missing: router a is served its HTTP listener
    // alone, router b its own Gateway's listener.
    let before = GeneratedCache::new(None, &Changes::default(), true).with_certificates(Some(certificates()));
    let old_a = block_on(before.get(&router_a, &frozen, &rules));
    let old_b = block_on(before.get(&router_b, &frozen, &rules));
    let old_sidecar = block_on(before.get(&sidecar, &frozen, &rules));
    assert_eq!(listener_names(&old_a), ["0.0.0.0_80"]);
    assert_eq!(listener_names(&old_b), ["0.0.0.0_8080"]);
    assert_eq!(contents(&old_a), full_with_certificates(&router_a));
    assert_eq!(contents(&old_b), full_with_certificates(&router_b));

    // The Secret written: a push carrying the credential change alone
    // generates the routers' classes again, router a now with its HTTPS
    // listener, and keeps the sidecar's.
    source.set(
        "a",
        "cert",
        pilot_model::TlsCredential {
            certificate_chain: b"certificate".to_vec(),
            private_key: b"key".to_vec(),
            ca_certificates: None,
        },
    );
    let changes = Changes {
        credentials: true,
        ..Default::default()
    };
    let after = GeneratedCache::new(Some(&before), &changes, true).with_certificates(Some(certificates()));
    let new_a = block_on(after.get(&router_a, &frozen, &rules));
    assert_eq!(listener_names(&new_a), ["0.0.0.0_80", "0.0.0.0_443"]);
    assert_eq!(contents(&new_a), full_with_certificates(&router_a));
    let new_b = block_on(after.get(&router_b, &frozen, &rules));
    assert_eq!(listener_names(&new_b), ["0.0.0.0_8080"]);
    let new_sidecar = block_on(after.get(&sidecar, &frozen, &rules));
    for short in ["CDS", "LDS", "RDS"] {
        assert!(
            Arc::ptr_eq(&new_sidecar.shared.types[short], &old_sidecar.shared.types[short]),
            "the sidecar's {short} kept"
        );
    }

    // A push without a credential change keeps the routers' listeners as
    // they were generated, whatever the source says meanwhile.
    assert!(source.remove("a", "cert"));
    let kept = GeneratedCache::new(
        Some(&after),
        &Changes {
            endpoints: ["v1.web.svc.cluster.local".to_string()].into(),
            ..Default::default()
        },
        true,
    )
    .with_certificates(Some(certificates()));
    let kept_a = block_on(kept.get(&router_a, &frozen, &rules));
    assert!(Arc::ptr_eq(
        &kept_a.shared.types["LDS"],
        &new_a.shared.types["LDS"]
    ));
}
