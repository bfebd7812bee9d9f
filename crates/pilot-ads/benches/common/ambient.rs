//! The `ads` bench's ambient scenario (`--ambient [NODES]`, default 1,000
//! nodes): ztunnels, one per node, served WDS (`istio.workload.Address`)
//! and WADS (`istio.security.Authorization`) over delta xDS, against the
//! same change pushed to as many Envoy sidecars.
//!
//! The mesh, for N nodes: 10 N workloads (Pods enrolled in ambient by
//! their `istio.io/dataplane-mode: ambient` label), workload `i` on node
//! `node-{i % N}` in namespace `ns{i % (N / 10)}`; N services with a
//! virtual IP, 10 instances each (each instance is its workload:
//! `ServiceInstance::with_workload`), a service's instances in its
//! namespace and on 10 nodes; and one L4 AuthorizationPolicy per
//! namespace (ALLOW from its namespace and the next, on port 9080). Each
//! node runs workloads of one namespace.
//!
//! One run, one process (the server's), the clients in a child process
//! (this same binary, `--ztunnels N --port P`: [`clients_main`]), so that
//! the server's CPU and RSS are its own:
//! 1. N ztunnels connect, each subscribing wildcard to both types, and
//!    ACK: the connect storm (every ztunnel from connect to both types
//!    ACKed), the bytes each received by type, the server's CPU and the
//!    clients', and the server's RSS per ztunnel once it is idle;
//! 2. a pod change: a new workload of `svc-2`, on a node that already runs
//!    workloads of its namespace; the time from the registry write to each
//!    ztunnel's ACK of the WDS response carrying it, the responses, the
//!    Addresses and the bytes each ztunnel got for it (counted over the
//!    change and one second after), the names those responses carried,
//!    and the server's CPU from the write to the last ACK;
//! 3. the baseline: the same mesh served to N Envoy sidecars (delta,
//!    `pilot_test_support::ads::proxies`, in namespaces `ns{i % (N / 10)}`)
//!    and the same pod change: each sidecar's EDS ACK, the EDS bytes and
//!    responses it got, the server's CPU.
//!
//! The ztunnel client is ours, on the lean transport
//! ([`GrpcStream`]): it sends the node id, metadata and subscriptions a
//! ztunnel sends, ACKs every response by nonce and decodes of a response
//! only its version, nonce, type and resource names.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use pilot_ads::XdsOptions;
use pilot_model::{
    ConfigStore, DynConfig, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceDiscovery,
    ServiceInstance, Workload, WorkloadKind,
};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::proxies::Proxies;
use pilot_test_support::ads::{AdsRequest, GrpcStream, request_headers};
use pilot_test_support::measure::{now_micros, percentile, rss_mb};
use prost::Message;

use crate::serving::Serving;

/// The WDS type URL.
const ADDRESS: &str = "type.googleapis.com/istio.workload.Address";
/// The WADS type URL.
const AUTHORIZATION: &str = "type.googleapis.com/istio.security.Authorization";
/// Workloads per node (and instances per service).
const PER_NODE: usize = 10;
/// The service the pod change adds a workload to.
const CHANGED: usize = 2;
/// How long the clients wait for an ACK before answering that some never
/// came.
const GIVE_UP: Duration = Duration::from_secs(180);

/// The mesh's shape for `nodes` nodes (see the module's doc).
#[derive(Clone, Copy)]
struct Mesh {
    nodes: usize,
    namespaces: usize,
}

impl Mesh {
    fn new(nodes: usize) -> Self {
        assert!(
            nodes >= PER_NODE && nodes.is_multiple_of(PER_NODE),
            "--ambient takes a node count that is a multiple of {PER_NODE}"
        );
        Mesh {
            nodes,
            namespaces: nodes / PER_NODE,
        }
    }

    fn workloads(&self) -> usize {
        self.nodes * PER_NODE
    }

    /// Workload `i`'s service: `i = q N + r` backs service
    /// `r % NS + NS q`, in namespace `r % NS` (as the workload), so each
    /// service has 10 instances on 10 nodes.
    fn service_of(&self, i: usize) -> usize {
        let (q, r) = (i / self.nodes, i % self.nodes);
        r % self.namespaces + self.namespaces * q
    }

