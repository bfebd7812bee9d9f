//! Scopes: which Sidecar applies to a proxy, what its egress hosts
//! import, what `exportTo` hides, and generation restricted to a scope
//! (equal to the whole mesh's generation less what is out of scope).

mod support;

use std::collections::BTreeSet;
use std::net::IpAddr;

use pilot_api::networking::OutboundMode;
use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, ServiceDiscovery};
use pilot_routing::{RoutingConfigs, ScopeOrigin};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::serving::{generate_scoped_outbound, scope_of, scoping_applies};
use pilot_xds::{BLACK_HOLE, HostReason, MeshConfig, PASSTHROUGH, Proxy, generate};
use support::sidecar::configs;

const A1: &str = "a1.a.svc.cluster.local";
const A2: &str = "a2.a.svc.cluster.local";
const B1: &str = "b1.b.svc.cluster.local";
const B2: &str = "b2.b.svc.cluster.local";
const ROOT: &str = "r1.istio-system.svc.cluster.local";

fn registry(hidden: &[&str]) -> RegistrySnapshot {
    let registry = MemoryServiceRegistry::new();
    for (i, host) in [A1, A2, B1, B2, ROOT].iter().enumerate() {
        let mut service = Service::new(*host, vec![Port::new("http", 80, Protocol::Http)]);
        if hidden.contains(host) {
            service.export_to = vec![".".into()];
        }
        registry.add_service(service);
        registry
            .add_endpoints(
                host,
                format!("10.0.{i}.1").parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    RegistrySnapshot::capture(&registry, 1)
}

fn hosts(scope: &pilot_xds::ProxyScope) -> Vec<&str> {
    scope.hosts.keys().map(String::as_str).collect()
}

const SIDECARS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*", "*/b1.b.svc.cluster.local"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: reviews, namespace: a}
spec:
  workloadSelector: {labels: {app: reviews}}
  egress: [{hosts: ["b/*"]}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: nothing, namespace: c}
spec:
  egress: [{hosts: ["~/*"]}]
"#;

#[test]
fn the_workload_sidecar_then_the_namespace_default_then_the_mesh_default() {
    let configs = configs(SIDECARS);
    let registry = registry(&[]);
    let mesh = MeshConfig::new(configs.compile());
    let scope = |namespace: &str, labels: Labels| {
        let sidecar = mesh.model().sidecar_for(namespace, &labels);
        scope_of(namespace, sidecar, &registry, &mesh, mesh.model())
    };

    let reviews = scope("a", Labels::from_pairs([("app", "reviews")]));
    assert_eq!(
        reviews.origin,
        ScopeOrigin::Workload {
            namespace: "a".into(),
            name: "reviews".into()
        }
    );
    assert_eq!(hosts(&reviews), [B1, B2]);
    assert_eq!(reviews.outbound, OutboundMode::AllowAny);

    let other = scope("a", Labels::new());
    assert!(matches!(other.origin, ScopeOrigin::NamespaceDefault { .. }));
    assert_eq!(hosts(&other), [A1, A2, B1]);
    assert_eq!(
        other.hosts[B1],
        HostReason::Imported("*/b1.b.svc.cluster.local".into())
    );
    assert_eq!(other.outbound, OutboundMode::RegistryOnly);

    // b has no Sidecar: the root namespace's, whose `.` is the root's.
    let b = scope("b", Labels::new());
    assert!(
        matches!(b.origin, ScopeOrigin::MeshDefault { .. }),
        "{:?}",
        b.origin
    );
    assert_eq!(hosts(&b), [ROOT]);

    assert!(
        hosts(&scope("c", Labels::new())).is_empty(),
        "~/* imports nothing"
    );

    // Without any Sidecar: every host, and nothing to scope.
    let none = MeshConfig::new(RoutingConfigs::default().compile());
    assert!(!scoping_applies(&registry, none.model()));
    let all = scope_of("b", None, &registry, &none, none.model());
    assert_eq!(all.origin, ScopeOrigin::NoSidecar);
    assert_eq!(all.hosts.len(), 5);
    assert!(scoping_applies(&registry, mesh.model()));
}

#[test]
fn export_to_hides_services_and_rules_from_other_namespaces() {
    // b2 is exported to its own namespace only.
    let registry = registry(&[B2]);
    let configs = configs(
        r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: b1, namespace: b}
spec:
  hosts: [b1.b.svc.cluster.local]
  exportTo: ["."]
  http: [{route: [{destination: {host: b1.b.svc.cluster.local}}], timeout: 3s}]
"#,
    );
    let mesh = MeshConfig::new(configs.compile());
    assert!(scoping_applies(&registry, mesh.model()));
    assert!(configs.restricts_visibility());
    assert!(mesh.model().restricts_visibility());
    let in_a = scope_of("a", None, &registry, &mesh, mesh.model());
    assert_eq!(hosts(&in_a), [A1, A2, B1, ROOT], "b2 is not exported to a");
    let in_b = scope_of("b", None, &registry, &mesh, mesh.model());
    assert_eq!(hosts(&in_b), [A1, A2, B1, B2, ROOT]);
    // The VirtualService is seen in b, not in a.
    assert!(configs.visible_to("a").compile().http_routes(B1).is_empty());
    assert_eq!(configs.visible_to("b").compile().http_routes(B1).len(), 1);
    // A mesh default of `.`: nothing without exportTo leaves its namespace.
    let mut private = RoutingConfigs::default();
    private.default_export_to = vec![".".into()];
    let private = MeshConfig::new(private.compile());
    let in_a = scope_of("a", None, &registry, &private, private.model());
    assert_eq!(hosts(&in_a), [A1, A2]);
}

#[test]
fn a_route_target_out_of_the_sidecars_hosts_comes_along() {
    let registry = registry(&[]);
    let configs = configs(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./a1.a.svc.cluster.local"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: a1, namespace: a}
spec:
  hosts: [a1]
  http: [{route: [{destination: {host: b2.b.svc.cluster.local}}]}]
"#,
    );
    let mesh = MeshConfig::new(configs.compile());
    let model = mesh.model();
    let scope = scope_of(
        "a",
        model.sidecar_for("a", &Labels::new()),
        &registry,
        &mesh,
        model,
    );
    assert_eq!(hosts(&scope), [A1, B2]);
    assert_eq!(scope.hosts[B2], HostReason::RouteTarget(A1.into()));
    let proxy = Proxy::from_node_id("sidecar~10.9.0.1~x.a~a.svc.cluster.local").unwrap();
    let resources = generate_scoped_outbound(&proxy, &registry, &MeshConfig::default(), model, &scope, &[]);
    resources.check().expect("every route target is present");
}

#[test]
fn scoped_generation_is_the_whole_generation_less_what_is_out_of_scope() {
    let registry = registry(&[]);
    let configs = configs(SIDECARS);
    let mesh = MeshConfig::new(configs.compile());
    let proxy = Proxy::from_node_id("sidecar~10.9.0.1~x.a~a.svc.cluster.local").unwrap();
    let scope = scope_of(
        "a",
        mesh.model().sidecar_for("a", &Labels::new()),
        &registry,
        &mesh,
        mesh.model(),
    );
    let scoped = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), &scope, &[]);
    scoped.check().unwrap();
    let full = generate(&proxy, &registry, &mesh);
    let in_scope = |name: &str| scope.hosts.keys().any(|h| name.ends_with(&format!("|{h}")));
    // Clusters and load assignments: those of the hosts in scope, equal.
    let expected: Vec<_> = full
        .clusters
        .iter()
        .filter(|c| in_scope(&c.name))
        .cloned()
        .collect();
    let got: Vec<_> = scoped
        .clusters
        .iter()
        .filter(|c| c.name != BLACK_HOLE)
        .cloned()
        .collect();
    assert_eq!(got, expected);
    assert!(scoped.clusters.iter().all(|c| c.name != PASSTHROUGH));
    assert!(scoped.clusters.iter().any(|c| c.name == BLACK_HOLE));
    let expected: Vec<_> = full
        .endpoints
        .iter()
        .filter(|e| in_scope(&e.cluster_name))
        .cloned()
        .collect();
    assert_eq!(scoped.endpoints, expected);
    // Routes: the virtual hosts of the hosts in scope, equal.
    let vhosts = |r: &pilot_xds::Resources| -> BTreeSet<String> {
        r.routes
            .iter()
            .flat_map(|rc| &rc.virtual_hosts)
            .map(|v| v.name.clone())
            .collect()
    };
    let expected: BTreeSet<String> = vhosts(&full)
        .into_iter()
        .filter(|v| scope.hosts.keys().any(|h| v.starts_with(h.as_str())))
        .collect();
    // And REGISTRY_ONLY's catch-all, answering 502 for any other host.
    let mut with_block_all = expected.clone();
    with_block_all.insert(pilot_xds::BLOCK_ALL.to_string());
    assert_eq!(vhosts(&scoped), with_block_all);
    assert!(registry.services().len() > scope.hosts.len());
}

