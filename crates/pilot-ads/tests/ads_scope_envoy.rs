//! Scoping through real Envoys with real traffic: one Envoy in namespace
//! `a` (its Sidecar imports `./*`, `REGISTRY_ONLY`) and one in namespace
//! `b` (`./*`, `ALLOW_ANY`), over services in `a`, `b` and `c`. Each
//! Envoy's config_dump holds its own namespace's hosts and no other; an
//! in-scope host answers 200 from its upstream; an out-of-scope host on an
//! outbound HTTP port is answered 502 under `REGISTRY_ONLY`, and has no
//! listener at all on its own port; a rule for a host out of an Envoy's
//! scope sends that Envoy nothing, counted by the server (what it sent each
//! proxy, by type) and by the Envoy (its update counters and config
//! versions).

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_ads::XdsServer;
use pilot_api::default_registry;
use pilot_model::{Port, Protocol, Service};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;
use serde_json::Value;
use support::envoy::{eventually, free_port, instance, request_to, start_envoy_as, upstream};
use support::mesh::apply;
use support::proxies::node_id;

const A1: &str = "a1.a.svc.cluster.local";
const B1: &str = "b1.b.svc.cluster.local";
const C1: &str = "c1.c.svc.cluster.local";

/// What the server last sent `node` of each type (CDS, EDS, LDS, RDS).
fn sent_to(server: &XdsServer, node: &str) -> Vec<(&'static str, Option<String>)> {
    let status = server.status();
    let proxy = status
        .iter()
        .find(|p| p.node_id == node)
        .expect("the proxy is connected");
    proxy.types.iter().map(|(t, s)| (*t, s.sent.clone())).collect()
}

/// The last push `node`'s stream has taken.
fn push_of(server: &XdsServer, node: &str) -> Option<u64> {
    server
        .status()
        .into_iter()
        .find(|p| p.node_id == node)
        .and_then(|p| p.push)
}

/// Envoy's own count of configuration updates it accepted, per type.
fn updates(envoy: &Envoy) -> Vec<(String, u64)> {
    ["cluster_manager.cds", "listener_manager.lds"]
        .iter()
        .map(|prefix| {
            let stat = format!("{prefix}.update_success");
            let text = envoy.admin(&format!("/stats?filter=^{stat}$"));
            let value = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{stat}: ")))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("{stat} in {text}"));
            (stat, value)
        })
        .collect()
}

/// Envoy's config_dump.
fn dump(envoy: &Envoy) -> Value {
    serde_json::from_str(&envoy.admin("/config_dump")).expect("config_dump is JSON")
}

/// The `version_info` of each part of a config_dump (clusters, listeners,
/// routes): what the Envoy last applied.
fn versions(dump: &Value) -> Vec<String> {
    dump["configs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["version_info"].as_str().map(str::to_string))
        .collect()
}

/// A DestinationRule `name` in `namespace` for the service `name` there,
/// with one subset `v1` (`version: v1`).
fn subset_rule(name: &str, namespace: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  host: {name}.{namespace}.svc.cluster.local\n  subsets: [{{name: v1, labels: {{version: v1}}}}]\n"
    )
}

/// Blocks the runtime's thread pool no longer than a check takes.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoys_in_two_namespaces_see_and_reach_only_their_scope() {
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    // a1 and c1 share an HTTP port, b1 has its own: a's Envoy binds the
    // first, b's the second.
    let (shared_port, b_port) = (free_port(), free_port());
    let registry = MemoryServiceRegistry::new();
    for (host, port, body) in [
        (A1, shared_port, "a1"),
        (B1, b_port, "b1"),
        (C1, shared_port, "c1"),
    ] {
        let service = registry.add_service(Service::new(host, vec![Port::new("http", port, Protocol::Http)]));
        let upstream = upstream(body, Arc::new(AtomicU64::new(0)));
        registry.add_instance(instance(&service, upstream, "v1")).unwrap();
    }
    apply(
        &store,
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: a}
spec:
  egress: [{hosts: ["./*"]}]
  outboundTrafficPolicy: {mode: REGISTRY_ONLY}
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: b}
spec:
  egress: [{hosts: ["./*"]}]
  outboundTrafficPolicy: {mode: ALLOW_ANY}
