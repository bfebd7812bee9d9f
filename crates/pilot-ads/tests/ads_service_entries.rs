//! ServiceEntries and WorkloadEntries as a registry, through a real Envoy
//! 1.40 with real traffic: local servers stand in for external hosts
//! reached through the sidecar's outbound listeners (`STATIC` endpoints,
//! `DNS` on `localhost`), a WorkloadEntry selected by a ServiceEntry
//! receives traffic and stops receiving it once deleted.

mod support;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_ads::{XdsOptions, XdsServer};
use pilot_model::{AggregateDiscovery, ConfigKey, ConfigStore, default_registry, document};
use pilot_store::{Controller, service_entry_registry};
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use support::envoy::{eventually, free_port, spread_to, start_envoy, upstream};

/// A server over a memory store, whose registry is an empty platform
/// registry and the store's service entries; with an Envoy fed by it.
struct Mesh {
    store: MemoryConfigStore,
    _server: XdsServer,
    _envoy: pilot_test_support::Envoy,
}

async fn mesh() -> Mesh {
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = AggregateDiscovery::new(vec![
        Arc::new(MemoryServiceRegistry::new()),
        Arc::new(service_entry_registry(&controller)),
    ]);
    let server = XdsServer::new(controller, Arc::new(registry), XdsOptions::default());
    let xds_port = free_port();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve(([127, 0, 0, 1], xds_port).into(), std::future::pending())
            .await
            .unwrap();
    });
    let envoy = start_envoy(xds_port, false);
    Mesh {
        store,
        _server: server,
        _envoy: envoy,
    }
}

async fn apply(store: &MemoryConfigStore, text: &str) {
    for object in document::parse("objects.yaml", text, &default_registry()).unwrap() {
        store.create(object).await.unwrap();
    }
}

/// Waits (off the runtime) until `n` requests to `host` on Envoy's
/// listener at `port` all get `body`.
async fn all_reach(port: u16, host: &'static str, body: &'static str) {
    tokio::task::spawn_blocking(move || {
        eventually(&format!("{host} answers {body}"), || {
            spread_to(port, host, 10, &[]).keys().eq([body])
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_hosts_static_and_dns_through_the_outbound_listener() {
    let mesh = mesh().await;
    let static_upstream = upstream("static", Arc::new(AtomicU64::new(0)));
    let dns_upstream = upstream("dns", Arc::new(AtomicU64::new(0)));
    let (static_port, dns_port) = (free_port(), free_port());
    apply(
        &mesh.store,
        &format!(
            r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: api, namespace: default}}
spec:
  hosts: [api.external.test]
  location: MESH_EXTERNAL
  ports: [{{number: {static_port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  endpoints: [{{address: 127.0.0.1, ports: {{http: {static_upstream}}}}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: named, namespace: default}}
spec:
  hosts: [named.external.test]
  ports: [{{number: {dns_port}, name: http, protocol: HTTP}}]
  resolution: DNS
  endpoints: [{{address: localhost, ports: {{http: {dns_upstream}}}}}]
"#
        ),
    )
    .await;
    all_reach(static_port, "api.external.test", "static").await;
    all_reach(dns_port, "named.external.test", "dns").await;
    // Deleting an entry takes its host away from the proxy.
    mesh.store
        .delete(&ConfigKey::new("ServiceEntry", "default", "api"), None)
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || {
        eventually("api.external.test is gone", || {
            !spread_to(static_port, "api.external.test", 5, &[]).contains_key("static")
        })
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selected_workload_entry_receives_traffic() {
    let mesh = mesh().await;
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
    apply(
        &mesh.store,
        &format!(
            r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: vm, namespace: default}}
spec:
  hosts: [vm.mesh.test]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: http, protocol: HTTP}}]
  resolution: STATIC
  workloadSelector: {{labels: {{app: vm}}}}
---
{}"#,
            workload("vm-1", vm1)
        ),
    )
    .await;
    all_reach(port, "vm.mesh.test", "vm-1").await;
    // A second WorkloadEntry joins; the first leaves: each write reaches
    // the proxy.
    apply(&mesh.store, &workload("vm-2", vm2)).await;
    tokio::task::spawn_blocking(move || {
        eventually("both workloads answer", || {
            spread_to(port, "vm.mesh.test", 30, &[]).len() == 2
        })
    })
    .await
    .unwrap();
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
    let mesh = mesh().await;
    let (v1, v2) = (tcp_upstream("v1"), tcp_upstream("v2"));
    let port = free_port();
    apply(
        &mesh.store,
        &format!(
            r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {{name: echo, namespace: default}}
spec:
  hosts: [echo.mesh.test]
  location: MESH_INTERNAL
  ports: [{{number: {port}, name: tcp, protocol: TCP}}]
  resolution: STATIC
  endpoints:
  - {{address: 127.0.0.1, ports: {{tcp: {v1}}}, labels: {{version: v1}}}}
  - {{address: 127.0.0.1, ports: {{tcp: {v2}}}, labels: {{version: v2}}}}
---
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
        ),
    )
    .await;
    tokio::task::spawn_blocking(move || {
        eventually("every connection reaches v1", || {
            tcp_spread(port, 10).keys().eq(["v1"])
        })
    })
    .await
    .unwrap();
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
