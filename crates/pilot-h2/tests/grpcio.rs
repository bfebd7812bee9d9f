//! pilot-h2 serving real gRPC clients (Python grpcio): bidi streams of raw
//! bytes both ways, messages larger than the windows, concurrent streams,
//! cancellation, statuses and limits read back by the client.

mod common;

use std::process::Stdio;

use common::{TestServer, python, run_client};
use pilot_h2::Config;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

async fn case(config: Config, name: &str) {
    let server = TestServer::start(config).await;
    let (ok, stdout) = run_client("grpcio_client.py", &[server.port.to_string(), name.to_string()]).await;
    assert!(
        ok && stdout.trim_end().ends_with("ok"),
        "grpcio case {name} failed: {stdout}"
    );
    server.stop().await;
}

macro_rules! grpcio_test {
    ($name:ident, $config:expr) => {
        grpcio_test!($name, $config, stringify!($name));
    };
    ($name:ident, $config:expr, $case:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            case($config, $case).await;
        }
    };
}

grpcio_test!(echo, Config::default());
grpcio_test!(
    large,
    Config {
        max_message_size: 8 << 20,
        ..Config::default()
    }
);
// Stream windows larger than the connection's: the connection window is
// returned in time all the same.
grpcio_test!(
    large_stream_window,
    Config {
        max_message_size: 8 << 20,
        initial_window_size: 16 << 20,
        connection_window_size: 1 << 20,
        ..Config::default()
    },
    "large"
);
grpcio_test!(concurrent, Config::default());
grpcio_test!(status, Config::default());
grpcio_test!(
    too_large,
    Config {
        max_message_size: 4096,
        ..Config::default()
    }
);
grpcio_test!(unknown, Config::default());

/// A client cancelling its call resets the stream: the service's sender
/// sees it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel() {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let server = TestServer::start(Config::default()).await;
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio_client.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args([server.port.to_string(), "cancel".to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the grpcio client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(
        stdout.next_line().await.expect("read").as_deref(),
        Some("started")
    );
    server.wait_event(|e| e == "open /test.Test/Hold").await;
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"go\n").await.expect("write");
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    let ended = server.wait_event(|e| e.starts_with("hold ended")).await;
    assert_eq!(ended, "hold ended Cancelled");
    server.stop().await;
}
