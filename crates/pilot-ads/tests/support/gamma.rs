//! The Gateway API's mesh conformance (GAMMA) through a real Envoy: the
//! conformance's echo Services in a registry, their manifests from the
//! corpus `gateway-api` in a store, sidecars in a namespace, and requests
//! checked against what the conformance tests expect.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use pilot_ads::XdsServer;
use pilot_api::default_registry;
use pilot_model::{
    ConfigStore, DynConfig, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document,
};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;

use super::envoy::{eventually, free_port, start_envoy_as};
use super::grpc::Python;
use super::proxies::node_id;

/// The conformance's mesh namespace, where the Services and the producer
/// routes are.
pub(crate) const MESH: &str = "gateway-conformance-mesh";
/// The conformance's consumer namespace.
pub(crate) const CONSUMER: &str = "gateway-conformance-mesh-consumer";

/// The ports the conformance writes (80, 8080) as this test serves them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ports {
    pub(crate) http: u16,
    pub(crate) alt: u16,
    pub(crate) grpc: u16,
}

impl Ports {
    /// Where a port of the manifests is served.
    pub(crate) fn of(&self, written: u16) -> u16 {
        match written {
            80 => self.http,
            8080 => self.alt,
            7070 => self.grpc,
            other => other,
        }
    }
}

/// The conformance mesh: the ADS server over a store of the manifests
/// and a registry of the echo Services, for the sidecars a test connects.
pub(crate) struct Gamma {
    pub(crate) xds_port: u16,
    pub(crate) ports: Ports,
    pub(crate) server: XdsServer,
    /// The resource versions of the stored routes, in order.
    pub(crate) versions: Vec<String>,
    /// The gRPC upstreams of port 7070 ([`Gamma::grpc`]), and their logs'
    /// directory.
    grpc: Option<(Vec<Python>, tempfile::TempDir)>,
}

impl Gamma {
    /// The mesh with the manifests `names` of the corpus stored before the
    /// server starts (so an Envoy's first configuration has them); `None`
    /// when the corpus is not there.
    pub(crate) async fn with(names: &[&str]) -> Option<Gamma> {
        Gamma::with_also(names, "").await
    }

    /// [`Gamma::with`], and the objects of `text` (the services' ports
    /// written as 80 and 8080, moved as the manifests' are).
    pub(crate) async fn with_also(names: &[&str], text: &str) -> Option<Gamma> {
        Gamma::build(names, text, false).await
    }

    /// [`Gamma::with_also`] with real gRPC upstreams on port 7070:
    /// `server.py` processes answering as `echo-v1` and `echo-v2` with the
    /// method called and the metadata they got.
    pub(crate) async fn grpc(names: &[&str], text: &str) -> Option<Gamma> {
        Gamma::build(names, text, true).await
    }

    async fn build(names: &[&str], text: &str, grpc: bool) -> Option<Gamma> {
        let corpus = pilot_test_support::corpus("gateway-api")?;
        let ports = Ports {
            http: free_port(),
            alt: free_port(),
            grpc: free_port(),
        };
        let store = MemoryConfigStore::new(default_registry());
        let mut versions = Vec::new();
        let mut objects: Vec<DynConfig> = names
            .iter()
            .flat_map(|name| manifest(&corpus, name, ports))
            .collect();
        for mut object in document::parse("test.yaml", text, &default_registry()).unwrap() {
            move_ports(&mut object.spec, ports);
            objects.push(object);
        }
        for object in objects {
            let stored = store.create(object).await.unwrap();
            versions.extend(stored.meta.resource_version.clone());
        }
        let controller = Arc::new(Controller::new(Arc::new(store.clone())));
        controller.run();
        let grpc = grpc.then(|| {
            let dir = tempfile::tempdir().unwrap();
            let ports = [free_port(), free_port()];
            let servers: Vec<Python> = ["echo-v1", "echo-v2"]
                .into_iter()
                .zip(ports)
                .map(|(name, port)| Python::server(name, port, dir.path()))
                .collect();
            (ports, servers, dir)
        });
        let grpc_ports = grpc.as_ref().map(|(ports, ..)| *ports);
        let grpc = grpc.map(|(_, servers, dir)| (servers, dir));
        let registry = echo_services(ports, grpc_ports);
        let (server, xds_port) = super::server::serve(controller, Arc::new(registry));
        Some(Gamma {
            xds_port,
            ports,
            server,
            versions,
            grpc,
        })
    }

