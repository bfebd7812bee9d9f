//! Idle and excess connections: a flood of idle connections does not stop
//! probes or writes, connections beyond the cap are answered 503, and idle
//! ones are closed by the server. And the binary's allocator hands freed
//! memory back promptly.

mod common;

use std::io::Read;
use std::net::TcpStream;
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

/// The pilot-discovery binary started with a soft open-files limit of
/// 1,024 (the usual default), as an operator's shell starts it; its REST
/// address once ready.
struct Process {
    child: std::process::Child,
    rest: std::net::SocketAddr,
    _dir: tempfile::TempDir,
}

impl Process {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready.json");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -Sn 1024 && exec \"$0\" \"$@\"")
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
            .arg(&ready)
            .spawn()
            .unwrap();
        for _ in 0..600 {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                let bound: serde_json::Value = serde_json::from_str(&text).unwrap();
                let rest = bound["rest"]
                    .as_str()
                    .unwrap()
                    .trim_start_matches("http://")
                    .parse()
                    .unwrap();
                if http(rest, "GET", "/readyz", &[], None).0 == 200 {
                    return Process {
                        child,
                        rest,
                        _dir: dir,
                    };
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("pilot-discovery never became ready");
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn two_thousand_idle_connections_do_not_stop_probes_or_writes() {
    let server = Process::start();
    let rest = server.rest;
    // Idle: connected, nothing sent; more than the 1,024 files the server
    // was started with (it raises its soft limit to the hard one).
    let idle: Vec<TcpStream> = (0..2000)
        .map(|i| TcpStream::connect(rest).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    // Let the server accept them all: the last one is served.
    let mut last = TcpStream::connect(rest).unwrap();
    std::io::Write::write_all(
        &mut last,
        b"GET /healthz HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
    )
    .unwrap();
    assert!(until_closed(&mut last).starts_with("HTTP/1.1 200"));
    let health = http(rest, "GET", "/healthz", &[], None);
    assert_eq!(health.0, 200);
    let body = serde_json::to_vec(&rule("flooded", "v1")).unwrap();
    let write = http(
        rest,
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        Some(&body),
    );
    assert_eq!(write.0, 201, "{}", String::from_utf8_lossy(&write.1));
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn beyond_the_cap_503_and_idle_connections_are_closed() {
    let server = TestServer::start(&["--max-connections", "20", "--header-read-timeout-ms", "2000"]).await;
    let rest = server.rest;
    tokio::task::spawn_blocking(move || {
        // Accepted in order, the 21st connection is over the cap: the
        // server holds the 20 idle ones (and no other: every earlier
        // request's connection was closed by the server, which gives its
        // slot back before the client can see the close). Should the server
        // stall past the header timeout first, the idle ones are closed and
        // the 21st is served: then again.
        let (mut idle, refused) = (0..5)
            .find_map(|_| {
                let idle: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(rest).unwrap()).collect();
                let mut extra = TcpStream::connect(rest).unwrap();
                let answer = until_closed(&mut extra);
                answer.starts_with("HTTP/1.1 503").then_some((idle, answer))
            })
            .expect("a connection beyond the cap of 20 was served");
        assert!(refused.contains("too many open connections"), "{refused}");
        // The idle connections are closed by the server (nothing sent)...
        for stream in &mut idle {
            assert_eq!(until_closed(stream), "");
        }
        drop(idle);
        // ...and new requests are served again.
        let mut answered = 0;
        for _ in 0..600 {
            answered = http(rest, "GET", "/healthz", &[], None).0;
            if answered == 200 {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(answered, 200);
    })
    .await
    .unwrap();
    server.stop().await;
}

/// The pilot-discovery binary runs on jemalloc with background threads
/// purging freed pages after 1 s (`.cargo/config.toml`), so the buffers of
/// a push to 2,000 proxies are back with the system before the next push,
/// not kept for jemalloc's default 10 s. Read from jemalloc's own report
/// of its options, which it prints at exit when asked.
#[test]
fn the_binary_hands_freed_memory_back_within_a_second() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_pilot-discovery"))
        .arg("--help")
        .env("_RJEM_MALLOC_CONF", "stats_print:true")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report = String::from_utf8_lossy(&output.stderr);
    for option in ["opt.background_thread: true", "opt.dirty_decay_ms: 1000"] {
        assert!(
            report.contains(option),
            "jemalloc's report lacks {option:?}: {}",
            report
                .lines()
                .filter(|l| l.contains("opt."))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}
