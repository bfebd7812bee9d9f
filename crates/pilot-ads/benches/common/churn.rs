//! The scoped mesh's churn scenario (`--churn`): the shared host
//! (`svc-1`, imported by every proxy, given [`SHARED_INSTANCES`]
//! instances) rolls as a Deployment's rolling restart does: each of its
//! instances is replaced at [`ROLL_RATE`] instances per second (a new
//! instance added, ready at once, then the old one removed: additions
//! before removals), while 1% of the other services each replace one
//! instance per second.
//!
//! Measured per registry event (an instance added or removed): its
//! staleness, from the change to the moment the last proxy concerned
//! (every proxy for `svc-1`; those seeing the service otherwise) has
//! ACKed an EDS version that includes it. The push that first includes an
//! event is the first whose registry state is at least as new as the
//! event ([`pilot_ads::PushInfo::registry_version`]); the ACK times are the
//! clients' (`Proxies::start_watching` logs each client's EDS ACKs). Over
//! the roll: the server's CPU each second, the responses and bytes each
//! proxy received, the pushes published, the push queue (from
//! publication to a stream taking the push, `XdsServer::push_timings`,
//! each second), the server's RSS each second; and, counted by the
//! clients, every `svc-1` load assignment (subsets included) they were
//! sent with no ready endpoint.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pilot_model::Labels;
use pilot_test_support::ads::proxies::Proxies;
use pilot_test_support::measure::{now_micros, rss_mb};

use super::{Layout, Running, SHARED, load, percentiles};

/// `svc-1`'s instances in the churn scenario.
pub(super) const SHARED_INSTANCES: usize = 100;
/// `svc-1`'s instances replaced per second.
const ROLL_RATE: u32 = 25;

/// `svc-1`'s instance `i` (beyond the layout's first four): 10.254.0.0 on.
pub(super) fn shared_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0x0afe_0000 + i as u32))
}

/// One registry change: the registry's version right after it, when (µs
/// since the epoch), and the service.
struct Event {
    registry_version: u64,
    at: u64,
    service: usize,
}

/// One second of the roll, as the server saw it.
struct Second {
    cpu: Duration,
    rss: f64,
    /// Streams that took a push, and their mean wait since its
    /// publication.
    taken: u64,
    queue_mean: Duration,
    published: u64,
}

/// Replaces one instance of `service` (the oldest of `instances`): a new
/// one at the next address, with the old one's labels, then the old one
/// removed; records both events.
fn replace(
    running: &Running,
    layout: &Layout,
    service: usize,
    instances: &mut VecDeque<(IpAddr, &'static str)>,
    next_ip: &mut u32,
    events: &mut Vec<Event>,
) {
    let host = layout.host(service);
    let (old, version) = instances.pop_front().expect("the service has instances");
    let new = IpAddr::V4(Ipv4Addr::from(0x0afd_0000 + *next_ip));
    *next_ip += 1;
    running
        .registry
        .add_endpoints(&host, new, Labels::from_pairs([("version", version)]))
        .expect("service exists");
    events.push(Event {
        registry_version: running.registry.version(),
        at: now_micros(),
        service,
    });
    running.registry.remove_instances(&host, old, None);
    events.push(Event {
        registry_version: running.registry.version(),
        at: now_micros(),
        service,
    });
    instances.push_back((new, version));
}

/// The instances of `service` as the layout made them, oldest first.
fn initial(service: usize) -> VecDeque<(IpAddr, &'static str)> {
    let mut instances: VecDeque<_> = (0..4u32)
        .map(|i| {
            (
                IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (service as u32) * 4 + i)),
                if i < 2 { "v1" } else { "v2" },
            )
        })
        .collect();
    if service == SHARED {
        instances.extend((4..SHARED_INSTANCES).map(|i| (shared_ip(i), if i % 2 == 0 { "v1" } else { "v2" })));
    }
    instances
}

