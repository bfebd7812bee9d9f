//! Proxies spread over three replicas (`--spread N`): three real
//! `pilot-discovery` processes (the release binary) on one real etcd, N
//! proxies in three client processes, client process k connected to
//! replica k (its ADS cluster lists all three, its own first), in a scoped
//! mesh: `--services` services (default 1,000) over `--namespaces`
//! namespaces (default 100), each namespace's Sidecar importing its own
//! namespace and the shared host `svc-1` (every proxy's), the services from
//! a services file every replica reads, their RouteRules in etcd.
//!
//! One run:
//! 1. **baseline**, when one process may hold N connections (the open-files
//!    limit): all N proxies on replica 1 (the status writer) alone;
//!    `--writes` changes of svc-1's rule (an all-proxy push), each with
//!    every replica's CPU over a fixed window from the write (every
//!    proxy's ACK, the records published, the status written), less the
//!    same window's CPU with no change;
//! 2. **spread**: N/3 proxies on each replica, the same changes; each
//!    replica's CPU per change beside a third of the baseline's; the
//!    rule's status counts N proxies, N ACKed;
//! 3. **kill**: the status writer is killed with SIGKILL under load; its
//!    proxies reconnect to the others. Measured from the kill: until each
//!    moved proxy ACKed all four types on its new stream (the clients'
//!    clock); until a surviving replica's `/debug/proxy-status` lists
//!    every proxy, once, SYNCED on a live replica; until the rule's status
//!    counts N again (the fewest and most proxies it counted meanwhile:
//!    lost or double-counted); then one more change is ACKed by all N and
//!    counted by the new writer.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use pilot_model::{ConfigKey, ConfigStore, DynConfig};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::ads::proxies::Proxies;
use pilot_test_support::measure::{cpu_time_of, now_micros, percentile, raise_open_files, rss_mb_of};
use pilot_test_support::{Discovery, EtcdServer};
use serde_json::Value;

/// The host every proxy imports, in namespace `ns1`.
const SHARED: usize = 1;

/// How long each change's CPU is counted from its write: every ACK, the
/// records published (within 200 ms of a change) and the status written
/// (each second) fit in it.
const WINDOW: Duration = Duration::from_secs(4);

/// How long the replicas are left after the clients connected, before
/// the idle window: the records of the storm's ACKs published and read.
const SETTLE: Duration = Duration::from_secs(5);

/// The replicas' record ttl (`--replica-ttl`).
const TTL: &str = "5s";

/// The spread scenario's shape.
pub(crate) struct Spread {
    pub(crate) clients: usize,
    pub(crate) services: usize,
    pub(crate) namespaces: usize,
    pub(crate) writes: usize,
}

fn namespace(service: usize, namespaces: usize) -> usize {
    service % namespaces
}

fn host(service: usize, namespaces: usize) -> String {
    format!(
        "svc-{service}.ns{}.svc.cluster.local",
        namespace(service, namespaces)
    )
}

/// The services file: every service on HTTP port 9080 with four instances
/// (two v1, two v2).
fn services_file(services: usize, namespaces: usize) -> String {
    let mut text = String::from("services:\n");
    for s in 0..services {
        text.push_str(&format!(
            "- hostname: {}\n  ports: [{{name: http, port: 9080, protocol: HTTP}}]\n  instances:\n",
            host(s, namespaces)
        ));
        for i in 0..4u32 {
            let ip = std::net::Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i);
            let version = if i < 2 { "v1" } else { "v2" };
            text.push_str(&format!(
                "  - {{address: {ip}, port: 9080, labels: {{version: {version}}}}}\n"
            ));
        }
    }
    text
}

fn parse(yaml: &str) -> DynConfig {
    let mut objects = pilot_model::document::parse("spread.yaml", yaml, &pilot_api::default_registry())
        .expect("a valid object");
    objects.remove(0)
}

