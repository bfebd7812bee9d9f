//! `cargo bench -p pilot-agent --bench gateway_routes [-- --routes N --changes N --case N --pace-us N]`:
//! route propagation at the edge, as the Gateway API's route-propagation
//! benchmarks measure it. pilot-discovery (memory store) serves a
//! Gateway API Gateway with `--routes` HTTPRoutes attached (default
//! 3,000; each its own hostname, `route-<i>.example.com`, to the Service
//! `v1`) to a real Envoy under `pilot-agent proxy router`. Each change
//! (default 300) patches one route's backend to the other Service (`v1`
//! to `v2` and back) over the REST API, and a client polls that route's
//! hostname through the router until the new backend answers: the time
//! from sending the write to that first answer is the change's
//! propagation. Meanwhile another client sends requests to every route in
//! turn and counts those that fail (anything but 200 from `v1` or `v2`),
//! without pause (it and the Envoy worker answering it take a core each
//! on a small host) unless `--pace-us` has it wait after each answer.
//!
//! Baselines in the same run: the same changes with one HTTPRoute (the
//! floor: what propagation costs without the other routes), and with the
//! same number of VirtualServices bound to an Istio `Gateway` (pilot's
//! serving of Istio's API), and the routes again with every push waiting
//! out the debounce's quiet period.
//!
//! Prints, per case, p50 / p90 / p99 / max of propagation and of the write
//! alone, the failed requests of the load client, and where the server's
//! part went (its push metrics: debounce, build, the RDS response, the
//! change to the last response handed over), and Envoy's own time
//! applying the route configuration updates (its RDS subscription's
//! `update_duration`). `--case N` runs only case N (0: the routes, 1: the
//! floor, 2: the VirtualServices, 3: the routes again with every push
//! debounced, as pilot-discovery's `--no-debounce-leading` does: the
//! baseline of pushing a change after a quiet period at once).

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{Agent, Discovery, free_port, get_by_length, named_upstream};

const NAMESPACE: &str = "edge";

/// What the routes are written as.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Api {
    /// HTTPRoutes attached to a Gateway API Gateway.
    GatewayApi,
    /// VirtualServices bound to an Istio Gateway.
    Istio,
}

struct Case {
    name: String,
    api: Api,
    routes: usize,
    /// pilot-discovery pushes a change after a quiet period at once (its
    /// default); false debounces every push (`--no-debounce-leading`).
    leading: bool,
}

