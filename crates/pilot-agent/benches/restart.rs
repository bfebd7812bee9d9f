//! `cargo bench -p pilot-agent --bench restart`: with pilot-discovery and
//! a real Envoy under the agent, kills Envoy 20 times and measures, for
//! each kill, the time until the agent's `/healthz/ready` says ready again
//! (new Envoy LIVE with pilot's listeners and clusters ACKed), and the new
//! Envoy's own part of it (from its process appearing to ready). Prints
//! the median and max of both, and the agent's RSS (Envoy excluded).

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{Agent, Backend, Discovery, free_port};

const KILLS: usize = 20;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::start();
    let services = common::services_file(dir.path(), free_port(), backend.port);
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.30",
            "--id",
            "bench.default",
            "--interception-mode",
            "NONE",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            "--budget-reset-after",
            "1s",
        ],
    );
    wait(|| agent.ready());
    let mut total = Vec::new();
    let mut envoy_own = Vec::new();
    for _ in 0..KILLS {
        // Let the budget refill (1 s ready), so every kill sees the first
        // backoff step (200 ms), as a rare crash would.
        std::thread::sleep(Duration::from_millis(1500));
        let old = agent.envoy_pids();
        assert_eq!(old.len(), 1);
        let killed_at = Instant::now();
        std::process::Command::new("kill")
            .args(["-9", &old[0].to_string()])
            .status()
            .unwrap();
        let mut appeared = None;
        loop {
            let pids = agent.envoy_pids();
            if appeared.is_none() && pids.len() == 1 && pids[0] != old[0] {
                appeared = Some(Instant::now());
            }
            if appeared.is_some() && agent.ready() {
                break;
            }
            assert!(
                killed_at.elapsed() < Duration::from_secs(60),
                "no new Envoy: {}",
                agent.log()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let ready = Instant::now();
        total.push(ready - killed_at);
        envoy_own.push(ready - appeared.unwrap());
    }
    let rss = std::fs::read_to_string(format!("/proc/{}/status", agent.pid()))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .unwrap_or("VmRSS: ?")
        .to_string();
    report("kill -9 -> new Envoy LIVE and SYNCED", &mut total);
    report(
        "  of which the new Envoy's own start (process seen -> ready)",
        &mut envoy_own,
    );
    println!("agent {rss} (Envoy excluded) after {KILLS} restarts");
}

fn report(what: &str, samples: &mut [Duration]) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let max = samples[samples.len() - 1];
    println!(
        "{what}: median {median:?}, max {max:?} over {} kills",
        samples.len()
    );
}

fn wait(mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < Duration::from_secs(60), "timed out");
        std::thread::sleep(Duration::from_millis(20));
    }
}
