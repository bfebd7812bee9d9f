//! ADS convergence and memory: time from a RouteRule write to every
//! connected client having ACKed the new route configuration, with N ADS
//! clients on real tonic gRPC streams over loopback, in a mesh of 1,000
//! services; and the server's resident memory with the clients connected
//! and after they left.
//!
//!     cargo bench -p pilot-xds --bench ads [-- [--own] [--namespaces K] [--compare] CLIENTS...]
//!
//! (default: 100 1000 2000 clients). With `--own` every client also runs an
//! instance of one of the services (so each has an inbound side of its
//! own); without, none does. `--namespaces K` puts client `i` in namespace
//! `ns{i % K}` (one proxy class per namespace; default 1, `default`).
//! `--compare` runs every size twice in one run: first with every class
//! generating everything itself (`XdsOptions::incremental` false, the
//! generation before sharing), then with shared clusters and load
//! assignments and incremental EDS (the default).
//!
//! After the rule writes, one endpoint is added to a service: its row gives
//! the time to every client's ACK of the EDS response, and the bytes of
//! load assignments each client received for it (state of the world: a
//! changed EDS response carries every subscribed assignment).
//!
//! The server runs in this process; the clients run in a child process (this
//! same binary, `--clients N --port P`), so the server's RSS is its own and
//! the clients' decoding is not counted in it. Both share the machine's two
//! cores. Each client is a sidecar with its own IP and no instances of its
//! own; it subscribes to CDS and LDS (wildcard), to the EDS and RDS names
//! those carry, and ACKs every response (with the full name list, as Envoy
//! does). It decodes only what it needs (names), skipping the rest of each
//! message. A client records when it sent its ACK of each RDS version; the
//! parent asks the child for those times (wall clock, same machine).
//!
//! A client whose stream fails or ends reconnects as Envoy does (jittered
//! exponential backoff, 500 ms to 30 s); the last row gives the number of
//! reconnects with why each stream ended (the client's error chain) and
//! the server's own count (`XdsServer::stream_ends`). While the clients
//! connect, the server prints its progress to stderr every 5 s.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use pilot_model::{ConfigStore, Labels, Port, Protocol, Service, istio};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_xds::{XdsOptions, XdsServer};
use prost::Message;
use tokio::sync::mpsc;

mod common;

const SERVICES: usize = 1_000;
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
const PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// What a client decodes of a `DiscoveryResponse` (other fields skipped).
#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    version_info: String,
    #[prost(message, repeated, tag = "2")]
    resources: Vec<AnyValue>,
    #[prost(string, tag = "4")]
    type_url: String,
    #[prost(string, tag = "5")]
    nonce: String,
}

/// `google.protobuf.Any`'s value, not copied.
#[derive(Clone, PartialEq, Message)]
struct AnyValue {
    #[prost(bytes = "bytes", tag = "2")]
    value: Bytes,
}

/// A cluster's name and whether it uses EDS (`Cluster` fields 1 and 3).
#[derive(Clone, PartialEq, Message)]
struct ClusterName {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "3")]
    eds_cluster_config: Option<Present>,
}

/// A message whose content does not matter, only its presence.
#[derive(Clone, PartialEq, Message)]
struct Present {}

/// `Listener.filter_chains` (3) → `FilterChain.filters` (3) →
/// `Filter.typed_config` (4) → `HttpConnectionManager.rds` (3) →
/// `Rds.route_config_name` (2).
#[derive(Clone, PartialEq, Message)]
struct ListenerRoutes {
    #[prost(message, repeated, tag = "3")]
    filter_chains: Vec<ChainFilters>,
}
#[derive(Clone, PartialEq, Message)]
struct ChainFilters {
    #[prost(message, repeated, tag = "3")]
    filters: Vec<FilterConfig>,
}
#[derive(Clone, PartialEq, Message)]
struct FilterConfig {
    #[prost(message, optional, tag = "4")]
    typed_config: Option<AnyValue>,
}
#[derive(Clone, PartialEq, Message)]
struct ManagerRds {
    #[prost(message, optional, tag = "3")]
    rds: Option<RdsName>,
}
#[derive(Clone, PartialEq, Message)]
struct RdsName {
    #[prost(string, tag = "2")]
    route_config_name: String,
}

#[cfg(feature = "bench-jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// The one unsafe of the workspace outside its libraries (see Cargo.toml).
#[allow(unsafe_code)]
unsafe extern "C" {
    /// glibc: returns free heap memory to the system.
    fn malloc_trim(pad: usize) -> i32;
}

