//! ADS convergence, CPU and memory: time from a RouteRule write to every
//! connected client having ACKed the new route configuration, with N ADS
//! clients on real HTTP/2 gRPC streams over loopback, in a mesh of 1,000
//! services (`--services`); the server's CPU time per push; and the
//! server's resident memory with the clients connected and after they
//! left.
//!
//!     cargo bench -p pilot-ads --bench ads -- [OPTIONS] [CLIENTS...]
//!
//! (default: 100 1000 2000 clients). Options:
//! - `--namespaces K`: client `i` lives in namespace `ns{i % K}` (one
//!   proxy class per namespace; default 1, `default`).
//! - `--classes C`: C RouteRules with a source match (`from-svc-k`: traffic
//!   from `svc-k` to `svc-{k+1}` goes to v1), and client `i` runs an
//!   instance of `svc-{i % C}`: C source-matched classes (times the
//!   namespaces').
//! - `--services N`: the mesh's size (default 1,000; 4 instances and a
//!   50/50 rule each).
//! - `--delta`: the clients speak incremental xDS (default: state of the
//!   world).
//! - `--own`: every client also runs an instance of one of the services
//!   (`svc-{i % N}`), so each has an inbound side of its own.
//! - `--compare`: every size twice in one process, first as main's code
//!   sent state-of-the-world load assignments and route configurations
//!   (every subscribed one whenever any changed:
//!   `XdsOptions::sotw_changed_only` false), then changed ones only (the
//!   default). `--whole` runs only the first. `--per-class` additionally
//!   makes every class generate everything itself
//!   (`XdsOptions::incremental` false).
//! - `--scoped K`: the scoped mesh instead (`common/scoped.rs`): services
//!   spread over the namespaces, each namespace's Sidecar importing its
//!   own namespace and K other services; bytes at connect against the
//!   same mesh unscoped (`--baseline-clients B` clients, default 20), a
//!   rule change seen by 1% of the proxies against one seen by all, the
//!   same host's HTTPRoute (the Gateway API, its parent the Service)
//!   changed against the same change written as a VirtualService, an
//!   HTTPRoute attached to a Gateway no client serves changed (nobody is sent
//!   anything; the server's CPU against the 1% rule change's), an
//!   endpoint added to a host seen by all and to a typical service, and
//!   the server's RSS per connected client. The figures in
//!   docs/PERFORMANCE.md:
//!   `--scoped 10 --services 5000 --namespaces 500 10000`. With
//!   `--storm-only`, the connect storm and its floor alone. With
//!   `--churn`, then a rolling restart under churn (`common/churn.rs`):
//!   `svc-1` (100 instances, every proxy imports it) has each instance
//!   replaced at 25 per second while 1% of the other services replace one
//!   instance per second each; the staleness of each registry event (to
//!   the last concerned proxy's EDS ACK), the server's CPU, the queue and
//!   RSS each second, responses and bytes per proxy, and every `svc-1`
//!   assignment a client got with no ready endpoint:
//!   `--scoped 10 --services 5000 --namespaces 500 --churn 10000`.
//! - `--ambient [NODES]`: the ambient scenario instead
//!   (`common/ambient.rs`): NODES ztunnels (default 1,000), one per node,
//!   on a mesh of 10 workloads per node; bytes per ztunnel at connect, the
//!   connect storm, the server's RSS per ztunnel, and a pod change (one
//!   workload added): each ztunnel's WDS ACK, what it got for it and the
//!   server's CPU, beside the same change pushed to as many delta
//!   sidecars. The figures in docs/PERFORMANCE.md: `--ambient`.
//!
//! Rows: the initial sync (the connect storm: every client from connect
//! to fully synced), three rule writes, then one endpoint added to a
//! service no rule write touched: the time to every client's ACK of the
//! EDS response carrying it, and the bytes of EDS responses each client
//! received for it (whole encoded messages). "server CPU" is this
//! process's CPU time (user + system, every thread;
//! `CLOCK_PROCESS_CPUTIME_ID`, nanoseconds) from the write to the last ACK: the push's generation and
//! sending, with the clients in their own process. The initial sync's row
//! also gives the clients' process's CPU time until then: both processes
//! share the machine's cores, so the storm's time is bounded by the two
//! together. The last row gives the bytes of responses each client
//! received over the run, by type. The row before it is the storm's floor
//! (`common/floor.rs`): the same bytes each client received in the initial
//! sync, sent to as many raw TCP connections of a child process over
//! loopback, with no protocol on either side.
//!
//! The server runs in this process; the clients run in a child process (this
//! same binary, `--clients N --port P`; `pilot_test_support::ads::proxies`), so the
//! server's RSS and CPU are its own. Both share the machine's cores. While
//! the clients connect, the server prints its progress to stderr every
//! 5 s. The last row gives the clients' reconnects (jittered exponential
//! backoff as Envoy's) with why each stream ended, and the server's own
//! count (`XdsServer::stream_ends`).

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pilot_ads::XdsOptions;
use pilot_api::istio;
use pilot_api::istio::{DestinationWeight, IstioService, MatchCondition, RouteRule};
use pilot_model::{Config, ConfigStore, Labels};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::ads::proxies::{self, Proxies, proxy_ip};
use pilot_test_support::measure::{now_micros, percentile, rss_mb};
use serving::Serving;

