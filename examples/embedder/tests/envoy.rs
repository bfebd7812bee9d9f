//! The embedded server configures a real Envoy: requests sent through
//! Envoy's listener reach the instance the registry lists and the route
//! rule in the file store picks; the status loop then writes the rule's
//! distribution status (Envoy ACKed it: 1/1) into the store, which the
//! REST API serves.
//!
//! Needs Envoy: `$ENVOY`, else the workspace's `.tools/envoy/bin/envoy`
//! (`scripts/install-deps` installs it). Without one the test fails and
//! says so.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pilot_api::istio;
use pilot_embedder_example::FileConfigStore;
use pilot_model::{ConfigStore, document};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long the test waits for Envoy before failing (a hang becomes a
/// failure; nothing here asserts on speed).
const PATIENCE: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_routes_by_the_embedded_store_and_registry() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config_dir = dir.path().join("config");

    // The rule, written straight into the store of one's own: all traffic
    // for hello goes to version v2.
    let rule = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: hello-v2, namespace: default}
spec:
  destination: {name: hello}
  route:
  - labels: {version: v2}
"#;
    let store = FileConfigStore::open(&config_dir, istio::registry()).expect("the file store");
    for object in document::parse("hello-v2.yaml", rule, &istio::registry()).expect("a valid rule") {
        store.create(object).await.expect("stored");
    }
    drop(store);

    // The registry's file: hello with two instances, one per version.
    let v1 = upstream("hello v1").await;
    let v2 = upstream("hello v2").await;
    let service_port = free_port();
    let services = dir.path().join("services.json");
    let instance = |port: u16, version: &str| serde_json::json!({"address": "127.0.0.1", "port": port, "portName": "http", "labels": {"version": version}});
    let file = serde_json::json!({"services": [{
        "hostname": "hello.default.svc.cluster.local",
        "ports": [{"name": "http", "port": service_port, "protocol": "HTTP"}],
        "instances": [instance(v1, "v1"), instance(v2, "v2")],
    }]});
    std::fs::write(&services, file.to_string()).expect("written");

    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port for ADS");
    let xds_port = listener.local_addr().expect("bound").port();
    let rest = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port for the REST API");
    let rest_port = rest.local_addr().expect("bound").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn({
        let (config_dir, services) = (config_dir.clone(), services.clone());
        async move {
            pilot_embedder_example::serve(&config_dir, &services, listener, rest, async {
                let _ = stopped.await;
            })
            .await
        }
    });

    let envoy = Envoy::start(dir.path(), xds_port);
    let answers = tokio::task::spawn_blocking(move || {
        let deadline = Instant::now() + PATIENCE;
        // Until the first answer through Envoy, then ten more.
        let mut answers = Vec::new();
        while answers.len() < 10 {
            match get(service_port, "hello", "/") {
                Some(answer) => answers.push(answer),
                None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                None => break,
            }
        }
        answers
    })
    .await
    .expect("the client thread");
    let seen = if answers.len() < 10 {
        envoy.admin("/clusters")
    } else {
        String::new()
    };
    // The rule as the REST API serves it, once its status counts Envoy's
    // ACK (or as it is when patience runs out).
    let rule = tokio::task::spawn_blocking(move || {
        let path = "/apis/config.istio.io/v1alpha2/namespaces/default/routerules/hello-v2";
        let deadline = Instant::now() + PATIENCE;
        loop {
            let rule = get(rest_port, "pilot", path)
                .and_then(|body| serde_json::from_str::<serde_json::Value>(&body).ok())
                .unwrap_or_default();
            if rule["status"]["acked"] == 1 || Instant::now() >= deadline {
                return rule;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .expect("the client thread");
    drop(envoy);
    let _ = stop.send(());
    server
        .await
        .expect("the server task")
        .expect("served until stopped");

    assert_eq!(
        answers.len(),
        10,
        "Envoy must answer on 127.0.0.1:{service_port} once configured (answers so far: {answers:?}); its clusters:\n{seen}"
    );
    assert!(
        answers.iter().all(|a| a == "hello v2"),
        "the rule in the file store sends every request to v2; got {answers:?}"
    );
    let status = &rule["status"];
    assert_eq!(
        (&status["proxies"], &status["acked"], &status["nacked"]),
        (&1.into(), &1.into(), &0.into()),
        "the one Envoy ACKed the rule: its status must say 1/1 (the rule through the REST API: {rule})"
    );
    assert_eq!(
        status["observedVersion"], rule["metadata"]["resourceVersion"],
        "the status must be about the rule's current version: {rule}"
    );
}

/// An upstream that answers every request with `answer`.
async fn upstream(answer: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let port = listener.local_addr().expect("bound").port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buffer[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        let response = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}",
                            answer.len()
                        );
                        if stream.write_all(response.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One HTTP/1.1 GET of `path` on `port` with `host`: the body of a 200,
/// else None.
fn get(port: u16, host: &str, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// A real Envoy getting everything over ADS, killed when dropped.
struct Envoy {
    child: Child,
    admin_address: PathBuf,
}

impl Envoy {
    fn start(dir: &std::path::Path, xds_port: u16) -> Envoy {
        let binary = std::env::var_os("ENVOY").map(PathBuf::from).unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/envoy/bin/envoy")
        });
        assert!(
            binary.exists(),
            "this test needs Envoy: set ENVOY or run scripts/install-deps (no {})",
            binary.display()
        );
        let bootstrap = dir.join("envoy.yaml");
        std::fs::write(&bootstrap, bootstrap_yaml(xds_port)).expect("written");
        let child = Command::new(&binary)
            .arg("-c")
            .arg(&bootstrap)
            .arg("--admin-address-path")
            .arg(dir.join("admin-address"))
            .args(["--disable-hot-restart", "--log-level", "warn"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        Envoy {
            child,
            admin_address: dir.join("admin-address"),
        }
    }

    /// What Envoy's admin answers at `path` (for a failure's message).
    fn admin(&self, path: &str) -> String {
        let Ok(address) = std::fs::read_to_string(&self.admin_address) else {
            return "(Envoy's admin never listened)".into();
        };
        let answer = TcpStream::connect(address.trim()).and_then(|mut stream| {
            write!(
                stream,
                "GET {path} HTTP/1.1\r\nHost: admin\r\nConnection: close\r\n\r\n"
            )?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        });
        answer.unwrap_or_else(|e| format!("(Envoy's admin did not answer: {e})"))
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A sidecar without traffic capture whose configuration all comes from
/// the ADS server on `xds_port`; its admin listens on a port of its own
/// choosing.
fn bootstrap_yaml(xds_port: u16) -> String {
    format!(
        r#"node:
  id: sidecar~10.0.0.100~embedded.default~default.svc.cluster.local
  cluster: embedded
  metadata: {{INTERCEPTION_MODE: NONE}}
admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
dynamic_resources:
  ads_config:
    api_type: GRPC
    transport_api_version: V3
    grpc_services: [{{envoy_grpc: {{cluster_name: xds-grpc}}}}]
  cds_config: {{ads: {{}}, resource_api_version: V3}}
  lds_config: {{ads: {{}}, resource_api_version: V3}}
static_resources:
  clusters:
  - name: xds-grpc
    type: STATIC
    connect_timeout: 1s
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config: {{http2_protocol_options: {{}}}}
    load_assignment:
      cluster_name: xds-grpc
      endpoints: [{{lb_endpoints: [{{endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {xds_port}}}}}}}}}]}}]
"#
    )
}
