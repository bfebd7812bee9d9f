//! The property of scoped pushes: for random meshes (services in three
//! namespaces, each namespace with or without a Sidecar importing a random
//! set of hosts and one selecting the workloads labelled `app: x`,
//! destination rules of its own, proxies with or without instances of
//! their own) and random batches of changes (endpoints added, removed and
//! relabelled, some at a proxy's own address; destination rules, virtual
//! services; rules exported to every namespace or only some), a push that keeps the scoped classes its
//! batch did not touch gives every proxy exactly what a generation from
//! scratch gives it, so the proxies sent anything (their configuration's
//! digests moved) are exactly those whose scoped configuration changed;
//! and a class whose scope holds no touched host is not generated again.
//! Endpoint changes alone come as two pushes when they are several, the
//! first taken by the proxies of one namespace only: the others, whose
//! classes that push never generated, get the second's configuration from
//! the one they hold. A router serving a Gateway is among the proxies,
//! and batches write VirtualServices bound to it: the sidecars' classes
//! are kept through them, the router's is not.

use std::net::IpAddr;
use std::sync::Arc;

use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery, document};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::Proxy;
use proptest::prelude::*;

use super::super::generation_cache::{Changes, GeneratedCache};
use super::super::own_instances::moved_addresses;
use super::super::proxy_config::{ORDER, ProxyConfig};
use super::super::recompile::PushRules;
use super::{same_services, steady, touched_hosts};

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

/// What a rule may be exported to (empty: no `exportTo`, every namespace).
const EXPORTS: [&str; 4] = ["", "[.]", "[b]", "[c, a]"];

/// A rule: the host it is for (by index), a number that makes a write
/// differ, and where it is exported (by index into [`EXPORTS`]).
type Rule = (usize, u32, usize);

/// A mesh: per namespace, the Sidecar's entries (by index into
/// [`ENTRIES`], none: no Sidecar) and whether it is REGISTRY_ONLY, and the
/// entry of a Sidecar selecting the workloads labelled `app: x`; the
/// destination rules of namespace `b` present before and after the batch;
/// and per proxy, an instance of its own (a host's index and whether it
/// is labelled `app: x`).
#[derive(Debug, Clone)]
struct Mesh {
    sidecars: Vec<Option<(Vec<usize>, bool)>>,
    selecting: Vec<Option<usize>>,
    base: Vec<Rule>,
    own: Vec<Option<(usize, bool)>>,
}

/// An endpoint change of a host (by index).
#[derive(Debug, Clone)]
enum Endpoint {
    /// An endpoint at a new address.
    Add,
    /// The host's first endpoint removed.
    Remove,
    /// An endpoint at a proxy's address (by index), labelled `app: x` or
    /// not: added, or relabelled if the proxy has one of the host.
    AtProxy(usize, bool),
    /// The host's instance at a proxy's address removed, if any.
    RemoveAtProxy(usize),
    /// The instance of a proxy's own (if it has one, whatever the host)
    /// labelled the other way.
    Relabel(usize),
}

/// A batch: endpoint changes, destination rules and virtual services of
/// namespace `a` written (a virtual service routes to the host its number
/// of places on, less one, so it may add a host to the scopes importing
/// its own).
#[derive(Debug, Clone)]
struct Batch {
    endpoints: Vec<(usize, Endpoint)>,
    rules: Vec<Rule>,
    routes: Vec<Rule>,
    /// VirtualServices bound to the Gateway (`edge<host>.example.com`).
    gateway: Vec<Rule>,
}

/// Proxies per namespace.
const PROXIES_PER_NAMESPACE: usize = 2;
/// Proxies in all.
const PROXIES: usize = NAMESPACES.len() * PROXIES_PER_NAMESPACE;

fn rule_strategy() -> impl Strategy<Value = Rule> {
    (0..NAMESPACES.len() * PER_NAMESPACE, 1..4u32, 0..EXPORTS.len())
}

