//! AuthorizationPolicy through a real Envoy: the generated inbound
//! listeners (RBAC filters included) of a workload at 127.0.0.2, in front
//! of local backends on 127.0.0.1, serve real requests; every rule
//! construct is loaded by `envoy --mode validate`; identities come from
//! client certificates pilot-ca signs, checked by the inbound TLS a
//! PeerAuthentication STRICT generates for a proxy with SDS certificates
//! (its `default` and `ROOTCA` served here as static secrets).

mod support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use pilot_api::security;
use pilot_model::{
    KindRegistry, Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document,
};
use pilot_routing::RoutingConfigs;
use pilot_test_support::{envoy_binary, free_port, http};
use pilot_xds::envoy_types::pb::envoy::config::core::v3::{DataSource, data_source, transport_socket};
use pilot_xds::envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, DownstreamTlsContext, Secret, TlsCertificate, common_tls_context, secret,
};
use pilot_xds::serving::generate_inbound;
use pilot_xds::{MeshConfig, Proxy, Resources, testing};
use prost::Message;
use support::static_envoy::StaticEnvoy;

const WORKLOAD: &str = "127.0.0.2";
const NODE: &str = "sidecar~127.0.0.2~reviews-v1.default~default.svc.cluster.local";

/// A backend on 127.0.0.1 answering every HTTP request `200 ok`; its port.
fn backend() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    port
}

fn answer(mut stream: TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok");
}

/// The workload `reviews` (app=reviews) with one instance at 127.0.0.2 on
/// each of `ports` (name, port, protocol).
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
                Labels::from_pairs([("app", "reviews"), ("version", "v1")]),
            )
        })
        .collect()
}

/// The AuthorizationPolicy objects of `yaml` (documents of `metadata` and
/// `spec`), validated as the API validates them.
fn policy_configs(yaml: &str) -> RoutingConfigs {
    let registry = KindRegistry::new();
    security::register(&registry).unwrap();
    let text: Vec<String> = yaml
        .split("\n---\n")
        .map(|d| format!("apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\n{d}"))
        .collect();
    let objects = document::parse("policies.yaml", &text.join("\n---\n"), &registry).unwrap();
    let configs = RoutingConfigs::from_configs(&objects).unwrap();
    assert_eq!(configs.authorization_policies.len(), objects.len());
    configs
}

/// [`policy_configs`], compiled.
fn policies(yaml: &str) -> MeshConfig {
    MeshConfig::new(policy_configs(yaml).compile())
}

fn inbound(mesh: &MeshConfig, own: &[ServiceInstance]) -> Resources {
    inbound_of(&Proxy::from_node_id(NODE).unwrap(), mesh, own)
}

fn inbound_of(proxy: &Proxy, mesh: &MeshConfig, own: &[ServiceInstance]) -> Resources {
    let resources = generate_inbound(proxy, own, mesh);
    resources.check().unwrap();
    resources
}

/// A real Envoy serving `resources` statically, killed when dropped.
struct Envoy(StaticEnvoy);

impl Envoy {
    /// Starts it and waits until every listener of `resources` accepts.
    /// Inbound listeners do not bind (captured connections reach them
    /// through the virtual listener); here they bind, and are reached
    /// directly.
    fn start(resources: &Resources) -> Self {
        Self::start_with_secrets(resources, Vec::new())
    }

    /// [`start`](Self::start) with static `secrets` in the bootstrap.
    fn start_with_secrets(resources: &Resources, secrets: Vec<Secret>) -> Self {
        Envoy(StaticEnvoy::start(NODE, WORKLOAD, resources, secrets))
    }

    fn log(&self) -> String {
        self.0.log()
    }
}

/// A request to the workload's `port`: status and body, or `None` when the
/// connection closed without an answer.
fn call(port: u16, method: &str, path: &str, headers: &[(&str, &str)]) -> Option<(u16, String)> {
    let address = SocketAddr::new(WORKLOAD.parse().unwrap(), port);
    http::request(address, method, path, headers, b"")
        .ok()
        .map(|answer| (answer.code, answer.text()))
}

