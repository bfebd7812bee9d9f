//! pilot-h2 against edge and hostile HTTP/2 clients (Python `h2` and raw
//! frames): flow control with small and late windows, CONTINUATION,
//! padding, PING, RST_STREAM both ways, bad prefaces, stream limits, header
//! lists and frames too large, unknown frames, GOAWAY both ways, keepalive.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{TestServer, python, run_client};
use pilot_h2::Config;
use tokio::io::{AsyncBufReadExt, BufReader};

async fn case(config: Config, name: &str) -> TestServer {
    let server = TestServer::start(config).await;
    let (ok, stdout) = run_client("h2_client.py", &[server.port.to_string(), name.to_string()]).await;
    assert!(
        ok && stdout.trim_end().ends_with("ok"),
        "h2 case {name} failed: {stdout}"
    );
    server
}

macro_rules! h2_test {
    ($name:ident) => {
        h2_test!($name, Config::default());
    };
    ($name:ident, $config:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            case($config, stringify!($name)).await.stop().await;
        }
    };
}

h2_test!(dynamic_table);
h2_test!(small_window);
h2_test!(window_from_settings);
h2_test!(ping);
h2_test!(continuation_and_padding);
h2_test!(interleaved);
h2_test!(bad_preface);
h2_test!(settings_first);
h2_test!(push_promise);
h2_test!(frame_too_large);
h2_test!(window_overflow);
h2_test!(data_beyond_window);
h2_test!(
    too_many_streams,
    Config {
        max_concurrent_streams: 2,
        ..Config::default()
    }
);
h2_test!(
    header_list_too_large,
    Config {
        max_header_list_size: 2048,
        ..Config::default()
    }
);
h2_test!(unknown_and_priority);
h2_test!(client_goaway);
h2_test!(stream_rules);
h2_test!(rapid_reset);
h2_test!(headers_early);
h2_test!(
    keepalive_unanswered,
    Config {
        keepalive_interval: Some(Duration::from_millis(100)),
        keepalive_timeout: Duration::from_millis(300),
        ..Config::default()
    }
);
h2_test!(
    keepalive_answered,
    Config {
        keepalive_interval: Some(Duration::from_millis(100)),
        keepalive_timeout: Duration::from_secs(10),
        ..Config::default()
    }
);
h2_test!(
    max_connection_age_graceful,
    Config {
        max_connection_age: Some(Duration::from_secs(2)),
        ..Config::default()
    }
);

/// A stream the client resets is seen as cancelled by the service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_by_client() {
    let server = case(Config::default(), "reset_by_client").await;
    let ended = server.wait_event(|e| e.starts_with("hold ended")).await;
    assert_eq!(ended, "hold ended Cancelled");
    server.stop().await;
}

/// Shutting the server down: GOAWAY with the last stream, the open stream
/// finishes, then the connection closes and `serve` returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful() {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let server = TestServer::start(Config::default()).await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h2_client.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args([server.port.to_string(), "graceful".to_string()])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the h2 client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("open"));
    let stopping = tokio::spawn(server.stop());
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    stopping.await.expect("the server stopped");
}

/// Starts an h2 client case that prints "open" once its stream is open.
async fn open_case(
    server: &TestServer,
    name: &str,
) -> (
    tokio::process::Child,
    tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
) {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/h2_client.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args([server.port.to_string(), name.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the h2 client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("open"));
    (child, stdout)
}

/// A client whose window is closed holds the service's sends back once the
/// stream's queue is full (`send_buffer`); opening the window lets them on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure() {
    let server = TestServer::start(Config {
        send_buffer: 256 << 10,
        ..Config::default()
    })
    .await;
    let (mut child, mut stdout) = open_case(&server, "backpressure").await;
    // 0, 100,000 and 200,000 bytes queued are under the bound: three sends
    // complete, and the fourth waits as long as the window stays closed.
    server.wait_event(|e| e == "flood sent 3").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !server.events().iter().any(|e| e == "flood sent 4"),
        "{:?}",
        server.events()
    );
    let mut stdin = child.stdin.take().expect("stdin");
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"go\n")
        .await
        .expect("write");
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    assert!(server.events().iter().any(|e| e == "flood sent 10"));
    server.stop().await;
}

/// Shutdown with a stream that never ends: GOAWAY, and the connection
/// closes when the grace ends; the service sees the connection gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grace() {
    let server = TestServer::start(Config {
        shutdown_grace: Some(Duration::from_millis(200)),
        ..Config::default()
    })
    .await;
    let (mut child, mut stdout) = open_case(&server, "grace").await;
    server.wait_event(|e| e == "open /test.Test/Hold").await;
    let events = server.events.clone();
    server.stop().await;
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    loop {
        if let Some(e) = events
            .lock()
            .expect("events")
            .iter()
            .find(|e| e.starts_with("hold ended"))
        {
            assert_eq!(e, "hold ended Unavailable");
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
