//! Emulated Envoys for the benches: thousands of ADS clients in a child
//! process (this same binary, `--clients N --port P[,P...] [--first F]
//! [--namespaces K] [--delta]`), so that the server's process measures the
//! server alone;
//! the parent asks the child for its figures over stdin ([`Proxies`]).
//! Shared by the `ads` bench of pilot-ads and the `status` and `replicas`
//! benches of pilot-server.
//!
//! Each proxy is a sidecar with its own IP ([`proxy_ip`]), in namespace
//! `ns{i % K}` (`default` when K is 1), that subscribes, follows the names
//! it is sent and ACKs as Envoy does, and reconnects as Envoy does
//! (`envoy.rs`). Each decodes only what it needs, and the name lists it
//! sends are held once for every proxy listing the same (`wire.rs`,
//! `names.rs`).
//!
//! They speak HTTP/2 through the lean transport
//! ([`GrpcStream`](super::GrpcStream), on the [`h2`](super::h2) module's frames and HPACK):
//! the same frames Envoy sends, at a fraction of a general-purpose
//! client's cost, so that the proxies' process keeps up with 10,000
//! streams on the server's machine.

mod envoy;
mod names;
mod wire;

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DiscoveryRequest};
use tokio::sync::mpsc;

use self::envoy::{Acked, ClientSetup, RECEIVED, Reconnects};
use super::stream::AdsRequest;
use super::transport::request_headers;
use crate::measure::cpu_time;

/// The allocator options of the proxies' process on a jemalloc build
/// (`_RJEM_MALLOC_CONF`): jemalloc's defaults, not the server's tuning
/// (`.cargo/config.toml`).
pub const MALLOC_CONF: &str = "dirty_decay_ms:10000";

/// Client `index`'s IP (11.0.0.0 plus the index).
pub fn proxy_ip(index: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0b00_0000 + index as u32))
}

/// The loopback address client `index` connects from (127.1.0.0/16 and
/// up, one per client, as each Envoy has its pod's): the ephemeral ports
/// of one source address hold only about 28,000 connections to the server.
pub fn source_ip(index: usize) -> Ipv4Addr {
    Ipv4Addr::new(
        127,
        1 + (index / 50_000) as u8,
        ((index / 200) % 250) as u8,
        1 + (index % 200) as u8,
    )
}

/// When `args` (this process's) are those [`Proxies::start`] gives its
/// child (`--clients N --port P [--namespaces K] [--delta]`), runs the
/// proxies until the parent closes the child's stdin and returns true;
/// otherwise returns false at once. A bench that starts [`Proxies`] calls
/// it first thing in `main`.
pub fn child_main(args: &[String]) -> bool {
    let Some((clients, ports, namespaces, delta)) = child_args(args) else {
        return false;
    };
    let first = args
        .iter()
        .position(|a| a == "--first")
        .and_then(|at| args.get(at + 1)?.parse().ok())
        .unwrap_or(0);
    let watch = args
        .iter()
        .position(|a| a == "--watch")
        .and_then(|at| args.get(at + 1))
        .map(|host| Arc::from(host.as_str()));
    crate::measure::raise_open_files(clients as u64 + 1024);
    run_child(clients, first, &ports, namespaces, delta, watch);
    true
}

/// The child process's arguments, if this process is one.
fn child_args(args: &[String]) -> Option<(usize, Vec<u16>, usize, bool)> {
    let at = args.iter().position(|a| a == "--clients")?;
    let clients = args[at + 1].parse().expect("a client count");
    let port = args
        .iter()
        .position(|a| a == "--port")
        .and_then(|at| {
            args[at + 1]
                .split(',')
                .map(|p| p.parse().ok())
                .collect::<Option<Vec<u16>>>()
        })
        .filter(|ports| !ports.is_empty())
        .expect("a port");
    let namespaces = args
        .iter()
        .position(|a| a == "--namespaces")
        .and_then(|at| args[at + 1].parse().ok())
        .unwrap_or(1);
    Some((clients, port, namespaces, args.iter().any(|a| a == "--delta")))
}

