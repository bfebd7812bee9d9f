//! Who may post pilot-agent's reports (`POST /v1/proxy-events`) when the
//! server has tokens: an operator's read-write token for any proxy, an
//! `xds` token (the agent's ADS token) for the proxies it may claim on ADS
//! only; a read-only token, no token or an unknown one, never.

mod common;

use common::TestServer;
use serde_json::Value;

const ADMIN: &str = "admin-token-0123456789abcdef";
const VIEWER: &str = "viewer-token-0123456789abcdef";
const PROXY_DEFAULT: &str = "proxy-token-default-0123456789";
const PROXY_ANY: &str = "proxy-token-any-namespace-0123";
const DEFAULT_NODE: &str = "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local";
const PROD_NODE: &str = "sidecar~10.0.0.2~ratings-v1.prod~prod.svc.cluster.local";

fn event(node: &str, restarts: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "node": node,
        "kind": "exited",
        "epoch": 0,
        "signal": 9,
        "restarts": restarts,
        "time_ms": 1_700_000_000_000u64,
    }))
    .unwrap()
}

fn post(server: &TestServer, token: Option<&str>, node: &str, restarts: u64) -> (u16, String) {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer));
    }
    let (code, body) = server.request("POST", "/v1/proxy-events", &headers, Some(&event(node, restarts)));
    (code, String::from_utf8_lossy(&body).to_string())
}

/// The restarts proxy-status shows for `node` (`None`: not listed).
fn restarts(server: &TestServer, node: &str) -> Option<u64> {
    let (code, body) = server.request(
        "GET",
        "/debug/proxy-status",
        &[("authorization", &format!("Bearer {ADMIN}"))],
        None,
    );
    assert_eq!(code, 200);
    let status: Value = serde_json::from_slice(&body).unwrap();
    let rows = status["proxies"].as_array().cloned().unwrap_or_default();
    rows.iter()
        .find(|row| row["node"] == node)
        .and_then(|row| row["process"]["restarts"].as_u64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_xds_token_posts_events_of_its_namespace_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        format!(
            "{ADMIN} rw admin\n{VIEWER} ro viewer\n{PROXY_DEFAULT} xds reviews namespace=default\n\
             {PROXY_ANY} xds gateways\n"
        ),
    )
    .unwrap();
    let server = TestServer::start(&["--token-file", tokens.to_str().unwrap()]).await;

    let (code, body) = post(&server, Some(PROXY_DEFAULT), DEFAULT_NODE, 1);
    assert_eq!(code, 204, "{body}");
    assert_eq!(restarts(&server, DEFAULT_NODE), Some(1));

    // Another namespace's proxy: refused, and nothing recorded.
    let (code, body) = post(&server, Some(PROXY_DEFAULT), PROD_NODE, 5);
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("namespace \\\"default\\\""), "{body}");
    assert_eq!(restarts(&server, PROD_NODE), None);

    // An xds token without a namespace, and an operator's token: any proxy.
    let (code, body) = post(&server, Some(PROXY_ANY), PROD_NODE, 2);
    assert_eq!(code, 204, "{body}");
    let (code, body) = post(&server, Some(ADMIN), PROD_NODE, 3);
    assert_eq!(code, 204, "{body}");
    assert_eq!(restarts(&server, PROD_NODE), Some(3));

    // Read-only, unknown and missing tokens may not.
    assert_eq!(post(&server, Some(VIEWER), DEFAULT_NODE, 9).0, 403);
    assert_eq!(
        post(&server, Some("unknown-token-0123456789abc"), DEFAULT_NODE, 9).0,
        401
    );
    assert_eq!(post(&server, None, DEFAULT_NODE, 9).0, 401);
    assert_eq!(restarts(&server, DEFAULT_NODE), Some(1));

    // The xds token still reads and writes nothing else.
    let (code, _) = server.request(
        "GET",
        "/debug/proxy-status",
        &[("authorization", &format!("Bearer {PROXY_DEFAULT}"))],
        None,
    );
    assert_eq!(code, 403);
    let (code, _) = server.request(
        "PUT",
        "/v1/proxy-events",
        &[("authorization", &format!("Bearer {PROXY_DEFAULT}"))],
        Some(&event(DEFAULT_NODE, 1)),
    );
    assert_eq!(code, 403);
    server.stop().await;
}