/// Service `s`'s RouteRule: `v1` percent to v1.
fn split(s: usize, namespaces: usize, v1: i32) -> DynConfig {
    parse(&format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: svc-{s}-split, namespace: ns{}}}\n\
         spec:\n  destination: {{name: svc-{s}}}\n  route:\n  - labels: {{version: v1}}\n    weight: {v1}\n  \
         - labels: {{version: v2}}\n    weight: {}\n",
        namespace(s, namespaces),
        100 - v1
    ))
}

/// Namespace `n`'s default Sidecar: its own namespace and the shared host.
fn sidecar(n: usize, namespaces: usize) -> DynConfig {
    parse(&format!(
        "apiVersion: networking.istio.io/v1\nkind: Sidecar\nmetadata: {{name: default, namespace: ns{n}}}\n\
         spec:\n  egress: [{{hosts: [\"./*\", \"ns{}/{}\"]}}]\n",
        namespace(SHARED, namespaces),
        host(SHARED, namespaces)
    ))
}

/// The load average over the last minute.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1e3)
}

/// A REST GET's JSON, `Null` when it did not answer 200.
fn json(server: &Discovery, path: &str) -> Value {
    let (code, body) = server.get(path);
    if code != 200 {
        return Value::Null;
    }
    serde_json::from_str(&body).unwrap_or(Value::Null)
}

/// The shared rule's status through `server`: (proxies, acked, whether it
/// is about the rule's current version).
fn rule_status(server: &Discovery, namespaces: usize) -> Option<(u64, u64, bool)> {
    let rule = json(
        server,
        &format!(
            "/apis/config.istio.io/v1alpha2/namespaces/ns{}/routerules/svc-{SHARED}-split",
            namespace(SHARED, namespaces)
        ),
    );
    let status = rule.get("status")?;
    Some((
        status["proxies"].as_u64()?,
        status["acked"].as_u64()?,
        status["observedVersion"] == rule["metadata"]["resourceVersion"],
    ))
}

/// The shared rule's status through `server` once it counts every proxy
/// as ACKed at the rule's current version, or as it stands after 30 s.
async fn all_counted(server: &Discovery, spread: &Spread) -> Option<(u64, u64, bool)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = rule_status(server, spread.namespaces);
        let all = |(proxies, acked, current): (u64, u64, bool)| {
            proxies == spread.clients as u64 && acked == proxies && current
        };
        if status.is_some_and(all) || Instant::now() > deadline {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Whether `server` holds the status-writer election (its `/metrics`).
fn writes_status(server: &Discovery) -> bool {
    let (_, body) = server.get("/metrics");
    body.lines().any(|line| {
        line.strip_prefix("pilot_status_writer ")
            .is_some_and(|v| v.trim() == "1")
    })
}

/// Through `server`'s `/debug/proxy-status`: the distinct proxies listed
/// SYNCED (all four types) on a replica other than `dead`, and the live
/// replicas it knows.
fn synced_listed(server: &Discovery, dead: &str) -> (usize, usize) {
    let status = json(server, "/debug/proxy-status");
    let mut nodes = HashSet::new();
    for proxy in status["proxies"].as_array().into_iter().flatten() {
        let synced = ["CDS", "EDS", "LDS", "RDS"]
            .iter()
            .all(|t| proxy["types"][t]["state"] == "SYNCED");
        if synced && proxy["connected"] == true && proxy["replica"] != dead {
            nodes.insert(proxy["node"].as_str().unwrap_or_default().to_string());
        }
    }
    (nodes.len(), status["replicas"].as_array().map_or(0, Vec::len))
}

/// The three replicas and the clients' processes.
struct Run<'a> {
    spread: &'a Spread,
    store: EtcdConfigStore,
    replicas: Vec<Discovery>,
    names: Vec<String>,
    split: i32,
}

/// One change's figures: every proxy's ACK (sorted) and each replica's CPU
/// over the window.
struct Change {
    acks: Vec<Duration>,
    cpu: Vec<Duration>,
}