/// The child process: runs `clients` proxies (numbered from `first`)
/// against `ports` (each client connects to the first, and after a failure
/// to another, as Envoy's ADS cluster of several hosts does), and answers
/// `wait VERSION START_US` on stdin with every client's time from START to
/// its ACK of RDS at VERSION or later (µs, one line), once all have;
/// `eds VERSION START_US` likewise for EDS, each time followed by
/// `/BYTES` (the EDS responses of that version), either followed by the
/// clients to wait for (comma-separated indices; all without);
/// `responses` with every client's count of responses received so far,
/// `responses eds` of EDS responses; `cpu` with the process's
/// CPU time (ms); `received` with the bytes of responses each client
/// received so far (the mean); `reconnects` with the reconnections, their
/// reasons and the bytes received by type. With a watched host
/// (`--watch HOST`): `watched` with the watched host's assignments
/// received with no ready endpoint, the clients that received one, and
/// the fewest ready endpoints any had (`-` before the first); `stale
/// VERSION START_US [CLIENTS]` with the latest of those clients' first
/// EDS ACK at VERSION or later, less START (µs), once all have ACKed one
/// (`-` when one has not within 60 s). `mark` (answered `ok`) notes every
/// client's RDS version; `next START_US` then answers as `wait` does for
/// each client's first RDS ACK of a version above its mark (whatever
/// server numbered it). `synced START_US` answers, once every client has
/// a stream opened at START or later on which it ACKed all four types,
/// the latest of those moments less START (µs), and `-` when one has not
/// within 60 s.
fn run_child(
    clients: usize,
    first: usize,
    ports: &[u16],
    namespaces: usize,
    delta: bool,
    watch: Option<Arc<str>>,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let path = if delta {
        DeltaDiscoveryRequest::PATH
    } else {
        DiscoveryRequest::PATH
    };
    let setup = ClientSetup {
        ports: ports
            .iter()
            .map(|&port| (port, request_headers(port, path)))
            .collect(),
        namespaces,
        delta,
        watch: watch.clone(),
    };
    let acked: Vec<Arc<Acked>> = (0..clients)
        .map(|_| {
            Arc::new(if watch.is_some() {
                Acked::watching()
            } else {
                Acked::default()
            })
        })
        .collect();
    let reconnects = Arc::new(Reconnects::default());
    runtime.block_on(async {
        for (i, a) in acked.iter().enumerate() {
            tokio::spawn(envoy::client(
                setup.clone(),
                first + i,
                Arc::clone(a),
                Arc::clone(&reconnects),
            ));
        }
        let mut marks: Vec<u64> = vec![0; clients];
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
            if line == "cpu" {
                println!("{}", cpu_time().as_millis());
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "responses" || line == "responses eds" {
                let counter = |a: &Acked| {
                    if line == "responses" {
                        a.responses.load(Ordering::Relaxed)
                    } else {
                        a.eds_responses.load(Ordering::Relaxed)
                    }
                };
                let counts: Vec<String> = acked.iter().map(|a| counter(a).to_string()).collect();
                println!("{}", counts.join(" "));
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "watched" {
                let empty: u64 = acked.iter().map(|a| a.watched_empty.load(Ordering::Relaxed)).sum();
                let clients_empty = acked
                    .iter()
                    .filter(|a| a.watched_empty.load(Ordering::Relaxed) > 0)
                    .count();
                let min = acked
                    .iter()
                    .map(|a| a.watched_min.load(Ordering::Relaxed))
                    .min()
                    .filter(|m| *m != u64::MAX)
                    .map_or("-".to_string(), |m| m.to_string());
                println!("{empty} {clients_empty} {min}");
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "mark" {
                marks = acked.iter().map(|a| a.version.load(Ordering::Acquire)).collect();
                println!("ok");
                let _ = std::io::stdout().flush();
                continue;
            }
            if let Some(start) = line.strip_prefix("next ") {
                let start: u64 = start.trim().parse().unwrap_or(0);
                while acked
                    .iter()
                    .zip(&marks)
                    .any(|(a, mark)| a.version.load(Ordering::Acquire) <= *mark)
                {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let times: Vec<String> = acked
                    .iter()
                    .map(|a| a.at.load(Ordering::Relaxed).saturating_sub(start).to_string())
                    .collect();
                println!("{}", times.join(" "));
                let _ = std::io::stdout().flush();
                continue;
            }
            if let Some(start) = line.strip_prefix("synced ") {
                println!("{}", synced(&acked, start.trim().parse().unwrap_or(0)).await);
                let _ = std::io::stdout().flush();
                continue;
            }
            if let Some(question) = line.strip_prefix("stale ") {
                println!("{}", stale(&acked, question).await);
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "received" {
                let total: u64 = RECEIVED.iter().map(|r| r.load(Ordering::Relaxed)).sum();
                println!("{}", total / clients.max(1) as u64);
                let _ = std::io::stdout().flush();
                continue;
            }
            if line == "reconnects" {
                let reasons = reconnects.reasons.lock().unwrap().clone();
                let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{n}x {r}")).collect();
                let kb = |at: usize| RECEIVED[at].load(Ordering::Relaxed) as f64 / 1024.0 / clients as f64;
                println!(
                    "received per client CDS {:.0} KB, EDS {:.0} KB, LDS {:.0} KB, RDS {:.0} KB; {} reconnects; {}",
                    kb(0),
                    kb(1),
                    kb(2),
                    kb(3),
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
            // An optional third word: the clients to wait for (indices,
            // comma-separated); every client without it.
            let only: Option<Vec<usize>> = words
                .next()
                .map(|w| w.split(',').filter_map(|i| i.parse().ok()).collect());
            let waited: Vec<&Arc<Acked>> = match &only {
                Some(only) => only.iter().filter_map(|&i| acked.get(i)).collect(),
                None => acked.iter().collect(),
            };
            let seen = |a: &Acked| {
                if eds {
                    a.eds_version.load(Ordering::Acquire)
                } else {
                    a.version.load(Ordering::Acquire)
                }
            };
            while waited.iter().any(|a| seen(a) < version) {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            let times: Vec<String> = waited
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

/// The answer to `synced START_US` (see [`run_child`]).
async fn synced(acked: &[Arc<Acked>], start: u64) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let synced_at = |a: &Acked| {
        let opened = a.stream_at.load(Ordering::Acquire);
        let synced = a.synced_at.load(Ordering::Acquire);
        (opened >= start && synced >= opened).then_some(synced)
    };
    loop {
        let latest = acked
            .iter()
            .map(|a| synced_at(a))
            .try_fold(0u64, |latest, at| Some(latest.max(at?)));
        if let Some(latest) = latest {
            return latest.saturating_sub(start).to_string();
        }
        if std::time::Instant::now() > deadline {
            return "-".into();
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The answer to `stale VERSION START_US [CLIENTS]` (see [`run_child`]).
async fn stale(acked: &[Arc<Acked>], question: &str) -> String {
    let mut words = question.split_whitespace();
    let (Some(version), Some(start)) = (
        words.next().and_then(|w| w.parse::<u64>().ok()),
        words.next().and_then(|w| w.parse::<u64>().ok()),
    ) else {
        return "-".into();
    };
    let waited: Vec<&Arc<Acked>> = match words.next() {
        Some(only) => only
            .split(',')
            .filter_map(|i| acked.get(i.parse::<usize>().ok()?))
            .collect(),
        None => acked.iter().collect(),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while waited
        .iter()
        .any(|a| a.eds_version.load(Ordering::Acquire) < version)
    {
        if std::time::Instant::now() > deadline {
            return "-".into();
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let first = |a: &Acked| -> Option<u64> {
        let log = a.eds_log.as_ref()?.lock().unwrap();
        let at = log.partition_point(|(v, _)| *v < version);
        log.get(at).map(|(_, at)| *at)
    };
    waited
        .iter()
        .map(|a| first(a).map(|at| at.saturating_sub(start)))
        .try_fold(0u64, |latest, at| Some(latest.max(at?)))
        .map_or("-".to_string(), |latest| latest.to_string())
}

/// The proxies' process, seen from the parent.
pub struct Proxies {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Proxies {
    /// Starts `clients` proxies against `port` in a child process, this
    /// same binary (whose `main` calls [`child_main`]): client `i` is a
    /// sidecar at [`proxy_ip`]`(i)` in namespace `ns{i % namespaces}`
    /// (`default` when `namespaces` is 1), speaking delta when `delta`.
    pub fn start(clients: usize, port: u16, namespaces: usize, delta: bool) -> Self {
        Self::spawn(clients, port, namespaces, delta, None)
    }

    /// [`start`](Self::start), the clients also logging every EDS ACK
    /// ([`staleness`](Self::staleness)) and checking `host`'s load
    /// assignments for ready endpoints ([`watched`](Self::watched)).
    pub fn start_watching(clients: usize, port: u16, namespaces: usize, delta: bool, host: &str) -> Self {
        Self::spawn(clients, port, namespaces, delta, Some(host))
    }

    /// Starts `clients` state-of-the-world proxies numbered from `first`
    /// (node ids, addresses) in a child process (see [`start`](Self::start)),
    /// each connecting to the first of `ports` and, after a failure, to
    /// another of them, as Envoy does with an ADS cluster of several hosts.
    pub fn start_on(clients: usize, first: usize, ports: &[u16], namespaces: usize) -> Self {
        Self::spawn_on(clients, first, ports, namespaces, false, None)
    }

    fn spawn(clients: usize, port: u16, namespaces: usize, delta: bool, watch: Option<&str>) -> Self {
        Self::spawn_on(clients, 0, &[port], namespaces, delta, watch)
    }

    fn spawn_on(
        clients: usize,
        first: usize,
        ports: &[u16],
        namespaces: usize,
        delta: bool,
        watch: Option<&str>,
    ) -> Self {
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        let mut command = std::process::Command::new(std::env::current_exe().expect("own path"));
        command.args([
            "--clients",
            &clients.to_string(),
            "--port",
            &ports.join(","),
            "--first",
            &first.to_string(),
            "--namespaces",
            &namespaces.to_string(),
        ]);
        if delta {
            command.arg("--delta");
        }
        if let Some(host) = watch {
            command.args(["--watch", host]);
        }
        // The clients keep jemalloc's default decay (on a jemalloc build)
        // whatever the server's is: the storm's figures depend on both.
        let mut child = command
            .env("_RJEM_MALLOC_CONF", MALLOC_CONF)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start the clients");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Proxies { child, stdin, stdout }
    }

    /// Every client's time from `start` (µs since the epoch) to its ACK of
    /// RDS at `version` or later, sorted.
    pub fn wait_acked(&mut self, version: u64, start: u64) -> Vec<Duration> {
        self.ask("wait", version, start).0
    }

    /// Notes every client's RDS version, for [`next`](Self::next).
    pub fn mark(&mut self) {
        writeln!(self.stdin, "mark").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        assert_eq!(line.trim(), "ok", "the clients process ended");
    }

    /// Every client's time from `start` (µs since the epoch) to its first
    /// RDS ACK of a version above the one [`mark`](Self::mark) noted,
    /// sorted: a push whatever server numbered it.
    pub fn next(&mut self, start: u64) -> Vec<Duration> {
        self.ask_line(&format!("next {start}")).0
    }

    /// Once every client has a stream opened at `start` (µs since the
    /// epoch) or later on which it ACKed CDS, EDS, LDS and RDS: the latest
    /// of those moments less `start`; `None` when one has not within 60 s.
    pub fn synced(&mut self, start: u64) -> Option<Duration> {
        writeln!(self.stdin, "synced {start}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().parse().ok().map(Duration::from_micros)
    }

    /// The process id of the clients' process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// [`ask`](Self::ask) of the clients `only` (indices) alone.
    pub fn ask_by(&mut self, what: &str, version: u64, start: u64, only: &[usize]) -> (Vec<Duration>, f64) {
        let only: Vec<String> = only.iter().map(usize::to_string).collect();
        self.ask_line(&format!("{what} {version} {start} {}", only.join(",")))
    }

    /// Every client's count of responses received so far (any type), by
    /// index.
    pub fn responses(&mut self) -> Vec<u64> {
        self.count("responses")
    }

    /// Every client's count of EDS responses received so far, by index.
    pub fn eds_responses(&mut self) -> Vec<u64> {
        self.count("responses eds")
    }

    /// The per-client counts the clients answer `question` with.
    fn count(&mut self, question: &str) -> Vec<u64> {
        writeln!(self.stdin, "{question}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.split_whitespace()
            .map(|w| w.parse().expect("a number"))
            .collect()
    }

    /// Sends `what VERSION START` and reads the sorted times and the mean
    /// of the bytes (EDS) that follow them.
    pub fn ask(&mut self, what: &str, version: u64, start: u64) -> (Vec<Duration>, f64) {
        self.ask_line(&format!("{what} {version} {start}"))
    }

    /// Sends `line` and reads the sorted times and the mean of the bytes
    /// (EDS) that follow them.
    fn ask_line(&mut self, line: &str) -> (Vec<Duration>, f64) {
        writeln!(self.stdin, "{line}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
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

    /// Of a watched host (`start_watching`): its assignments the clients
    /// received with no ready endpoint, the clients that received one,
    /// and the fewest ready endpoints any assignment had (`None` before
    /// the first).
    pub fn watched(&mut self) -> (u64, u64, Option<u64>) {
        writeln!(self.stdin, "watched").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        let mut words = line.split_whitespace();
        let mut number = || words.next().and_then(|w| w.parse().ok());
        (number().expect("a count"), number().expect("a count"), number())
    }

    /// Of the clients `only` (every client when `None`; they must have
    /// been started with `start_watching`): the time from `start` (µs
    /// since the epoch) to the last of their first EDS ACKs at `version`
    /// or later, once all have ACKed one; `None` when one has not within
    /// 60 s.
    pub fn staleness(&mut self, version: u64, start: u64, only: Option<&[usize]>) -> Option<Duration> {
        let only = only.map_or(String::new(), |only| {
            only.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
        });
        writeln!(self.stdin, "stale {version} {start} {only}").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().parse().ok().map(Duration::from_micros)
    }

    /// The proxies' process's CPU time so far (user + system).
    pub fn cpu(&mut self) -> Duration {
        writeln!(self.stdin, "cpu").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        Duration::from_millis(line.trim().parse().expect("milliseconds"))
    }

    /// The bytes of responses each client received so far (the mean of
    /// whole encoded messages).
    pub fn received(&mut self) -> u64 {
        writeln!(self.stdin, "received").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().parse().expect("bytes")
    }

    /// The proxies' reconnections and why, one line.
    pub fn reconnects(&mut self) -> String {
        writeln!(self.stdin, "reconnects").expect("clients alive");
        self.stdin.flush().expect("clients alive");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("clients answer");
        line.trim().to_string()
    }

    /// Ends the proxies' process.
    pub fn stop(mut self) {
        drop(self.stdin);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