    /// A sidecar (a real Envoy, its listeners on loopback at the service
    /// ports) in `namespace`, once it serves the Services: its listeners
    /// are up only with their routes.
    pub(crate) async fn client(&self, namespace: &str) -> Envoy {
        let envoy = start_envoy_as(&node_id(namespace, "10.99.0.1"), self.xds_port, false);
        let port = self.ports.http;
        blocking(move || {
            eventually("the sidecar serves echo-v1", || {
                send(port, &Request::get("echo-v1", "/")).status != 0
            })
        })
        .await;
        envoy
    }
}

impl Gamma {
    /// A gRPC client (`client.py`) whose bootstrap makes it a proxyless
    /// client in `namespace` of this server (used when it dials an
    /// `xds:///` name); it dials other targets directly. Only for a mesh
    /// made by [`Gamma::grpc`].
    pub(crate) fn grpc_client(&self, namespace: &str) -> Python {
        let (_, dir) = self
            .grpc
            .as_ref()
            .expect("a mesh with gRPC upstreams (Gamma::grpc)");
        let bootstrap = dir.path().join(format!("bootstrap-{namespace}.json"));
        let node = serde_json::json!({
            "xds_servers": [{
                "server_uri": format!("127.0.0.1:{}", self.xds_port),
                "channel_creds": [{"type": "insecure"}],
                "server_features": ["xds_v3"],
            }],
            "node": {
                "id": node_id(namespace, "10.99.0.2"),
                "metadata": {"GENERATOR": "grpc", "NAMESPACE": namespace, "LABELS": {}},
                "locality": {},
            },
        });
        std::fs::write(&bootstrap, node.to_string()).unwrap();
        Python::start("client.py", &[namespace], &bootstrap, dir.path())
    }
}

/// The documents of the corpus manifest `name`, their ports 80 and 8080
/// moved to the test's.
fn manifest(corpus: &std::path::Path, name: &str, ports: Ports) -> Vec<DynConfig> {
    let file = format!("gwapi_conformance.tests.mesh.{name}.yaml");
    let text = std::fs::read_to_string(corpus.join(&file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut objects = document::parse(&file, &text, &default_registry()).unwrap();
    for object in &mut objects {
        move_ports(&mut object.spec, ports);
    }
    objects
}

/// Every `port` of a spec (parent and backend references) that is 80 or
/// 8080, moved to the test's.
fn move_ports(value: &mut serde_json::Value, ports: Ports) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value.as_u64().and_then(|p| u16::try_from(p).ok()) {
                    Some(port) if key == "port" => *value = ports.of(port).into(),
                    _ => move_ports(value, ports),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| move_ports(v, ports)),
        _ => {}
    }
}

