//! A rolling restart under traffic, with a real Envoy 1.40 and a real
//! proxyless gRPC client (PyPI's `grpcio`, the client and server scripts
//! of `crates/pilot-system-tests/tests/grpc/`, installed in `.tools/grpc`
//! by `scripts/install-deps`) on one ADS server. Two services each have
//! [`INSTANCES`] real backends on loopback: `reviews` (HTTP listeners,
//! called through Envoy) and `greeter` (gRPC server processes, called
//! through `xds:///`). While both clients send requests without pause,
//! every instance of both is replaced, one after another, [`ROUNDS`]
//! times, as a Deployment's rolling restart does: a new backend starts
//! and serves (ready), is added to the registry, the old one is removed
//! from the registry at once (no waiting for the proxies), and the old
//! backend shuts down gracefully once the proxies have ACKed a push
//! without it (its termination grace). Not one request fails; after every
//! step the endpoints Envoy holds (`/clusters`) are the registry's, and at
//! the end the gRPC client's calls are answered by exactly the registry's
//! backends.

mod support;

use std::collections::BTreeSet;
use std::net::{IpAddr, TcpListener};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_model::{Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use serde_json::Value;
use support::envoy::{admin, eventually, free_port, start_envoy};
use support::grpc::Python;
use support::traffic::{Tally, http_client};

const REVIEWS: &str = "reviews.default.svc.cluster.local";
const GREETER: &str = "greeter.default.svc.cluster.local";
const GRPC_NODE: &str = "sidecar~127.0.0.1~grpc-client.default~default.svc.cluster.local";
/// Backends per service.
const INSTANCES: usize = 2;
/// Times every instance is replaced.
const ROUNDS: usize = 3;
/// Keep-alive HTTP clients calling through Envoy.
const CLIENTS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_of_the_world_rollout_fails_no_request() {
    rollout(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_rollout_fails_no_request() {
    rollout(true).await;
}

/// An HTTP backend on loopback that answers every request with its name;
/// [`HttpBackend::retire`] closes its listener and lets the connections
/// it has finish (a graceful shutdown).
struct HttpBackend {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl HttpBackend {
    fn start(name: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        stream.set_nonblocking(false).unwrap();
                        let name = name.clone();
                        std::thread::spawn(move || {
                            support::envoy::serve(stream, &name, Arc::new(AtomicU64::new(0)))
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            // The listener closes here: new connections are refused.
        });
        HttpBackend { port, stop }
    }

    fn retire(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// One backend of each service, the same generation.
struct Generation {
    http: HttpBackend,
    grpc: Python,
    grpc_port: u16,
}

fn instance(service: &Arc<Service>, port: u16, name: &str) -> ServiceInstance {
    ServiceInstance::new(
        Arc::clone(service),
        NetworkEndpoint::new(
            "127.0.0.1".parse::<IpAddr>().unwrap(),
            port,
            service.ports[0].clone(),
        ),
        Labels::from_pairs([("app", "rollout"), ("pod", name)]),
    )
}

/// The backend ports of `cluster` that Envoy's `/clusters` lists.
fn envoy_hosts(admin_port: u16, cluster: &str) -> BTreeSet<u16> {
    let prefix = format!("{cluster}::127.0.0.1:");
    admin(admin_port, "/clusters")
        .lines()
        .filter_map(|l| Some(l.strip_prefix(&prefix)?.split_once("::cx_total::")?.0))
        .filter_map(|port| port.parse().ok())
        .collect()
}

/// The backend ports the registry holds for `host`.
fn registry_ports(registry: &MemoryServiceRegistry, host: &str) -> BTreeSet<u16> {
    use pilot_model::ServiceDiscovery;
    registry
        .instances(host, &[], &[])
        .iter()
        .map(|i| i.endpoint.port)
        .collect()
}

async fn rollout(delta: bool) {
    let dir = tempfile::tempdir().unwrap();
    let store = MemoryConfigStore::new(istio::registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    let registry = MemoryServiceRegistry::new();
    let reviews_port = free_port();
    let greeter_port = free_port();
    let reviews = registry.add_service(Service::new(
        REVIEWS,
        vec![Port::new("http", reviews_port, Protocol::Http)],
    ));
    let greeter = registry.add_service(Service::new(
        GREETER,
        vec![Port::new("grpc", greeter_port, Protocol::Grpc)],
    ));
    let (server, xds_port) = support::server::serve(controller, Arc::new(registry.clone()));
    let envoy = start_envoy(xds_port, delta);
    let admin_port = envoy.admin_port;
    let bootstrap = dir.path().join("client.json");
    std::fs::write(
        &bootstrap,
        serde_json::json!({
            "xds_servers": [{
                "server_uri": format!("127.0.0.1:{xds_port}"),
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }],
            "node": {
                "id": GRPC_NODE,
                "metadata": {"GENERATOR": "grpc", "NAMESPACE": "default", "LABELS": {}},
                "locality": {},
            },
        })
        .to_string(),
    )
    .unwrap();

    let mut serial = 0;
    let mut start_generation = |dir: &Path| {
        serial += 1;
        let name = format!("pod-{serial}");
        let http = HttpBackend::start(name.clone());
        let grpc_port = free_port();
        let mut grpc = Python::start("server.py", &[&name, &grpc_port.to_string()], &bootstrap, dir);
        assert_eq!(grpc.line(), "started", "{}", grpc.log());
        (
            name,
            Generation {
                http,
                grpc,
                grpc_port,
            },
        )
    };
    let mut live: Vec<(String, Generation)> = Vec::new();
    for _ in 0..INSTANCES {
        let (name, generation) = start_generation(dir.path());
        registry
            .add_instance(instance(&reviews, generation.http.port, &name))
            .unwrap();
        registry
            .add_instance(instance(&greeter, generation.grpc_port, &name))
            .unwrap();
        live.push((name, generation));
    }
    let reviews_cluster = format!("outbound|{reviews_port}||{REVIEWS}");
    let greeter_cluster = format!("outbound|{greeter_port}||{GREETER}");

    // Envoy holds the registry's endpoints, then every proxy ACKed a push
    // at least as new as the one that brought them.
    let converged = |registry: &MemoryServiceRegistry| {
        let registry = registry.clone();
        let server = server.clone();
        let (reviews_cluster, greeter_cluster) = (reviews_cluster.clone(), greeter_cluster.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                eventually("Envoy to hold the registry's endpoints", || {
                    envoy_hosts(admin_port, &reviews_cluster) == registry_ports(&registry, REVIEWS)
                        && envoy_hosts(admin_port, &greeter_cluster) == registry_ports(&registry, GREETER)
                });
            })
            .await
            .unwrap();
            let version = server.version().unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let status = server.status();
                let nodes: BTreeSet<&str> = status
                    .iter()
                    .filter(|p| p.acked_push() >= Some(version))
                    .map(|p| p.node_id.as_str())
                    .collect();
                if nodes.contains(GRPC_NODE) && nodes.len() >= 2 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "push {version} not ACKed by both: {status:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };

    let mut client = Python::start("client.py", &["load"], &bootstrap, dir.path());
    let target = format!("xds:///{GREETER}:{greeter_port}");
    tokio::task::block_in_place(|| {
        eventually("the greeter to answer through xds:///", || {
            client.ask(&format!("health {target}"))["status"] == "SERVING"
        });
        eventually("reviews to answer through Envoy", || {
            support::envoy::request(reviews_port, &[]).0 == 200
        });
    });
    converged(&registry).await;

    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (stop, tally) = (Arc::clone(&stop), Arc::clone(&tally));
            std::thread::spawn(move || http_client(reviews_port, stop, tally))
        })
        .collect();
    let loading = client.ask(&format!("load {target}"));
    assert_eq!(loading["loading"], target.as_str(), "{loading}");
    while tally.ok.load(Ordering::Relaxed) < 100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // The rolling restart.
    let mut retired = Vec::new();
    for _ in 0..ROUNDS {
        for _ in 0..INSTANCES {
            let (name, generation) = tokio::task::block_in_place(|| start_generation(dir.path()));
            registry
                .add_instance(instance(&reviews, generation.http.port, &name))
                .unwrap();
            registry
                .add_instance(instance(&greeter, generation.grpc_port, &name))
                .unwrap();
            live.push((name, generation));
            let (_, mut old) = live.remove(0);
            let localhost = "127.0.0.1".parse().unwrap();
            registry.remove_instances(REVIEWS, localhost, Some(old.http.port));
            registry.remove_instances(GREETER, localhost, Some(old.grpc_port));
            converged(&registry).await;
            old.http.retire();
            old.grpc.retire();
            retired.push(old);
        }
    }

    // Traffic after the last step, then the tallies.
    let before = tally.ok.load(Ordering::Relaxed);
    while tally.ok.load(Ordering::Relaxed) < before + 100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let grpc = tokio::task::block_in_place(|| client.ask("stop"));
    let sum = |v: &Value| -> u64 { v.as_object().unwrap().values().filter_map(Value::as_u64).sum() };
    let (http_ok, http_failed) = (
        tally.ok.load(Ordering::Relaxed),
        tally.failed.load(Ordering::Relaxed),
    );
    let samples = tally.samples.lock().unwrap().clone();
    let (grpc_ok, grpc_failed) = (sum(&grpc["counts"]), sum(&grpc["errors"]));
    eprintln!(
        "{} rollout of {INSTANCES} instances x {ROUNDS}: through Envoy {http_ok} ok, {http_failed} failed {samples:?}; gRPC {grpc_ok} ok, {grpc_failed} failed: {grpc}",
        if delta { "delta" } else { "state of the world" }
    );
    assert!(grpc_ok > 0, "{grpc}\n{}", client.log());
    assert_eq!(
        (http_failed, grpc_failed),
        (0, 0),
        "failed requests: Envoy {samples:?}, gRPC {grpc}\n{}",
        client.log()
    );

    // The endpoints in use are the registry's: Envoy's clusters, and the
    // backends that answer the gRPC client's calls (round robin: every
    // one of them within a few rounds).
    let live_ports =
        |pick: fn(&Generation) -> u16| live.iter().map(|(_, g)| pick(g)).collect::<BTreeSet<u16>>();
    assert_eq!(registry_ports(&registry, REVIEWS), live_ports(|g| g.http.port));
    assert_eq!(registry_ports(&registry, GREETER), live_ports(|g| g.grpc_port));
    assert_eq!(
        envoy_hosts(admin_port, &format!("outbound|{reviews_port}||{REVIEWS}")),
        live_ports(|g| g.http.port)
    );
    assert_eq!(
        envoy_hosts(admin_port, &format!("outbound|{greeter_port}||{GREETER}")),
        live_ports(|g| g.grpc_port)
    );
    let calls = tokio::task::block_in_place(|| client.ask(&format!("count {target} {}", 10 * INSTANCES)));
    assert_eq!(calls["errors"], serde_json::json!({}), "{calls}");
    let answered: BTreeSet<String> = calls["counts"].as_object().unwrap().keys().cloned().collect();
    let names: BTreeSet<String> = live.iter().map(|(name, _)| name.clone()).collect();
    assert_eq!(answered, names, "{calls}");
    drop(retired);
    drop(envoy);
}
