//! The agent with the real Envoy and pilot-discovery: Envoy syncs, a
//! `kill -9` is restarted and reported (proxy-status, metrics), an Envoy
//! that cannot start spends the retry budget and the agent says why.

mod common;

use common::{Agent, Discovery, eventually, free_port};

const ADMIN: &str = "admin-token-0123456789";
const READER: &str = "reader-token-0123456789";
const NODE: &str = "sidecar~10.0.0.7~app-1.default~default.svc.cluster.local";

fn secured_discovery(dir: &std::path::Path) -> (Discovery, std::path::PathBuf) {
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{ADMIN} rw admin\n{READER} ro viewer\n")).unwrap();
    let agent_token = dir.join("agent-token");
    std::fs::write(&agent_token, format!("{ADMIN}\n")).unwrap();
    let services = common::services_file(dir, free_port(), free_port());
    let discovery = Discovery::start(&[
        "--token-file",
        tokens.to_str().unwrap(),
        "--services",
        services.to_str().unwrap(),
    ]);
    (discovery, agent_token)
}

fn proxy_row(discovery: &Discovery) -> Option<String> {
    let (code, out) = discovery.pilotctl(ADMIN, &["proxy-status"]);
    assert_eq!(code, 0, "{out}");
    out.lines().find(|l| l.starts_with(NODE)).map(str::to_string)
}

#[test]
fn envoy_syncs_and_a_kill_9_is_restarted_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let (discovery, token_file) = secured_discovery(dir.path());
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.7",
            "--id",
            "app-1.default",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            "--discovery-url",
            &discovery.url,
            "--discovery-token-file",
            token_file.to_str().unwrap(),
            "--max-retries",
            "1",
            "--budget-reset-after",
            "1s",
        ],
    );
    // `pilot-agent wait` returns once Envoy is LIVE with pilot's config.
    let wait = std::process::Command::new(common::agent_binary())
        .args([
            "wait",
            "--status-url",
            &format!("http://127.0.0.1:{}", agent.status_port),
            "--timeout",
            "60s",
        ])
        .output()
        .unwrap();
    assert!(
        wait.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&wait.stderr),
        agent.log()
    );
    assert!(agent.ready());
    eventually("proxy-status SYNCED", || {
        proxy_row(&discovery)
            .is_some_and(|row| row.split_whitespace().filter(|w| *w == "SYNCED").count() >= 2)
    });
    let row = proxy_row(&discovery).unwrap();
    let words: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(words[words.len() - 2..], ["0", "-"], "no restart yet: {row}");

    let first = agent.envoy_pids();
    assert_eq!(first.len(), 1, "{first:?}");
    let killed = std::process::Command::new("kill")
        .args(["-9", &first[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());

    eventually("a new Envoy, ready again", || {
        let pids = agent.envoy_pids();
        pids.len() == 1 && pids[0] != first[0] && agent.ready()
    });
    eventually("proxy-status to show the restart and the signal", || {
        proxy_row(&discovery)
            .is_some_and(|row| row.contains("signal 9 (SIGKILL)") && row.split_whitespace().any(|w| w == "1"))
    });
    eventually("SYNCED again", || {
        proxy_row(&discovery)
            .is_some_and(|row| row.split_whitespace().filter(|w| *w == "SYNCED").count() >= 2)
    });
    let (code, metrics) = discovery.get("/metrics", ADMIN);
    assert_eq!(code, 200);
    assert!(metrics.contains("pilot_proxy_restarts_total 1\n"), "{metrics}");
    assert!(
        metrics.contains("pilot_proxy_unexpected_exits_total{reason=\"signal\"} 1\n"),
        "{metrics}"
    );
    assert_eq!(agent.metric("pilot_agent_envoy_restarts_total"), Some(1));

    // A budget of one retry, refilled once the new Envoy stayed ready:
    // a second kill is restarted too.
    eventually("the budget refilled", || {
        agent.log().contains("retry budget refilled")
    });
    let second = agent.envoy_pids();
    assert_eq!(second.len(), 1);
    let killed = std::process::Command::new("kill")
        .args(["-9", &second[0].to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("a third Envoy, ready", || {
        let pids = agent.envoy_pids();
        pids.len() == 1 && pids[0] != second[0] && agent.ready()
    });
    assert_eq!(agent.metric("pilot_agent_envoy_restarts_total"), Some(2));
    eventually("proxy-status to show 2 restarts", || {
        proxy_row(&discovery)
            .is_some_and(|row| row.contains("signal 9 (SIGKILL)") && row.split_whitespace().any(|w| w == "2"))
    });
    // The agent's status port serves Envoy's own stats too.
    let (_, stats) = common::get(agent.status_port, "/stats/prometheus");
    assert!(stats.contains("envoy_server_live"), "{stats}");

    // Reports need a token like every other write: none, 401; read-only, 403.
    let event =
        format!(r#"{{"node":"{NODE}","kind":"started","epoch":9,"restarts":0,"time_ms":1,"expected":true}}"#);
    let headers = [("content-type", "application/json")];
    let (code, _) = common::http("POST", discovery.port, "/v1/proxy-events", &headers, &event).unwrap();
    assert_eq!(code, 401);
    let reader = format!("Bearer {READER}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", reader.as_str()),
    ];
    let (code, _) = common::http("POST", discovery.port, "/v1/proxy-events", &headers, &event).unwrap();
    assert_eq!(code, 403);
    // A malformed node id is refused with the field named.
    let bad = event.replace(NODE, "not-a-node-id");
    let admin = format!("Bearer {ADMIN}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", admin.as_str()),
    ];
    let (code, body) = common::http("POST", discovery.port, "/v1/proxy-events", &headers, &bad).unwrap();
    assert_eq!(code, 422, "{body}");
    assert!(body.contains(".node"), "{body}");
}

#[test]
fn an_envoy_that_cannot_start_spends_the_budget_and_the_agent_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (discovery, token_file) = secured_discovery(dir.path());
    let mut agent = Agent::start(
        "router",
        &[
            "--ip",
            "10.0.0.8",
            "--id",
            "gw.default",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            "--discovery-url",
            &discovery.url,
            "--token-file",
            token_file.to_str().unwrap(),
            "--envoy-arg=--no-such-option",
            "--max-retries",
            "3",
            "--initial-backoff",
            "20ms",
        ],
    );
    let code = agent.wait_exit();
    let log = agent.log();
    assert_ne!(code, 0, "{log}");
    assert!(
        log.contains("exited 4 times in a row (retry budget spent)"),
        "{log}"
    );
    assert!(
        log.contains("no-such-option"),
        "Envoy's own complaint is in the message: {log}"
    );
    // Backoff doubles from the initial delay.
    for step in [
        "restart 1 of 3 in 20ms",
        "restart 2 of 3 in 40ms",
        "restart 3 of 3 in 80ms",
    ] {
        assert!(log.contains(step), "{step}: {log}");
    }
    assert!(!log.contains("restart 4 of"), "{log}");
    assert!(agent.envoy_pids().is_empty());
    // Reported: the proxy never connected, and pilot knows why.
    let node = "router~10.0.0.8~gw.default~default.svc.cluster.local";
    eventually("the spent budget reported", || {
        let (_, body) = discovery.get("/debug/proxy-status", ADMIN);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        value["proxies"].as_array().into_iter().flatten().any(|p| {
            p["node"] == node
                && p["connected"] == false
                && p["process"]["last_exit"] == "exit code 1"
                && p["process"]["last_event"] == "budget_exhausted"
                && p["process"]["restarts"] == 3
        })
    });
    let (_, metrics) = discovery.get("/metrics", ADMIN);
    assert!(
        metrics.contains("pilot_proxy_budget_exhausted_total 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pilot_proxy_unexpected_exits_total{reason=\"code\"} 4\n"),
        "{metrics}"
    );
}

#[test]
fn wait_times_out_while_envoy_has_no_configuration() {
    // Nothing listens at the discovery address: Envoy runs but never gets
    // listeners or clusters, so the proxy is not ready.
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.9",
            "--id",
            "lonely.default",
            "--discovery-address",
            &format!("127.0.0.1:{}", free_port()),
        ],
    );
    eventually("Envoy started", || agent.envoy_pids().len() == 1);
    let wait = std::process::Command::new(common::agent_binary())
        .args([
            "wait",
            "--status-url",
            &format!("http://127.0.0.1:{}", agent.status_port),
            "--timeout",
            "2s",
        ])
        .output()
        .unwrap();
    assert_eq!(wait.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&wait.stderr);
    assert!(stderr.contains("not ready after 2s"), "{stderr}");
    assert!(!agent.ready());
}

