//! ADS security as a proxy (or an attacker) sees it: a real gRPC client
//! and the real Envoy against the server's ADS port, with tokens, TLS and
//! client certificates made by the `openssl` command.

mod common;

use std::path::Path;
use std::time::Duration;

use common::TestServer;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use pilot_test_support::{Pki, certs, eventually};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const ADMIN: &str = "admin-token-0123456789abcdef";
const VIEWER: &str = "viewer-token-0123456789abcdef";
const PROXY_DEFAULT: &str = "proxy-token-default-0123456789";
/// The token of examples/server/envoy-secure.yaml.
const EXAMPLE: &str = "pilot-example-xds-token-0001";
const DEFAULT_NODE: &str = "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local";
const PROD_NODE: &str = "sidecar~10.0.0.2~ratings-v1.prod~prod.svc.cluster.local";

fn services_file() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/server/services.yaml")
        .display()
        .to_string()
}

fn token_file(dir: &Path) -> String {
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!(
            "{ADMIN} rw admin\n{VIEWER} ro viewer\n{PROXY_DEFAULT} xds reviews namespace=default\n\
             {EXAMPLE} xds example namespace=default\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// `ca`, `server` (localhost), `proxy` (spiffe .../ns/default/sa/example),
/// `plain` (from `ca`, no SPIFFE identity) and `forged` (the same identity
/// as `proxy`, from another CA).
fn certificates() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new(dir.path());
    pki.ca("ca").unwrap();
    pki.ca("other-ca").unwrap();
    pki.leaf("server", "ca", certs::SERVER).unwrap();
    let spiffe = certs::client_with_uri("spiffe://cluster.local/ns/default/sa/example");
    pki.leaf("proxy", "ca", &spiffe).unwrap();
    pki.leaf("forged", "other-ca", &spiffe).unwrap();
    let plain = format!("subjectAltName=DNS:client.example\n{}", certs::CLIENT);
    pki.leaf("plain", "ca", &plain).unwrap();
    dir
}

fn pem(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap()
}

async fn plain_channel(address: std::net::SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// A TLS channel trusting `ca.pem`, presenting `client` (`NAME.pem`) if
/// given; the connection error, if the handshake is refused.
async fn tls_channel(
    address: std::net::SocketAddr,
    certs: &Path,
    client: Option<&str>,
) -> Result<Channel, tonic::transport::Error> {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(pem(certs, "ca.pem")))
        .domain_name("localhost");
    if let Some(name) = client {
        tls = tls.identity(Identity::from_pem(
            pem(certs, &format!("{name}.pem")),
            pem(certs, &format!("{name}-key.pem")),
        ));
    }
    Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
}

/// Opens an ADS stream as `node_id` (with `token` in its metadata and
/// node metadata `SERVICE_ACCOUNT: example`, the `proxy` certificate's)
/// and returns the first response, or the status the stream ended with.
async fn first_response(
    channel: Channel,
    token: Option<&str>,
    node_id: Option<&str>,
) -> Result<DiscoveryResponse, tonic::Status> {
    first_response_as(channel, token, node_id, Some("example")).await
}

/// [`first_response`] with node metadata `SERVICE_ACCOUNT: account`
/// (none when `None`).
async fn first_response_as(
    channel: Channel,
    token: Option<&str>,
    node_id: Option<&str>,
    account: Option<&str>,
) -> Result<DiscoveryResponse, tonic::Status> {
    let metadata = account.map(|account| envoy_types::pb::google::protobuf::Struct {
        fields: [(
            "SERVICE_ACCOUNT".to_string(),
            envoy_types::pb::google::protobuf::Value {
                kind: Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(
                    account.into(),
                )),
            },
        )]
        .into(),
    });
    let first = DiscoveryRequest {
        node: node_id.map(|id| Node {
            id: id.into(),
            metadata: metadata.clone(),
            ..Default::default()
        }),
        type_url: CDS.into(),
        ..Default::default()
    };
    // The request stream stays open (as a proxy's does) until the answer.
    let requests = futures::stream::iter([first]).chain(futures::stream::pending());
    let mut request = tonic::Request::new(requests);
    if let Some(token) = token {
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    let answer = async {
        let mut responses = AggregatedDiscoveryServiceClient::new(channel)
            .stream_aggregated_resources(request)
            .await?
            .into_inner();
        match responses.message().await? {
            Some(response) => Ok(response),
            None => Err(tonic::Status::ok("ended without a response")),
        }
    };
    tokio::time::timeout(Duration::from_secs(60), answer)
        .await
        .expect("no answer from the ADS server")
}

use futures::StreamExt as _;

/// Asserts that a stream was refused with `expected`, saying each of
/// `reasons`.
fn assert_refused(result: Result<DiscoveryResponse, tonic::Status>, expected: tonic::Code, reasons: &[&str]) {
    match result {
        Ok(response) => panic!("served {response:?} where {expected:?} was expected"),
        Err(status) => {
            assert_eq!(status.code(), expected, "{status:?}");
            for reason in reasons {
                assert!(status.message().contains(reason), "{reason} in {status:?}");
            }
        }
    }
}

/// A server whose ADS port takes TLS with client certificates of
/// `certs`' CA (`server.pem`, `ca.pem`), with the registry of
/// [`services_file`] and the arguments `more`.
async fn mtls_server(certs: &Path, more: &[&str]) -> TestServer {
    let path = |name: &str| certs.join(name).display().to_string();
    let (cert, key, ca, services) = (
        path("server.pem"),
        path("server-key.pem"),
        path("ca.pem"),
        services_file(),
    );
    let mut args = vec![
        "--services",
        &services,
        "--xds-tls-cert",
        &cert,
        "--xds-tls-key",
        &key,
        "--xds-client-ca",
        &ca,
    ];
    args.extend_from_slice(more);
    TestServer::start(&args).await
}

/// `pilot_xds_refused_streams_total{reason=REASON}` on /metrics.
fn refused(server: &TestServer, reason: &str) -> u64 {
    let (status, body) = server.request(
        "GET",
        "/metrics",
        &[("authorization", &format!("Bearer {ADMIN}"))],
        None,
    );
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    let prefix = format!("pilot_xds_refused_streams_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in /metrics"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ads_with_tokens_refuses_missing_forged_and_out_of_scope_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&[
        "--token-file",
        &token_file(dir.path()),
        "--services",
        &services_file(),
    ])
    .await;
    let channel = plain_channel(server.xds).await;

    let none = first_response(channel.clone(), None, Some(DEFAULT_NODE)).await;
    assert_refused(none, tonic::Code::Unauthenticated, &["Bearer TOKEN"]);
    let forged = first_response(
        channel.clone(),
        Some("forged-token-0123456789abcdef"),
        Some(DEFAULT_NODE),
    )
    .await;
    assert_refused(forged, tonic::Code::Unauthenticated, &[]);

    // A proxy token of namespace default claiming a node of prod.
    let spoofed = first_response(channel.clone(), Some(PROXY_DEFAULT), Some(PROD_NODE)).await;
    assert_refused(spoofed, tonic::Code::PermissionDenied, &["namespace \"default\""]);

    // Malformed requests end with an error status, not OK.
    let nameless = first_response(channel.clone(), Some(PROXY_DEFAULT), None).await;
    assert_refused(nameless, tonic::Code::InvalidArgument, &[]);
    let malformed = first_response(channel.clone(), Some(PROXY_DEFAULT), Some("not-a-node-id")).await;
    assert_refused(malformed, tonic::Code::InvalidArgument, &[]);

    // The right credentials get configuration.
    let own = first_response(channel.clone(), Some(PROXY_DEFAULT), Some(DEFAULT_NODE))
        .await
        .unwrap();
    assert_eq!(own.type_url, CDS);
    assert!(!own.resources.is_empty(), "no clusters sent");
    let operator = first_response(channel.clone(), Some(ADMIN), Some(PROD_NODE))
        .await
        .unwrap();
    assert_eq!(operator.type_url, CDS);

    assert_eq!(refused(&server, "unauthenticated"), 2);
    assert_eq!(refused(&server, "permission_denied"), 1);
    assert_eq!(refused(&server, "invalid_argument"), 2);

    // An xDS token reads nothing over REST; `bearer` in lower case works;
    // OPTIONS is not a write.
    let rules = common::rules("default");
    let (status, _) = server.request(
        "GET",
        &rules,
        &[("authorization", &format!("Bearer {PROXY_DEFAULT}"))],
        None,
    );
    assert_eq!(status, 403);
    let (status, _) = server.request(
        "GET",
        &rules,
        &[("authorization", &format!("bearer {VIEWER}"))],
        None,
    );
    assert_eq!(status, 200);
    let (status, _) = server.request(
        "OPTIONS",
        &rules,
        &[("authorization", &format!("Bearer {VIEWER}"))],
        None,
    );
    assert_ne!(status, 403);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ads_over_mtls_binds_the_certificate_identity() {
    let certs = certificates();
    let server = mtls_server(certs.path(), &[]).await;

    // Plain text, no certificate, a certificate of another CA: no stream.
    let plain = first_response(plain_channel(server.xds).await, None, Some(DEFAULT_NODE)).await;
    assert!(plain.is_err(), "plain text was served: {plain:?}");
    for client in [None, Some("forged")] {
        if let Ok(channel) = tls_channel(server.xds, certs.path(), client).await {
            let answer = first_response(channel, None, Some(DEFAULT_NODE)).await;
            assert!(answer.is_err(), "client {client:?} was served: {answer:?}");
        }
    }
    // A certificate of the CA without a SPIFFE identity.
    let channel = tls_channel(server.xds, certs.path(), Some("plain"))
        .await
        .unwrap();
    let anonymous = first_response(channel, None, Some(DEFAULT_NODE)).await;
    assert_refused(anonymous, tonic::Code::Unauthenticated, &[]);

    // The proxy's certificate: its own namespace only.
    let channel = tls_channel(server.xds, certs.path(), Some("proxy"))
        .await
        .unwrap();
    let own = first_response(channel.clone(), None, Some(DEFAULT_NODE))
        .await
        .unwrap();
    assert!(!own.resources.is_empty());
    let spoofed = first_response(channel.clone(), None, Some(PROD_NODE)).await;
    assert_refused(spoofed, tonic::Code::PermissionDenied, &[]);
    // Its own namespace, but another service account, or none at all.
    let other = first_response_as(channel.clone(), None, Some(DEFAULT_NODE), Some("ratings")).await;
    assert_refused(
        other,
        tonic::Code::PermissionDenied,
        &[
            "service account \"example\"",
            "does not match SERVICE_ACCOUNT \"ratings\"",
        ],
    );
    let missing = first_response_as(channel, None, Some(DEFAULT_NODE), None).await;
    assert_refused(
        missing,
        tonic::Code::PermissionDenied,
        &["does not match the missing SERVICE_ACCOUNT"],
    );
    let (status, body) = server.request("GET", "/metrics", &[], None);
    assert_eq!(status, 200);
    assert!(
        String::from_utf8_lossy(&body)
            .contains("pilot_xds_refused_streams_total{reason=\"permission_denied\"} 3"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ads_without_credentials_is_refused_off_loopback() {
    let argv = [
        "pilot-discovery",
        "--listen",
        "127.0.0.1:0",
        "--xds-listen",
        "0.0.0.0:0",
    ];
    let args = pilot_server::Args::parse_with_config(argv.iter().map(|s| s.to_string()).collect()).unwrap();
    let error = pilot_server::run(args, std::future::pending(), |_| {})
        .await
        .unwrap_err();
    assert!(error.to_string().contains("without authentication"), "{error}");
}

/// Envoy from examples/server/envoy-secure.yaml, with its ports,
/// certificate directory and node id replaced.
struct Envoy(pilot_test_support::Envoy);

impl Envoy {
    fn start(xds_port: u16, certs: &Path, node_id: &str) -> Self {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/server/envoy-secure.yaml");
        let admin = pilot_test_support::free_port();
        let text = std::fs::read_to_string(example)
            .unwrap()
            .replace("port_value: 15010", &format!("port_value: {xds_port}"))
            .replace("port_value: 15000", &format!("port_value: {admin}"))
            .replace("/tmp/pilot-ads/certs/", &format!("{}/", certs.display()))
            .replace(
                "sidecar~10.0.0.100~example.default~default.svc.cluster.local",
                node_id,
            );
        Envoy(
            pilot_test_support::Envoy::start(&text, "envoy.yaml", admin, "info")
                .expect("envoy (scripts/install-deps installs it)"),
        )
    }

    fn log(&self) -> String {
        self.0.log()
    }

    fn clusters(&self) -> String {
        self.0.admin("/clusters")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn envoy_gets_configuration_over_mtls_with_a_token_and_a_spoofing_envoy_does_not() {
    let certs = certificates();
    let dir = tempfile::tempdir().unwrap();
    let server = mtls_server(certs.path(), &["--token-file", &token_file(dir.path())]).await;
    let xds_port = server.xds.port();
    let proxy_status = || {
        let (status, body) = server.request(
            "GET",
            "/debug/proxy-status",
            &[("authorization", &format!("Bearer {ADMIN}"))],
            None,
        );
        assert_eq!(status, 200);
        String::from_utf8_lossy(&body).to_string()
    };
    let good = Envoy::start(
        xds_port,
        certs.path(),
        "sidecar~10.0.0.100~example.default~default.svc.cluster.local",
    );
    let spoof = Envoy::start(
        xds_port,
        certs.path(),
        "sidecar~10.0.0.101~payments.prod~prod.svc.cluster.local",
    );
    let _envoys = tokio::task::spawn_blocking(move || {
        eventually("the good Envoy has pilot's clusters", || {
            good.clusters().contains("reviews.default.svc.cluster.local")
        });
        eventually("the spoofing Envoy is refused", || {
            // PERMISSION_DENIED (7), with the reason (as `grpc-message`
            // carries it: spaces are not percent-encoded).
            let log = spoof.log();
            log.contains("xds-grpc closed: 7,") && log.contains("may only claim proxies")
        });
        assert!(
            !spoof.clusters().contains("reviews.default.svc.cluster.local"),
            "{}",
            spoof.clusters()
        );
        (good, spoof)
    })
    .await
    .unwrap();
    let status = proxy_status();
    assert!(status.contains("example.default"), "{status}");
    assert!(!status.contains("payments.prod"), "{status}");
    assert!(refused(&server, "permission_denied") >= 1);
    server.stop().await;
}

/// TLS handshakes run side by side: clients stalled in theirs (a TLS
/// record header sent, then nothing) do not hold up a proxy's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn clients_stalled_in_the_tls_handshake_do_not_hold_up_a_proxy() {
    use tokio::io::AsyncWriteExt;
    let certs = certificates();
    // Longer than the guard below: the stalled clients stay open.
    let server = mtls_server(certs.path(), &["--xds-handshake-timeout", "10m"]).await;
    let mut stalled = Vec::new();
    for _ in 0..10 {
        let mut socket = tokio::net::TcpStream::connect(server.xds).await.unwrap();
        socket.write_all(b"\x16\x03\x01\x02\x00").await.unwrap();
        stalled.push(socket);
    }
    // A guard against a hang, not a figure under test.
    let served = tokio::time::timeout(Duration::from_secs(60), async {
        let channel = tls_channel(server.xds, certs.path(), Some("proxy"))
            .await
            .unwrap();
        first_response(channel, None, Some(DEFAULT_NODE)).await
    })
    .await
    .expect("the proxy's handshake waited behind the stalled ones");
    assert!(!served.unwrap().resources.is_empty());
    drop(stalled);
    server.stop().await;
}
