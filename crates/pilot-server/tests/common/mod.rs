//! An in-process pilot-discovery on free loopback ports, and a tiny HTTP
//! client for the tests.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the shared support module"
)]

pub(crate) mod attack;
pub(crate) mod ca;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};

use pilot_server::{Args, Bound};
use serde_json::Value;

/// A running server, stopped when dropped.
pub(crate) struct TestServer {
    pub rest: SocketAddr,
    pub xds: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), pilot_server::StartError>>>,
}

impl TestServer {
    /// Starts a server with these extra flags (memory store by default).
    pub(crate) async fn start(extra: &[&str]) -> Self {
        let mut argv: Vec<String> = [
            "pilot-discovery",
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.extend(extra.iter().map(|s| s.to_string()));
        // The status writer off unless a test asks for it: its rounds write
        // every new object's status (a MODIFIED event for REST watchers) at
        // times no test controls, between the events a watch test expects.
        if !extra.contains(&"--status-interval") {
            argv.extend(["--status-interval".to_string(), "0s".to_string()]);
        }
        let args = Args::parse_with_config(argv).expect("flags");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (bound_tx, bound_rx) = tokio::sync::oneshot::channel::<Bound>();
        let task = tokio::spawn(pilot_server::run(
            args,
            async move {
                let _ = stopped.await;
            },
            move |bound| {
                let _ = bound_tx.send(bound);
            },
        ));
        let bound = bound_rx.await.expect("the server did not start");
        let server = TestServer {
            rest: bound.rest,
            xds: bound.xds,
            stop: Some(stop),
            task: Some(task),
        };
        // Ready once the caches synced.
        let started = std::time::Instant::now();
        while server.request("GET", "/readyz", &[], None).0 != 200 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(60),
                "the server never became ready"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        server
    }

    /// Stops the server and waits until it has.
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server run");
        }
    }

    /// One request; the status code and the body.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> (u16, Vec<u8>) {
        http(self.rest, method, path, headers, body)
    }

    /// A JSON request; the status code and the body as JSON (Null if none).
    pub(crate) fn json(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
        let (code, answer) = self.request(
            method,
            path,
            &[("content-type", "application/json")],
            bytes.as_deref(),
        );
        (code, serde_json::from_slice(&answer).unwrap_or(Value::Null))
    }

    /// Opens a watch; lines come from the returned reader.
    /// A watch (or any GET) whose response headers have come: a watch
    /// answers them once it has taken its starting point, so every write
    /// after this returns is one it sees.
    pub(crate) fn watch(&self, path: &str) -> BufReader<TcpStream> {
        let mut stream = TcpStream::connect(self.rest).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nhost: test\r\n\r\n").unwrap();
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        loop {
            line.clear();
            let read = reader.read_line(&mut line).expect("the response head");
            if read == 0 || line == "\r\n" {
                break;
            }
        }
        reader
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The next watch event (skipping HTTP headers and chunk sizes); `None` at
/// the end of the stream.
pub(crate) fn next_event(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        if line.starts_with('{') {
            return serde_json::from_str(line.trim()).ok();
        }
    }
}

/// A blocking HTTP/1.1 request with `connection: close`; panics if
/// nothing answers.
pub(crate) fn http(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> (u16, Vec<u8>) {
    let answer = pilot_test_support::http::request(address, method, path, headers, body.unwrap_or_default())
        .unwrap_or_else(|error| panic!("{error}"));
    (answer.code, answer.body)
}

/// A valid route rule document.
pub(crate) fn rule(name: &str, version: &str) -> Value {
    serde_json::json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "reviews"}},
        "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": version}}]},
    })
}

/// The route rules path in `namespace`.
pub(crate) fn rules(namespace: &str) -> String {
    format!("/apis/config.istio.io/v1alpha2/namespaces/{namespace}/routerules")
}

/// A `pilot-discovery` process on a Kubernetes fake (`--store kubernetes
/// --install-crds`, through a kubeconfig), killed when dropped.
pub(crate) struct OnFake {
    /// The server.
    pub server: pilot_test_support::Discovery,
    /// Its REST address.
    pub rest: SocketAddr,
    _cluster: pilot_test_support::FakeCluster,
}

/// Starts [`OnFake`] on `fake` and waits until it is ready.
pub(crate) async fn discovery_on_fake(fake: &pilot_kube_fake::FakeApiServer) -> OnFake {
    let cluster = pilot_test_support::FakeCluster::serve(fake).await;
    let kubeconfig = cluster.kubeconfig().to_path_buf();
    let server = tokio::task::spawn_blocking(move || {
        pilot_test_support::Discovery::start_with_env(
            &["--store", "kubernetes", "--install-crds", "--log-level", "warn"],
            &[("KUBECONFIG", kubeconfig.as_os_str())],
        )
    })
    .await
    .unwrap();
    OnFake {
        rest: ([127, 0, 0, 1], server.port).into(),
        server,
        _cluster: cluster,
    }
}