fn mesh_strategy() -> impl Strategy<Value = Mesh> {
    let hosts = NAMESPACES.len() * PER_NAMESPACE;
    (
        prop::collection::vec(
            prop::option::of((prop::collection::vec(0..ENTRIES.len(), 1..3), any::<bool>())),
            NAMESPACES.len(),
        ),
        prop::collection::vec(prop::option::of(0..ENTRIES.len()), NAMESPACES.len()),
        prop::collection::vec(rule_strategy(), 0..2),
        prop::collection::vec(prop::option::of((0..hosts, any::<bool>())), PROXIES),
    )
        .prop_map(|(sidecars, selecting, base, own)| Mesh {
            sidecars,
            selecting,
            base,
            own,
        })
}

fn endpoint_strategy() -> impl Strategy<Value = (usize, Endpoint)> {
    let hosts = NAMESPACES.len() * PER_NAMESPACE;
    let change = prop_oneof![
        Just(Endpoint::Add),
        Just(Endpoint::Remove),
        (0..PROXIES, any::<bool>()).prop_map(|(p, x)| Endpoint::AtProxy(p, x)),
        (0..PROXIES).prop_map(Endpoint::RemoveAtProxy),
        (0..PROXIES).prop_map(Endpoint::Relabel),
    ];
    (0..hosts, change)
}

fn batch_strategy() -> impl Strategy<Value = Batch> {
    (
        prop::collection::vec(endpoint_strategy(), 0..3),
        prop::collection::vec(rule_strategy(), 0..2),
        prop::collection::vec(rule_strategy(), 0..2),
        prop::collection::vec(rule_strategy(), 0..2),
    )
        .prop_map(|(endpoints, rules, routes, gateway)| Batch {
            endpoints,
            rules,
            routes,
            gateway,
        })
}

/// `exportTo` as a spec line, when the rule has one.
fn export_line(export: usize) -> String {
    match EXPORTS[export] {
        "" => String::new(),
        list => format!("  exportTo: {list}\n"),
    }
}

fn yaml(mesh: &Mesh, rules: &[Rule], routes: &[Rule], gateway: &[Rule]) -> String {
    let hosts = hosts();
    // The Gateway the router serves, with a route of its own always.
    let mut text = String::from(
        "---\napiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: a}\n\
         spec:\n  selector: {istio: ingressgateway}\n  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: [\"*\"]}]\n",
    );
    for (i, n, _) in [(0, 1, 0)].iter().chain(gateway) {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: edge{i}, namespace: a}}\nspec:\n  hosts: [edge{i}.example.com]\n  gateways: [edge]\n  http: [{{route: [{{destination: {{host: {}}}}}], timeout: {n}s}}]\n",
            hosts[(*i + *n as usize - 1) % hosts.len()],
        ));
    }
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
    for (ns, entry) in NAMESPACES.iter().zip(&mesh.selecting) {
        let Some(entry) = entry else {
            continue;
        };
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: x, namespace: {ns}}}\nspec:\n  workloadSelector: {{labels: {{app: x}}}}\n  egress: [{{hosts: [{:?}]}}]\n",
            ENTRIES[*entry]
        ));
    }
    let base = mesh.base.iter().map(|r| ("b", r));
    for (namespace, (i, n, export)) in base.chain(rules.iter().map(|r| ("a", r))) {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: dr{i}, namespace: {namespace}}}\nspec:\n  host: {}\n  subsets: [{{name: v{n}, labels: {{version: v{n}}}}}]\n{}",
            hosts[*i],
            export_line(*export)
        ));
    }
    for (i, n, export) in routes {
        text.push_str(&format!(
            "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: vs{i}, namespace: a}}\nspec:\n  hosts: [{}]\n  http: [{{route: [{{destination: {{host: {}}}}}], timeout: {n}s}}]\n{}",
            hosts[*i],
            hosts[(*i + *n as usize - 1) % hosts.len()],
            export_line(*export)
        ));
    }
    text
}

fn compile(text: &str) -> PushRules {
    let objects = document::parse("mesh.yaml", text, &pilot_api::default_registry()).unwrap();
    PushRules::from_configs(&objects).unwrap()
}