const DENIED: Option<(u16, &str)> = Some((403, "RBAC: access denied"));
const OK: Option<(u16, &str)> = Some((200, "ok"));

fn expect(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    expected: Option<(u16, &str)>,
    envoy: &Envoy,
) {
    let got = call(port, method, path, headers);
    assert_eq!(
        got.as_ref().map(|(code, body)| (*code, body.as_str())),
        expected,
        "{method} {path} {headers:?} on port {port}\nEnvoy's log:\n{}",
        envoy.log()
    );
}

#[test]
fn envoy_loads_every_rule_construct() {
    let (http_port, tcp_port) = (free_port(), free_port());
    let mesh = policies(&format!(
        r#"metadata: {{name: every-field, namespace: default}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  rules:
  - from:
    - source:
        principals: ["cluster.local/ns/default/sa/productpage", "*", "cluster.local/ns/x/*", "*/sa/y"]
        notPrincipals: ["cluster.local/ns/default/sa/evil"]
        namespaces: ["default", "test-*", "*-prod", "*"]
        notNamespaces: ["kube-system"]
        ipBlocks: ["10.0.0.0/8", "1.2.3.4", "::1"]
        notIpBlocks: ["10.1.0.0/16"]
        remoteIpBlocks: ["192.168.0.0/16"]
        notRemoteIpBlocks: ["fe80::/10"]
    - source: {{namespaces: [other]}}
    to:
    - operation:
        hosts: ["reviews.default.svc.cluster.local", "*.example.com", "api.*"]
        notHosts: ["admin.example.com"]
        methods: ["GET", "HEAD"]
        notMethods: ["DELETE"]
        paths: ["/reviews/*", "*.css", "/exact", "*"]
        notPaths: ["/admin*"]
        ports: ["{http_port}"]
        notPorts: ["15000"]
    when:
    - {{key: "request.headers[x-user]", values: ["alice", "bob*", "*"], notValues: ["mallory"]}}
    - {{key: source.ip, values: ["127.0.0.1"]}}
    - {{key: remote.ip, notValues: ["10.0.0.0/8"]}}
    - {{key: source.namespace, values: ["default"]}}
    - {{key: source.principal, values: ["cluster.local/ns/default/sa/productpage"]}}
    - {{key: destination.ip, values: ["127.0.0.2"]}}
    - {{key: destination.port, values: ["{http_port}", "{tcp_port}"]}}
    - {{key: connection.sni, values: ["*.local"]}}
  - {{}}
---
metadata: {{name: deny-some, namespace: istio-system}}
spec:
  action: DENY
  rules:
  - to: [{{operation: {{paths: ["/secret"], ports: ["{tcp_port}"]}}}}]
---
metadata: {{name: allow-nothing, namespace: default}}
spec: {{}}"#
    ));
    let resources = inbound(
        &mesh,
        &own(&[
            ("http", http_port, Protocol::Http),
            ("tcp", tcp_port, Protocol::Tcp),
        ]),
    );
    let names: Vec<String> = filter_names(&resources);
    assert_eq!(
        names,
        [
            format!("{WORKLOAD}_{http_port}: http rbac, http rbac, fault, cors, router"),
            format!("{WORKLOAD}_{tcp_port}: network rbac, network rbac, tcp_proxy"),
        ]
    );
    testing::validate(&envoy_binary(), NODE, &resources).unwrap();
}

