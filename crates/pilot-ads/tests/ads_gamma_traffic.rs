//! The Gateway API for service mesh (GAMMA) through a real Envoy with real
//! traffic: HTTPRoutes attached to a Service, from the Gateway API's mesh
//! conformance manifests (the corpus `gateway-api` at
//! `../shared/corpora/`), route a sidecar's requests for that Service to
//! upstreams that say who they are and echo the request they got (path,
//! host, headers). The expectation tables are those the mesh conformance
//! tests state, for a client in `gateway-conformance-mesh` (and, for the
//! consumer route, one in `gateway-conformance-mesh-consumer`).
//!
//! The conformance Services are `echo` (both versions), `echo-v1` and
//! `echo-v2`, each with ports 80 and 8080 (and 7070 for the GRPCRoutes);
//! the test creates them in the registry on free ports and moves the
//! manifests' ports to those. The GRPCRoutes' requests are gRPC's shape
//! (`POST /package.Service/Method`, `content-type: application/grpc`)
//! carried over HTTP/1.1 to the same echo upstreams: what is checked is
//! how Envoy routes them, not gRPC's framing.

mod support;

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
use support::envoy::{eventually, free_port, start_envoy_as};
use support::proxies::node_id;

/// The conformance's mesh namespace, where the Services and the producer
/// routes are.
const MESH: &str = "gateway-conformance-mesh";
/// The conformance's consumer namespace.
const CONSUMER: &str = "gateway-conformance-mesh-consumer";

/// The ports the conformance writes (80, 8080) as this test serves them.
#[derive(Debug, Clone, Copy)]
struct Ports {
    http: u16,
    alt: u16,
    grpc: u16,
}