// The version-split rule, shared with pilot-xds's generation bench.
#[path = "common/ambient.rs"]
mod ambient;
#[path = "../../pilot-xds/benches/common/mod.rs"]
mod common;
#[path = "common/floor.rs"]
mod floor;
#[path = "common/h2_floor.rs"]
mod h2_floor;
#[path = "common/mesh.rs"]
mod mesh;
#[path = "common/scoped.rs"]
mod scoped;
#[path = "common/serving.rs"]
mod serving;

#[cfg(feature = "bench-jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

// The one unsafe of the workspace outside its libraries (see Cargo.toml).
#[allow(unsafe_code, reason = "glibc's malloc_trim has no safe binding")]
unsafe extern "C" {
    /// glibc: returns free heap memory to the system.
    fn malloc_trim(pad: usize) -> i32;
    /// POSIX: the time of `clock`.
    fn clock_gettime(clock: i32, time: *mut Timespec) -> i32;
}

#[cfg(feature = "bench-jemalloc")]
#[allow(unsafe_code, reason = "a call with no safe binding (see the SAFETY comment)")]
unsafe extern "C" {
    /// jemalloc's control interface (tikv-jemalloc-sys prefixes its
    /// symbols with `_rjem_`).
    fn _rjem_mallctl(
        name: *const std::ffi::c_char,
        old: *mut std::ffi::c_void,
        old_len: *mut usize,
        new: *mut std::ffi::c_void,
        new_len: usize,
    ) -> i32;
}

/// jemalloc's counts of this process's heap, in bytes: allocated (what
/// live allocations asked for, rounded to size classes), active (the
/// pages holding them) and resident (every page jemalloc has touched and
/// not returned, its own metadata included); `None` on the system
/// allocator.
fn heap_stats() -> Option<[usize; 3]> {
    #[cfg(feature = "bench-jemalloc")]
    {
        #[allow(unsafe_code, reason = "a call with no safe binding (see the SAFETY comment)")]
        let read = |name: &std::ffi::CStr| -> Option<usize> {
            let mut value = 0usize;
            let mut len = std::mem::size_of::<usize>();
            // SAFETY: reads one size_t into a valid pointer of that size.
            let status = unsafe {
                _rjem_mallctl(
                    name.as_ptr(),
                    (&mut value as *mut usize).cast(),
                    &mut len,
                    std::ptr::null_mut(),
                    0,
                )
            };
            (status == 0).then_some(value)
        };
        // Statistics are a snapshot taken when the epoch advances.
        let mut epoch = 1u64;
        let mut len = std::mem::size_of::<u64>();
        // SAFETY: writes and reads one uint64_t through valid pointers.
        #[allow(unsafe_code, reason = "a call with no safe binding (see the SAFETY comment)")]
        let status = unsafe {
            _rjem_mallctl(
                c"epoch".as_ptr(),
                (&mut epoch as *mut u64).cast(),
                &mut len,
                (&mut epoch as *mut u64).cast(),
                len,
            )
        };
        if status != 0 {
            return None;
        }
        Some([
            read(c"stats.allocated")?,
            read(c"stats.active")?,
            read(c"stats.resident")?,
        ])
    }
    #[cfg(not(feature = "bench-jemalloc"))]
    None
}

