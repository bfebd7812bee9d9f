//! CUSTOM and AUDIT AuthorizationPolicies through a real Envoy: the
//! generated inbound listeners of a workload at 127.0.0.2 (in front of
//! local backends on 127.0.0.1) and the outbound clusters of the mesh
//! config's extension providers, serving real requests. The external
//! authorizers are servers this test starts: an HTTP one (allows when the
//! request has `x-ext-authz: allow`) and a gRPC
//! `envoy.service.auth.v3.Authorization` one (the same rule; on TCP,
//! whatever the test sets); each counts its checks, so a request outside
//! a CUSTOM policy's rules is seen never to reach it. A provider whose
//! service is down is allowed through with `failOpen` and answered with
//! `statusOnError` without; one the mesh config does not have, or whose
//! service the registry does not have, denies what its policies match. AUDIT lets everything through and marks what its
//! rules match for the access log.

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pilot_api::mesh::ExtensionProviders;
use pilot_api::security;
use pilot_model::{
    KindRegistry, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document,
};
use pilot_routing::RoutingConfigs;
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::{envoy_binary, free_port, http};
use pilot_xds::envoy_types::pb::envoy::config::accesslog::v3::{AccessLog, access_log};
use pilot_xds::envoy_types::pb::envoy::config::core::v3::{
    DataSource, SubstitutionFormatString, address, data_source, socket_address, substitution_format_string,
};
use pilot_xds::envoy_types::pb::envoy::config::listener::v3::filter;
use pilot_xds::envoy_types::pb::envoy::extensions::access_loggers::file::v3::{
    FileAccessLog, file_access_log,
};
use pilot_xds::envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
use pilot_xds::envoy_types::pb::envoy::service::auth::v3::authorization_server::{
    Authorization, AuthorizationServer,
};
use pilot_xds::envoy_types::pb::envoy::service::auth::v3::{
    CheckRequest, CheckResponse, DeniedHttpResponse, OkHttpResponse, check_response,
};
use pilot_xds::envoy_types::pb::envoy::r#type::v3::HttpStatus;
use pilot_xds::envoy_types::pb::google::rpc;
use pilot_xds::serving::{generate_inbound, generate_outbound};
use pilot_xds::{MeshConfig, Proxy, Resources, testing};
use prost::{Message, Name};
use support::static_envoy::StaticEnvoy;

const WORKLOAD: &str = "127.0.0.2";
const NODE: &str = "sidecar~127.0.0.2~reviews-v1.default~default.svc.cluster.local";
const HTTP_AUTHZ: &str = "ext-authz-http.foo.svc.cluster.local";
const GRPC_AUTHZ: &str = "ext-authz-grpc.foo.svc.cluster.local";
const DOWN_GRPC: &str = "ext-authz-down.foo.svc.cluster.local";
const DOWN_HTTP: &str = "ext-authz-down-http.foo.svc.cluster.local";

/// A backend on 127.0.0.1 answering every HTTP request `200 ok`; its port.
fn backend() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                if read_head(&stream).is_some() {
                    let _ = (&stream)
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
                }
            });
        }
    });
    port
}

/// The head of one HTTP request on `stream`, lowercased.
fn read_head(mut stream: &TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    Some(String::from_utf8_lossy(&head).to_ascii_lowercase())
}

/// The HTTP authorization server: allows (200) a check carrying
/// `x-ext-authz: allow`, denies (403, a header and a body of its own)
/// anything else; keeps every check's request line.
struct HttpAuthz {
    port: u16,
    checks: Arc<Mutex<Vec<String>>>,
}

impl HttpAuthz {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let checks: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = Arc::clone(&checks);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let seen = Arc::clone(&seen);
                std::thread::spawn(move || {
                    let Some(head) = read_head(&stream) else { return };
                    seen.lock()
                        .unwrap()
                        .push(head.lines().next().unwrap_or_default().to_string());
                    let answer: &[u8] = if head.contains("\r\nx-ext-authz: allow\r\n") {
                        b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                    } else {
                        b"HTTP/1.1 403 Forbidden\r\nx-ext-authz-check-result: denied\r\ncontent-length: 24\r\nconnection: close\r\n\r\ndenied by ext-authz http"
                    };
                    let _ = (&stream).write_all(answer);
                });
            }
        });
        HttpAuthz { port, checks }
    }

    fn checks(&self) -> Vec<String> {
        self.checks.lock().unwrap().clone()
    }
}