/// Each listener's filters (the HTTP connection manager's HTTP filters),
/// short names.
fn filter_names(resources: &Resources) -> Vec<String> {
    use pilot_xds::envoy_types::pb::envoy::config::listener::v3::filter::ConfigType;
    use pilot_xds::envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    let short = |name: &str| {
        name.trim_start_matches("envoy.filters.http.")
            .trim_start_matches("envoy.filters.network.")
            .replace("rbac", "")
            .to_string()
    };
    resources
        .listeners
        .iter()
        .map(|listener| {
            let filters = &listener.filter_chains[0].filters;
            let names: Vec<String> = match &filters[0].config_type {
                Some(ConfigType::TypedConfig(any))
                    if filters[0].name.ends_with("http_connection_manager") =>
                {
                    HttpConnectionManager::decode(any.value.as_slice())
                        .unwrap()
                        .http_filters
                        .iter()
                        .map(|f| {
                            if f.name == pilot_xds::HTTP_RBAC_FILTER {
                                "http rbac".into()
                            } else {
                                short(&f.name)
                            }
                        })
                        .collect()
                }
                _ => filters
                    .iter()
                    .map(|f| {
                        if f.name == pilot_xds::NETWORK_RBAC_FILTER {
                            "network rbac".into()
                        } else {
                            short(&f.name)
                        }
                    })
                    .collect(),
            };
            format!("{}: {}", listener.name, names.join(", "))
        })
        .collect()
}

#[test]
fn rbac_decides_requests_and_connections_through_a_real_envoy() {
    let http_port = backend();
    let (tcp_allowed, tcp_unmatched, tcp_denied) = (backend(), backend(), backend());
    let mesh = policies(&format!(
        r#"metadata: {{name: reviews-viewer, namespace: default}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  rules:
  - to: [{{operation: {{methods: [GET], paths: ["/reviews/*"]}}}}]
  - when: [{{key: "request.headers[x-user]", values: [admin]}}]
  - to: [{{operation: {{ports: ["{tcp_allowed}", "{tcp_denied}"]}}}}]
---
metadata: {{name: no-secrets, namespace: default}}
spec:
  action: DENY
  rules:
  # On TCP ports this rule is kept without its paths (it would deny every
  # connection, as Istio does), hence its port.
  - to: [{{operation: {{paths: ["*/secret"], ports: ["{http_port}"]}}}}]
  - to: [{{operation: {{ports: ["{tcp_denied}"]}}}}]
---
metadata: {{name: mesh-wide, namespace: istio-system}}
spec:
  action: DENY
  rules:
  - to: [{{operation: {{ports: ["{http_port}"]}}}}]
    when: [{{key: "request.headers[x-blocked]", values: ["*"]}}]
---
metadata: {{name: elsewhere, namespace: other}}
spec:
  action: DENY
  rules: [{{}}]
---
metadata: {{name: ratings-only, namespace: default}}
spec:
  selector: {{matchLabels: {{app: ratings}}}}
  action: DENY
  rules: [{{}}]"#
    ));
    let resources = inbound(
        &mesh,
        &own(&[
            ("http", http_port, Protocol::Http),
            ("tcp-a", tcp_allowed, Protocol::Tcp),
            ("tcp-b", tcp_unmatched, Protocol::Tcp),
            ("tcp-c", tcp_denied, Protocol::Tcp),
        ]),
    );
    let envoy = Envoy::start(&resources);

    // The first ALLOW rule: GET under /reviews/.
    expect(http_port, "GET", "/reviews/1", &[], OK, &envoy);
    expect(http_port, "GET", "/reviews/1?x=y", &[], OK, &envoy);
    // An ALLOW policy applies: what none of its rules matches is denied.
    expect(http_port, "POST", "/reviews/1", &[], DENIED, &envoy);
    expect(http_port, "GET", "/ratings/1", &[], DENIED, &envoy);
    // The second ALLOW rule: a header condition.
    expect(
        http_port,
        "POST",
        "/ratings/1",
        &[("x-user", "admin")],
        OK,
        &envoy,
    );
    expect(
        http_port,
        "POST",
        "/ratings/1",
        &[("x-user", "guest")],
        DENIED,
        &envoy,
    );
    // DENY wins over ALLOW (both ALLOW rules match here).
    expect(
        http_port,
        "GET",
        "/reviews/secret",
        &[("x-user", "admin")],
        DENIED,
        &envoy,
    );
    // A mesh-wide DENY from the root namespace applies too.
    expect(
        http_port,
        "GET",
        "/reviews/1",
        &[("x-blocked", "yes")],
        DENIED,
        &envoy,
    );
    // TCP: the port rule allows; only HTTP rules (skipped on TCP) do not;
    // DENY wins on its port. A denied connection closes with no answer.
    expect(tcp_allowed, "GET", "/anything", &[], OK, &envoy);
    expect(tcp_unmatched, "GET", "/anything", &[], None, &envoy);
    expect(tcp_denied, "GET", "/anything", &[], None, &envoy);
}

