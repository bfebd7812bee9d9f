//! pilot-agent's reports posted to `POST /v1/proxy-events` are counted in
//! `/metrics`: restarts move only forward, an expected exit (a drained
//! parent after a hot restart) is no failure, and unexpected exits are
//! counted by how Envoy ended.

mod common;

use common::TestServer;
use serde_json::json;

const NODE: &str = "sidecar~10.0.0.1~a.default~default.svc.cluster.local";

fn post(server: &TestServer, kind: &str, restarts: u64, signal: Option<i32>, expected: bool) {
    let event = json!({
        "node": NODE,
        "kind": kind,
        "epoch": 0,
        "signal": signal,
        "expected": expected,
        "message": "epoch 0 signal 9",
        "restarts": restarts,
        "time_ms": 1,
    });
    let body = serde_json::to_vec(&event).unwrap();
    let (code, answer) = server.request(
        "POST",
        "/v1/proxy-events",
        &[("content-type", "application/json")],
        Some(&body),
    );
    assert_eq!(code, 204, "{}", String::from_utf8_lossy(&answer));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_reports_are_counted_in_metrics() {
    let server = TestServer::start(&[]).await;
    post(&server, "started", 0, None, true);
    post(&server, "exited", 0, Some(9), false);
    post(&server, "started", 1, None, true);
    // A drained parent after a hot restart.
    post(&server, "exited", 1, None, true);
    // A late, reordered report does not move the count back.
    post(&server, "restarting", 0, None, false);
    let (code, body) = server.request("GET", "/metrics", &[], None);
    assert_eq!(code, 200);
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("pilot_proxy_restarts_total 1\n"), "{text}");
    assert!(
        text.contains("pilot_proxy_unexpected_exits_total{reason=\"signal\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("pilot_proxy_unexpected_exits_total{reason=\"code\"} 0\n"),
        "{text}"
    );
    server.stop().await;
}