fn rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

fn split_rule(service: usize, v1: i32) -> pilot_model::DynConfig {
    let name = format!("svc-{service}");
    common::split_rule(&name, &format!("{name}-split"), v1)
        .to_dyn()
        .expect("serializes")
}

/// When a client ACKed its latest RDS version: (version, wall-clock µs).
#[derive(Default)]
struct Acked {
    version: AtomicU64,
    at: AtomicU64,
    /// The same for EDS, with the bytes of the last EDS response's
    /// resources.
    eds_version: AtomicU64,
    eds_at: AtomicU64,
    eds_bytes: AtomicU64,
}

/// Why clients' streams ended, and how often they reconnected.
#[derive(Default)]
struct Reconnects {
    /// Reconnections over every client.
    total: AtomicU64,
    /// The reasons, counted ("connect: ...", "status CODE: message",
    /// "ended by the server").
    reasons: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
}

impl Reconnects {
    fn count(&self, reason: String) {
        *self.reasons.lock().unwrap().entry(reason).or_default() += 1;
    }
}

/// One client, as Envoy behaves: runs a stream until it fails or ends,
/// then reconnects after a jittered exponential backoff (Envoy's ADS
/// retry: from 500 ms to 30 s), counting why.
async fn client(port: u16, index: usize, namespaces: usize, acked: Arc<Acked>, reconnects: Arc<Reconnects>) {
    let mut backoff = Duration::from_millis(500);
    let mut attempt = 0u64;
    loop {
        let reason = stream(port, index, namespaces, &acked).await;
        reconnects.count(reason);
        reconnects.total.fetch_add(1, Ordering::Relaxed);
        attempt += 1;
        // Jitter: a fraction of the backoff, different per client.
        let jitter = ((index as u64)
            .wrapping_mul(2_654_435_761)
            .wrapping_add(attempt * 40_503))
            % 1000;
        tokio::time::sleep(backoff.mul_f64(jitter as f64 / 1000.0)).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// One stream: subscribes, follows EDS/RDS names, ACKs everything; returns
/// why it ended.
async fn stream(port: u16, index: usize, namespaces: usize, acked: &Acked) -> String {
    let channel = match tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .expect("address")
        .connect()
        .await
    {
        Ok(channel) => channel,
        Err(error) => return format!("connect: {error}"),
    };
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(64 * 1024 * 1024);
    let ip = client_ip(index);
    let namespace = if namespaces <= 1 {
        "default".to_string()
    } else {
        format!("ns{}", index % namespaces)
    };
    let node = Node {
        id: format!("sidecar~{ip}~client-{index}.{namespace}~{namespace}.svc.cluster.local"),
        ..Default::default()
    };
    let (tx, rx) = mpsc::channel(16);
    let request = |type_url: &str, names: Vec<String>, version: &str, nonce: &str| DiscoveryRequest {
        node: Some(node.clone()),
        type_url: type_url.into(),
        resource_names: names,
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    };
    let _ = tx.send(request(CDS, vec![], "", "")).await;
    let _ = tx.send(request(LDS, vec![], "", "")).await;
    if let Err(error) = grpc.ready().await {
        return format!("ready: {error}");
    }
    let codec = tonic_prost::ProstCodec::<DiscoveryRequest, Response>::default();
    let requests = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    let response = match grpc
        .streaming(
            tonic::Request::new(requests),
            http::uri::PathAndQuery::from_static(PATH),
            codec,
        )
        .await
    {
        Ok(response) => response,
        Err(status) => return format!("open: status {:?}: {}", status.code(), status.message()),
    };
    let mut responses = response.into_inner();
    let (mut eds, mut rds): (BTreeSet<String>, BTreeSet<String>) = Default::default();
    loop {
        let response = match responses.message().await {
            Ok(Some(response)) => response,
            Ok(None) => return "ended by the server (OK)".into(),
            Err(status) => {
                // The whole chain: hyper's message alone does not say
                // which HTTP/2 error it was.
                let mut reason = format!("status {:?}: {}", status.code(), status.message());
                let mut source = std::error::Error::source(&status);
                while let Some(error) = source {
                    reason.push_str(&format!(" <- {error}"));
                    source = error.source();
                }
                return reason;
            }
        };
        let mut follow_up = None;
        if response.type_url == CDS {
            let names: BTreeSet<String> = response
                .resources
                .iter()
                .filter_map(|a| ClusterName::decode(a.value.clone()).ok())
                .filter(|c| c.eds_cluster_config.is_some())
                .map(|c| c.name)
                .collect();
            if names != eds {
                eds = names;
                follow_up = Some(request(EDS, eds.iter().cloned().collect(), "", ""));
            }
        } else if response.type_url == LDS {
            let names: BTreeSet<String> = response
                .resources
                .iter()
                .filter_map(|a| ListenerRoutes::decode(a.value.clone()).ok())
                .flat_map(|l| l.filter_chains.into_iter().flat_map(|c| c.filters))
                .filter_map(|f| ManagerRds::decode(f.typed_config?.value).ok()?.rds)
                .map(|rds| rds.route_config_name)
                .collect();
            if names != rds {
                rds = names;
                follow_up = Some(request(RDS, rds.iter().cloned().collect(), "", ""));
            }
        }
        let names = if response.type_url == EDS {
            eds.iter().cloned().collect()
        } else if response.type_url == RDS {
            rds.iter().cloned().collect()
        } else {
            vec![]
        };
        let ack = request(&response.type_url, names, &response.version_info, &response.nonce);
        if tx.send(ack).await.is_err() {
            return "request stream closed".into();
        }
        if response.type_url == RDS
            && let Ok(version) = response.version_info.parse::<u64>()
        {
            acked.at.store(now_micros(), Ordering::Relaxed);
            acked.version.store(version, Ordering::Release);
        }
        if response.type_url == EDS
            && let Ok(version) = response.version_info.parse::<u64>()
        {
            let bytes: usize = response.resources.iter().map(|r| r.value.len()).sum();
            acked.eds_bytes.store(bytes as u64, Ordering::Relaxed);
            acked.eds_at.store(now_micros(), Ordering::Relaxed);
            acked.eds_version.store(version, Ordering::Release);
        }
        if let Some(follow_up) = follow_up
            && tx.send(follow_up).await.is_err()
        {
            return "request stream closed".into();
        }
    }
}

/// The child process: runs `clients` clients against `port`, and answers
/// `wait VERSION START_US` on stdin with every client's time from START to
/// its ACK of RDS at VERSION or later (µs, one line), once all have;
/// `eds VERSION START_US` likewise for EDS, each time followed by
/// `/BYTES` (the resources of the EDS response ACKed).
fn clients_main(clients: usize, port: u16, namespaces: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let acked: Vec<Arc<Acked>> = (0..clients).map(|_| Arc::default()).collect();
    let reconnects = Arc::new(Reconnects::default());
    runtime.block_on(async {
        for (i, a) in acked.iter().enumerate() {
            tokio::spawn(client(
                port,
                i,
                namespaces,
                Arc::clone(a),
                Arc::clone(&reconnects),
            ));
        }
        let (lines_tx, mut lines) = mpsc::channel::<String>(1);
        std::thread::spawn(move || {
            for line in BufReader::new(std::io::stdin()).lines() {
                let Ok(line) = line else { break };
                if lines_tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            if line == "reconnects" {
                let reasons = reconnects.reasons.lock().unwrap().clone();
                let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{n}x {r}")).collect();
                println!(
                    "{} reconnects; {}",
                    reconnects.total.load(Ordering::Relaxed),
                    if reasons.is_empty() {
                        "none".to_string()
                    } else {
                        reasons.join("; ")
                    }
                );
                let _ = std::io::stdout().flush();
                continue;
            }
            let eds = line.starts_with("eds");
            let mut words = line.split_whitespace().skip(1);
            let (Some(version), Some(start)) = (
                words.next().and_then(|w| w.parse::<u64>().ok()),
                words.next().and_then(|w| w.parse::<u64>().ok()),
            ) else {
                return;
            };
            let seen = |a: &Acked| {
                if eds {
                    a.eds_version.load(Ordering::Acquire)
                } else {
                    a.version.load(Ordering::Acquire)
                }
            };
            while acked.iter().any(|a| seen(a) < version) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let times: Vec<String> = acked
                .iter()
                .map(|a| {
                    if eds {
                        format!(
                            "{}/{}",
                            a.eds_at.load(Ordering::Relaxed).saturating_sub(start),
                            a.eds_bytes.load(Ordering::Relaxed)
                        )
                    } else {
                        a.at.load(Ordering::Relaxed).saturating_sub(start).to_string()
                    }
                })
                .collect();
            println!("{}", times.join(" "));
            let _ = std::io::stdout().flush();
        }
    });
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[(((sorted.len() - 1) as f64) * p).round() as usize]
}

/// Asks the clients for their ACK times of `version` counted from `start`.
fn wait_acked(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut impl BufRead,
    version: u64,
    start: u64,
) -> Vec<Duration> {
    ask(stdin, stdout, "wait", version, start).0
}

/// Sends `what VERSION START` and reads the sorted times and the mean of
/// the bytes (EDS) that follow them.
fn ask(
    stdin: &mut std::process::ChildStdin,
    stdout: &mut impl BufRead,
    what: &str,
    version: u64,
    start: u64,
) -> (Vec<Duration>, f64) {
    writeln!(stdin, "{what} {version} {start}").expect("clients alive");
    stdin.flush().expect("clients alive");
    let mut line = String::new();
    stdout.read_line(&mut line).expect("clients answer");
    let mut bytes = 0u64;
    let mut times: Vec<Duration> = line
        .split_whitespace()
        .map(|w| {
            let (time, size) = w.split_once('/').unwrap_or((w, "0"));
            bytes += size.parse::<u64>().expect("a number");
            Duration::from_micros(time.parse().expect("a number"))
        })
        .collect();
    assert!(!times.is_empty(), "the clients process ended");
    times.sort();
    let mean = bytes as f64 / times.len() as f64;
    (times, mean)
}

/// Client `index`'s IP.
fn client_ip(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + index as u32))
}

/// How the bench runs: where clients live, and the server's options.
#[derive(Clone, Copy)]
struct Setup {
    own: bool,
    namespaces: usize,
    incremental: bool,
}

async fn converge(clients: usize, setup: Setup) {
    let own = setup.own;
    let store = MemoryConfigStore::new(istio::registry());
    let registry = MemoryServiceRegistry::new();
    for s in 0..SERVICES {
        let host = format!("svc-{s}.default.svc.cluster.local");
        registry.add_service(Service::new(&host, vec![Port::new("http", 9080, Protocol::Http)]));
        for i in 0..4u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i));
            let labels = Labels::from_pairs([("version", if i < 2 { "v1" } else { "v2" })]);
            registry.add_endpoints(&host, ip, labels).expect("service exists");
        }
        store.create(split_rule(s, 50)).await.expect("create");
    }
    if own {
        // Every client runs an instance of a service (two per service at
        // 2,000 clients): each gets its own inbound side.
        for index in 0..clients {
            let host = format!("svc-{}.default.svc.cluster.local", index % SERVICES);
            let labels = Labels::from_pairs([("version", "v1")]);
            registry
                .add_endpoints(&host, client_ip(index), labels)
                .expect("service exists");
        }
    }
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let registry = Arc::new(registry);
    let options = XdsOptions {
        incremental: setup.incremental,
        ..XdsOptions::default()
    };
    let server = XdsServer::new(
        Arc::clone(&controller),
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        options,
    );
    let port = pilot_test_support::free_port();
    let serving = server.clone();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server_task = tokio::spawn(async move {
        let _ = serving
            .serve(([127, 0, 0, 1], port).into(), async {
                let _ = stopped.await;
            })
            .await;
    });
    server.wait_version(1).await;
    let before = rss_mb();
    let start = now_micros();
    let started = Instant::now();
    let mut child = Command::new(std::env::current_exe().expect("own path"))
        .args([
            "--clients",
            &clients.to_string(),
            "--port",
            &port.to_string(),
            "--namespaces",
            &setup.namespaces.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the clients");
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    // Progress while the clients connect (to stderr): streams open, fully
    // synced, and why streams ended so far, as the server saw it.
    let watching = server.clone();
    let progress = tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            let status = watching.status();
            let synced = status
                .iter()
                .filter(|p| p.types.len() == 4 && p.types.values().all(|t| t.synced()))
                .count();
            eprintln!(
                "  {:>4.0} s: {} streams open, {synced} synced; ended: {:?}; RSS {:.0} MB",
                started.elapsed().as_secs_f64(),
                status.len(),
                watching.stream_ends(),
                rss_mb()
            );
        }
    });
    let initial = tokio::task::block_in_place(|| wait_acked(&mut stdin, &mut stdout, 1, start));
    progress.abort();
    let connected = started.elapsed();
    let with_clients = rss_mb();

    let mut writes = Vec::new();
    for round in 0..3 {
        let current = store
            .get(&pilot_model::ConfigKey::new(
                "RouteRule",
                "default",
                "svc-1-split",
            ))
            .await
            .unwrap()
            .unwrap();
        let mut next = split_rule(1, [80, 20, 50][round]);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = server.version().unwrap() + 1;
        let start = now_micros();
        store.update(next).await.unwrap();
        let times = tokio::task::block_in_place(|| wait_acked(&mut stdin, &mut stdout, version, start));
        writes.push((
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            *times.last().unwrap(),
            rss_mb(),
        ));
    }
    // One endpoint added to svc-2 (which no rule write touched).
    let version = server.version().unwrap() + 1;
    let start = now_micros();
    registry
        .add_endpoints(
            "svc-2.default.svc.cluster.local",
            IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1)),
            Labels::from_pairs([("version", "v1")]),
        )
        .expect("service exists");
    let (endpoint, eds_bytes) =
        tokio::task::block_in_place(|| ask(&mut stdin, &mut stdout, "eds", version, start));
    let endpoint_rss = rss_mb();
    let reconnects = tokio::task::block_in_place(|| {
        writeln!(stdin, "reconnects").expect("clients alive");
        stdin.flush().expect("clients alive");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("clients answer");
        line.trim().to_string()
    });
    let ends = server.stream_ends();
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    // Every stream noticed the disconnect and left.
    while !server.status().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // jemalloc's background threads return freed pages after its decay
    // time (10 s); glibc returns only the top of its heaps.
    tokio::time::sleep(Duration::from_secs(if cfg!(feature = "bench-jemalloc") {
        15
    } else {
        1
    }))
    .await;
    let after = rss_mb();
    // What glibc kept of what was freed, handed back: the rest is live.
    // SAFETY: malloc_trim only releases free memory; glibc is this
    // process's allocator.
    #[allow(unsafe_code)]
    unsafe {
        malloc_trim(0)
    };
    let trimmed = rss_mb();
    let _ = stop.send(());
    let _ = server_task.await;
    let mode = if setup.incremental { "shared" } else { "per class" };
    let clients = format!("{clients} / {} ns, {mode}", setup.namespaces);
    println!(
        "| {clients} | initial sync | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} s | {before:.0} MB | {with_clients:.0} MB | |",
        percentile(&initial, 0.5).as_secs_f64() * 1e3,
        percentile(&initial, 0.99).as_secs_f64() * 1e3,
        initial.last().unwrap().as_secs_f64() * 1e3,
        connected.as_secs_f64()
    );
    for (round, (p50, p99, max, rss)) in writes.into_iter().enumerate() {
        println!(
            "| {clients} | write {} | {:.0} ms | {:.0} ms | {:.0} ms | | | {rss:.0} MB | {} |",
            round + 1,
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            if round == 2 {
                format!("{after:.0} MB ({trimmed:.0} MB after malloc_trim)")
            } else {
                String::new()
            },
        );
    }
    println!(
        "| {clients} | endpoint added (EDS ACKed; {:.0} KB of assignments per client) | {:.0} ms | {:.0} ms | {:.0} ms | | | {endpoint_rss:.0} MB | |",
        eds_bytes / 1024.0,
        percentile(&endpoint, 0.5).as_secs_f64() * 1e3,
        percentile(&endpoint, 0.99).as_secs_f64() * 1e3,
        endpoint.last().unwrap().as_secs_f64() * 1e3,
    );
    println!("| {clients} | clients: {reconnects}; server: streams ended {ends:?} | | | | | | | |");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--clients") {
        let clients = args[at + 1].parse().expect("a client count");
        let port = args
            .iter()
            .position(|a| a == "--port")
            .and_then(|at| args[at + 1].parse().ok())
            .expect("a port");
        let namespaces = args
            .iter()
            .position(|a| a == "--namespaces")
            .and_then(|at| args[at + 1].parse().ok())
            .unwrap_or(1);
        clients_main(clients, port, namespaces);
        return;
    }
    if args.iter().any(|a| a == "--test") {
        return;
    }
    let namespaces: usize = args
        .iter()
        .position(|a| a == "--namespaces")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(1);
    let counts: Vec<usize> = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| args[i - 1] != "--namespaces")
        .filter_map(|(_, a)| a.parse().ok())
        .collect();
    let counts = if counts.is_empty() {
        vec![100, 1000, 2000]
    } else {
        counts
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "| clients | what | to all ACKed p50 | p99 | max | first sync (all) | server RSS before | server RSS connected | server RSS after disconnect |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let own = args.iter().any(|a| a == "--own");
    let modes: &[bool] = if args.iter().any(|a| a == "--compare") {
        &[false, true]
    } else {
        &[true]
    };
    for clients in counts {
        for &incremental in modes {
            let setup = Setup {
                own,
                namespaces,
                incremental,
            };
            runtime.block_on(converge(clients, setup));
        }
    }
}
