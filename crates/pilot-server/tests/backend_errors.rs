//! A backend failure reaches REST clients as what failed in their terms
//! ("etcd at ... is unreachable", "the Kubernetes API refused: ..."), never
//! as the client library's internals (gRPC status, tonic transport errors,
//! kube's debug output): those go to the server's log.

mod common;

use std::net::SocketAddr;

use common::{TestServer, http, rule, rules};
use pilot_test_support::EtcdServer;
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
    // A write sent over the connection before the client has seen it die
    // cannot know whether etcd applied it: 504, naming etcd. Once the
    // client knows, a write is 503. (Which the first write gets depends
    // on how busy the machine is.)
    let mut attempts = 0;
    let (code, body) = loop {
        attempts += 1;
        let (code, body) = tokio::task::spawn_blocking(move || create(rest, "after"))
            .await
            .unwrap();
        if code != 504 || attempts == 3 {
            break (code, body);
        }
        assert_eq!(body["reason"], "Timeout", "{body}");
        assert_user_terms(
            &body,
            &format!(
                "the write may have been applied; the backend did not confirm it: etcd at {endpoint} did not answer in time"
            ),
        );
    };
    assert_eq!(code, 503, "attempt {attempts}: {body}");
    assert_eq!(body["reason"], "ServiceUnavailable", "{body}");
    assert_user_terms(&body, &format!("etcd at {endpoint} is unreachable"));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kubernetes_api_that_refuses_is_503_quoting_the_api_server() {
    let fake = pilot_kube_fake::FakeApiServer::new();
    let on_fake = common::discovery_on_fake(&fake).await;
    let rest = on_fake.rest;
    fake.refuse_writes(true);
    let (code, body) = tokio::task::spawn_blocking(move || create(rest, "refused"))
        .await
        .unwrap();
    drop(on_fake);
    assert_eq!(code, 503, "{body}");
    assert_user_terms(
        &body,
        "the Kubernetes API refused: routerules.config.istio.io is forbidden: \
         the fake API server refuses writes for now (403 Forbidden",
    );
}