"#,
    )
    .await;
    let (server, xds_port) = support::server::serve(controller, Arc::new(registry));
    let (node_a, node_b) = (node_id("a", "10.99.0.1"), node_id("b", "10.99.0.2"));
    let start = |node: &str| start_envoy_as(node, xds_port, false);
    let (envoy_a, envoy_b) = (Arc::new(start(&node_a)), Arc::new(start(&node_b)));

    // In scope: each Envoy routes its own namespace's host.
    blocking(move || {
        eventually("a's Envoy reaches a1", || {
            request_to(shared_port, A1, &[]) == (200, "a1".into())
        });
        eventually("b's Envoy reaches b1", || {
            request_to(b_port, B1, &[]) == (200, "b1".into())
        });
    })
    .await;

    // Out of scope: not in the Envoy's configuration at all.
    let (dump_a, dump_b) = (dump(&envoy_a).to_string(), dump(&envoy_b).to_string());
    assert!(dump_a.contains(&format!("outbound|{shared_port}||{A1}")));
    for host in [B1, C1] {
        assert!(!dump_a.contains(host), "{host} is out of a's scope");
    }
    assert!(dump_b.contains(&format!("outbound|{b_port}||{B1}")));
    for host in [A1, C1] {
        assert!(!dump_b.contains(host), "{host} is out of b's scope");
    }
    // The outbound traffic policy: a's route configuration answers any
    // other host 502; b's (ALLOW_ANY) blocks nothing. Without traffic
    // capture neither has the passthrough (nothing hands it connections).
    assert!(dump_a.contains(pilot_xds::BLOCK_ALL) && !dump_a.contains(pilot_xds::PASSTHROUGH));
    assert!(!dump_b.contains(pilot_xds::BLOCK_ALL));
    // And its traffic is refused: c1 shares a1's port, a's Envoy answers
    // 502 for it (c1's upstream is never reached); b1's port has no
    // listener on a's Envoy, so only b's answers there.
    let (refused, unknown) =
        blocking(move || (request_to(shared_port, C1, &[]), request_to(b_port, C1, &[]))).await;
    assert_eq!(refused.0, 502, "{refused:?}");
    assert_ne!(refused.1, "c1");
    // b's Envoy, ALLOW_ANY: no virtual host for c1, so no 502 of its own.
    assert_eq!(unknown.0, 404, "{unknown:?}");
    let listeners_a = envoy_a.admin("/listeners");
    assert!(!listeners_a.contains(&format!(":{b_port}")), "{listeners_a}");

    // A DestinationRule for c1 (in no Envoy's scope), then one for b1 (in
    // b's only): a's Envoy is sent nothing by either.
    let before_a = (
        sent_to(&server, &node_a),
        updates(&envoy_a),
        versions(&dump(&envoy_a)),
    );
    let before_b = (sent_to(&server, &node_b), updates(&envoy_b));
    let version = server.version().expect("a push happened");
    apply(&store, &subset_rule("c1", "c")).await;
    server.wait_version(version + 1).await;
    let pushed = server.version().unwrap();
    taken(&server, &node_a, pushed).await;
    taken(&server, &node_b, pushed).await;
    assert_eq!(
        sent_to(&server, &node_b),
        before_b.0,
        "c1's rule is out of b's scope"
    );
    assert_eq!(updates(&envoy_b), before_b.1, "c1's rule is out of b's scope");

    apply(&store, &subset_rule("b1", "b")).await;
    let subset = format!("outbound|{b_port}|version=v1|{B1}");
    let b = Arc::clone(&envoy_b);
    blocking(move || {
        eventually("b's Envoy has b1's subset cluster", || {
            dump(&b).to_string().contains(&subset)
        })
    })
    .await;
    taken(&server, &node_a, server.version().unwrap()).await;
    // The server sent b new clusters and a nothing...
    assert_ne!(sent_to(&server, &node_b), before_b.0);
    assert_eq!(sent_to(&server, &node_a), before_a.0, "a was sent nothing");
    // ...and a's Envoy applied nothing: no update, the same versions.
    assert_ne!(updates(&envoy_b), before_b.1);
    assert_eq!(updates(&envoy_a), before_a.1, "a's Envoy took no update");
    assert_eq!(versions(&dump(&envoy_a)), before_a.2);
    let reached = blocking(move || request_to(shared_port, A1, &[])).await;
    assert_eq!(reached, (200, "a1".into()));
}

/// Waits until `node`'s stream has taken push `pushed` (or a later one):
/// polls the server's status, 30 s at most.
async fn taken(server: &XdsServer, node: &str, pushed: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while push_of(server, node).is_none_or(|p| p < pushed) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{node} did not take push {pushed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