struct Measured {
    propagation: Vec<Duration>,
    writes: Vec<Duration>,
    requests: u64,
    failed: u64,
    /// pilot-discovery's mean per push over the changes, by phase (its
    /// metrics): debounce, build, RDS response, convergence.
    phases: Vec<(&'static str, f64)>,
    /// Pushes pilot-discovery published during the changes.
    pushes: f64,
    /// Envoy's RDS `update_duration` histograms.
    envoy: Vec<String>,
}

/// The phases of a push pilot-discovery's metrics time: (metric, label).
const PHASES: [(&str, &str); 6] = [
    ("pilot_debounce_time", "debounce"),
    ("pilot_pushcontext_init_seconds", "build"),
    ("pilot_xds_push_time{type=\"lds\"}", "lds"),
    ("pilot_xds_push_time{type=\"srds\"}", "srds"),
    ("pilot_xds_push_time{type=\"rds\"}", "rds"),
    ("pilot_proxy_convergence_time", "converged"),
];

/// Each phase's (sum in seconds, count) from pilot-discovery's metrics.
fn phase_totals(discovery: &Discovery) -> Vec<(f64, f64)> {
    let (_, text) = pilot_test_support::Discovery::get(discovery, "/metrics");
    PHASES
        .iter()
        .map(|(metric, _)| {
            let (name, labels) = metric.split_once('{').map_or((*metric, ""), |(n, l)| (n, l));
            let value = |suffix: &str| {
                let key = if labels.is_empty() {
                    format!("{name}_{suffix} ")
                } else {
                    format!("{name}_{suffix}{{{labels} ")
                };
                text.lines()
                    .find_map(|l| l.strip_prefix(&key))
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            (value("sum"), value("count"))
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list" || a == "--test") {
        return;
    }
    let flag = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let routes = flag("--routes", 3000);
    let changes = flag("--changes", 300);
    // `--pace-us N`: the load client waits N µs after each answer (0: it
    // sends without pause, taking a core of its own and one of Envoy's).
    let pace = Duration::from_micros(flag("--pace-us", 0) as u64);
    let cases = [
        Case {
            name: format!("{routes} HTTPRoutes on a Gateway API Gateway"),
            api: Api::GatewayApi,
            routes,
            leading: true,
        },
        Case {
            name: "1 HTTPRoute (floor)".to_string(),
            api: Api::GatewayApi,
            routes: 1,
            leading: true,
        },
        Case {
            name: format!("{routes} VirtualServices on an Istio Gateway"),
            api: Api::Istio,
            routes,
            leading: true,
        },
        Case {
            name: format!("{routes} HTTPRoutes, every push debounced"),
            api: Api::GatewayApi,
            routes,
            leading: false,
        },
    ];
    println!("route propagation through pilot-agent proxy router, {changes} changes per case");
    println!(
        "{:<48} {:>8} {:>8} {:>8} {:>8}   {:>8} {:>8}   {:>9}",
        "case", "p50 ms", "p90 ms", "p99 ms", "max ms", "write50", "write99", "failed"
    );
    // `--case N`: only the Nth case (0: the routes, 1: the floor, 2: the
    // VirtualServices, 3: the routes with every push debounced), to
    // compare one change's effect quickly.
    let only = args
        .iter()
        .position(|a| a == "--case")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse::<usize>().ok());
    for (index, case) in cases.into_iter().enumerate() {
        if only.is_some_and(|only| only != index) {
            continue;
        }
        let measured = run(&case, changes, pace);
        let p = |samples: &[Duration], q: f64| {
            let mut sorted = samples.to_vec();
            sorted.sort();
            let at = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[at].as_secs_f64() * 1e3
        };
        println!(
            "{:<48} {:>8.1} {:>8.1} {:>8.1} {:>8.1}   {:>8.1} {:>8.1}   {:>4}/{:<5}",
            case.name,
            p(&measured.propagation, 0.5),
            p(&measured.propagation, 0.9),
            p(&measured.propagation, 0.99),
            p(&measured.propagation, 1.0),
            p(&measured.writes, 0.5),
            p(&measured.writes, 0.99),
            measured.failed,
            measured.requests,
        );
        let phases: Vec<String> = measured
            .phases
            .iter()
            .map(|(label, ms)| format!("{label} {ms:.1}"))
            .collect();
        println!(
            "    pilot-discovery's mean per push, ms: {} ({:.0} pushes for {changes} changes)",
            phases.join(", "),
            measured.pushes
        );
        for line in &measured.envoy {
            println!("    Envoy's RDS update_duration: {line}");
        }
    }
}

/// One case: a fresh pilot-discovery and router, the routes, the changes.
fn run(case: &Case, changes: usize, pace: Duration) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let v1 = named_upstream("v1");
    let v2 = named_upstream("v2");
    let mut services = String::from("services:\n");
    for (name, port) in [("v1", v1), ("v2", v2)] {
        services.push_str(&format!(
            "- hostname: {name}.{NAMESPACE}.svc.cluster.local\n  ports: [{{name: http, port: 8080, protocol: HTTP}}]\n  \
             instances:\n  - {{address: 127.0.0.1, port: {port}, labels: {{app: {name}}}}}\n"
        ));
    }
    let services_file = dir.path().join("services.yaml");
    std::fs::write(&services_file, services).unwrap();
    let mut flags = vec!["--services", services_file.to_str().unwrap()];
    if !case.leading {
        flags.push("--no-debounce-leading");
    }
    let discovery = Discovery::start(&flags);
    let port = free_port();
    apply(&discovery, dir.path(), &objects(case, port));
    let router = Agent::start(
        "router",
        &[
            "--ip",
            "10.0.2.1",
            "--id",
            &format!("edge-router.{NAMESPACE}"),
            "--namespace",
            NAMESPACE,
            "--label",
            "gateway.networking.k8s.io/gateway-name=edge",
            "--label",
            "istio=ingressgateway",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
        ],
    );
    // Every route served (the first, the last, and each hundredth).
    let sample: Vec<usize> = (0..case.routes)
        .filter(|i| i % 100 == 0 || *i == case.routes - 1)
        .collect();
    let started = Instant::now();
    while !sample
        .iter()
        .all(|i| get_by_length(port, &host(*i), "/") == (200, "v1".to_string()))
    {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the routes were not served in 5 minutes\n{}",
            router.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // The load client: every route in turn, each answer counted.
    let stop = Arc::new(AtomicBool::new(false));
    let requests = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let load = {
        let (stop, requests, failed) = (Arc::clone(&stop), Arc::clone(&requests), Arc::clone(&failed));
        let routes = case.routes;
        std::thread::spawn(move || {
            let mut client = Client::new(port);
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let (status, body) = client.get(&host(i % routes));
                requests.fetch_add(1, Ordering::Relaxed);
                if status != 200 || !(body == "v1" || body == "v2") {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                i += 7;
                if !pace.is_zero() {
                    std::thread::sleep(pace);
                }
            }
        })
    };

    let mut measured = Measured {
        propagation: Vec::new(),
        writes: Vec::new(),
        requests: 0,
        failed: 0,
        phases: Vec::new(),
        pushes: 0.0,
        envoy: Vec::new(),
    };
    let before = phase_totals(&discovery);
    // Each route changed once to v2 before any is changed back; spread
    // over the routes.
    let mut client = Client::new(port);
    for change in 0..changes {
        let route = (change * 7919) % case.routes;
        let current = client.get(&host(route)).1;
        let next = if current == "v1" { "v2" } else { "v1" };
        let sent = Instant::now();
        patch(&discovery, case.api, route, next);
        measured.writes.push(sent.elapsed());
        loop {
            let (_, body) = client.get(&host(route));
            if body == next {
                measured.propagation.push(sent.elapsed());
                break;
            }
            assert!(
                sent.elapsed() < Duration::from_secs(60),
                "change {change} not live in a minute\n{}",
                router.log()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    load.join().unwrap();
    let after = phase_totals(&discovery);
    // The build is timed once per push.
    measured.pushes = after[1].1 - before[1].1;
    measured.phases = PHASES
        .iter()
        .zip(before.iter().zip(&after))
        .map(|((_, label), ((sum0, count0), (sum1, count1)))| {
            let count = count1 - count0;
            (
                *label,
                if count > 0.0 {
                    (sum1 - sum0) / count * 1e3
                } else {
                    0.0
                },
            )
        })
        .collect();
    // Envoy's own time applying each route configuration update (its
    // RDS subscription's `update_duration` histogram, percentiles over the
    // whole run in ms).
    let (_, stats) = common::get(router.admin_port, "/stats?filter=update_duration");
    let updated: Vec<&str> = stats
        .lines()
        .filter(|l| l.contains(".rds.") && l.contains("P50") && !l.contains("P100(0,0)"))
        .map(str::trim)
        .collect();
    if updated.len() <= 3 {
        measured.envoy = updated.iter().map(|l| l.to_string()).collect();
    } else {
        // One route configuration per host (scoped routes): each updated
        // only by the changes to its host. Its cumulative median and
        // maximum, summarized over those updated.
        let mut medians = Vec::new();
        let mut maxima = Vec::new();
        for line in &updated {
            let value = |p: &str| -> Option<f64> {
                let at = line.find(&format!("{p}("))? + p.len() + 1;
                let inner = &line[at..at + line[at..].find(')')?];
                inner.split(',').nth(1)?.trim().parse().ok()
            };
            medians.extend(value("P50"));
            maxima.extend(value("P100"));
        }
        medians.sort_by(f64::total_cmp);
        maxima.sort_by(f64::total_cmp);
        let at = |v: &[f64], q: f64| {
            v.get(((v.len() as f64 - 1.0) * q) as usize)
                .copied()
                .unwrap_or(0.0)
        };
        measured.envoy = vec![format!(
            "{} route configurations with updates timed above 0; their medians: p50 {:.1} ms, max {:.1} ms; their maxima: p50 {:.1} ms, max {:.1} ms",
            updated.len(),
            at(&medians, 0.5),
            at(&medians, 1.0),
            at(&maxima, 0.5),
            at(&maxima, 1.0)
        )];
    }
    measured.requests = requests.load(Ordering::Relaxed);
    measured.failed = failed.load(Ordering::Relaxed);
    drop(router);
    measured
}

/// An HTTP/1.1 client keeping its connection to the router open (a new
/// connection per request would run out of local ports at this rate).
struct Client {
    port: u16,
    stream: Option<TcpStream>,
}

impl Client {
    fn new(port: u16) -> Self {
        Client { port, stream: None }
    }

    /// A GET of `/` for `host`: the status and the body; `(0, "")` when
    /// the connection failed (the next request opens another).
    fn get(&mut self, host: &str) -> (u16, String) {
        let answer = self.try_get(host);
        if answer.is_none() {
            self.stream = None;
        }
        answer.unwrap_or((0, String::new()))
    }

    fn try_get(&mut self, host: &str) -> Option<(u16, String)> {
        if self.stream.is_none() {
            let stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
            stream.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
            stream.set_nodelay(true).ok()?;
            self.stream = Some(stream);
        }
        let stream = self.stream.as_mut()?;
        stream
            .write_all(format!("GET / HTTP/1.1\r\nhost: {host}\r\n\r\n").as_bytes())
            .ok()?;
        let mut raw = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|n| n.trim().parse().ok())?;
                if raw.len() >= end + 4 + length {
                    let status = head.split_whitespace().nth(1)?.parse().ok()?;
                    let body = String::from_utf8_lossy(&raw[end + 4..end + 4 + length]).to_string();
                    if head.contains("connection: close") {
                        self.stream = None;
                    }
                    return Some((status, body));
                }
            }
            let n = stream.read(&mut chunk).ok()?;
            if n == 0 {
                return None;
            }
            raw.extend_from_slice(&chunk[..n]);
        }
    }
}

fn host(i: usize) -> String {
    format!("route-{i}.example.com")
}

/// The case's Gateway (its listener on `port`) and routes, to `v1`.
fn objects(case: &Case, port: u16) -> String {
    let mut text = match case.api {
        Api::GatewayApi => format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: pilot}}\n\
             spec: {{controllerName: pilot.io/gateway-controller}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: {NAMESPACE}}}\n\
             spec:\n  gatewayClassName: pilot\n  listeners:\n  - {{name: http, protocol: HTTP, port: {port}}}\n"
        ),
        Api::Istio => format!(
            "apiVersion: networking.istio.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: {NAMESPACE}}}\n\
             spec:\n  selector: {{istio: ingressgateway}}\n  servers:\n  \
             - port: {{number: {port}, name: http, protocol: HTTP}}\n    hosts: [\"*\"]\n"
        ),
    };
    for i in 0..case.routes {
        let host = host(i);
        text.push_str(&match case.api {
            Api::GatewayApi => format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: route-{i}, namespace: {NAMESPACE}}}\n\
                 spec:\n  parentRefs: [{{name: edge}}]\n  hostnames: [{host}]\n  rules:\n  - backendRefs: [{{name: v1, port: 8080}}]\n"
            ),
            Api::Istio => format!(
                "---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {{name: route-{i}, namespace: {NAMESPACE}}}\n\
                 spec:\n  hosts: [{host}]\n  gateways: [edge]\n  http:\n  - route: [{{destination: {{host: v1, port: {{number: 8080}}}}}}]\n"
            ),
        });
    }
    text
}