#[test]
fn a_crash_during_a_hot_restart_aborts_every_epoch_and_starts_again_at_0() {
    let dir = tempfile::tempdir().unwrap();
    let services = common::services_file(dir.path(), free_port(), free_port());
    let discovery = Discovery::start(&["--services", services.to_str().unwrap()]);
    let agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.11",
            "--id",
            "racy.default",
            "--interception-mode",
            "NONE",
            "--discovery-address",
            &format!("127.0.0.1:{}", discovery.xds_port),
            // The parent stays long enough for both epochs to be seen.
            "--drain-duration",
            "30s",
            "--parent-shutdown-duration",
            "40s",
        ],
    );
    eventually("epoch 0 ready", || agent.ready());
    let parent = agent.envoy_pids();
    assert_eq!(parent.len(), 1);
    agent.signal("HUP");
    eventually("epoch 1 ready beside its draining parent", || {
        agent.metric("pilot_agent_envoy_epoch") == Some(1) && agent.ready() && agent.envoy_pids().len() == 2
    });
    let child = *agent.envoy_pids().iter().find(|p| !parent.contains(p)).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", &child.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    eventually("both epochs gone, a fresh epoch 0 ready", || {
        let pids = agent.envoy_pids();
        pids.len() == 1
            && pids[0] != child
            && pids[0] != parent[0]
            && agent.metric("pilot_agent_envoy_epoch") == Some(0)
            && agent.ready()
    });
    assert_eq!(agent.metric("pilot_agent_envoy_restarts_total"), Some(1));
    assert_eq!(
        agent.metric("pilot_agent_envoy_unexpected_exits_total"),
        Some(1),
        "{}",
        agent.log()
    );
    assert!(agent.config_dir.join("envoy-rev0.json").exists());
    eventually("epoch 1's bootstrap removed", || {
        !agent.config_dir.join("envoy-rev1.json").exists()
    });
}