impl Run<'_> {
    fn cpu(&self) -> Vec<Duration> {
        self.replicas.iter().map(|r| cpu_time_of(r.pid())).collect()
    }

    /// Each replica's CPU over one window with no change.
    fn idle(&self) -> Vec<Duration> {
        let before = self.cpu();
        std::thread::sleep(WINDOW);
        self.cpu()
            .iter()
            .zip(&before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect()
    }

    /// Changes the shared rule through the store; waits for every client
    /// of `children` to ACK it and for the window to end.
    async fn change(&mut self, children: &mut [Proxies]) -> Change {
        let key = ConfigKey::new(
            "RouteRule",
            format!("ns{}", namespace(SHARED, self.spread.namespaces)),
            format!("svc-{SHARED}-split"),
        );
        let current = self
            .store
            .get(&key)
            .await
            .expect("read")
            .expect("the rule exists");
        self.split = if self.split == 80 { 20 } else { 80 };
        let mut next = split(SHARED, self.spread.namespaces, self.split);
        next.meta.resource_version = current.meta.resource_version.clone();
        for child in children.iter_mut() {
            child.mark();
        }
        let before = self.cpu();
        let started = Instant::now();
        let start = now_micros();
        self.store.update(next).await.expect("the write");
        let mut acks: Vec<Duration> =
            tokio::task::block_in_place(|| children.iter_mut().flat_map(|child| child.next(start)).collect());
        acks.sort();
        tokio::time::sleep(WINDOW.saturating_sub(started.elapsed())).await;
        let cpu = self
            .cpu()
            .iter()
            .zip(&before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect();
        Change { acks, cpu }
    }

    /// `writes` changes: per replica, the median CPU per change less the
    /// idle window's; the median ACK p99.
    async fn changes(&mut self, children: &mut [Proxies], label: &str) -> (Vec<Duration>, Duration) {
        // The storm's records published and read first.
        tokio::time::sleep(SETTLE).await;
        let idle = self.idle();
        let mut cpus: Vec<Vec<Duration>> = vec![Vec::new(); self.replicas.len()];
        let mut p99s = Vec::new();
        for _ in 0..self.spread.writes {
            let change = self.change(children).await;
            for (r, cpu) in change.cpu.iter().enumerate() {
                cpus[r].push(cpu.saturating_sub(idle[r]));
            }
            p99s.push(percentile(&change.acks, 0.99));
            eprintln!(
                "{label}: change ACKed p50 {} p99 {} max {}; CPU {:?} (load {})",
                ms(percentile(&change.acks, 0.5)),
                ms(percentile(&change.acks, 0.99)),
                ms(*change.acks.last().unwrap()),
                change.cpu.iter().map(|d| ms(*d)).collect::<Vec<_>>(),
                load()
            );
        }
        eprintln!(
            "{label}: idle window CPU {:?}",
            idle.iter().map(|d| ms(*d)).collect::<Vec<_>>()
        );
        let median = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        (cpus.into_iter().map(median).collect(), median(p99s))
    }

    /// Starts `clients` proxies in three processes: process k on the ports
    /// `ports(k)`, its clients numbered from k × clients / 3.
    fn clients(&self, clients: usize, ports: impl Fn(usize) -> Vec<u16>) -> (Vec<Proxies>, Duration) {
        let start = now_micros();
        let mut children: Vec<Proxies> = (0..3)
            .map(|k| {
                let first = k * clients / 3;
                let count = (k + 1) * clients / 3 - first;
                Proxies::start_on(count, first, &ports(k), self.spread.namespaces)
            })
            .collect();
        let mut storm = Duration::ZERO;
        for child in &mut children {
            storm = storm.max(
                child
                    .synced(start)
                    .expect("every proxy connects and ACKs all four types"),
            );
        }
        (children, storm)
    }

    fn ports(&self, k: usize) -> Vec<u16> {
        (0..3).map(|j| self.replicas[(k + j) % 3].xds_port).collect()
    }
}

fn stop(children: Vec<Proxies>) {
    for child in children {
        child.stop();
    }
}

/// Runs the scenario and prints its tables.
pub(crate) async fn run(spread: Spread) {
    let clients = spread.clients;
    let limit = raise_open_files(20_000);
    let etcd = EtcdServer::start().expect("etcd starts (the etcd package is installed)");
    let options = EtcdOptions::new([etcd.endpoint()]);
    let store = EtcdConfigStore::connect(&options, pilot_api::default_registry())
        .await
        .expect("connects to etcd");
    for s in 0..spread.services {
        store
            .create(split(s, spread.namespaces, 50))
            .await
            .expect("create");
    }
    for n in 0..spread.namespaces {
        store.create(sidecar(n, spread.namespaces)).await.expect("create");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, services_file(spread.services, spread.namespaces)).expect("the services file");
    let endpoint = etcd.endpoint();
    // Each replica may hold every proxy but a few hundred descriptors.
    let xds_cap = (limit.saturating_sub(1_000)).to_string();
    let start = |name: &str| {
        Discovery::start(&[
            "--store",
            "etcd",
            "--etcd-endpoints",
            &endpoint,
            "--services",
            services.to_str().expect("a UTF-8 path"),
            "--replica-name",
            name,
            "--replica-ttl",
            TTL,
            "--max-connections",
            "64",
            "--xds-max-connections",
            &xds_cap,
            "--log-level",
            "warn",
        ])
    };
    // Replica 1 first: it takes the status-writer election.
    let names: Vec<String> = (1..=3).map(|i| format!("replica-{i}")).collect();
    let first = start(&names[0]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !writes_status(&first) {
        assert!(Instant::now() < deadline, "replica 1 did not take the election");
        std::thread::sleep(Duration::from_millis(100));
    }
    let replicas = vec![first, start(&names[1]), start(&names[2])];
    let mut run = Run {
        spread: &spread,
        store,
        replicas,
        names,
        split: 50,
    };
    println!(
        "spread: {clients} proxies, {} services in {} namespaces, each proxy importing its namespace and svc-{SHARED}; \
         open-files limit {limit}; WINDOW {} s per change; load {}",
        spread.services,
        spread.namespaces,
        WINDOW.as_secs(),
        load()
    );

    // 1. Baseline: replica 1 serves every proxy.
    let baseline = if clients as u64 + 1_000 <= limit {
        let replica_1 = run.replicas[0].xds_port;
        let (mut children, storm) = run.clients(clients, |_| vec![replica_1]);
        let rss = rss_mb_of(run.replicas[0].pid());
        let (cpu, p99) = run.changes(&mut children, "baseline").await;
        stop(children);
        println!(
            "baseline, one replica of {clients}: storm {}, RSS {rss:.0} MB, CPU per change {}, ACKed p99 {}",
            ms(storm),
            ms(cpu[0]),
            ms(p99)
        );
        Some(cpu[0])
    } else {
        println!(
            "baseline left out: one process cannot hold {clients} connections under the open-files limit of {limit}"
        );
        None
    };
    // Let the baseline's proxies leave every record before the spread.
    tokio::time::sleep(Duration::from_secs(2)).await;

    // 2. Spread: a third on each replica.
    let (mut children, storm) = run.clients(clients, |k| run.ports(k));
    let rss: Vec<f64> = run.replicas.iter().map(|r| rss_mb_of(r.pid())).collect();
    let (cpu, p99) = run.changes(&mut children, "spread").await;
    let counted = all_counted(&run.replicas[1], &spread).await;
    println!();
    println!("| {clients} proxies over 3 replicas | replica-1 (writer) | replica-2 | replica-3 |");
    println!("| --- | --- | --- | --- |");
    println!("| storm (all ACKed all four types) | {} | | |", ms(storm));
    println!(
        "| RSS after the storm | {:.0} MB | {:.0} MB | {:.0} MB |",
        rss[0], rss[1], rss[2]
    );
    println!(
        "| CPU per all-proxy change (median of {}, less idle) | {} | {} | {} |",
        spread.writes,
        ms(cpu[0]),
        ms(cpu[1]),
        ms(cpu[2])
    );
    if let Some(baseline) = baseline {
        let third = baseline.as_secs_f64() / 3.0;
        println!(
            "| ... / (one replica of all: {} / 3) | {:.2}x | {:.2}x | {:.2}x |",
            ms(baseline),
            cpu[0].as_secs_f64() / third,
            cpu[1].as_secs_f64() / third,
            cpu[2].as_secs_f64() / third
        );
    }
    println!("| change ACKed by all, p99 (median) | {} | | |", ms(p99));
    println!("| rule status (proxies, acked, current) | {counted:?} | | |");

    // 3. Kill the status writer under load.
    let dead = run.names[0].clone();
    let killed = now_micros();
    let kill_at = Instant::now();
    pilot_test_support::signal(run.replicas[0].pid(), "KILL");
    let mut fewest = u64::MAX;
    let mut most = 0;
    let mut listed_at = None;
    let mut counted_at = None;
    let deadline = Instant::now() + Duration::from_secs(60);
    while (listed_at.is_none() || counted_at.is_none()) && Instant::now() < deadline {
        if listed_at.is_none() {
            let (listed, live) = synced_listed(&run.replicas[1], &dead);
            if listed == clients && live == 2 {
                listed_at = Some(kill_at.elapsed());
            }
        }
        if let Some((proxies, acked, current)) = rule_status(&run.replicas[2], spread.namespaces) {
            fewest = fewest.min(proxies);
            most = most.max(proxies);
            if counted_at.is_none()
                && proxies == clients as u64
                && acked == proxies
                && current
                && writes_status_any(&run)
            {
                counted_at = Some(kill_at.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let moved = tokio::task::block_in_place(|| children[0].synced(killed));
    // "received per client ...; N reconnects; reasons": the count.
    let reconnects = children[0].reconnects();
    let reconnects = reconnects
        .split("; ")
        .find(|part| part.ends_with(" reconnects"))
        .unwrap_or_default()
        .to_string();
    // One more change, through the new writer's status.
    let survivors: Vec<Discovery> = run.replicas.drain(1..).collect();
    let mut run = Run {
        spread: &spread,
        store: run.store,
        replicas: survivors,
        names: run.names,
        split: run.split,
    };
    let after = run.change(&mut children).await;
    let recounted = all_counted(&run.replicas[0], &spread).await;
    println!();
    println!(
        "| after kill -9 of the status writer ({} proxies on it; --replica-ttl {TTL}) | time from the kill |",
        clients / 3
    );
    println!("| --- | --- |");
    println!(
        "| its proxies ACKed all four types on a new stream (clients' clock) | {} |",
        moved.map_or("not within 60 s".into(), ms)
    );
    println!(
        "| proxy-status lists every proxy once, SYNCED on a live replica | {} |",
        listed_at.map_or("not within 60 s".into(), ms)
    );
    println!(
        "| the rule's status counts {clients} of {clients} again (new writer) | {} |",
        counted_at.map_or("not within 60 s".into(), ms)
    );
    println!("| proxies the status counted meanwhile (fewest, most) | {fewest}, {most} |");
    println!(
        "| next change ACKed by all, p99; its status | {}; {recounted:?} |",
        ms(percentile(&after.acks, 0.99))
    );
    println!("| the moved clients' reconnects | {reconnects} |");
    stop(children);
    drop(run);
    drop(etcd);
}

/// Whether a surviving replica holds the election (the status then comes
/// from a live writer).
fn writes_status_any(run: &Run<'_>) -> bool {
    run.replicas[1..].iter().any(writes_status)
}