/// The gRPC authorization server: an HTTP check is allowed with
/// `x-ext-authz: allow`; a TCP one (no HTTP attributes) when `allow_tcp`.
#[derive(Clone, Default)]
struct GrpcAuthz {
    checks: Arc<AtomicUsize>,
    /// The client ports of the TCP connections checked.
    tcp_checks: Arc<Mutex<Vec<u32>>>,
    allow_tcp: Arc<AtomicBool>,
}

#[tonic::async_trait]
impl Authorization for GrpcAuthz {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
        let attributes = request.into_inner().attributes.unwrap_or_default();
        let client_port = attributes
            .source
            .and_then(|s| s.address)
            .and_then(|a| match a.address {
                Some(address::Address::SocketAddress(s)) => match s.port_specifier {
                    Some(socket_address::PortSpecifier::PortValue(port)) => Some(port),
                    _ => None,
                },
                _ => None,
            })
            .unwrap_or_default();
        let http = attributes.request.and_then(|r| r.http);
        let allowed = match &http {
            Some(http) => {
                self.checks.fetch_add(1, Ordering::SeqCst);
                http.headers.get("x-ext-authz").map(String::as_str) == Some("allow")
            }
            None => {
                self.tcp_checks.lock().unwrap().push(client_port);
                self.allow_tcp.load(Ordering::SeqCst)
            }
        };
        let response = if allowed {
            CheckResponse {
                status: Some(rpc::Status::default()),
                http_response: Some(check_response::HttpResponse::OkResponse(OkHttpResponse::default())),
                ..Default::default()
            }
        } else {
            CheckResponse {
                status: Some(rpc::Status {
                    code: 7, // PERMISSION_DENIED
                    ..Default::default()
                }),
                http_response: Some(check_response::HttpResponse::DeniedResponse(DeniedHttpResponse {
                    status: Some(HttpStatus { code: 403 }),
                    body: "denied by ext-authz grpc".into(),
                    ..Default::default()
                })),
                ..Default::default()
            }
        };
        Ok(tonic::Response::new(response))
    }
}

impl GrpcAuthz {
    /// Serves on 127.0.0.1 on `runtime`; its port.
    fn start(&self, runtime: &tokio::runtime::Runtime) -> u16 {
        let incoming = runtime
            .block_on(async { tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap()) })
            .unwrap();
        let port = incoming.local_addr().unwrap().port();
        runtime.spawn(
            tonic::transport::Server::builder()
                .add_service(AuthorizationServer::new(self.clone()))
                .serve_with_incoming(incoming),
        );
        port
    }
}

/// The authorization services, each with one endpoint on 127.0.0.1.
fn registry(services: &[(&str, u16, Protocol)]) -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    for (host, port, protocol) in services {
        let service = registry.add_service(Service::new(*host, vec![Port::new("main", *port, *protocol)]));
        let instance = ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new(
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                *port,
                service.ports[0].clone(),
            ),
            Labels::default(),
        );
        registry.add_instance(instance).unwrap();
    }
    registry
}

/// The workload `reviews` with one instance at 127.0.0.2 on each port.
fn own(ports: &[(&str, u16, Protocol)]) -> Vec<ServiceInstance> {
    let service = Arc::new(Service::new(
        "reviews.default.svc.cluster.local",
        ports
            .iter()
            .map(|(name, port, protocol)| Port::new(*name, *port, *protocol))
            .collect(),
    ));
    service
        .ports
        .iter()
        .map(|port| {
            ServiceInstance::new(
                Arc::clone(&service),
                NetworkEndpoint::new(WORKLOAD.parse::<IpAddr>().unwrap(), port.port, port.clone()),
                Labels::from_pairs([("app", "reviews")]),
            )
        })
        .collect()
}

/// The AuthorizationPolicies of `yaml`, validated as the API validates
/// them, with the extension providers of the mesh config `mesh`.
fn mesh(yaml: &str, mesh: &str) -> MeshConfig {
    let registry = KindRegistry::new();
    security::register(&registry).unwrap();
    let text: Vec<String> = yaml
        .split("\n---\n")
        .map(|d| format!("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n{d}"))
        .collect();
    let objects = document::parse("policies.yaml", &text.join("\n---\n"), &registry).unwrap();
    let configs = RoutingConfigs::from_configs(&objects).unwrap();
    assert_eq!(configs.authorization_policies.len(), objects.len());
    let providers = ExtensionProviders::parse("mesh.yaml", mesh).unwrap();
    MeshConfig::new(configs.compile()).with_extension_providers(Arc::new(providers))
}