    fn namespace(&self, service: usize) -> String {
        format!("ns{}", service % self.namespaces)
    }

    fn host(&self, service: usize) -> String {
        format!("svc-{service}.{}.svc.cluster.local", self.namespace(service))
    }

    fn vip(service: usize) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(0xac10_0000 + service as u32))
    }

    fn port() -> Port {
        Port::new("http", 9080, Protocol::Http)
    }

    /// Service `service`'s workload `name` at `ip` on `node`, enrolled in
    /// ambient, as the instance it is.
    fn instance(
        &self,
        registry: &MemoryServiceRegistry,
        service: usize,
        name: &str,
        ip: IpAddr,
        node: usize,
    ) {
        let namespace = self.namespace(service);
        let labels = Labels::from_pairs([
            ("app", format!("svc-{service}").as_str()),
            (pilot_model::DATAPLANE_MODE_LABEL, pilot_model::AMBIENT),
        ]);
        let workload = Workload::new(WorkloadKind::Pod, &namespace, name)
            .with_addresses([ip])
            .with_node(format!("node-{node}"))
            .with_service_account(format!("svc-{service}"))
            .with_labels(labels.clone());
        let host = self.host(service);
        let held = registry.get_service(&host).expect("the service exists");
        let instance = ServiceInstance::new(held, NetworkEndpoint::new(ip, 9080, Self::port()), labels)
            .with_workload(Arc::new(workload));
        registry.add_instance(instance).expect("the service has the port");
    }

    /// Namespace `n`'s L4 policy: ALLOW from `n` and the next namespace,
    /// to port 9080.
    fn policy(&self, n: usize) -> DynConfig {
        let yaml = format!(
            "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: allow-neighbours, namespace: ns{n}}}\nspec:\n  action: ALLOW\n  rules: [{{from: [{{source: {{namespaces: [ns{n}, ns{}]}}}}], to: [{{operation: {{ports: [\"9080\"]}}}}]}}]\n",
            (n + 1) % self.namespaces
        );
        let mut objects = pilot_model::document::parse("policy.yaml", &yaml, &pilot_api::default_registry())
            .expect("a valid AuthorizationPolicy");
        objects.remove(0)
    }

    async fn populate(&self, registry: &MemoryServiceRegistry, store: &MemoryConfigStore) {
        for s in 0..self.nodes {
            let mut service = Service::new(self.host(s), vec![Self::port()]);
            service.address = Some(Self::vip(s));
            registry.add_service(service);
        }
        for i in 0..self.workloads() {
            let s = self.service_of(i);
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0001 + i as u32));
            self.instance(registry, s, &format!("svc-{s}-{i}"), ip, i % self.nodes);
        }
        for n in 0..self.namespaces {
            store.create(self.policy(n)).await.expect("create");
        }
    }

    /// The pod change: a new workload of [`CHANGED`], on the node of its
    /// first instance (which runs workloads of its namespace only).
    fn change(&self, registry: &MemoryServiceRegistry) -> String {
        let node = (0..self.workloads())
            .find(|&i| self.service_of(i) == CHANGED)
            .map(|i| i % self.nodes)
            .expect("the service has instances");
        let name = format!("svc-{CHANGED}-new");
        let ip = IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1));
        self.instance(registry, CHANGED, &name, ip, node);
        format!("Kubernetes//Pod/{}/{name}", self.namespace(CHANGED))
    }
}

/// A server on the mesh.
struct Running {
    serving: Serving,
    registry: Arc<MemoryServiceRegistry>,
}

async fn start(mesh: &Mesh) -> Running {
    let store = MemoryConfigStore::new(pilot_api::default_registry());
    let registry = MemoryServiceRegistry::new();
    mesh.populate(&registry, &store).await;
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    controller.wait_synced().await;
    let registry = Arc::new(registry);
    let serving = Serving::start(
        controller,
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        XdsOptions::default(),
    )
    .await;
    Running { serving, registry }
}

/// The load average over the last minute.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// The p50 / p99 / max of sorted `times`.
fn percentiles(times: &[Duration]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!(
        "{:.0} / {:.0} / {:.0} ms",
        ms(percentile(times, 0.5)),
        ms(percentile(times, 0.99)),
        ms(*times.last().unwrap())
    )
}