/// `struct timespec` on 64-bit Linux.
#[repr(C)]
struct Timespec {
    seconds: i64,
    nanoseconds: i64,
}

/// This process's CPU time, every thread, past and present, to the
/// nanosecond (`/proc/self/stat` counts 10 ms ticks, too coarse for a push
/// of tens of milliseconds).
fn cpu_time() -> Duration {
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut time = Timespec {
        seconds: 0,
        nanoseconds: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    #[allow(
        unsafe_code,
        reason = "clock_gettime has no safe binding in the standard library"
    )]
    let status = unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut time) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
    Duration::new(time.seconds as u64, time.nanoseconds as u32)
}

/// Traffic from `svc-{k}` to `svc-{to}` goes to v1: a source-matched rule,
/// so the proxies running `svc-{k}` are a class of their own.
fn source_rule(k: usize, to: usize) -> pilot_model::DynConfig {
    Config::new(
        "default",
        format!("from-svc-{k}"),
        RouteRule {
            destination: Some(IstioService {
                name: format!("svc-{to}"),
                ..Default::default()
            }),
            precedence: 2,
            match_condition: Some(MatchCondition {
                source: Some(IstioService {
                    name: format!("svc-{k}"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            route: vec![DestinationWeight {
                labels: [("version".to_string(), "v1".to_string())].into(),
                weight: Some(100),
                ..Default::default()
            }],
            ..Default::default()
        },
    )
    .to_dyn()
    .expect("serializes")
}

/// How the bench runs: where clients live, and the server's options.
#[derive(Clone, Copy)]
struct Setup {
    own: bool,
    namespaces: usize,
    classes: usize,
    services: usize,
    delta: bool,
    incremental: bool,
    sotw_changed_only: bool,
}

impl Setup {
    fn label(&self, clients: usize) -> String {
        let mut label = format!("{clients} / {} ns", self.namespaces);
        if self.classes > 0 {
            label.push_str(&format!(" / {} classes", self.classes));
        }
        if self.services != 1_000 {
            label.push_str(&format!(" / {} svc", self.services));
        }
        label.push_str(if self.delta { ", delta" } else { ", sotw" });
        if !self.delta {
            label.push_str(if self.sotw_changed_only {
                ", changed only"
            } else {
                ", whole (main)"
            });
        }
        if !self.incremental {
            label.push_str(", per class");
        }
        label
    }
}

async fn converge(clients: usize, setup: Setup) {
    let services = setup.services;
    let store = MemoryConfigStore::new(istio::registry());
    let registry = MemoryServiceRegistry::new();
    mesh::populate(services, &registry, &store).await;
    for k in 0..setup.classes {
        store
            .create(source_rule(k, (k + 1) % services))
            .await
            .expect("create");
    }
    // Every client runs an instance of a service: with `--own` one each
    // (two per service at 2,000 clients), each with an inbound side of
    // its own; with `--classes C` one of the C source services.
    let runs = |index: usize| {
        if setup.classes > 0 {
            Some(index % setup.classes)
        } else if setup.own {
            Some(index % services)
        } else {
            None
        }
    };
    for index in 0..clients {
        if let Some(s) = runs(index) {
            let host = format!("svc-{s}.default.svc.cluster.local");
            let labels = Labels::from_pairs([("version", "v1")]);
            registry
                .add_endpoints(&host, proxy_ip(index), labels)
                .expect("service exists");
        }
    }
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    controller.wait_synced().await;
    let registry = Arc::new(registry);
    let options = {
        let mut value = XdsOptions::default();
        value.incremental = setup.incremental;
        value.sotw_changed_only = setup.sotw_changed_only;
        value
    };
    let serving = Serving::start(
        Arc::clone(&controller),
        Arc::clone(&registry) as Arc<dyn pilot_model::ServiceDiscovery>,
        options,
    )
    .await;
    let (server, port) = (serving.server.clone(), serving.port);
    let before = rss_mb();
    let start = now_micros();
    let started = Instant::now();
    let cpu_start = cpu_time();
    let mut child = Proxies::start(clients, port, setup.namespaces, setup.delta);
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
    let initial = tokio::task::block_in_place(|| child.wait_acked(1, start));
    progress.abort();
    let connected = started.elapsed();
    let initial_cpu = cpu_time().saturating_sub(cpu_start);
    let clients_cpu = tokio::task::block_in_place(|| child.cpu());
    let synced_bytes = tokio::task::block_in_place(|| child.received());
    let with_clients = rss_mb();
    let with_clients_settled = settled_rss().await;

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
        let mut next = mesh::service_split(1, [80, 20, 50][round]);
        next.meta.resource_version = current.meta.resource_version.clone();
        let version = server.version().unwrap() + 1;
        let cpu = cpu_time();
        let start = now_micros();
        store.update(next).await.unwrap();
        let times = tokio::task::block_in_place(|| child.wait_acked(version, start));
        writes.push((
            percentile(&times, 0.5),
            percentile(&times, 0.99),
            *times.last().unwrap(),
            cpu_time().saturating_sub(cpu),
            rss_mb(),
        ));
    }
    // One endpoint added to svc-2 (which no rule write touched).
    let version = server.version().unwrap() + 1;
    let cpu = cpu_time();
    let start = now_micros();
    registry
        .add_endpoints(
            "svc-2.default.svc.cluster.local",
            IpAddr::V4(Ipv4Addr::new(10, 255, 0, 1)),
            Labels::from_pairs([("version", "v1")]),
        )
        .expect("service exists");
    let (endpoint, eds_bytes) = tokio::task::block_in_place(|| child.ask("eds", version, start));
    let endpoint_cpu = cpu_time().saturating_sub(cpu);
    let endpoint_rss = rss_mb();
    let endpoint_rss_settled = settled_rss().await;
    let reconnects = tokio::task::block_in_place(|| child.reconnects());
    let ends = server.stream_ends();
    child.stop();
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
    #[allow(unsafe_code, reason = "glibc's malloc_trim has no safe binding")]
    unsafe {
        malloc_trim(0)
    };
    let trimmed = rss_mb();
    serving.stop().await;
    let floor = floor::run(clients, synced_bytes as usize, cpu_time).await;
    let clients_count = clients;
    let clients = setup.label(clients);
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| {clients} | initial sync (clients' CPU {:.1} s) | {:.0} ms | {:.0} ms | {:.0} ms | {:.1} s | {:.0} ms | {before:.0} MB | {with_clients:.0} MB ({with_clients_settled:.0} MB 2 s later) | |",
        clients_cpu.as_secs_f64(),
        ms(percentile(&initial, 0.5)),
        ms(percentile(&initial, 0.99)),
        ms(*initial.last().unwrap()),
        connected.as_secs_f64(),
        ms(initial_cpu),
    );
    for (round, (p50, p99, max, cpu, rss)) in writes.into_iter().enumerate() {
        println!(
            "| {clients} | write {} | {:.0} ms | {:.0} ms | {:.0} ms | | {:.0} ms | | {rss:.0} MB | {} |",
            round + 1,
            ms(p50),
            ms(p99),
            ms(max),
            ms(cpu),
            if round == 2 {
                format!("{after:.0} MB ({trimmed:.0} MB after malloc_trim)")
            } else {
                String::new()
            },
        );
    }
    println!(
        "| {clients} | endpoint added (EDS ACKed; {:.2} KB of EDS per client) | {:.0} ms | {:.0} ms | {:.0} ms | | {:.0} ms | | {endpoint_rss:.0} MB ({endpoint_rss_settled:.0} MB 2 s later) | |",
        eds_bytes / 1024.0,
        ms(percentile(&endpoint, 0.5)),
        ms(percentile(&endpoint, 0.99)),
        ms(*endpoint.last().unwrap()),
        ms(endpoint_cpu),
    );
    println!(
        "| {clients} | loopback floor: the initial sync's {:.0} KB to each of {clients_count} raw TCP connections, no HTTP/2, gRPC or xDS (clients' CPU {:.1} s) | | | | {:.2} s | {:.0} ms | | | |",
        synced_bytes as f64 / 1024.0,
        floor.clients_cpu.as_secs_f64(),
        floor.wall.as_secs_f64(),
        ms(floor.server_cpu),
    );
    println!("| {clients} | clients: {reconnects}; server: streams ended {ends:?} | | | | | | | | |");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if proxies::child_main(&args) {
        return;
    }
    if let Some((clients, port, bytes)) = floor::child_args(&args) {
        floor::clients_main(clients, port, bytes);
        return;
    }
    if let Some((clients, port, read)) = h2_floor::child_args(&args) {
        h2_floor::clients_main(clients, port, read);
        return;
    }
    if let Some((ztunnels, port)) = ambient::child_args(&args) {
        ambient::clients_main(ztunnels, port);
        return;
    }
    if args.iter().any(|a| a == "--test") {
        return;
    }
    const VALUED: [&str; 5] = [
        "--namespaces",
        "--classes",
        "--services",
        "--scoped",
        "--baseline-clients",
    ];
    let value = |flag: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == flag)
            .and_then(|at| args.get(at + 1)?.parse().ok())
            .unwrap_or(default)
    };
    let flag = |name: &str| args.iter().any(|a| a == name);
    let counts: Vec<usize> = args
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(i, _)| !VALUED.contains(&args[i - 1].as_str()))
        .filter_map(|(_, a)| a.parse().ok())
        .collect();
    let ambient_nodes = counts.first().copied().unwrap_or(1_000);
    let counts = if counts.is_empty() {
        vec![100, 1000, 2000]
    } else {
        counts
    };
    // The server's end of every connection, and the floors' servers'.
    let most = counts.iter().copied().max().unwrap_or(0).max(ambient_nodes) as u64;
    let needed = most + 4096;
    let limit = pilot_test_support::measure::raise_open_files(needed);
    if limit < needed {
        println!(
            "open-files limit: {limit}, below the {needed} this process and the clients' each need: \
             raising the hard limit takes root with CAP_SYS_RESOURCE (`ulimit -Hn`); connections past it fail"
        );
    } else if most > 10_000 {
        println!("open-files limit: {limit} in this process and the clients' (each needs {needed})");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if flag("--ambient") {
        runtime.block_on(ambient::run(ambient_nodes));
        return;
    }
    if flag("--scoped") {
        for clients in counts {
            let mut layout = scoped::Layout::new(
                value("--services", 1_000),
                value("--namespaces", 1),
                value("--scoped", 10),
            );
            layout.churn = flag("--churn");
            runtime.block_on(scoped::run(
                clients,
                layout,
                value("--baseline-clients", 20),
                flag("--storm-only"),
            ));
        }
        return;
    }
    println!(
        "| clients | what | to all ACKed p50 | p99 | max | first sync (all) | server CPU | server RSS before | server RSS connected | server RSS after disconnect |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let modes: &[bool] = if flag("--compare") {
        &[false, true]
    } else if flag("--whole") {
        &[false]
    } else {
        &[true]
    };
    for clients in counts {
        for &sotw_changed_only in modes {
            let setup = Setup {
                own: flag("--own"),
                namespaces: value("--namespaces", 1),
                classes: value("--classes", 0),
                services: value("--services", 1_000),
                delta: flag("--delta"),
                incremental: !flag("--per-class"),
                sotw_changed_only,
            };
            runtime.block_on(converge(clients, setup));
        }
    }
}

/// The server's RSS 2 s after a burst, the clients still connected: by
/// then jemalloc's background threads have returned what the burst freed
/// (its decay is 1 s, `.cargo/config.toml`), so it is what the server
/// holds for them. The figure right after the burst is printed beside it.
async fn settled_rss() -> f64 {
    tokio::time::sleep(Duration::from_secs(2)).await;
    rss_mb()
}