#[test]
fn with_no_allow_policy_everything_is_allowed() {
    let port = backend();
    let mesh = policies(
        r#"metadata: {name: no-delete, namespace: default}
spec:
  action: DENY
  rules: [{to: [{operation: {methods: [DELETE]}}]}]"#,
    );
    let resources = inbound(&mesh, &own(&[("http", port, Protocol::Http)]));
    let envoy = Envoy::start(&resources);
    expect(port, "GET", "/anything", &[], OK, &envoy);
    expect(port, "POST", "/reviews/1", &[], OK, &envoy);
    expect(port, "DELETE", "/reviews/1", &[], DENIED, &envoy);
}

/// Certificates pilot-ca signs: a root, and a key and chain per identity.
struct Pki {
    dir: tempfile::TempDir,
    authority: pilot_ca::CertificateAuthority,
}

impl Pki {
    fn new() -> Self {
        let material = pilot_ca::generate_root("cluster.local", Duration::from_secs(24 * 3600)).unwrap();
        let authority =
            pilot_ca::CertificateAuthority::new(&material, pilot_ca::CaOptions::new("cluster.local"))
                .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("root.pem"), authority.root_pem()).unwrap();
        Pki { dir, authority }
    }

    /// The chain and key of `default/sa/service_account`, also written as
    /// `SA.pem` and `SA-key.pem`.
    fn identity(&self, service_account: &str) -> (String, String) {
        let key = pilot_ca::WorkloadKey::generate().unwrap();
        let id = pilot_ca::SpiffeId::new("cluster.local", "default", service_account).unwrap();
        let csr = pilot_ca::Csr::from_pem(&key.csr_pem(&id).unwrap()).unwrap();
        let issued = self.authority.sign(&csr, &id, None).unwrap();
        let chain = issued.cert_chain.concat();
        let dir = self.dir.path();
        std::fs::write(dir.join(format!("{service_account}.pem")), &chain).unwrap();
        std::fs::write(
            dir.join(format!("{service_account}-key.pem")),
            key.private_key_pem(),
        )
        .unwrap();
        (chain, key.private_key_pem())
    }

    /// The secrets pilot-agent serves over SDS for `service_account`:
    /// `default` (its chain and key) and `ROOTCA` (the root), here static.
    fn sds_secrets(&self, service_account: &str) -> Vec<Secret> {
        let inline = |text: String| DataSource {
            specifier: Some(data_source::Specifier::InlineString(text)),
            ..Default::default()
        };
        let (chain, key) = self.identity(service_account);
        vec![
            Secret {
                name: "default".into(),
                r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
                    certificate_chain: Some(inline(chain)),
                    private_key: Some(inline(key)),
                    ..Default::default()
                })),
            },
            Secret {
                name: "ROOTCA".into(),
                r#type: Some(secret::Type::ValidationContext(CertificateValidationContext {
                    trusted_ca: Some(inline(self.authority.root_pem().to_string())),
                    ..Default::default()
                })),
            },
        ]
    }

    /// `curl` as `service_account` (no client certificate: `None`): the
    /// status, 0 when the handshake failed.
    fn curl(&self, service_account: Option<&str>, method: &str, port: u16, path: &str) -> u16 {
        let dir = self.dir.path();
        let mut command = Command::new("curl");
        command
            .args(["-sk", "-o", "/dev/null", "-w", "%{http_code}", "-X", method])
            .arg("--cacert")
            .arg(dir.join("root.pem"));
        if let Some(account) = service_account {
            command
                .arg("--cert")
                .arg(dir.join(format!("{account}.pem")))
                .arg("--key")
                .arg(dir.join(format!("{account}-key.pem")));
        }
        let output = command
            .arg(format!("https://{WORKLOAD}:{port}{path}"))
            .output()
            .expect("curl (scripts/install-deps)");
        String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap_or(0)
    }
}

