//! Resuming a watch at a version the store has not reached is refused
//! (504, `ResourceVersionTooLarge`) and at one whose history is gone is 410,
//! on every backend, so a client relists instead of silently missing
//! events.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{TestServer, next_event, rule, rules};
use serde_json::Value;

/// A watch (or list) request read to its end: its status code and its
/// body, or the first event of a streamed answer. A watch that streams
/// without ending fails the test instead of hanging it.
fn answer(address: SocketAddr, path: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    if let Err(error) = stream.read_to_end(&mut response) {
        panic!(
            "{path}: still streaming ({error}) after {:?}",
            String::from_utf8_lossy(&response)
        );
    }
    let text = String::from_utf8_lossy(&response).to_string();
    let code = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    let json = body
        .lines()
        .find(|line| line.starts_with('{'))
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or(Value::Null);
    (code, json)
}

fn assert_too_large(address: SocketAddr, path: &str) {
    let (code, status) = answer(address, path);
    assert_eq!(code, 504, "{path}: {status}");
    assert_eq!(status["reason"], "Timeout", "{status}");
    assert_eq!(
        status["details"]["causes"][0]["reason"], "ResourceVersionTooLarge",
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("Too large resource version: 999999999"),
        "{status}"
    );
}

/// 410, at once or as the watch's ERROR event.
fn assert_gone(address: SocketAddr, path: &str) {
    let (code, body) = answer(address, path);
    let status = if code == 200 {
        assert_eq!(body["type"], "ERROR", "{path}: {body}");
        body["object"].clone()
    } else {
        body
    };
    assert_eq!(status["code"], 410, "{path}: {code} {status}");
}

/// Writes one rule and returns its resourceVersion.
fn write(server_rest: SocketAddr, name: &str) -> u64 {
    let body = serde_json::to_vec(&rule(name, "v1")).unwrap();
    let (code, answer) = common::http(
        server_rest,
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        Some(&body),
    );
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let object: Value = serde_json::from_slice(&answer).unwrap();
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn too_large_everywhere(rest: SocketAddr) {
    let path = rules("default");
    assert_too_large(rest, &format!("{path}?watch=true&resourceVersion=999999999"));
    assert_too_large(
        rest,
        "/apis/config.istio.io/v1alpha2/routerules?watch=true&resourceVersion=999999999",
    );
    assert_too_large(rest, &format!("{path}?resourceVersion=999999999"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_store_refuses_a_version_it_has_not_reached() {
    let server = TestServer::start(&[]).await;
    let version = write(server.rest, "first");
    too_large_everywhere(server.rest);
    // At the current version the watch is served and sees what follows.
    let mut watch = server.watch(&format!(
        "{}?watch=true&resourceVersion={version}",
        rules("default")
    ));
    write(server.rest, "second");
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["metadata"]["name"], "second", "{event}");
    server.stop().await;

    // A restarted memory store (no --data-dir) starts over: the version a
    // client remembers is now in its future.
    let restarted = TestServer::start(&[]).await;
    let (code, status) = answer(
        restarted.rest,
        &format!("{}?watch=true&resourceVersion={version}", rules("default")),
    );
    assert_eq!(code, 504, "{status}");
    restarted.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_store_refuses_too_new_and_compacted_versions() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &endpoint]).await;
    let first = write(server.rest, "first");
    write(server.rest, "second");
    let last = write(server.rest, "third");
    too_large_everywhere(server.rest);
    // Compact etcd's history before `last` (its JSON gateway): the events
    // after `first` are gone.
    let etcd_address: SocketAddr = endpoint.trim_start_matches("http://").parse().unwrap();
    let body = format!("{{\"revision\": {last}, \"physical\": true}}");
    let (code, answer_body) = common::http(
        etcd_address,
        "POST",
        "/v3/kv/compaction",
        &[("content-type", "application/json")],
        Some(body.as_bytes()),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer_body));
    assert_gone(
        server.rest,
        &format!("{}?watch=true&resourceVersion={first}", rules("default")),
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubernetes_store_refuses_too_new_and_expired_versions() {
    let fake = pilot_kube_fake::FakeApiServer::new();
    let on_fake = common::discovery_on_fake(&fake).await;
    let rest = on_fake.rest;
    // The server is killed when dropped, even if an assertion fails.
    let first = write(rest, "first");
    write(rest, "second");
    too_large_everywhere(rest);
    fake.expire_history();
    assert_gone(
        rest,
        &format!("{}?watch=true&resourceVersion={first}", rules("default")),
    );
    drop(on_fake);
}