/// The conformance's Services: `echo` (pods v1 and v2), `echo-v1`,
/// `echo-v2`, each on ports 80 (`http`) and 8080 (`http-alt`), their pods
/// real upstreams answering as `echo-v1` and `echo-v2`, and 7070 (`grpc`),
/// served by the gRPC upstreams on `grpc` (v1's, v2's) when given (by
/// nothing otherwise: the HTTP upstreams do not speak HTTP/2).
fn echo_services(ports: Ports, grpc: Option<[u16; 2]>) -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    let v1 = echo_upstream("echo-v1");
    let v2 = echo_upstream("echo-v2");
    let [grpc_v1, grpc_v2] = grpc.unwrap_or([v1, v2]);
    for (name, pods) in [
        ("echo", vec![("v1", v1, grpc_v1), ("v2", v2, grpc_v2)]),
        ("echo-v1", vec![("v1", v1, grpc_v1)]),
        ("echo-v2", vec![("v2", v2, grpc_v2)]),
    ] {
        let service_ports = vec![
            Port::new("http", ports.http, Protocol::Http),
            Port::new("http-alt", ports.alt, Protocol::Http),
            Port::new("grpc", ports.grpc, Protocol::Grpc),
        ];
        let service = registry.add_service(Service::new(
            format!("{name}.{MESH}.svc.cluster.local"),
            service_ports.clone(),
        ));
        for (version, pod, grpc_pod) in &pods {
            for port in &service_ports {
                let upstream = if port.protocol == Protocol::Grpc {
                    *grpc_pod
                } else {
                    *pod
                };
                let endpoint = NetworkEndpoint::new(loopback(), upstream, port.clone());
                let labels = Labels::from_pairs([("version", *version)]);
                registry
                    .add_instance(ServiceInstance::new(Arc::clone(&service), endpoint, labels))
                    .unwrap();
            }
        }
    }
    registry
}

fn loopback() -> IpAddr {
    IpAddr::from([127, 0, 0, 1])
}

/// An HTTP/1.1 upstream answering 200 to every request with what it got:
/// `backend`, then `path`, `host`, `method` and each header (`h:name`,
/// lower case) on a line of its own.
fn echo_upstream(backend: &'static str) -> u16 {
    let listener = TcpListener::bind((loopback(), 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    let mut lines = head.split("\r\n");
                    let mut request = lines.next().unwrap_or_default().split(' ');
                    let method = request.next().unwrap_or_default();
                    let path = request.next().unwrap_or_default();
                    let mut body = format!("backend={backend}\npath={path}\nmethod={method}\n");
                    for line in lines.filter(|l| !l.is_empty()) {
                        if let Some((name, value)) = line.split_once(':') {
                            let name = name.trim().to_ascii_lowercase();
                            if name == "host" {
                                body.push_str(&format!("host={}\n", value.trim()));
                            }
                            body.push_str(&format!("h:{name}={}\n", value.trim()));
                        }
                    }
                    let response = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A request a client sends.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    method: &'static str,
    host: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    pub(crate) fn get(host: &str, path: &str) -> Self {
        Request {
            method: "GET",
            host: host.into(),
            path: path.into(),
            headers: Vec::new(),
        }
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What came back: the status, the response's headers (lower-case names),
/// and, from an echo upstream, what it got.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: BTreeMap<String, String>,
    /// The upstream that answered (`echo-v1`, `echo-v2`), if one did.
    pub(crate) backend: Option<String>,
    /// The request's path as the upstream got it.
    pub(crate) path: String,
    /// The request's headers as the upstream got them (lower-case names;
    /// repeated ones joined by `,`).
    pub(crate) got: BTreeMap<String, String>,
}

/// Sends `request` to Envoy's listener on `port`.
pub(crate) fn send(port: u16, request: &Request) -> Answer {
    let Ok(mut stream) = TcpStream::connect((loopback(), port)) else {
        return Answer::default();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut text = format!(
        "{} {} HTTP/1.1\r\nhost: {}\r\nconnection: close\r\ncontent-length: 0\r\n",
        request.method, request.path, request.host
    );
    for (name, value) in &request.headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    if stream.write_all(text.as_bytes()).is_err() {
        return Answer::default();
    }
    // Read up to the end of the body its length gives, not to the close:
    // Envoy closes the connection of a local reply only after a delay.
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = response.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Answer::default(),
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&response[..head_end]).to_string();
    let length: usize = head
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0);
    while response.len() < head_end + 4 + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
        }
    }
    let body = String::from_utf8_lossy(&response[head_end + 4..]).to_string();
    let head = head.as_str();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut answer = Answer {
        status,
        headers,
        ..Default::default()
    };
    for line in body.lines() {
        if let Some(backend) = line.strip_prefix("backend=") {
            answer.backend = Some(backend.to_string());
        } else if let Some(path) = line.strip_prefix("path=") {
            answer.path = path.to_string();
        } else if let Some((name, value)) = line.strip_prefix("h:").and_then(|h| h.split_once('=')) {
            answer
                .got
                .entry(name.to_string())
                .and_modify(|v| {
                    v.push(',');
                    v.push_str(value);
                })
                .or_insert_with(|| value.to_string());
        }
    }
    answer
}