#[test]
fn a_hosts_namespace_is_its_second_label() {
    for host in [
        "a.ns.svc.cluster.local",
        "a.ns",
        "a",
        "",
        "a..b",
        ".ns.svc",
        "a.ns.",
    ] {
        assert_eq!(
            pilot_xds::host_namespace(host),
            host.split('.').nth(1),
            "{host:?}"
        );
    }
    assert_eq!(
        pilot_xds::host_namespace("reviews.bookinfo.svc"),
        Some("bookinfo")
    );
    assert_eq!(pilot_xds::host_namespace("httpbin"), None);
}

/// Istio's exclusion entries: `~ns/*` takes a namespace away from what the
/// listener's other entries import, `~/host` a host from every namespace,
/// and `~/*` everything.
const EXCLUDING: &str = r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress:
  - hosts: ["*/*", "~b/*", "~/a2.a.svc.cluster.local"]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: selected, namespace: a}
spec:
  workloadSelector: {labels: {app: reviews}}
  egress:
  - hosts: ["b/*", "~b/b2.b.svc.cluster.local"]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: b}
spec:
  egress:
  - hosts: ["./*", "~/*"]
"#;

#[test]
fn exclusions_take_away_and_a_label_selected_sidecar_scopes_only_its_workloads_envoy() {
    let configs = configs(EXCLUDING);
    let registry = registry(&[]);
    let mesh = MeshConfig::new(configs.compile());
    let scope = |namespace: &str, labels: Labels| {
        let sidecar = mesh.model().sidecar_for(namespace, &labels);
        scope_of(namespace, sidecar, &registry, &mesh, mesh.model())
    };
    let other = scope("a", Labels::new());
    assert!(matches!(other.origin, ScopeOrigin::NamespaceDefault { .. }));
    assert_eq!(hosts(&other), [A1, ROOT]);
    let reviews_labels = Labels::from_pairs([("app", "reviews")]);
    let reviews = scope("a", reviews_labels.clone());
    assert!(matches!(reviews.origin, ScopeOrigin::Workload { .. }));
    assert_eq!(hosts(&reviews), [B1]);
    assert!(hosts(&scope("b", Labels::new())).is_empty(), "~/* leaves nothing");

    // What each Envoy loads: the selected workload's has b1's cluster and
    // none of namespace a's; the other's the reverse.
    let envoy = pilot_test_support::envoy_binary();
    let clusters_of = |node: &str, labels: &Labels, scope: &pilot_xds::ProxyScope| -> BTreeSet<String> {
        let mut proxy = Proxy::from_node_id(node).unwrap();
        proxy.labels = labels.clone();
        let resources = generate_scoped_outbound(&proxy, &registry, &mesh, mesh.model(), scope, &[]);
        let dump = pilot_xds::testing::config_dump(&envoy, &proxy.node_id(), &resources).unwrap();
        dump["configs"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["static_clusters"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["cluster"]["name"].as_str().map(str::to_string))
            .filter(|name| name.starts_with("outbound|"))
            .collect()
    };
    let reviews_clusters = clusters_of(
        "sidecar~10.9.0.2~reviews-1.a~a.svc.cluster.local",
        &reviews_labels,
        &reviews,
    );
    assert_eq!(
        reviews_clusters,
        BTreeSet::from([format!("outbound|80||{B1}")]),
        "the selected workload's Envoy"
    );
    let other_clusters = clusters_of(
        "sidecar~10.9.0.3~x-1.a~a.svc.cluster.local",
        &Labels::new(),
        &other,
    );
    assert_eq!(
        other_clusters,
        BTreeSet::from([format!("outbound|80||{A1}"), format!("outbound|80||{ROOT}")]),
        "the namespace default's Envoy"
    );
}