/// Waits (100 ms steps, 3 s at most) until this process used under 5 ms
/// of CPU in 100 ms; returns how long that took.
async fn idle() -> Duration {
    let quiet = Instant::now();
    loop {
        let cpu = crate::cpu_time();
        tokio::time::sleep(Duration::from_millis(100)).await;
        if crate::cpu_time().saturating_sub(cpu) < Duration::from_millis(5)
            || quiet.elapsed() > Duration::from_secs(3)
        {
            return quiet.elapsed();
        }
    }
}

/// When the push of `version` (or a later one) was published, from its
/// first change (ms), or `—`.
async fn published(pushes: &mut pilot_ads::PushSubscription, version: u64) -> String {
    let wait = async {
        while let Some(info) = pushes.next().await {
            if info.version >= version {
                return info.latency;
            }
        }
        None
    };
    match tokio::time::timeout(Duration::from_secs(5), wait).await {
        Ok(Some(latency)) => format!("{:.0}", latency.as_secs_f64() * 1e3),
        _ => "—".into(),
    }
}

/// How the distinct values of `values` are spread: `value` when all are
/// equal, else `min–max (mean)`.
fn spread(values: impl Iterator<Item = u64>) -> String {
    let values: Vec<u64> = values.collect();
    let (min, max) = (
        values.iter().min().copied().unwrap_or(0),
        values.iter().max().copied().unwrap_or(0),
    );
    if min == max {
        return min.to_string();
    }
    let mean = values.iter().sum::<u64>() as f64 / values.len() as f64;
    format!("{min}–{max} (mean {mean:.1})")
}

