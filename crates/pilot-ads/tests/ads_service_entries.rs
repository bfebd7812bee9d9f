//! ServiceEntries and WorkloadEntries as a registry, through a real Envoy
//! 1.40 with real traffic: local servers stand in for external hosts
//! reached through the sidecar's outbound listeners (`STATIC` endpoints,
//! `DNS` on `localhost`), a WorkloadEntry selected by a ServiceEntry
//! receives traffic and stops receiving it once deleted.

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_model::{ConfigKey, ConfigStore};
use support::envoy::{eventually, free_port, spread_to, upstream};
use support::mesh::Mesh;

/// A ServiceEntry `name` in `default` for `host`, with one port `port`
/// of `protocol` (named after it), resolved by `resolution`; `rest` is the
/// rest of its spec, YAML lines indented by two.
fn service_entry(name: &str, host: &str, port: u16, protocol: &str, resolution: &str, rest: &str) -> String {
    format!(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [{host}]\n  ports: [{{number: {port}, name: {}, protocol: {protocol}}}]\n  resolution: {resolution}\n{rest}",
        protocol.to_lowercase()
    )
}

/// Waits (off the runtime, where the requests block) until `check`
/// passes.
async fn until(what: String, check: impl FnMut() -> bool + Send + 'static) {
    tokio::task::spawn_blocking(move || eventually(&what, check))
        .await
        .unwrap();
}

/// Waits until 10 requests to `host` on Envoy's listener at `port` all
/// get `body`.
async fn all_reach(port: u16, host: &'static str, body: &'static str) {
    until(format!("{host} answers {body}"), move || {
        spread_to(port, host, 10, &[]).keys().eq([body])
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_hosts_static_and_dns_through_the_outbound_listener() {
    let mesh = Mesh::start().await;
    let static_upstream = upstream("static", Arc::new(AtomicU64::new(0)));
    let dns_upstream = upstream("dns", Arc::new(AtomicU64::new(0)));
    let (static_port, dns_port) = (free_port(), free_port());
    let api = service_entry(
        "api",
        "api.external.test",
        static_port,
        "HTTP",
        "STATIC",
        &format!(
            "  location: MESH_EXTERNAL\n  endpoints: [{{address: 127.0.0.1, ports: {{http: {static_upstream}}}}}]\n"
        ),
    );
    let named = service_entry(
        "named",
        "named.external.test",
        dns_port,
        "HTTP",
        "DNS",
        &format!("  endpoints: [{{address: localhost, ports: {{http: {dns_upstream}}}}}]\n"),
    );
    mesh.apply(&format!("{api}---\n{named}")).await;
    all_reach(static_port, "api.external.test", "static").await;
    all_reach(dns_port, "named.external.test", "dns").await;
    // Deleting an entry takes its host away from the proxy.
    mesh.store
        .delete(&ConfigKey::new("ServiceEntry", "default", "api"), None)
        .await
        .unwrap();
    until("api.external.test is gone".into(), move || {
        !spread_to(static_port, "api.external.test", 5, &[]).contains_key("static")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_workload_entry_receives_traffic() {
    let mesh = Mesh::start().await;
    let (vm1, vm2) = (
        upstream("vm-1", Arc::new(AtomicU64::new(0))),
        upstream("vm-2", Arc::new(AtomicU64::new(0))),
    );
    let port = free_port();
    let workload = |name: &str, upstream: u16| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: WorkloadEntry\nmetadata: {{name: {name}, namespace: default}}\nspec: {{address: 127.0.0.1, ports: {{http: {upstream}}}, labels: {{app: vm}}, serviceAccount: vm}}\n"
        )
    };
    let vm = service_entry(
        "vm",
        "vm.mesh.test",
        port,
        "HTTP",
        "STATIC",
        "  location: MESH_INTERNAL\n  workloadSelector: {labels: {app: vm}}\n",
    );
    mesh.apply(&format!("{vm}---\n{}", workload("vm-1", vm1))).await;
    all_reach(port, "vm.mesh.test", "vm-1").await;
    // A second WorkloadEntry joins; the first leaves: each write reaches
    // the proxy.
    mesh.apply(&workload("vm-2", vm2)).await;
    until("both workloads answer".into(), move || {
        spread_to(port, "vm.mesh.test", 30, &[]).len() == 2
    })
    .await;
    mesh.store
        .delete(&ConfigKey::new("WorkloadEntry", "default", "vm-1"), None)
        .await
        .unwrap();
    all_reach(port, "vm.mesh.test", "vm-2").await;
}

/// A TCP server that writes `name` to every connection and closes it.
fn tcp_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = std::io::Write::write_all(&mut stream, name.as_bytes());
        }
    });
    port
}

/// What one connection through Envoy's listener at `port` reads.
fn tcp_answer(port: u16) -> String {
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(10)));
    let mut text = String::new();
    let _ = std::io::Read::read_to_string(&mut stream, &mut text);
    text
}

/// Connections by what they read, over `n` connections.
fn tcp_spread(port: u16, n: usize) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for _ in 0..n {
        *counts.entry(tcp_answer(port)).or_default() += 1;
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tcp_route_splits_connections_by_weight() {
    let mesh = Mesh::start().await;
    let (v1, v2) = (tcp_upstream("v1"), tcp_upstream("v2"));
    let port = free_port();
    let echo = service_entry(
        "echo",
        "echo.mesh.test",
        port,
        "TCP",
        "STATIC",
        &format!(
            "  location: MESH_INTERNAL\n  endpoints:\n  - {{address: 127.0.0.1, ports: {{tcp: {v1}}}, labels: {{version: v1}}}}\n  - {{address: 127.0.0.1, ports: {{tcp: {v2}}}, labels: {{version: v2}}}}\n"
        ),
    );
    mesh.apply(&format!(
        r#"{echo}---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {{name: echo, namespace: default}}
spec:
  host: echo.mesh.test
  subsets: [{{name: v1, labels: {{version: v1}}}}, {{name: v2, labels: {{version: v2}}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: echo, namespace: default}}
spec:
  hosts: [echo.mesh.test]
  tcp:
  - route: [{{destination: {{host: echo.mesh.test, subset: v1}}}}]
"#
    ))
    .await;
    until("every connection reaches v1".into(), move || {
        tcp_spread(port, 10).keys().eq(["v1"])
    })
    .await;
    // 80/20: counted over 1000 connections once v2 gets any.
    let key = ConfigKey::new("VirtualService", "default", "echo");
    let mut split = (*mesh.store.get(&key).await.unwrap().unwrap()).clone();
    split.spec = serde_json::json!({
        "hosts": ["echo.mesh.test"],
        "tcp": [{"route": [
            {"destination": {"host": "echo.mesh.test", "subset": "v1"}, "weight": 80},
            {"destination": {"host": "echo.mesh.test", "subset": "v2"}, "weight": 20},
        ]}],
    });
    mesh.store.update(split).await.unwrap();
    let counts = tokio::task::spawn_blocking(move || {
        eventually("v2 gets connections", || tcp_spread(port, 20).contains_key("v2"));
        tcp_spread(port, 1000)
    })
    .await
    .unwrap();
    let v1 = counts.get("v1").copied().unwrap_or(0) as f64 / 1000.0;
    assert!((0.75..=0.85).contains(&v1), "80/20 split, got {counts:?}");
    assert_eq!(
        counts.values().sum::<usize>(),
        counts["v1"] + counts["v2"],
        "{counts:?}"
    );
}
