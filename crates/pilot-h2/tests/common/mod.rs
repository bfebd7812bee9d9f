//! A test server on a free loopback port with a service whose behaviour
//! each method path picks, and the Python clients (grpcio, `h2`) from the
//! workspace's `.tools/grpc` virtual environment.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the shared support module"
)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use pilot_h2::{Code, Config, Request, Sender, Server};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running test server.
pub(crate) struct TestServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// What the service saw, one line per event.
    pub events: Arc<Mutex<Vec<String>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server with `config`.
    pub(crate) async fn start(config: Config) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local address").port();
        let events = Arc::new(Mutex::new(Vec::new()));
        let seen = events.clone();
        let server = Server::new(config, move |request: Request, sender: Sender| {
            tokio::spawn(serve(request, sender, seen.clone()));
        });
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let _ = server
                .serve(listener, async {
                    let _ = stopped.await;
                })
                .await;
        });
        TestServer {
            port,
            events,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Shuts down gracefully and waits for every connection to close.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// The events so far.
    pub(crate) fn events(&self) -> Vec<String> {
        self.events.lock().expect("events lock").clone()
    }

    /// Waits until an event satisfies `check` (the test's own timeout bounds it).
    pub(crate) async fn wait_event(&self, check: impl Fn(&str) -> bool) -> String {
        loop {
            if let Some(event) = self.events().into_iter().find(|e| check(e)) {
                return event;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The service: `/test.Test/Echo` echoes each message then ends OK;
/// `/test.Test/Status` reads every message then ends INVALID_ARGUMENT with
/// a message needing percent-encoding; `/test.Test/Sized` answers each
/// message (a decimal number N) with N bytes; `/test.Test/Flood` sends ten
/// messages of 100,000 bytes; `/test.Test/Hold` answers
/// nothing and records how the stream ended; `/test.Test/Headers` sends
/// its response HEADERS at once, then ends OK when the client ends its side.
async fn serve(mut request: Request, mut sender: Sender, events: Arc<Mutex<Vec<String>>>) {
    let path = request.head.path.clone();
    let record = |event: String| events.lock().expect("events lock").push(event);
    record(format!("open {path}"));
    match path.as_str() {
        "/test.Test/Echo" => {
            while let Some(message) = request.messages.next().await {
                match message {
                    Ok(message) => {
                        if let Err(status) = sender.send(vec![message.into_bytes()]).await {
                            record(format!("echo send failed {status}"));
                            return;
                        }
                    }
                    Err(status) => {
                        record(format!("echo receive failed {status}"));
                        return;
                    }
                }
            }
            sender.finish(Code::Ok, "");
        }
        "/test.Test/Status" => {
            while let Some(Ok(_)) = request.messages.next().await {}
            sender.finish(Code::InvalidArgument, "bad request: 100% \u{fc}\n");
        }
        "/test.Test/Sized" => {
            while let Some(Ok(message)) = request.messages.next().await {
                let text = String::from_utf8_lossy(&message.into_bytes()).into_owned();
                let n: usize = text.trim().parse().unwrap_or(0);
                let body: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
                // In two parts, to show a message written from several buffers.
                let (a, b) = body.split_at(n / 2);
                if sender
                    .send(vec![Bytes::copy_from_slice(a), Bytes::copy_from_slice(b)])
                    .await
                    .is_err()
                {
                    return;
                }
            }
            sender.finish(Code::Ok, "");
        }
        "/test.Test/Flood" => {
            // Ten messages of 100,000 bytes, as fast as the sender takes them.
            let message = Bytes::from(vec![7u8; 100_000]);
            for sent in 1..=10 {
                if sender.send(vec![message.clone()]).await.is_err() {
                    return;
                }
                record(format!("flood sent {sent}"));
            }
            sender.finish(Code::Ok, "");
        }
        "/test.Test/Hold" => {
            let status = sender.closed().await;
            record(format!("hold ended {:?}", status.code));
        }
        "/test.Test/Headers" => {
            sender.send_headers();
            while let Some(Ok(_)) = request.messages.next().await {}
            sender.finish(Code::Ok, "");
        }
        _ => sender.finish(Code::Unimplemented, "no such method"),
    }
}

/// The Python of `.tools/grpc`, when installed.
pub(crate) fn python() -> Option<PathBuf> {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/grpc/bin/python");
    python.exists().then_some(python)
}

/// Runs a Python client script from tests/ with arguments; its stdout
/// and whether it exited 0.
pub(crate) async fn run_client(script: &str, args: &[String]) -> (bool, String) {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(script);
    let output = tokio::process::Command::new(python)
        .arg(script)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .expect("run the Python client");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    if !output.status.success() {
        eprintln!("client {args:?} failed:\n{stdout}\n{stderr}");
    }
    (output.status.success(), stdout)
}