/// The bench's ambient run with `nodes` nodes; prints its table.
pub(crate) async fn run(nodes: usize) {
    let mesh = Mesh::new(nodes);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let kb = |b: f64| b / 1024.0;

    // 1. The ztunnels' connect storm.
    let running = start(&mesh).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_before = rss_mb();
    let cpu = crate::cpu_time();
    let started = Instant::now();
    let start_us = now_micros();
    let mut child = Ztunnels::start(nodes, running.serving.port);
    let watching = running.serving.server.clone();
    let progress = tokio::spawn(async move {
        let started = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            eprintln!(
                "  {:>4.0} s: {} streams open; ended: {:?}; RSS {:.0} MB",
                started.elapsed().as_secs_f64(),
                watching.status().len(),
                watching.stream_ends(),
                rss_mb()
            );
        }
    });
    let storm_times = tokio::task::block_in_place(|| child.wait("both", 1, start_us));
    progress.abort();
    let storm = started.elapsed();
    let storm_cpu = crate::cpu_time().saturating_sub(cpu);
    let storm_load = load();
    let clients_cpu = tokio::task::block_in_place(|| child.cpu());
    let connect = tokio::task::block_in_place(|| child.totals());
    let rss_synced = rss_mb();
    let quiet = idle().await;
    let rss_connected = rss_mb();
    let rss_load = load();

    // 2. The pod change.
    let before = tokio::task::block_in_place(|| child.totals());
    let mut pushes = running.serving.server.subscribe_pushes();
    let version = running.serving.server.version().unwrap() + 1;
    let cpu = crate::cpu_time();
    let start_us = now_micros();
    let changed = mesh.change(&running.registry);
    let change_times = tokio::task::block_in_place(|| child.wait("wds", version, start_us));
    let change_cpu = crate::cpu_time().saturating_sub(cpu);
    let change_load = load();
    let change_published = published(&mut pushes, version).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = tokio::task::block_in_place(|| child.totals());
    let names = tokio::task::block_in_place(|| child.names());
    let reconnects = tokio::task::block_in_place(|| child.reconnects());
    let ends = running.serving.server.stream_ends();
    child.stop();
    running.serving.stop().await;

    // 3. The same mesh and change, to sidecars.
    let running = start(&mesh).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let start_us = now_micros();
    let mut sidecars = Proxies::start(nodes, running.serving.port, mesh.namespaces, true);
    tokio::task::block_in_place(|| sidecars.wait_acked(1, start_us));
    let sidecar_storm = started.elapsed();
    let sidecar_connect = tokio::task::block_in_place(|| sidecars.received());
    idle().await;
    let sidecar_before = tokio::task::block_in_place(|| sidecars.responses());
    let mut pushes = running.serving.server.subscribe_pushes();
    let version = running.serving.server.version().unwrap() + 1;
    let cpu = crate::cpu_time();
    let start_us = now_micros();
    mesh.change(&running.registry);
    let (sidecar_times, eds_bytes) = tokio::task::block_in_place(|| sidecars.ask("eds", version, start_us));
    let sidecar_cpu = crate::cpu_time().saturating_sub(cpu);
    let sidecar_load = load();
    let sidecar_published = published(&mut pushes, version).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let sidecar_after = tokio::task::block_in_place(|| sidecars.responses());
    let sidecar_reconnects = tokio::task::block_in_place(|| sidecars.reconnects());
    sidecars.stop();
    running.serving.stop().await;

    let grown = |f: fn(&Totals) -> u64| before.iter().zip(&after).map(move |(b, a)| f(a) - f(b));
    let mean = |values: &[Totals], f: fn(&Totals) -> u64| {
        values.iter().map(f).sum::<u64>() as f64 / values.len().max(1) as f64
    };
    println!(
        "\nAmbient: {nodes} ztunnels (one per node), {} workloads backing {nodes} services (10 instances each) in {} namespaces, one L4 AuthorizationPolicy per namespace\n",
        mesh.workloads(),
        mesh.namespaces,
    );
    println!("| what | ztunnels | sidecars (delta), same mesh and change | load average |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| bytes per client at connect | {:.1} KB (WDS {:.1} KB in {} responses, {} Addresses; WADS {:.1} KB) | {:.1} KB (CDS, EDS, LDS, RDS) | {storm_load} |",
        kb(mean(&connect, |t| t.wds_bytes + t.wads_bytes)),
        kb(mean(&connect, |t| t.wds_bytes)),
        spread(connect.iter().map(|t| t.wds_responses)),
        spread(connect.iter().map(|t| t.wds_resources)),
        kb(mean(&connect, |t| t.wads_bytes)),
        kb(sidecar_connect as f64),
    );
    println!(
        "| connect storm: all synced (p50 / p99 / max ACK {}); server CPU {:.1} s, clients' CPU {:.1} s | {:.1} s | {:.1} s | {storm_load} |",
        percentiles(&storm_times),
        storm_cpu.as_secs_f64(),
        clients_cpu.as_secs_f64(),
        storm.as_secs_f64(),
        sidecar_storm.as_secs_f64(),
    );
    println!(
        "| server RSS per connected ztunnel, once the server is idle ({:.1} s after the storm) | {:.1} KB ({rss_before:.0} → {rss_connected:.0} MB; right after the storm {:.1} KB) | | {rss_load} |",
        quiet.as_secs_f64(),
        (rss_connected - rss_before) * 1024.0 / nodes as f64,
        (rss_synced - rss_before) * 1024.0 / nodes as f64,
    );
    println!(
        "| pod change (a workload added to `svc-2`): from the registry write to each client's ACK (WDS for a ztunnel, EDS for a sidecar), p50 / p99 / max | {} | {} | {change_load} / {sidecar_load} |",
        percentiles(&change_times),
        percentiles(&sidecar_times),
    );
    println!(
        "| the same: the push published (debounce included), then the first client's ACK | {} ms, {:.0} ms | {} ms, {:.0} ms | |",
        change_published,
        ms(change_times[0]),
        sidecar_published,
        ms(sidecar_times[0]),
    );
    println!(
        "| the same: responses and bytes each client got for it | WDS responses {}, Addresses {}, WDS bytes {}; WADS responses {} | responses {}, EDS bytes {:.0} (mean) | |",
        spread(grown(|t| t.wds_responses)),
        spread(grown(|t| t.wds_resources)),
        spread(grown(|t| t.wds_bytes)),
        spread(grown(|t| t.wads_responses)),
        spread(sidecar_before.iter().zip(&sidecar_after).map(|(b, a)| a - b)),
        eds_bytes,
    );
    println!("| the same: what the ztunnels' last WDS response named (expected `{changed}`) | {names} | | |");
    println!(
        "| the same: server CPU from the write to the last ACK | {:.1} ms | {:.1} ms | |",
        ms(change_cpu),
        ms(sidecar_cpu),
    );
    println!(
        "| clients' reconnects; server: streams ended | {reconnects}; {ends:?} | {sidecar_reconnects} | |"
    );
}