/// Route `i`'s backend changed to `to` with a merge patch.
fn patch(discovery: &Discovery, api: Api, i: usize, to: &str) {
    let (path, body) = match api {
        Api::GatewayApi => (
            format!("/apis/gateway.networking.k8s.io/v1/namespaces/{NAMESPACE}/httproutes/route-{i}"),
            format!(r#"{{"spec":{{"rules":[{{"backendRefs":[{{"name":"{to}","port":8080}}]}}]}}}}"#),
        ),
        Api::Istio => (
            format!("/apis/networking.istio.io/v1/namespaces/{NAMESPACE}/virtualservices/route-{i}"),
            format!(
                r#"{{"spec":{{"http":[{{"route":[{{"destination":{{"host":"{to}","port":{{"number":8080}}}}}}]}}]}}}}"#
            ),
        ),
    };
    let answer = pilot_test_support::http::request(
        ([127, 0, 0, 1], discovery.port).into(),
        "PATCH",
        &path,
        &[("content-type", "application/merge-patch+json")],
        body.as_bytes(),
    )
    .expect("the REST API answers");
    assert_eq!(answer.code, 200, "{path}: {}", answer.text());
}

fn apply(discovery: &Discovery, dir: &Path, text: &str) {
    let file = dir.join("routes.yaml");
    std::fs::write(&file, text).unwrap();
    let applied = pilot_test_support::pilotctl(
        Some(&discovery.url),
        &["apply", "-f", file.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{}{}", applied.stdout, applied.stderr);
}