/// Runs the roll against the connected `child` and prints its rows.
pub(super) async fn run(running: &Running, child: &mut Proxies, layout: &Layout, clients: usize) {
    let server = running.serving.server.clone();
    // Every push published from now on: version, registry version.
    let published: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let mut subscription = server.subscribe_pushes();
    let collecting = {
        let published = Arc::clone(&published);
        tokio::spawn(async move {
            while let Some(push) = subscription.next().await {
                published
                    .lock()
                    .unwrap()
                    .push((push.version, push.registry_version));
            }
        })
    };
    // One sample a second.
    let seconds: Arc<Mutex<Vec<Second>>> = Arc::default();
    let sampling = {
        let (seconds, server) = (Arc::clone(&seconds), server.clone());
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1));
            ticks.tick().await;
            let mut cpu = crate::cpu_time();
            let mut queue = server.push_timings().queue;
            let mut version = server.version().unwrap_or(0);
            loop {
                ticks.tick().await;
                let (cpu_now, queue_now, version_now) = (
                    crate::cpu_time(),
                    server.push_timings().queue,
                    server.version().unwrap_or(0),
                );
                let taken = queue_now.count - queue.count;
                seconds.lock().unwrap().push(Second {
                    cpu: cpu_now.saturating_sub(cpu),
                    rss: rss_mb(),
                    taken,
                    queue_mean: (queue_now.sum.saturating_sub(queue.sum))
                        .checked_div(taken as u32)
                        .unwrap_or_default(),
                    published: version_now - version,
                });
                (cpu, queue, version) = (cpu_now, queue_now, version_now);
            }
        })
    };
    let before = tokio::task::block_in_place(|| (child.responses(), child.eds_responses(), child.received()));
    let sent_before: u64 = server.sent_by_type().iter().map(|(_, n)| n).sum();
    let rss_before = rss_mb();
    let cpu_before = crate::cpu_time();

    // The other services that churn: 1% of them (at least one), spread
    // over the mesh, never the shared host.
    let others: Vec<usize> = {
        let count = ((layout.services - 1) / 100).max(1);
        let step = (layout.services / count).max(1);
        (0..count)
            .map(|j| (3 + j * step) % layout.services)
            .filter(|&s| s != SHARED)
            .collect()
    };
    let mut shared = initial(SHARED);
    let mut churning: Vec<VecDeque<(IpAddr, &'static str)>> = others.iter().map(|&s| initial(s)).collect();
    let mut next_ip = 0;
    let mut events = Vec::new();
    let started = Instant::now();
    // A mark in the progress (stderr): a profiler can start here.
    eprintln!("churn: the roll starts");
    let mut ticks = tokio::time::interval(Duration::from_secs(1) / ROLL_RATE);
    for tick in 0..SHARED_INSTANCES {
        ticks.tick().await;
        replace(running, layout, SHARED, &mut shared, &mut next_ip, &mut events);
        // Each other service once a second, spread over the second's ticks.
        let slot = tick % ROLL_RATE as usize;
        for (j, &service) in others.iter().enumerate() {
            if j * ROLL_RATE as usize / others.len() == slot {
                replace(
                    running,
                    layout,
                    service,
                    &mut churning[j],
                    &mut next_ip,
                    &mut events,
                );
            }
        }
    }
    let rolled = started.elapsed();
    let roll_cpu = crate::cpu_time().saturating_sub(cpu_before);
    let load_rolled = load();

    // Every event's push: the first whose registry state holds it.
    let last = events.last().map_or(0, |e| e.registry_version);
    while published.lock().unwrap().last().is_none_or(|(_, r)| *r < last) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let pushes = published.lock().unwrap().clone();
    let (mut shared_stale, mut other_stale, mut missing) = (Vec::new(), Vec::new(), 0);
    for event in &events {
        let Some(&(version, _)) = pushes.iter().find(|(_, r)| *r >= event.registry_version) else {
            missing += 1;
            continue;
        };
        let stale = if event.service == SHARED {
            tokio::task::block_in_place(|| child.staleness(version, event.at, None))
        } else {
            let seeing = layout.clients_seeing(clients, event.service);
            if seeing.is_empty() {
                continue;
            }
            tokio::task::block_in_place(|| child.staleness(version, event.at, Some(&seeing)))
        };
        match (stale, event.service == SHARED) {
            (Some(stale), true) => shared_stale.push(stale),
            (Some(stale), false) => other_stale.push(stale),
            (None, _) => missing += 1,
        }
    }
    collecting.abort();
    sampling.abort();
    let after = tokio::task::block_in_place(|| (child.responses(), child.eds_responses(), child.received()));
    let sent: u64 = server.sent_by_type().iter().map(|(_, n)| n).sum::<u64>() - sent_before;
    let (empty, clients_empty, fewest) = tokio::task::block_in_place(|| child.watched());
    let seconds = std::mem::take(&mut *seconds.lock().unwrap());
    shared_stale.sort();
    other_stale.sort();

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean_delta =
        |b: &[u64], a: &[u64]| a.iter().zip(b).map(|(a, b)| a - b).sum::<u64>() as f64 / clients as f64;
    let stale_row = |times: &[Duration]| {
        if times.is_empty() {
            "—".to_string()
        } else {
            percentiles(times)
        }
    };
    let cores: Vec<f64> = seconds.iter().map(|s| s.cpu.as_secs_f64()).collect();
    let queue: Vec<String> = seconds
        .iter()
        .map(|s| format!("{}×{:.0} ms", s.taken, ms(s.queue_mean)))
        .collect();
    let per_second: Vec<String> = seconds.iter().map(|s| s.published.to_string()).collect();
    let rss_max = seconds.iter().map(|s| s.rss).fold(rss_before, f64::max);
    println!(
        "\nChurn: `{}` ({SHARED_INSTANCES} instances, every proxy) rolled at {ROLL_RATE} instances/s in {:.1} s (each: added, then the old one removed), while {} other services (1%) each replaced one instance per second: {} registry events\n",
        layout.host(SHARED),
        rolled.as_secs_f64(),
        others.len(),
        events.len(),
    );
    println!("| what | figure | target | load average |");
    println!("| --- | --- | --- | --- |");
    println!(
        "| staleness of `svc-1`'s events (to every proxy's EDS ACK of a push holding it), p50 / p99 / max | {} ({} events) | p99 ≤ 500 ms, max ≤ 1 s | {load_rolled} |",
        stale_row(&shared_stale),
        shared_stale.len(),
    );
    println!(
        "| staleness of the other services' events (to the ACK of every proxy seeing the service), p50 / p99 / max | {} ({} events) | — | {load_rolled} |",
        stale_row(&other_stale),
        other_stale.len(),
    );
    println!(
        "| events whose push was not seen or not ACKed by every proxy concerned within 60 s | {missing} | 0 | {load_rolled} |"
    );
    println!(
        "| server CPU per second of the roll (cores), each second | {} (mean over the roll {:.2}) | ≤ 1.5 | {load_rolled} |",
        cores
            .iter()
            .map(|c| format!("{c:.2}"))
            .collect::<Vec<_>>()
            .join(", "),
        roll_cpu.as_secs_f64() / rolled.as_secs_f64(),
    );
    println!(
        "| pushes published, each second | {} | — | {load_rolled} |",
        per_second.join(", ")
    );
    println!(
        "| per proxy over the roll: responses, EDS responses, bytes received | {:.1}, {:.1}, {:.1} KB (server sent {sent} responses) | — | {load_rolled} |",
        mean_delta(&before.0, &after.0),
        mean_delta(&before.1, &after.1),
        (after.2.saturating_sub(before.2)) as f64 / 1024.0,
    );
    println!(
        "| push queue, each second: streams that took a push × their mean wait since its publication | {} | bounded (not growing) | {load_rolled} |",
        queue.join(", ")
    );
    println!(
        "| server RSS: before the roll → its highest (sampled each second) | {rss_before:.0} → {rss_max:.0} MB | — | {load_rolled} |"
    );
    println!(
        "| `svc-1` load assignments the clients were sent with no ready endpoint (clients that got one; fewest ready endpoints seen) | {empty} ({clients_empty}; {}) | 0 | {load_rolled} |",
        fewest.map_or("—".to_string(), |f| f.to_string()),
    );
}
