//! Refusals a client gets before its request reaches a handler carry
//! Status bodies as every other error does: 431 for header fields too many
//! or too large, 414 for a URI too long; and a list in a namespace that
//! cannot exist is 400, not an empty list.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::{TestServer, rules};

/// Sends `head` (and nothing more) and reads the answer until the server
/// closes the connection.
fn answer(rest: std::net::SocketAddr, head: &str) -> (String, serde_json::Value) {
    let mut stream = TcpStream::connect(rest).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    // A guard against a hang, not a figure under test.
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut text = Vec::new();
    let _ = stream.read_to_end(&mut text);
    let text = String::from_utf8_lossy(&text).to_string();
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let status = text.lines().next().unwrap_or("").to_string();
    (
        status,
        serde_json::from_str(body).unwrap_or(serde_json::Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn header_and_uri_refusals_carry_status_bodies() {
    let server = TestServer::start(&[]).await;
    let rest = server.rest;
    tokio::task::spawn_blocking(move || {
        let many: String = (0..200).map(|i| format!("x-field-{i}: {i}\r\n")).collect();
        let (status, body) = answer(rest, &format!("GET /healthz HTTP/1.1\r\nhost: t\r\n{many}\r\n"));
        assert!(status.starts_with("HTTP/1.1 431"), "{status}");
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["code"], 431, "{body}");
        assert_eq!(body["reason"], "RequestHeaderFieldsTooLarge", "{body}");

        let long = format!("/healthz?{}", "a".repeat(70_000));
        let (status, body) = answer(rest, &format!("GET {long} HTTP/1.1\r\nhost: t\r\n\r\n"));
        assert!(status.starts_with("HTTP/1.1 414"), "{status}");
        assert_eq!(body["kind"], "Status", "{body}");
        assert_eq!(body["code"], 414, "{body}");
        assert_eq!(body["reason"], "RequestURITooLong", "{body}");
    })
    .await
    .unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listing_an_invalid_namespace_is_400() {
    let server = TestServer::start(&[]).await;
    let (code, body) = server.json("GET", &rules("Bad_NS"), None);
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert!(body["message"].as_str().unwrap().contains("Bad_NS"), "{body}");
    let (code, body) = server.json("GET", &rules("default"), None);
    assert_eq!(code, 200, "{body}");
    server.stop().await;
}