/// One ztunnel's counts, as the clients' process reports them.
#[derive(Default, Clone, Copy)]
struct Totals {
    wds_responses: u64,
    wds_resources: u64,
    wds_bytes: u64,
    wads_responses: u64,
    wads_bytes: u64,
}

/// The ztunnels' process, seen from the parent.
struct Ztunnels {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Ztunnels {
    /// Starts `count` ztunnels against `port` in a child process (this
    /// same binary, whose `main` calls [`child_args`]).
    fn start(count: usize, port: u16) -> Self {
        let mut child = std::process::Command::new(std::env::current_exe().expect("own path"))
            .args(["--ztunnels", &count.to_string(), "--port", &port.to_string()])
            .env("_RJEM_MALLOC_CONF", pilot_test_support::ads::proxies::MALLOC_CONF)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the ztunnels");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Ztunnels { child, stdin, stdout }
    }

    fn ask(&mut self, question: &str) -> String {
        writeln!(self.stdin, "{question}").expect("ztunnels alive");
        self.stdin.flush().expect("ztunnels alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("ztunnels answer");
        assert!(!line.is_empty(), "the ztunnels' process ended");
        line.trim().to_string()
    }

    /// Every ztunnel's time from `start` (µs since the epoch) to its ACK
    /// of `what` (`wds`, `wads`, or `both`: the later) at `version` or
    /// later, sorted.
    fn wait(&mut self, what: &str, version: u64, start: u64) -> Vec<Duration> {
        let line = self.ask(&format!("wait {what} {version} {start}"));
        assert!(
            line != "-",
            "some ztunnel did not ACK {what} version {version} within {GIVE_UP:?}"
        );
        let mut times: Vec<Duration> = line
            .split_whitespace()
            .map(|w| Duration::from_micros(w.parse().expect("µs")))
            .collect();
        times.sort();
        times
    }

    /// Every ztunnel's counts so far, by index.
    fn totals(&mut self) -> Vec<Totals> {
        self.ask("totals")
            .split_whitespace()
            .map(|w| {
                let n: Vec<u64> = w.split('/').map(|n| n.parse().expect("a count")).collect();
                Totals {
                    wds_responses: n[0],
                    wds_resources: n[1],
                    wds_bytes: n[2],
                    wads_responses: n[3],
                    wads_bytes: n[4],
                }
            })
            .collect()
    }

    /// The names the ztunnels' last WDS responses carried (when few), with
    /// how many ztunnels got each list.
    fn names(&mut self) -> String {
        self.ask("names")
    }

    fn cpu(&mut self) -> Duration {
        Duration::from_millis(self.ask("cpu").parse().expect("milliseconds"))
    }

    fn reconnects(&mut self) -> String {
        self.ask("reconnects")
    }

    fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// When `args` are a ztunnels' process's (`--ztunnels N --port P`), its
/// ztunnel count and the server's port.
pub(crate) fn child_args(args: &[String]) -> Option<(usize, u16)> {
    let at = args.iter().position(|a| a == "--ztunnels")?;
    let count = args.get(at + 1)?.parse().ok()?;
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|at| args.get(at + 1)?.parse().ok())?;
    Some((count, port))
}

/// What one ztunnel recorded.
#[derive(Default)]
struct Record {
    /// By type (`[WDS, WADS]`): responses, resources and bytes (whole
    /// encoded messages) received.
    responses: [AtomicU64; 2],
    resources: [AtomicU64; 2],
    bytes: [AtomicU64; 2],
    /// By type: the version of the latest response ACKed, and when
    /// (wall-clock µs) its first response was.
    version: [AtomicU64; 2],
    at: [AtomicU64; 2],
    /// The names of the latest WDS response, when it had 16 or fewer.
    last_names: Mutex<Vec<String>>,
}

/// Reconnections, by reason.
#[derive(Default)]
struct Ends(Mutex<BTreeMap<String, u64>>);

/// The ztunnels' process: runs `count` ztunnels against `port` and
/// answers the parent on stdin: `wait WHAT VERSION START_US` with every
/// ztunnel's time from START to its ACK at VERSION or later (`-` after
/// [`GIVE_UP`]); `totals` with every ztunnel's
/// `wds_responses/wds_resources/wds_bytes/wads_responses/wads_bytes`;
/// `names`; `cpu` (ms); `reconnects`.
pub(crate) fn clients_main(count: usize, port: u16) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let headers = request_headers(port, DeltaDiscoveryRequest::PATH);
    let records: Vec<Arc<Record>> = (0..count).map(|_| Arc::default()).collect();
    let ends = Arc::new(Ends::default());
    runtime.block_on(async {
        for (i, record) in records.iter().enumerate() {
            tokio::spawn(ztunnel(
                port,
                headers.clone(),
                i,
                Arc::clone(record),
                Arc::clone(&ends),
            ));
        }
        let (lines_tx, mut lines) = tokio::sync::mpsc::channel::<String>(1);
        std::thread::spawn(move || {
            for line in BufReader::new(std::io::stdin()).lines() {
                let Ok(line) = line else { break };
                if lines_tx.blocking_send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = lines.recv().await {
            let answer = answer(&records, &ends, &line).await;
            println!("{answer}");
            let _ = std::io::stdout().flush();
        }
    });
}

async fn answer(records: &[Arc<Record>], ends: &Ends, line: &str) -> String {
    let load = |a: &AtomicU64| a.load(Ordering::Acquire);
    let mut words = line.split_whitespace();
    match words.next() {
        Some("cpu") => pilot_test_support::measure::cpu_time().as_millis().to_string(),
        Some("totals") => records
            .iter()
            .map(|r| {
                format!(
                    "{}/{}/{}/{}/{}",
                    load(&r.responses[0]),
                    load(&r.resources[0]),
                    load(&r.bytes[0]),
                    load(&r.responses[1]),
                    load(&r.bytes[1])
                )
            })
            .collect::<Vec<_>>()
            .join(" "),
        Some("names") => {
            let mut lists: BTreeMap<String, usize> = BTreeMap::new();
            for r in records {
                let names = r.last_names.lock().unwrap().join(",");
                *lists
                    .entry(if names.is_empty() {
                        "(many or none)".into()
                    } else {
                        names
                    })
                    .or_default() += 1;
            }
            lists
                .iter()
                .map(|(names, n)| format!("{n}x {names}"))
                .collect::<Vec<_>>()
                .join("; ")
        }
        Some("reconnects") => {
            let ends = ends.0.lock().unwrap();
            if ends.is_empty() {
                "no reconnects".into()
            } else {
                ends.iter()
                    .map(|(why, n)| format!("{n}x {why}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        }
        Some("wait") => {
            let (Some(what), Some(version), Some(start)) = (
                words.next(),
                words.next().and_then(|w| w.parse::<u64>().ok()),
                words.next().and_then(|w| w.parse::<u64>().ok()),
            ) else {
                return "-".into();
            };
            let slots: &[usize] = match what {
                "wds" => &[0],
                "wads" => &[1],
                _ => &[0, 1],
            };
            let deadline = Instant::now() + GIVE_UP;
            while records
                .iter()
                .any(|r| slots.iter().any(|&s| load(&r.version[s]) < version))
            {
                if Instant::now() > deadline {
                    return "-".into();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            records
                .iter()
                .map(|r| {
                    let at = slots.iter().map(|&s| load(&r.at[s])).max().unwrap_or(0);
                    at.saturating_sub(start).to_string()
                })
                .collect::<Vec<_>>()
                .join(" ")
        }
        _ => "-".into(),
    }
}

/// What a ztunnel decodes of a `DeltaDiscoveryResponse`: version, the
/// resources' names, type, nonce.
#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    system_version_info: String,
    #[prost(message, repeated, tag = "2")]
    resources: Vec<Named>,
    #[prost(string, tag = "4")]
    type_url: String,
    #[prost(string, tag = "5")]
    nonce: String,
}

/// A `Resource`'s name (its other fields skipped), read in place (a
/// string on the wire; 11,000 per ztunnel at connect).
#[derive(Clone, PartialEq, Message)]
struct Named {
    #[prost(bytes = "bytes", tag = "3")]
    name: Bytes,
}

fn string(text: &str) -> Value {
    Value {
        kind: Some(value::Kind::StringValue(text.into())),
    }
}

/// Ztunnel `index`'s node, as ztunnel sends it: its pod in
/// `istio-system`, on node `node-{index}`.
fn node(index: usize) -> Node {
    let ip = Ipv4Addr::from(0x0c00_0000 + index as u32).to_string();
    let pod = format!("ztunnel-{index}");
    let node = format!("node-{index}");
    let fields = [
        ("NAME", pod.as_str()),
        ("NAMESPACE", "istio-system"),
        ("INSTANCE_IPS", ip.as_str()),
        ("NODE_NAME", node.as_str()),
        ("CLUSTER_ID", "Kubernetes"),
    ];
    Node {
        id: format!("ztunnel~{ip}~{pod}.istio-system~istio-system.svc.cluster.local"),
        metadata: Some(Struct {
            fields: fields.iter().map(|(k, v)| (k.to_string(), string(v))).collect(),
        }),
        ..Default::default()
    }
}

/// One ztunnel: a stream until it fails or ends, then again after a
/// jittered backoff (500 ms doubling to 15 s, as ztunnel's).
async fn ztunnel(port: u16, headers: Bytes, index: usize, record: Arc<Record>, ends: Arc<Ends>) {
    let mut backoff = Duration::from_millis(500);
    let mut attempt = 0u64;
    loop {
        let why = stream(port, &headers, index, &record).await;
        *ends.0.lock().unwrap().entry(why).or_default() += 1;
        attempt += 1;
        let jitter = ((index as u64)
            .wrapping_mul(2_654_435_761)
            .wrapping_add(attempt * 40_503))
            % 1000;
        tokio::time::sleep(backoff.mul_f64(jitter as f64 / 1000.0)).await;
        backoff = (backoff * 2).min(Duration::from_secs(15));
    }
}

/// One stream: subscribes (wildcard) to both types, ACKs every response;
/// returns why it ended.
async fn stream(port: u16, headers: &Bytes, index: usize, record: &Record) -> String {
    let mut h2 = match GrpcStream::open(port, headers).await {
        Ok(h2) => h2,
        Err(why) => return why.to_string(),
    };
    for type_url in [ADDRESS, AUTHORIZATION] {
        let request = DeltaDiscoveryRequest {
            node: Some(node(index)),
            type_url: type_url.into(),
            ..Default::default()
        };
        h2.send(&[Bytes::from(request.encode_to_vec())]);
    }
    loop {
        let message = match h2.message().await {
            Ok(Some(message)) => message,
            Ok(None) => return "ended by the server (OK)".into(),
            Err(why) => return why.to_string(),
        };
        let size = message.len() as u64;
        let response = match Response::decode(message) {
            Ok(response) => response,
            Err(error) => return format!("decode: {error}"),
        };
        let slot = match response.type_url.as_str() {
            ADDRESS => 0,
            AUTHORIZATION => 1,
            other => return format!("a response of type {other}"),
        };
        let ack = DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        };
        h2.send(&[Bytes::from(ack.encode_to_vec())]);
        record.responses[slot].fetch_add(1, Ordering::Relaxed);
        record.resources[slot].fetch_add(response.resources.len() as u64, Ordering::Relaxed);
        record.bytes[slot].fetch_add(size, Ordering::Relaxed);
        if slot == 0 {
            *record.last_names.lock().unwrap() = if response.resources.len() <= 16 {
                response
                    .resources
                    .iter()
                    .map(|r| String::from_utf8_lossy(&r.name).into_owned())
                    .collect()
            } else {
                Vec::new()
            };
        }
        if let Ok(version) = response.system_version_info.parse::<u64>() {
            // The first ACK of a version is when it arrived.
            if record.version[slot].load(Ordering::Relaxed) < version {
                record.at[slot].store(now_micros(), Ordering::Relaxed);
                record.version[slot].store(version, Ordering::Release);
            }
        }
    }
}