pub(crate) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

/// Checks every case of `cases` (request, what the answer must be) on
/// `port`, and reports each that fails.
pub(crate) fn expect(port: u16, cases: &[(Request, Expect)]) {
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|(request, expected)| {
            let answer = send(port, request);
            expected
                .check(&answer)
                .err()
                .map(|e| format!("{request:?}: {e}\n  got {answer:?}"))
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// What an answer must be.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expect {
    status: Option<u16>,
    backend: Option<&'static str>,
    path: Option<&'static str>,
    /// Headers the upstream must have got, with these values.
    got: Vec<(&'static str, &'static str)>,
    /// Headers the upstream must not have got.
    not_got: Vec<&'static str>,
    /// Response headers with these values.
    headers: Vec<(&'static str, String)>,
    /// Response headers absent.
    absent: Vec<&'static str>,
}

impl Expect {
    /// 200 from `backend`.
    pub(crate) fn backend(backend: &'static str) -> Self {
        Expect {
            status: Some(200),
            backend: Some(backend),
            ..Default::default()
        }
    }

    pub(crate) fn status(status: u16) -> Self {
        Expect {
            status: Some(status),
            ..Default::default()
        }
    }

    pub(crate) fn path(mut self, path: &'static str) -> Self {
        self.path = Some(path);
        self
    }

    pub(crate) fn got(mut self, name: &'static str, value: &'static str) -> Self {
        self.got.push((name, value));
        self
    }

    pub(crate) fn not_got(mut self, name: &'static str) -> Self {
        self.not_got.push(name);
        self
    }

    pub(crate) fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    pub(crate) fn absent(mut self, name: &'static str) -> Self {
        self.absent.push(name);
        self
    }

    pub(crate) fn check(&self, answer: &Answer) -> Result<(), String> {
        if let Some(status) = self.status
            && answer.status != status
        {
            return Err(format!("status {} is not {status}", answer.status));
        }
        if let Some(backend) = self.backend
            && answer.backend.as_deref() != Some(backend)
        {
            return Err(format!("answered by {:?}, not {backend}", answer.backend));
        }
        if let Some(path) = self.path
            && answer.path != path
        {
            return Err(format!("the upstream got path {}, not {path}", answer.path));
        }
        for (name, value) in &self.got {
            if answer.got.get(*name).map(String::as_str) != Some(*value) {
                return Err(format!(
                    "the upstream got {name}: {:?}, not {value}",
                    answer.got.get(*name)
                ));
            }
        }
        for name in &self.not_got {
            if answer.got.contains_key(*name) {
                return Err(format!("the upstream got {name}"));
            }
        }
        for (name, value) in &self.headers {
            if answer.headers.get(*name) != Some(value) {
                return Err(format!(
                    "response {name}: {:?}, not {value}",
                    answer.headers.get(*name)
                ));
            }
        }
        for name in &self.absent {
            if answer.headers.contains_key(*name) {
                return Err(format!("response has {name}"));
            }
        }
        Ok(())
    }
}

/// A GET of `path` for `echo`.
pub(crate) fn echo(path: &str) -> Request {
    Request::get("echo", path)
}