/// The workload's inbound listeners and clusters, with the outbound
/// clusters (and endpoints) of the authorization services.
fn resources(mesh: &MeshConfig, own: &[ServiceInstance], registry: &MemoryServiceRegistry) -> Resources {
    let proxy = Proxy::from_node_id(NODE).unwrap();
    // As the ADS server generates them: with the providers whose service
    // the registry has.
    let mut resources = generate_inbound(&proxy, own, &mesh.resolving_providers(registry));
    let outbound = generate_outbound(&proxy, registry, mesh, &[]);
    resources.clusters.extend(outbound.clusters);
    resources.endpoints.extend(outbound.endpoints);
    resources.check().unwrap();
    resources
}

/// A real Envoy serving `resources` statically, killed when dropped.
struct Envoy(StaticEnvoy);

impl Envoy {
    /// Starts it and waits until every listener accepts (inbound listeners
    /// bind here, to be reached directly).
    fn start(resources: &Resources) -> Self {
        Envoy(StaticEnvoy::start(NODE, WORKLOAD, resources, Vec::new()))
    }

    fn log(&self) -> String {
        self.0.log()
    }
}

/// `resources` with, on each HTTP connection manager, an access log to
/// `path` of each request's path and its audit mark (the
/// `access_log_hint` an RBAC filter with action LOG sets): what an
/// operator's access log format shows.
fn with_audit_log(mut resources: Resources, path: &std::path::Path) -> Resources {
    let log = FileAccessLog {
        path: path.display().to_string(),
        access_log_format: Some(file_access_log::AccessLogFormat::LogFormat(
            SubstitutionFormatString {
                format: Some(substitution_format_string::Format::TextFormatSource(DataSource {
                    specifier: Some(data_source::Specifier::InlineString(
                        "%REQ(:PATH)% audit=%DYNAMIC_METADATA(envoy.common:access_log_hint)%\n".into(),
                    )),
                    ..Default::default()
                })),
                ..Default::default()
            },
        )),
    };
    let log = AccessLog {
        name: "envoy.access_loggers.file".into(),
        config_type: Some(access_log::ConfigType::TypedConfig(
            pilot_xds::envoy_types::pb::google::protobuf::Any {
                type_url: FileAccessLog::type_url(),
                value: log.encode_to_vec(),
            },
        )),
        ..Default::default()
    };
    for listener in &mut resources.listeners {
        for chain in &mut listener.filter_chains {
            for f in &mut chain.filters {
                let Some(filter::ConfigType::TypedConfig(config)) = &mut f.config_type else {
                    continue;
                };
                if config.type_url != HttpConnectionManager::type_url() {
                    continue;
                }
                let mut manager = HttpConnectionManager::decode(config.value.as_slice()).unwrap();
                manager.access_log.push(log.clone());
                config.value = manager.encode_to_vec();
            }
        }
    }
    resources
}

/// A request to the workload's `port`: status, head and body, or `None`
/// when the connection closed without an answer.
fn call(port: u16, path: &str, headers: &[(&str, &str)]) -> Option<http::Answer> {
    http::request(
        SocketAddr::new(WORKLOAD.parse().unwrap(), port),
        "GET",
        path,
        headers,
        b"",
    )
    .ok()
}

fn status(port: u16, path: &str, headers: &[(&str, &str)], envoy: &Envoy) -> (u16, String) {
    let answer = call(port, path, headers)
        .unwrap_or_else(|| panic!("GET {path} on {port}: no answer\nEnvoy's log:\n{}", envoy.log()));
    (answer.code, answer.text())
}