impl Ports {
    /// Where a port of the manifests is served.
    fn of(&self, written: u16) -> u16 {
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
struct Gamma {
    xds_port: u16,
    ports: Ports,
    server: XdsServer,
    /// The resource versions of the stored routes, in order.
    versions: Vec<String>,
}

impl Gamma {
    /// The mesh with the manifests `names` of the corpus stored before the
    /// server starts (so an Envoy's first configuration has them); `None`
    /// when the corpus is not there.
    async fn with(names: &[&str]) -> Option<Gamma> {
        Gamma::with_also(names, "").await
    }

    /// [`Gamma::with`], and the objects of `text` (the services' ports
    /// written as 80 and 8080, moved as the manifests' are).
    async fn with_also(names: &[&str], text: &str) -> Option<Gamma> {
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
        let registry = echo_services(ports);
        let (server, xds_port) = support::server::serve(controller, Arc::new(registry));
        Some(Gamma {
            xds_port,
            ports,
            server,
            versions,
        })
    }

    /// A sidecar (a real Envoy, its listeners on loopback at the service
    /// ports) in `namespace`, once it serves the Services: its listeners
    /// are up only with their routes.
    async fn client(&self, namespace: &str) -> Envoy {
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
/// real upstreams answering as `echo-v1` and `echo-v2`.
fn echo_services(ports: Ports) -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    let v1 = echo_upstream("echo-v1");
    let v2 = echo_upstream("echo-v2");
    for (name, pods) in [
        ("echo", vec![("v1", v1), ("v2", v2)]),
        ("echo-v1", vec![("v1", v1)]),
        ("echo-v2", vec![("v2", v2)]),
    ] {
        let service_ports = vec![
            Port::new("http", ports.http, Protocol::Http),
            Port::new("http-alt", ports.alt, Protocol::Http),
            Port::new("http-grpc", ports.grpc, Protocol::Http),
        ];
        let service = registry.add_service(Service::new(
            format!("{name}.{MESH}.svc.cluster.local"),
            service_ports.clone(),
        ));
        for (version, pod) in &pods {
            for port in &service_ports {
                let endpoint = NetworkEndpoint::new(loopback(), *pod, port.clone());
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
struct Request {
    method: &'static str,
    host: String,
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn get(host: &str, path: &str) -> Self {
        Request {
            method: "GET",
            host: host.into(),
            path: path.into(),
            headers: Vec::new(),
        }
    }

    /// A gRPC call's request head for `host`: `POST /service/method`.
    fn grpc(host: &str, service: &str, method: &str) -> Self {
        Request {
            method: "POST",
            host: host.into(),
            path: format!("/{service}/{method}"),
            headers: vec![
                ("content-type".into(), "application/grpc".into()),
                ("te".into(), "trailers".into()),
            ],
        }
    }

    fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// What came back: the status, the response's headers (lower-case names),
/// and, from an echo upstream, what it got.
#[derive(Debug, Clone, Default)]
struct Answer {
    status: u16,
    headers: BTreeMap<String, String>,
    /// The upstream that answered (`echo-v1`, `echo-v2`), if one did.
    backend: Option<String>,
    /// The request's path as the upstream got it.
    path: String,
    /// The request's headers as the upstream got them (lower-case names;
    /// repeated ones joined by `,`).
    got: BTreeMap<String, String>,
}

/// Sends `request` to Envoy's listener on `port`.
fn send(port: u16, request: &Request) -> Answer {
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

async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap()
}

/// Checks every case of `cases` (request, what the answer must be) on
/// `port`, and reports each that fails.
fn expect(port: u16, cases: &[(Request, Expect)]) {
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
struct Expect {
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
    fn backend(backend: &'static str) -> Self {
        Expect {
            status: Some(200),
            backend: Some(backend),
            ..Default::default()
        }
    }

    fn status(status: u16) -> Self {
        Expect {
            status: Some(status),
            ..Default::default()
        }
    }

    fn path(mut self, path: &'static str) -> Self {
        self.path = Some(path);
        self
    }

    fn got(mut self, name: &'static str, value: &'static str) -> Self {
        self.got.push((name, value));
        self
    }

    fn not_got(mut self, name: &'static str) -> Self {
        self.not_got.push(name);
        self
    }

    fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    fn absent(mut self, name: &'static str) -> Self {
        self.absent.push(name);
        self
    }

    fn check(&self, answer: &Answer) -> Result<(), String> {
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
fn echo(path: &str) -> Request {
    Request::get("echo", path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simple_route_sends_the_services_requests_to_its_backend() {
    let Some(mesh) = Gamma::with(&["httproute-simple-same-namespace"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        let cases: Vec<(Request, Expect)> = ["/", "/any/path", "/v2"]
            .into_iter()
            .map(|path| (echo(path), Expect::backend("echo-v1")))
            .collect();
        expect(port, &cases);
        // Every request, not just most of them.
        let spread: Vec<Option<String>> = (0..20).map(|_| send(port, &echo("/")).backend).collect();
        assert!(
            spread.iter().all(|b| b.as_deref() == Some("echo-v1")),
            "{spread:?}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_paths_split_and_weights_share_the_rest_70_30() {
    // mesh-split's exact paths, and httproute-weight's 70/30 for every
    // other request on port 80.
    let Some(mesh) = Gamma::with(&["mesh-split", "httproute-weight"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let counts = blocking(move || {
        expect(
            port,
            &[
                (echo("/v1"), Expect::backend("echo-v1")),
                (echo("/v2"), Expect::backend("echo-v2")),
            ],
        );
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..2000 {
            let answer = send(port, &echo("/"));
            let key = answer
                .backend
                .unwrap_or_else(|| format!("status {}", answer.status));
            *counts.entry(key).or_default() += 1;
        }
        counts
    })
    .await;
    let v1 = counts.get("echo-v1").copied().unwrap_or(0);
    let v2 = counts.get("echo-v2").copied().unwrap_or(0);
    assert_eq!(v1 + v2, 2000, "every request answered by v1 or v2: {counts:?}");
    // 70 ± 5 points: 2000 requests put 5 points at about 5 standard
    // deviations of the binomial count.
    assert!((1300..=1500).contains(&v1), "70/30 split: {counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_and_headers_match_with_the_gateway_api_precedence() {
    let Some(mesh) = Gamma::with(&["httproute-matching"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (echo("/"), Expect::backend("echo-v1")),
                (echo("/example"), Expect::backend("echo-v1")),
                (echo("/").header("Version", "one"), Expect::backend("echo-v1")),
                (echo("/v2"), Expect::backend("echo-v2")),
                (echo("/v2/example"), Expect::backend("echo-v2")),
                (echo("/").header("Version", "two"), Expect::backend("echo-v2")),
                (echo("/v2/"), Expect::backend("echo-v2")),
                // A prefix takes whole segments: /v2example is not /v2's.
                (echo("/v2example"), Expect::backend("echo-v1")),
                (echo("/foo/v2/example"), Expect::backend("echo-v1")),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_parameters_match_and_what_matches_nothing_is_404() {
    let Some(mesh) = Gamma::with(&["httproute-query-param-matching"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (echo("/?animal=whale"), Expect::backend("echo-v1")),
                (echo("/?animal=dolphin"), Expect::backend("echo-v2")),
                (
                    echo("/?animal=whale&otherparam=irrelevant"),
                    Expect::backend("echo-v1"),
                ),
                (echo("/?animal=dolphin&color=yellow"), Expect::backend("echo-v2")),
                (echo("/?color=blue"), Expect::status(404)),
                (echo("/?animal=dog"), Expect::status(404)),
                (echo("/?animal=whaledolphin"), Expect::status(404)),
                (echo("/"), Expect::status(404)),
                (echo("/path1?animal=whale"), Expect::backend("echo-v1")),
                (
                    echo("/?animal=whale").header("version", "one"),
                    Expect::backend("echo-v2"),
                ),
                (echo("/path3?animal=shark"), Expect::backend("echo-v1")),
                (
                    echo("/path4?animal=kraken").header("version", "three"),
                    Expect::backend("echo-v1"),
                ),
                (echo("/?animal=shark"), Expect::status(404)),
                (echo("/path4?animal=kraken"), Expect::status(404)),
                (echo("/path5?animal=hydra"), Expect::backend("echo-v1")),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_answer_each_status_code_with_their_location() {
    let Some(mesh) = Gamma::with(&[
        "httproute-303-redirect",
        "httproute-307-redirect",
        "httproute-308-redirect",
    ])
    .await
    else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/redirect"),
                    Expect::status(303).header("location", "http://echo/redirect"),
                ),
                (
                    echo("/temporary"),
                    Expect::status(307).header("location", "http://echo/temporary"),
                ),
                (
                    echo("/permanent"),
                    Expect::status(308).header("location", "http://echo/permanent"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirects_replace_path_host_port_and_scheme() {
    let Some(mesh) = Gamma::with(&[
        "httproute-redirect-path",
        "httproute-redirect-port",
        "httproute-redirect-scheme",
        "httproute-redirect-host-and-status",
    ])
    .await
    else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let to = |status: u16, location: &str| Expect::status(status).header("location", location.to_string());
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/original-prefix/lemon"),
                    to(302, "http://echo/replacement-prefix/lemon"),
                ),
                (
                    echo("/full/path/original"),
                    to(302, "http://echo/full-path-replacement"),
                ),
                (
                    echo("/path-and-host"),
                    to(302, "http://example.org/replacement-prefix"),
                ),
                (
                    echo("/path-and-status"),
                    to(301, "http://echo/replacement-prefix"),
                ),
                (
                    echo("/full-path-and-host"),
                    to(302, "http://example.org/replacement-full"),
                ),
                (
                    echo("/full-path-and-status"),
                    to(301, "http://echo/replacement-full"),
                ),
                (echo("/port"), to(302, "http://echo:8083/port")),
                (
                    echo("/port-and-host"),
                    to(302, "http://example.org:8083/port-and-host"),
                ),
                (
                    echo("/port-and-status"),
                    to(301, "http://echo:8083/port-and-status"),
                ),
                (
                    echo("/port-and-host-and-status"),
                    to(302, "http://example.org:8083/port-and-host-and-status"),
                ),
                (echo("/scheme"), to(302, "https://echo/scheme")),
                (
                    echo("/scheme-and-host"),
                    to(302, "https://example.org/scheme-and-host"),
                ),
                (
                    echo("/scheme-and-status"),
                    to(301, "https://echo/scheme-and-status"),
                ),
                (
                    echo("/scheme-and-host-and-status"),
                    to(302, "https://example.org/scheme-and-host-and-status"),
                ),
                (
                    echo("/hostname-redirect"),
                    to(302, "http://example.org/hostname-redirect"),
                ),
                (
                    echo("/host-and-status"),
                    to(301, "http://example.org/host-and-status"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_headers_are_set_added_and_removed() {
    header_modifier("httproute-request-header-modifier").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_own_filters_set_add_and_remove_its_request_headers() {
    header_modifier("httproute-request-header-modifier-backend").await;
}

/// The request header modifier's cases, for its filters on the rules or
/// on their backends (the manifest `name`).
async fn header_modifier(name: &str) {
    let Some(mesh) = Gamma::with(&[name]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/set").header("Some-Other-Header", "val"),
                    Expect::backend("echo-v1")
                        .path("/set")
                        .got("some-other-header", "val")
                        .got("x-header-set", "set-overwrites-values"),
                ),
                (
                    echo("/set")
                        .header("Some-Other-Header", "val")
                        .header("X-Header-Set", "some-other-value"),
                    Expect::backend("echo-v1")
                        .got("some-other-header", "val")
                        .got("x-header-set", "set-overwrites-values"),
                ),
                (
                    echo("/add").header("Some-Other-Header", "val"),
                    Expect::backend("echo-v1")
                        .path("/add")
                        .got("some-other-header", "val")
                        .got("x-header-add", "add-appends-values"),
                ),
                (
                    echo("/add")
                        .header("Some-Other-Header", "val")
                        .header("X-Header-Add", "some-other-value"),
                    Expect::backend("echo-v1")
                        .got("some-other-header", "val")
                        .got("x-header-add", "some-other-value,add-appends-values"),
                ),
                (
                    echo("/remove").header("X-Header-Remove", "val"),
                    Expect::backend("echo-v1")
                        .path("/remove")
                        .not_got("x-header-remove"),
                ),
                (
                    echo("/multiple")
                        .header("X-Header-Set-2", "set-val-2")
                        .header("X-Header-Add-2", "add-val-2")
                        .header("X-Header-Remove-2", "remove-val-2")
                        .header("Another-Header", "another-header-val"),
                    Expect::backend("echo-v1")
                        .path("/multiple")
                        .got("x-header-set-1", "header-set-1")
                        .got("x-header-set-2", "header-set-2")
                        .got("x-header-add-1", "header-add-1")
                        .got("x-header-add-2", "add-val-2,header-add-2")
                        .got("x-header-add-3", "header-add-3")
                        .got("another-header", "another-header-val")
                        .not_got("x-header-remove-1")
                        .not_got("x-header-remove-2"),
                ),
                (
                    echo("/case-insensitivity")
                        .header("x-header-set", "original-val-set")
                        .header("x-header-add", "original-val-add")
                        .header("x-header-remove", "original-val-remove")
                        .header("Another-Header", "another-header-val"),
                    Expect::backend("echo-v1")
                        .got("x-header-set", "header-set")
                        .got("x-header-add", "original-val-add,header-add")
                        .got("another-header", "another-header-val")
                        .not_got("x-header-remove"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_are_rewritten_by_prefix_or_in_full() {
    let Some(mesh) = Gamma::with(&["httproute-rewrite-path"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.http;
    let modified = |path: &'static str| {
        Expect::backend("echo-v1")
            .path(path)
            .got("x-header-add", "header-val-1")
            .got("x-header-add-append", "append-val-1,header-val-2")
            .got("x-header-set", "set-overwrites-values")
            .not_got("x-header-remove")
    };
    let with_headers = |path: &str| {
        echo(path)
            .header("X-Header-Remove", "remove-val")
            .header("X-Header-Add-Append", "append-val-1")
            .header("X-Header-Set", "set-val")
    };
    blocking(move || {
        expect(
            port,
            &[
                (
                    echo("/prefix/one/two"),
                    Expect::backend("echo-v1").path("/one/two"),
                ),
                (
                    echo("/strip-prefix/three"),
                    Expect::backend("echo-v1").path("/three"),
                ),
                (echo("/strip-prefix"), Expect::backend("echo-v1").path("/")),
                (echo("/full/one/two"), Expect::backend("echo-v1").path("/one")),
                (
                    with_headers("/full/rewrite-path-and-modify-headers/test"),
                    modified("/test"),
                ),
                (
                    with_headers("/prefix/rewrite-path-and-modify-headers/one"),
                    modified("/prefix/one"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_port_restricts_the_route_to_that_port() {
    let Some(mesh) = Gamma::with(&["mesh-ports"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let Ports { http, alt, .. } = mesh.ports;
    blocking(move || {
        // echo-v1's route names port 80: on 8080 it does not apply.
        expect(
            http,
            &[
                (
                    Request::get("echo-v1", "/"),
                    Expect::backend("echo-v1").header("x-header-set", "v1"),
                ),
                (
                    Request::get("echo-v2", "/"),
                    Expect::backend("echo-v2").header("x-header-set", "v2"),
                ),
            ],
        );
        expect(
            alt,
            &[
                (
                    Request::get(&format!("echo-v1:{alt}"), "/"),
                    Expect::backend("echo-v1").absent("x-header-set"),
                ),
                (
                    Request::get(&format!("echo-v2:{alt}"), "/"),
                    Expect::backend("echo-v2").header("x-header-set", "v2"),
                ),
            ],
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_route_applies_only_to_clients_of_its_namespace() {
    let Some(mesh) = Gamma::with(&["mesh-consumer-route"]).await else {
        return;
    };
    let port = mesh.ports.http;
    let host = format!("echo-v1.{MESH}");
    // One sidecar at a time: both would listen on the same loopback ports.
    let consumer = mesh.client(CONSUMER).await;
    let request = Request::get(&host, "/");
    let case = (
        request.clone(),
        Expect::backend("echo-v1").header("x-header-set", "set"),
    );
    blocking(move || expect(port, &[case])).await;
    drop(consumer);
    let _producer = mesh.client(MESH).await;
    let case = (request, Expect::backend("echo-v1").absent("x-header-set"));
    blocking(move || {
        // The consumer's sidecar is gone once its listener refuses
        // connections; then the producer's answers.
        eventually("the producer namespace's sidecar answers", || {
            send(port, &Request::get(&host, "/")).status == 200
        });
        expect(port, &[case])
    })
    .await;
}

/// The conformance's gRPC echo service.
const GRPC_ECHO: &str = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_split_70_30_and_a_zero_weight_backend_gets_none() {
    let Some(mesh) = Gamma::with(&["grpcroute-weight"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.grpc;
    let host = format!("echo:{port}");
    let counts = blocking(move || {
        let call = Request::grpc(&host, GRPC_ECHO, "Echo");
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for _ in 0..2000 {
            let answer = send(port, &call);
            let key = answer
                .backend
                .unwrap_or_else(|| format!("status {}", answer.status));
            *counts.entry(key).or_default() += 1;
        }
        counts
    })
    .await;
    let v1 = counts.get("echo-v1").copied().unwrap_or(0);
    let v2 = counts.get("echo-v2").copied().unwrap_or(0);
    // echo-v3 (weight 0, and not in the registry) is sent nothing.
    assert_eq!(v1 + v2, 2000, "every call answered by v1 or v2: {counts:?}");
    assert!((1300..=1500).contains(&v1), "70/30 split: {counts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_matched_by_header_have_their_headers_modified() {
    let Some(mesh) = Gamma::with(&["grpcroute-request-header-modifier"]).await else {
        return;
    };
    let _client = mesh.client(MESH).await;
    let port = mesh.ports.grpc;
    let host = format!("echo:{port}");
    let call = move |case: &str| Request::grpc(&host, GRPC_ECHO, "Echo").header("x-test-case", case);
    blocking(move || {
        expect(
            port,
            &[
                (
                    call("set")
                        .header("some-other-header", "this-header-should-be-set")
                        .header("x-header-set", "this-value-should-be-overwritten"),
                    Expect::backend("echo-v1")
                        .got("x-test-case", "set")
                        .got("some-other-header", "this-header-should-be-set")
                        .got("x-header-set", "set-overwrites-values"),
                ),
                (
                    call("add").header("x-header-add", "this-value-should-be-appended"),
                    Expect::backend("echo-v1")
                        .got("x-test-case", "add")
                        .got("x-header-add", "this-value-should-be-appended,add-appends-values"),
                ),
                (
                    call("remove").header("x-header-remove", "this-should-be-removed"),
                    Expect::backend("echo-v1")
                        .got("x-test-case", "remove")
                        .not_got("x-header-remove"),
                ),
                (
                    call("multi")
                        .header("x-header-set-2", "set-header-2")
                        .header("x-header-add-2", "add-header-2")
                        .header("x-header-remove-2", "should-be-removed-2"),
                    Expect::backend("echo-v2")
                        .got("x-test-case", "multi")
                        .got("x-header-set-1", "header-set-1")
                        .got("x-header-set-2", "header-set-2")
                        .got("x-header-add-1", "header-add-1")
                        .got("x-header-add-2", "add-header-2,header-add-2")
                        .not_got("x-header-remove-1")
                        .not_got("x-header-remove-2"),
                ),
            ],
        )
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaces_consumer_routes_replace_the_producer_routes_for_its_clients() {
    // The producer routes every path of echo-v1; the consumer's route
    // only /only. A consumer client's other requests match no route of
    // its namespace: 404, the producer's routes are not its.
    let routes = format!(
        r#"
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: producer, namespace: {MESH}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo-v1}}]
  rules:
  - filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: X-Route, value: producer}}]}}}}]
    backendRefs: [{{name: echo-v1, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: consumer, namespace: {CONSUMER}}}
spec:
  parentRefs: [{{group: "", kind: Service, name: echo-v1, namespace: {MESH}}}]
  rules:
  - matches: [{{path: {{type: Exact, value: /only}}}}]
    filters: [{{type: ResponseHeaderModifier, responseHeaderModifier: {{set: [{{name: X-Route, value: consumer}}]}}}}]
    backendRefs: [{{name: echo-v1, namespace: {MESH}, port: 80}}]
"#
    );
    let Some(mesh) = Gamma::with_also(&[], &routes).await else {
        return;
    };
    let port = mesh.ports.http;
    let host = format!("echo-v1.{MESH}");
    let consumer = mesh.client(CONSUMER).await;
    let cases = vec![
        (
            Request::get(&host, "/only"),
            Expect::backend("echo-v1").header("x-route", "consumer"),
        ),
        (Request::get(&host, "/"), Expect::status(404)),
        (Request::get(&host, "/other"), Expect::status(404)),
    ];
    blocking(move || expect(port, &cases)).await;
    drop(consumer);
    let _producer = mesh.client(MESH).await;
    let cases = vec![
        (
            Request::get(&host, "/only"),
            Expect::backend("echo-v1").header("x-route", "producer"),
        ),
        (
            Request::get(&host, "/"),
            Expect::backend("echo-v1").header("x-route", "producer"),
        ),
    ];
    blocking(move || expect(port, &cases)).await;
}
