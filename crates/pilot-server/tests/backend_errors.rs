//! A backend failure reaches REST clients as what failed in their terms
//! ("etcd at ... is unreachable", "the Kubernetes API refused: ..."), never
//! as the client library's internals (gRPC status, tonic transport errors,
//! kube's debug output): those go to the server's log.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{TestServer, http, rule, rules};
use pilot_store_etcd::testing::EtcdServer;
use serde_json::Value;

/// Words of the client libraries' errors that must not reach a REST body.
const INTERNALS: [&str; 8] = [
    "tonic",
    "status:",
    "Status {",
    "transport error",
    "grpc",
    "ApiError",
    "ErrorResponse",
    "hyper",
];

fn assert_user_terms(body: &Value, expected: &str) {
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains(expected), "{body}");
    let text = body.to_string();
    for word in INTERNALS {
        assert!(!text.contains(word), "{word:?} in {body}");
    }
}

fn create(rest: SocketAddr, name: &str) -> (u16, Value) {
    let body = serde_json::to_vec(&rule(name, "v1")).unwrap();
    let (code, answer) = http(
        rest,
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        Some(&body),
    );
    (code, serde_json::from_slice(&answer).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_etcd_is_503_naming_etcd_and_its_address() {
    let mut etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &endpoint]).await;
    let rest = server.rest;
    assert_eq!(
        tokio::task::spawn_blocking(move || create(rest, "before"))
            .await
            .unwrap()
            .0,
        201
    );

    etcd.kill();
    let (code, body) = tokio::task::spawn_blocking(move || create(rest, "after"))
        .await
        .unwrap();
    assert_eq!(code, 503, "{body}");
    assert_eq!(body["reason"], "ServiceUnavailable", "{body}");
    assert_user_terms(&body, &format!("etcd at {endpoint} is unreachable"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kubernetes_api_that_refuses_is_503_quoting_the_api_server() {
    let fake = pilot_store_k8s::testing::FakeApiServer::new();
    let listening = fake.listen().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, listening.kubeconfig()).unwrap();
    let ready = dir.path().join("ready.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pilot-discovery"))
        .args(["--store", "kubernetes", "--install-crds"])
        .args(["--listen", "127.0.0.1:0", "--xds-listen", "127.0.0.1:0"])
        .args(["--log-level", "warn", "--ready-file"])
        .arg(&ready)
        .env("KUBECONFIG", &kubeconfig)
        .spawn()
        .unwrap();
    let rest = tokio::task::spawn_blocking(move || {
        for _ in 0..600 {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && let Ok(bound) = serde_json::from_str::<Value>(&text)
            {
                let rest: SocketAddr = bound["rest"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("http://")
                    .parse()
                    .unwrap();
                if http(rest, "GET", "/readyz", &[], None).0 == 200 {
                    return Some(rest);
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        None
    })
    .await
    .unwrap();
    let Some(rest) = rest else {
        let _ = child.kill();
        panic!("pilot-discovery on the fake API server never became ready");
    };
    fake.refuse_writes(true);
    let (code, body) = tokio::task::spawn_blocking(move || create(rest, "refused"))
        .await
        .unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(code, 503, "{body}");
    assert_user_terms(
        &body,
        "the Kubernetes API refused: routerules.config.istio.io is forbidden: \
         the fake API server refuses writes for now (403 Forbidden",
    );
}