/// The address of proxy `p`.
fn proxy_address(p: usize) -> IpAddr {
    format!("10.9.0.{p}").parse().unwrap()
}

/// Proxy `p` is in namespace `p / PROXIES_PER_NAMESPACE`; then the
/// router serving the Gateway, in `a`.
fn proxies() -> Vec<Proxy> {
    let mut proxies: Vec<Proxy> = (0..PROXIES)
        .map(|p| {
            let ns = NAMESPACES[p / PROXIES_PER_NAMESPACE];
            Proxy::from_node_id(&format!(
                "sidecar~{}~client.{ns}~{ns}.svc.cluster.local",
                proxy_address(p)
            ))
            .unwrap()
        })
        .collect();
    let mut router = Proxy::from_node_id(&format!(
        "router~{}~edge.a~a.svc.cluster.local",
        proxy_address(PROXIES)
    ))
    .unwrap();
    router.labels = Labels::from_pairs([("istio", "ingressgateway")]);
    proxies.push(router);
    proxies
}

/// `app: x`, or no label.
fn app(x: bool) -> Labels {
    if x {
        Labels::from_pairs([("app", "x")])
    } else {
        Labels::new()
    }
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

/// Makes the endpoint changes `changes` in `registry`, the first being
/// the batch's change number `first` (new addresses are numbered by it).
fn apply(registry: &MemoryServiceRegistry, mesh: &Mesh, changes: &[(usize, Endpoint)], first: usize) {
    for (n, (i, change)) in changes.iter().enumerate().map(|(n, c)| (n + first, c)) {
        let host = &hosts()[*i];
        match change {
            Endpoint::Add => {
                let address = format!("10.1.{i}.{}", n + 1).parse::<IpAddr>().unwrap();
                registry.add_endpoints(host, address, Labels::new()).unwrap();
            }
            Endpoint::Remove => {
                let address = format!("10.0.{i}.1").parse::<IpAddr>().unwrap();
                registry.remove_instances(host, address, None);
            }
            Endpoint::AtProxy(p, x) => {
                registry.add_endpoints(host, proxy_address(*p), app(*x)).unwrap();
            }
            Endpoint::RemoveAtProxy(p) => {
                registry.remove_instances(host, proxy_address(*p), None);
            }
            Endpoint::Relabel(p) => {
                if let Some((own, x)) = mesh.own[*p] {
                    registry
                        .add_endpoints(&hosts()[own], proxy_address(*p), app(!x))
                        .unwrap();
                }
            }
        }
    }
}

/// The hosts whose instances `changes` change, as the pipeline records
/// them.
fn changed_hosts(mesh: &Mesh, changes: &[(usize, Endpoint)]) -> std::collections::HashSet<String> {
    changes
        .iter()
        .filter_map(|(i, change)| match change {
            Endpoint::Relabel(p) => mesh.own[*p].map(|(own, _)| hosts()[own].clone()),
            _ => Some(hosts()[*i].clone()),
        })
        .collect()
}

/// Whether a push moved some proxy's own instances.
fn moves_a_proxy(changes: &Changes) -> bool {
    (0..PROXIES).any(|p| changes.moved.contains(&proxy_address(p)))
}

/// A push of the endpoint changes `changes` (the rules unchanged), with
/// what the pipeline works out for it.
fn endpoint_changes(
    mesh: &Mesh,
    changes: &[(usize, Endpoint)],
    (rules, before): (&PushRules, &pilot_model::RegistrySnapshot),
    after: &pilot_model::RegistrySnapshot,
) -> Changes {
    let touched = touched_hosts((rules, before), (rules, after), None, &mut true);
    let same_services = same_services(before, after);
    let steady = steady(rules, rules, touched.as_ref(), same_services);
    let moved = match &touched {
        Some(touched) if steady => moved_addresses(before, after, touched),
        _ => Default::default(),
    };
    Changes {
        endpoints: changed_hosts(mesh, changes),
        steady,
        moved,
        touched,
        same_services,
        ..Default::default()
    }
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
    for (p, own) in mesh.own.iter().enumerate() {
        if let Some((i, x)) = own {
            registry
                .add_endpoints(&hosts()[*i], proxy_address(p), app(*x))
                .unwrap();
        }
    }
    let before_registry = registry.snapshot();
    let before_mesh = compile(&yaml(&mesh, &[], &[], &[]));
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

    // Endpoint changes only, with two or more of them: the first is a push
    // of its own that only the first namespace's proxies take (the others
    // are busy with an older one), and the rest follow.
    let rules_changed = !(batch.rules.is_empty() && batch.routes.is_empty() && batch.gateway.is_empty());
    let split = usize::from(!rules_changed && batch.endpoints.len() >= 2);
    let (early, late) = batch.endpoints.split_at(split);
    apply(&registry, &mesh, early, 0);
    let mut held = held;
    // Whether a push of the batch moved some proxy's own instances (its
    // class may then be a new one).
    let mut moved_any = false;
    let (prior, prior_registry) = if early.is_empty() {
        (first, before_registry)
    } else {
        let mid_registry = registry.snapshot();
        let changes = endpoint_changes(&mesh, early, (&before_mesh, &before_registry), &mid_registry);
        moved_any |= moves_a_proxy(&changes);
        let middle = GeneratedCache::new(Some(&first), &changes, true);
        runtime.block_on(async {
            for (p, proxy) in proxies.iter().enumerate().take(PROXIES_PER_NAMESPACE) {
                held[p] = middle.get(proxy, &mid_registry, &before_mesh).await;
            }
        });
        (middle, mid_registry)
    };
    apply(&registry, &mesh, late, early.len());
    let after_registry = registry.snapshot();
    let after_mesh = if rules_changed {
        compile(&yaml(&mesh, &batch.rules, &batch.routes, &batch.gateway))
    } else {
        before_mesh.clone()
    };
    let mut same_ingress = false;
    let touched = touched_hosts(
        (&before_mesh, &prior_registry),
        (&after_mesh, &after_registry),
        None,
        &mut same_ingress,
    );
    // Rules exported to some namespaces only are said host by host too.
    prop_assert!(touched.is_some(), "{:?}", batch);
    let same_services = same_services(&prior_registry, &after_registry);
    let steady = steady(&before_mesh, &after_mesh, touched.as_ref(), same_services);
    // As the pipeline does.
    let moved = match &touched {
        Some(touched) if steady => moved_addresses(&prior_registry, &after_registry, touched),
        _ => Default::default(),
    };
    // As the pipeline records them: a rule change is a full push; a batch
    // of instance changes only names the hosts whose instances changed
    // (their load assignments are patched into the classes kept).
    let changes = Changes {
        full: rules_changed,
        rules: rules_changed,
        endpoints: changed_hosts(&mesh, late),
        steady,
        moved,
        touched: touched.clone(),
        same_services,
        same_ingress,
        edge_hosts: (rules_changed && same_services)
            .then(|| after_mesh.model().changed_edge_hosts(before_mesh.model()))
            .flatten()
            .map(Arc::new),
        credentials: false,
        rejected: false,
    };
    moved_any |= moves_a_proxy(&changes);
    let incremental = GeneratedCache::new(Some(&prior), &changes, true);
    let fresh = GeneratedCache::new(None, &everything, true);
    runtime.block_on(async {
        for (p, (proxy, held)) in proxies.iter().zip(&held).enumerate() {
            // It took the push before this one (else it holds an older
            // one, the incremental push's previous one's previous).
            let took_prior = early.is_empty() || p < PROXIES_PER_NAMESPACE;
            // A stream holding what the push keeps does not even ask for
            // its configuration: it sends nothing.
            let skipped = held
                .held
                .as_ref()
                .is_some_and(|h| incremental.holds(h, &after_registry));
            let kept = incremental.get(proxy, &after_registry, &after_mesh).await;
            let scratch = fresh.get(proxy, &after_registry, &after_mesh).await;
            prop_assert_eq!(
                contents(&kept),
                contents(&scratch),
                "{} after {:?}",
                proxy.id,
                batch
            );
            let sent = !skipped && contents(held) != contents(&kept);
            let changed = contents(held) != contents(&scratch);
            prop_assert_eq!(sent, changed);
            let own = after_registry.host_instances(&[proxy.ip]);
            let own_before = prior_registry.host_instances(&[proxy.ip]);
            let scope = incremental
                .scopes
                .scope(proxy, &own, &after_registry, &after_mesh)
                .expect("Sidecars or none, the mesh is scoped: some namespace has one or none do");
            let scope_before = prior
                .scopes
                .scope(proxy, &own_before, &prior_registry, &before_mesh)
                .expect("the same Sidecars");
            // Both kept unless the first rule exported to some namespaces
            // only came or the last went, which gives every namespace its
            // own view or takes it away: a class of its own, generated
            // anew, its contents the same, so its proxies are still sent
            // nothing.
            let same_views =
                before_mesh.model().restricts_visibility() == after_mesh.model().restricts_visibility();
            if let Some(touched) = &touched
                && took_prior
                && same_views
                && own == own_before
                && touched.iter().all(|h| !scope_before.contains(h))
            {
                prop_assert!(
                    Arc::ptr_eq(&scope, &scope_before),
                    "{}: no touched host in scope, the scope is kept",
                    proxy.id
                );
            }
            // A class whose scope holds no touched host is kept (the
            // proxy's own instances the same: else its class may be
            // another), a router's only if the Gateway's routes are the
            // same.
            if let Some(touched) = &touched
                && took_prior
                && (same_ingress || proxy.proxy_type == pilot_xds::ProxyType::Sidecar)
                && same_views
                && own == own_before
                && touched.iter().all(|h| !scope.contains(h))
            {
                prop_assert!(
                    Arc::ptr_eq(&kept.shared, &held.shared),
                    "{}: no touched host in scope, kept",
                    proxy.id
                );
            }
        }
        // The Gateway's routes alone: the router's class is generated
        // again, every sidecar's kept.
        if batch.endpoints.is_empty() && batch.rules.is_empty() && batch.routes.is_empty() {
            prop_assert_eq!(
                incremental
                    .scopes
                    .generated
                    .load(std::sync::atomic::Ordering::Relaxed),
                usize::from(!same_ingress),
                "{:?}",
                batch
            );
        }
        // Endpoint changes that moved no proxy: every class is kept or
        // patched, none generated again (a class no proxy took in the
        // middle push included).
        if !rules_changed && !moved_any {
            prop_assert_eq!(
                incremental
                    .scopes
                    .generated
                    .load(std::sync::atomic::Ordering::Relaxed),
                0,
                "{:?}",
                batch
            );
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

#[test]
fn classes_no_proxy_took_in_a_push_are_patched_in_the_next() {
    // Every namespace's Sidecar imports `s0.a`, each with other hosts (a
    // class each): both endpoint pushes touch every class, and only
    // namespace `a`'s proxies take the first.
    let mesh = Mesh {
        sidecars: vec![
            Some((vec![0], false)),
            Some((vec![1, 2], false)),
            Some((vec![1, 5], false)),
        ],
        selecting: vec![None; NAMESPACES.len()],
        base: Vec::new(),
        own: vec![None; PROXIES],
    };
    let batch = Batch {
        endpoints: vec![(0, Endpoint::Add), (0, Endpoint::Add)],
        rules: Vec::new(),
        routes: Vec::new(),
        gateway: Vec::new(),
    };
    check(mesh, batch).unwrap();
}

#[test]
fn a_change_to_the_gateways_routes_alone_generates_the_routers_class_alone() {
    let mesh = Mesh {
        sidecars: vec![Some((vec![0], false)), Some((vec![1, 2], false)), None],
        selecting: vec![None; NAMESPACES.len()],
        base: Vec::new(),
        own: vec![None; PROXIES],
    };
    // The Gateway's own route sent elsewhere, and a new one.
    let batch = Batch {
        endpoints: Vec::new(),
        rules: Vec::new(),
        routes: Vec::new(),
        gateway: vec![(0, 2, 0), (3, 1, 0)],
    };
    check(mesh, batch).unwrap();
}