#[test]
fn only_productpage_may_get_reviews_over_mutual_tls() {
    let port = backend();
    let mut configs = policy_configs(
        r#"metadata: {name: reviews-from-productpage, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  action: ALLOW
  rules:
  - from: [{source: {principals: ["cluster.local/ns/default/sa/productpage"]}}]
    to: [{operation: {methods: [GET], paths: ["/reviews/*"]}}]
---
metadata: {name: no-admin, namespace: default}
spec:
  action: DENY
  rules:
  - from: [{source: {namespaces: [default]}}]
    to: [{operation: {paths: ["/reviews/admin"]}}]"#,
    );
    configs.peer_authentications = vec![std::sync::Arc::new(pilot_model::Config::new(
        "default",
        "strict",
        serde_json::from_value(serde_json::json!({"mtls": {"mode": "STRICT"}})).unwrap(),
    ))];
    let mesh = MeshConfig::new(configs.compile());
    let pki = Pki::new();
    pki.identity("productpage");
    pki.identity("other");
    // A proxy whose agent serves SDS: STRICT makes its inbound TLS.
    let metadata = [("SDS".to_string(), "true".to_string())].into();
    let proxy = Proxy::from_node_id(NODE)
        .unwrap()
        .with_metadata(&metadata)
        .unwrap();
    let mut resources = inbound_of(&proxy, &mesh, &own(&[("http", port, Protocol::Http)]));
    let tls_chains = static_secrets(&mut resources);
    assert_eq!(
        tls_chains,
        resources.listeners[0].filter_chains.len(),
        "STRICT: every inbound chain requires TLS"
    );
    let envoy = Envoy::start_with_secrets(&resources, pki.sds_secrets("reviews"));
    let log = || envoy.log();

    assert_eq!(
        pki.curl(Some("productpage"), "GET", port, "/reviews/1"),
        200,
        "{}",
        log()
    );
    assert_eq!(
        pki.curl(Some("other"), "GET", port, "/reviews/1"),
        403,
        "{}",
        log()
    );
    assert_eq!(
        pki.curl(Some("productpage"), "POST", port, "/reviews/1"),
        403,
        "{}",
        log()
    );
    assert_eq!(
        pki.curl(Some("productpage"), "GET", port, "/details/1"),
        403,
        "{}",
        log()
    );
    // DENY (any identity of namespace default) wins over the ALLOW.
    assert_eq!(
        pki.curl(Some("productpage"), "GET", port, "/reviews/admin"),
        403,
        "{}",
        log()
    );
    // No client certificate: no handshake.
    assert_eq!(pki.curl(None, "GET", port, "/reviews/1"), 0, "{}", log());
}

