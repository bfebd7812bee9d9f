//! Clients that hold REST connections cannot silence the server: a body
//! that does not arrive is given up at its deadline, `/healthz` and
//! `/readyz` are answered with every connection slot taken, and the caps
//! fit in the open-files limit (a cap it cannot hold stops the server at
//! start).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{TestServer, http, rule, rules};

/// Reads until the server closes the connection; what it sent.
fn until_closed(stream: &mut TcpStream) -> String {
    // A guard against a hang, not a figure under test.
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut text = Vec::new();
    match stream.read_to_end(&mut text) {
        Ok(_) => String::from_utf8_lossy(&text).to_string(),
        Err(error) => panic!("the server kept the connection open: {error}"),
    }
}

/// A connection that sent a POST head announcing 100 bytes of body, and
/// `sent` of them.
fn slow_post(rest: SocketAddr, sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(rest).unwrap();
    write!(
        stream,
        "POST {} HTTP/1.1\r\nhost: t\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{}",
        rules("default"),
        "{".repeat(sent)
    )
    .unwrap();
    stream
}

/// `GET path` until it answers `code` (connections free up as the server
/// gets to them); panics after many tries.
fn until_answer(rest: SocketAddr, path: &str, code: u16) -> Vec<u8> {
    let mut last = 0;
    for _ in 0..600 {
        let (answered, body) = http(rest, "GET", path, &[], None);
        if answered == code {
            return body;
        }
        last = answered;
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("GET {path} never answered {code} (last {last})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_body_that_does_not_arrive_is_answered_408_and_nothing_is_written() {
    let server = TestServer::start(&["--body-read-timeout-ms", "300"]).await;
    let rest = server.rest;
    tokio::task::spawn_blocking(move || {
        let mut stream = slow_post(rest, 10);
        let answer = until_closed(&mut stream);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("\"reason\":\"Timeout\""), "{answer}");
        assert!(answer.contains("--body-read-timeout-ms"), "{answer}");
        let (code, body) = http(rest, "GET", &rules("default"), &[], None);
        assert_eq!(code, 200);
        let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["items"], serde_json::json!([]));
    })
    .await
    .unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn probes_are_answered_with_every_slot_taken() {
    // Long deadlines: the slow connections hold their slots throughout.
    let server = TestServer::start(&[
        "--max-connections",
        "10",
        "--body-read-timeout-ms",
        "600000",
        "--header-read-timeout-ms",
        "600000",
    ])
    .await;
    let rest = server.rest;
    tokio::task::spawn_blocking(move || {
        let slow: Vec<TcpStream> = (0..10).map(|_| slow_post(rest, 0)).collect();
        // Once the server holds all ten, other requests are refused...
        let refused = until_answer(rest, &rules("default"), 503);
        let refused = String::from_utf8_lossy(&refused);
        assert!(refused.contains("too many open connections"), "{refused}");
        // ...but the probes are answered.
        let (code, _) = http(rest, "GET", "/healthz", &[], None);
        assert_eq!(code, 200);
        let (code, _) = http(rest, "GET", "/readyz", &[], None);
        assert_eq!(code, 200);
        drop(slow);
        let body = serde_json::to_vec(&rule("after", "v1")).unwrap();
        let mut created = 0;
        for _ in 0..600 {
            created = http(
                rest,
                "POST",
                &rules("default"),
                &[("content-type", "application/json")],
                Some(&body),
            )
            .0;
            if created == 201 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(created, 201);
    })
    .await
    .unwrap();
    server.stop().await;
}

/// `pilot-discovery` started with an open-files limit of 1,024 (soft and
/// hard) and `args`.
fn spawn_with_1024_files(args: &[&str], ready: &std::path::Path) -> std::process::Child {
    std::process::Command::new("sh")
        .arg("-c")
        .arg("ulimit -S -n 1024 && ulimit -H -n 1024 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_pilot-discovery"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
            "--log-level",
            "warn",
        ])
        .arg("--ready-file")
        .arg(ready)
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Kills the child when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_cap_the_open_files_limit_cannot_hold_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Killed(spawn_with_1024_files(
        &["--max-connections", "10000"],
        &dir.path().join("ready.json"),
    ));
    // A guard against a hang, not a figure under test.
    let mut status = None;
    for _ in 0..600 {
        if let Some(exited) = child.0.try_wait().unwrap() {
            status = Some(exited);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = status.expect("pilot-discovery started with a cap its open-files limit cannot hold");
    assert!(!status.success());
    let mut stderr = String::new();
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(stderr.contains("--max-connections 10000"), "{stderr}");
    assert!(stderr.contains("open-files limit of 1024"), "{stderr}");
}

#[test]
fn with_1024_files_1100_idle_connections_leave_probes_and_writes_answered() {
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    // Idle connections are kept for as long as the test runs.
    let _child = Killed(spawn_with_1024_files(
        &["--header-read-timeout-ms", "600000"],
        &ready,
    ));
    let mut rest = None;
    for _ in 0..600 {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            let bound: serde_json::Value = serde_json::from_str(&text).unwrap();
            rest = Some(
                bound["rest"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("http://")
                    .parse::<SocketAddr>()
                    .unwrap(),
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let rest = rest.expect("pilot-discovery never became ready");
    until_answer(rest, "/readyz", 200);
    let idle: Vec<TcpStream> = (0..1100)
        .map(|i| TcpStream::connect(rest).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // The probes are answered while every idle connection is open.
    until_answer(rest, "/healthz", 200);
    // A write is answered at once: refused while the slots are full...
    let body = serde_json::to_vec(&rule("after", "v1")).unwrap();
    let (code, answer) = http(
        rest,
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        Some(&body),
    );
    assert!(
        code == 503 || code == 201,
        "{code} {}",
        String::from_utf8_lossy(&answer)
    );
    // ...and applied once they are free.
    drop(idle);
    let mut created = code;
    for _ in 0..600 {
        if created == 201 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        created = http(
            rest,
            "POST",
            &rules("default"),
            &[("content-type", "application/json")],
            Some(&body),
        )
        .0;
    }
    assert_eq!(created, 201);
}