/// A request on a new connection to the workload's TCP `port`: the
/// connection's client port and the answer (empty when it closed
/// unanswered).
fn tcp_call(port: u16) -> (u16, String) {
    let mut stream = TcpStream::connect((WORKLOAD, port)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let client_port = stream.local_addr().unwrap().port();
    let _ = stream.write_all(b"GET / HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    (client_port, String::from_utf8_lossy(&answer).into_owned())
}

const ALLOW: &[(&str, &str)] = &[("x-ext-authz", "allow")];

#[test]
fn custom_policies_consult_their_providers_only_for_the_requests_they_match() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let http_authz = HttpAuthz::start();
    let grpc_authz = GrpcAuthz::default();
    let grpc_port = grpc_authz.start(&runtime);
    // Nothing listens on these: the providers behind them are down.
    let (down_grpc, down_http) = (free_port(), free_port());
    let registry = registry(&[
        (HTTP_AUTHZ, http_authz.port, Protocol::Http),
        (GRPC_AUTHZ, grpc_port, Protocol::Grpc),
        (DOWN_GRPC, down_grpc, Protocol::Grpc),
        (DOWN_HTTP, down_http, Protocol::Http),
    ]);
    let (by_http, by_grpc, others, tcp) = (backend(), backend(), backend(), backend());
    let mesh = mesh(
        &format!(
            r#"metadata: {{name: by-http, namespace: default}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  action: CUSTOM
  provider: {{name: http}}
  rules:
  - to: [{{operation: {{ports: ["{by_http}"], paths: ["/custom/*"]}}}}]
---
metadata: {{name: by-grpc, namespace: istio-system}}
spec:
  action: CUSTOM
  provider: {{name: grpc}}
  rules:
  - to: [{{operation: {{ports: ["{by_grpc}"], paths: ["/custom/*"]}}}}]
  - to: [{{operation: {{ports: ["{tcp}"]}}}}]
---
metadata: {{name: open, namespace: default}}
spec:
  action: CUSTOM
  provider: {{name: down-open}}
  rules:
  - to: [{{operation: {{ports: ["{others}"], paths: ["/open/*"]}}}}]
---
metadata: {{name: closed, namespace: default}}
spec:
  action: CUSTOM
  provider: {{name: down-closed}}
  rules:
  - to: [{{operation: {{ports: ["{others}"], paths: ["/closed/*"]}}}}]
---
metadata: {{name: nowhere, namespace: default}}
spec:
  action: CUSTOM
  provider: {{name: not-in-the-mesh-config}}
  rules:
  - to: [{{operation: {{ports: ["{others}"], paths: ["/missing/*"]}}}}]
---
metadata: {{name: unregistered, namespace: default}}
spec:
  action: CUSTOM
  provider: {{name: unregistered}}
  rules:
  - to: [{{operation: {{ports: ["{others}"], paths: ["/unregistered/*"]}}}}]
---
metadata: {{name: audit, namespace: default}}
spec:
  action: AUDIT
  rules:
  - to: [{{operation: {{paths: ["/audit/*"]}}}}]
---
metadata: {{name: ratings-only, namespace: default}}
spec:
  selector: {{matchLabels: {{app: ratings}}}}
  action: CUSTOM
  provider: {{name: http}}
  rules: [{{}}]"#
        ),
        &format!(
            r#"extensionProviders:
- name: http
  envoyExtAuthzHttp:
    service: {HTTP_AUTHZ}
    port: {}
    pathPrefix: /check
    includeRequestHeadersInCheck: [x-ext-authz]
    headersToDownstreamOnDeny: [x-ext-authz-check-result]
- name: grpc
  envoyExtAuthzGrpc:
    service: foo/{GRPC_AUTHZ}
    port: {grpc_port}
    timeout: 10s
- name: down-open
  envoyExtAuthzGrpc: {{service: {DOWN_GRPC}, port: {down_grpc}, failOpen: true}}
- name: down-closed
  envoyExtAuthzHttp: {{service: {DOWN_HTTP}, port: {down_http}, statusOnError: "503"}}
- name: unregistered
  envoyExtAuthzGrpc: {{service: not-in-the-registry.foo.svc.cluster.local, port: 9000, failOpen: true}}
"#,
            http_authz.port
        ),
    );
    let resources = resources(
        &mesh,
        &own(&[
            ("http-a", by_http, Protocol::Http),
            ("http-b", by_grpc, Protocol::Http),
            ("http-c", others, Protocol::Http),
            ("tcp", tcp, Protocol::Tcp),
        ]),
        &registry,
    );
    let log_dir = tempfile::tempdir().unwrap();
    let access_log = log_dir.path().join("access.log");
    let envoy = Envoy::start(&with_audit_log(resources, &access_log));
    let ok = (200, "ok".to_string());

    // The HTTP provider decides what its policy matches, with the
    // header it was given, under its path prefix.
    assert_eq!(status(by_http, "/custom/1", ALLOW, &envoy), ok);
    let denied = call(by_http, "/custom/1", &[("x-ext-authz", "deny")]).unwrap();
    assert_eq!(
        (denied.code, denied.text().as_str()),
        (403, "denied by ext-authz http")
    );
    assert!(
        denied
            .head
            .to_ascii_lowercase()
            .contains("x-ext-authz-check-result: denied"),
        "headersToDownstreamOnDeny: {}",
        denied.head
    );
    assert_eq!(
        http_authz.checks(),
        ["get /check/custom/1 http/1.1", "get /check/custom/1 http/1.1"]
    );
    // Outside the policy's rules the provider is never asked.
    assert_eq!(status(by_http, "/other", &[], &envoy), ok);
    assert_eq!(status(by_grpc, "/custom/1", ALLOW, &envoy), ok);
    assert_eq!(http_authz.checks().len(), 2);

    // The gRPC provider, from a mesh-wide policy.
    assert_eq!(grpc_authz.checks.load(Ordering::SeqCst), 1);
    assert_eq!(
        status(by_grpc, "/custom/2", &[], &envoy),
        (403, "denied by ext-authz grpc".to_string())
    );
    assert_eq!(status(by_grpc, "/other", &[], &envoy), ok);
    assert_eq!(status(by_http, "/custom/1", ALLOW, &envoy), ok);
    assert_eq!(grpc_authz.checks.load(Ordering::SeqCst), 2);

    // A provider that is down: failOpen lets the request through; without
    // it, statusOnError answers.
    assert_eq!(status(others, "/open/1", &[], &envoy), ok);
    assert_eq!(status(others, "/closed/1", ALLOW, &envoy).0, 503);
    // A provider the mesh config does not have: what its policy matches
    // is denied, the rest passes.
    assert_eq!(
        status(others, "/missing/1", ALLOW, &envoy),
        (403, "RBAC: access denied".to_string())
    );
    assert_eq!(status(others, "/other", &[], &envoy), ok);
    // A provider whose service is not in the registry, even with
    // failOpen: denied as a missing one, as Istio does.
    assert_eq!(
        status(others, "/unregistered/1", ALLOW, &envoy),
        (403, "RBAC: access denied".to_string())
    );
    assert_eq!(http_authz.checks().len(), 3);
    assert_eq!(grpc_authz.checks.load(Ordering::SeqCst), 2);

    // TCP: the gRPC provider decides each connection its rule matches
    // (Envoy's readiness probes were checked too: the connections are told
    // apart by their client port).
    let checked = |port: u16| {
        let checks = grpc_authz.tcp_checks.lock().unwrap();
        checks.iter().filter(|p| **p == u32::from(port)).count()
    };
    let (port, answer) = tcp_call(tcp);
    assert_eq!(answer, "", "a denied connection closes unanswered");
    assert_eq!(checked(port), 1);
    grpc_authz.allow_tcp.store(true, Ordering::SeqCst);
    let (port, answer) = tcp_call(tcp);
    assert!(answer.ends_with("\r\n\r\nok"), "{answer}");
    assert_eq!(checked(port), 1);

    // AUDIT: everything passes; what the AUDIT rules match is marked for
    // the access log, the rest not.
    assert_eq!(status(by_http, "/audit/1", &[], &envoy), ok);
    assert_eq!(status(others, "/audit/2", &[], &envoy), ok);
    assert_eq!(status(others, "/not-audited", &[], &envoy), ok);
    // Envoy writes its access log out every second or so: wait (bounded)
    // for the last request's line.
    let deadline = Instant::now() + Duration::from_secs(60);
    let log = loop {
        let log = std::fs::read_to_string(&access_log).unwrap_or_default();
        if log.contains("/not-audited ") {
            break log;
        }
        assert!(
            Instant::now() < deadline,
            "no access log line:\n{log}\n{}",
            envoy.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for line in [
        "/audit/1 audit=true",
        "/audit/2 audit=true",
        "/not-audited audit=false",
    ] {
        assert!(log.lines().any(|l| l == line), "{line} not in\n{log}");
    }
    assert!(log.lines().any(|l| l == "/custom/1 audit=false"), "{log}");
}

/// Each listener's filters (the HTTP connection manager's HTTP filters),
/// by name.
fn filter_names(resources: &Resources) -> Vec<(String, Vec<String>)> {
    resources
        .listeners
        .iter()
        .map(|listener| {
            let filters = &listener.filter_chains[0].filters;
            let names = match &filters[0].config_type {
                Some(filter::ConfigType::TypedConfig(any))
                    if any.type_url == HttpConnectionManager::type_url() =>
                {
                    HttpConnectionManager::decode(any.value.as_slice())
                        .unwrap()
                        .http_filters
                        .iter()
                        .map(|f| f.name.clone())
                        .collect()
                }
                _ => filters.iter().map(|f| f.name.clone()).collect(),
            };
            (listener.name.clone(), names)
        })
        .collect()
}

#[test]
fn envoy_loads_every_provider_field_in_istios_filter_order() {
    let (http_port, tcp_port) = (free_port(), free_port());
    let registry = registry(&[
        (HTTP_AUTHZ, 8000, Protocol::Http),
        (GRPC_AUTHZ, 9000, Protocol::Grpc),
    ]);
    let mesh = mesh(
        r#"metadata: {name: audit, namespace: default}
spec:
  action: AUDIT
  rules: [{to: [{operation: {methods: [GET]}}]}]
---
metadata: {name: by-http, namespace: default}
spec:
  action: CUSTOM
  provider: {name: http}
  rules: [{to: [{operation: {paths: ["/admin/*"]}}], when: [{key: "request.headers[x-a]", values: ["b"]}]}]
---
metadata: {name: by-grpc, namespace: default}
spec:
  action: CUSTOM
  provider: {name: grpc}
  rules: [{from: [{source: {ipBlocks: ["10.0.0.0/8"]}}]}]
---
metadata: {name: by-nobody, namespace: default}
spec:
  action: CUSTOM
  provider: {name: missing}
  rules: [{to: [{operation: {ports: ["1"]}}]}]
---
metadata: {name: deny, namespace: default}
spec:
  action: DENY
  rules: [{to: [{operation: {methods: [DELETE]}}]}]
---
metadata: {name: allow, namespace: default}
spec:
  rules: [{}]"#,
        &format!(
            r#"extensionProviders:
- name: http
  envoyExtAuthzHttp:
    service: foo/{HTTP_AUTHZ}
    port: 8000
    timeout: 1.5s
    pathPrefix: /check
    failOpen: true
    clearRouteCache: true
    statusOnError: "503"
    includeRequestHeadersInCheck: [x-ext-authz, "x-prefix-*", "*-suffix"]
    includeAdditionalHeadersInCheck: {{x-added: value, x-request: "%REQ(:path)%"}}
    includeRequestBodyInCheck: {{maxRequestBytes: 2048, allowPartialMessage: true, packAsBytes: true}}
    headersToUpstreamOnAllow: [authorization, "x-user-*"]
    headersToDownstreamOnDeny: [set-cookie]
    headersToDownstreamOnAllow: [x-seen]
- name: grpc
  envoyExtAuthzGrpc:
    service: {GRPC_AUTHZ}
    port: 9000
    timeout: 200ms
    failOpen: true
    clearRouteCache: true
    statusOnError: "500"
    includeRequestBodyInCheck: {{maxRequestBytes: 100}}
"#
        ),
    );
    let resources = resources(
        &mesh,
        &own(&[
            ("http", http_port, Protocol::Http),
            ("tcp", tcp_port, Protocol::Tcp),
        ]),
        &registry,
    );
    let rbac = pilot_xds::HTTP_RBAC_FILTER;
    let ext_authz = pilot_xds::HTTP_EXT_AUTHZ_FILTER;
    let network_rbac = pilot_xds::NETWORK_RBAC_FILTER;
    assert_eq!(
        filter_names(&resources),
        [
            (
                format!("{WORKLOAD}_{http_port}"),
                [
                    rbac,      // AUDIT (LOG)
                    rbac,      // grpc's CUSTOM rules (shadow)
                    ext_authz, // grpc
                    rbac,      // http's CUSTOM rules (shadow)
                    ext_authz, // http
                    rbac,      // the missing provider's rules, denied
                    rbac,      // DENY
                    rbac,      // ALLOW
                    "envoy.filters.http.fault",
                    "envoy.filters.http.cors",
                    "envoy.filters.http.router",
                ]
                .map(String::from)
                .to_vec()
            ),
            (
                format!("{WORKLOAD}_{tcp_port}"),
                [
                    network_rbac, // AUDIT (LOG)
                    network_rbac, // grpc's CUSTOM rules (shadow)
                    pilot_xds::NETWORK_EXT_AUTHZ_FILTER,
                    // no network filter for the HTTP provider
                    network_rbac, // the missing provider's rules, denied
                    network_rbac, // DENY
                    network_rbac, // ALLOW
                    "envoy.filters.network.tcp_proxy",
                ]
                .map(String::from)
                .to_vec()
            ),
        ]
    );
    testing::validate(&envoy_binary(), NODE, &resources).unwrap();
}