/// Points the generated inbound TLS contexts' SDS secrets (`default`,
/// `ROOTCA` from the agent's SDS cluster) at the bootstrap's static
/// secrets of the same names, keeping everything else generated (client
/// certificate required, validation against `ROOTCA`); the number of
/// chains with a TLS context requiring a client certificate.
fn static_secrets(resources: &mut Resources) -> usize {
    let mut requiring = 0;
    for chain in resources
        .listeners
        .iter_mut()
        .flat_map(|l| l.filter_chains.iter_mut())
    {
        let Some(socket) = chain.transport_socket.as_mut() else {
            continue;
        };
        let Some(transport_socket::ConfigType::TypedConfig(any)) = socket.config_type.as_mut() else {
            continue;
        };
        let mut context = DownstreamTlsContext::decode(any.value.as_slice()).unwrap();
        if context.require_client_certificate.is_some_and(|r| r.value) {
            requiring += 1;
        }
        let common = context.common_tls_context.as_mut().unwrap();
        assert!(
            !common.tls_certificate_sds_secret_configs.is_empty(),
            "the workload certificate comes over SDS"
        );
        for sds in &mut common.tls_certificate_sds_secret_configs {
            assert_eq!(sds.name, "default");
            sds.sds_config = None;
        }
        match common.validation_context_type.as_mut() {
            Some(common_tls_context::ValidationContextType::CombinedValidationContext(combined)) => {
                let sds = combined.validation_context_sds_secret_config.as_mut().unwrap();
                assert_eq!(sds.name, "ROOTCA");
                sds.sds_config = None;
            }
            Some(common_tls_context::ValidationContextType::ValidationContextSdsSecretConfig(sds)) => {
                assert_eq!(sds.name, "ROOTCA");
                sds.sds_config = None;
            }
            other => panic!("peers are checked against ROOTCA: {other:?}"),
        }
        any.value = context.encode_to_vec();
    }
    requiring
}

#[test]
fn service_accounts_and_trust_domains_decide_over_mutual_tls() {
    let port = backend();
    let mut configs = policy_configs(
        r#"metadata: {name: reviews-from-productpage-sa, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  action: ALLOW
  rules:
  - from: [{source: {serviceAccounts: [productpage]}}]
  - from: [{source: {serviceAccounts: ["default/other"]}}]
    to: [{operation: {paths: ["/public"]}}]
---
metadata: {name: no-admin-from-the-mesh, namespace: default}
spec:
  action: DENY
  rules:
  - from: [{source: {trustDomains: ["cluster.*"]}}]
    to: [{operation: {paths: ["/admin"]}}]
  - when: [{key: source.trustDomain, notValues: ["cluster.local"]}]
  - when: [{key: "experimental.envoy.filters.http.example[app][tier]", values: [never-written]}]"#,
    );
    configs.peer_authentications = vec![std::sync::Arc::new(pilot_model::Config::new(
        "default",
        "strict",
        serde_json::from_value(serde_json::json!({"mtls": {"mode": "STRICT"}})).unwrap(),
    ))];
    let mesh = MeshConfig::new(configs.compile());
    let pki = Pki::new();
    pki.identity("productpage");
    pki.identity("other");
    let metadata = [("SDS".to_string(), "true".to_string())].into();
    let proxy = Proxy::from_node_id(NODE)
        .unwrap()
        .with_metadata(&metadata)
        .unwrap();
    let mut resources = inbound_of(&proxy, &mesh, &own(&[("http", port, Protocol::Http)]));
    static_secrets(&mut resources);
    let envoy = Envoy::start_with_secrets(&resources, pki.sds_secrets("reviews"));
    let log = || envoy.log();
    // The bare service account is the policy's namespace's.
    assert_eq!(
        pki.curl(Some("productpage"), "GET", port, "/reviews/1"),
        200,
        "{}",
        log()
    );
    assert_eq!(
        pki.curl(Some("other"), "GET", port, "/reviews/1"),
        403,
        "{}",
        log()
    );
    assert_eq!(pki.curl(Some("other"), "GET", port, "/public"), 200, "{}", log());
    // No filter wrote the metadata the last DENY rule reads: it denies
    // nothing. The trust domain cluster.local matches `cluster.*`: DENY
    // wins.
    assert_eq!(
        pki.curl(Some("productpage"), "GET", port, "/admin"),
        403,
        "{}",
        log()
    );
}
