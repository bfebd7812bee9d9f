//! The certificate service on the ADS port as a workload sees it: a real
//! gRPC client sends a CSR made with a new key, with the credential ADS
//! accepts, and gets a chain that verifies against the root; another
//! identity, an operator's token or no credential is refused; the root
//! in `--ca-dir` stays the same across a restart.

mod common;

use std::path::Path;
use std::time::SystemTime;

use common::TestServer;
use common::ca::{IstioCertificateRequest, IstioCertificateResponse, channel};
use pilot_ca::{SpiffeId, WorkloadKey, verify_chain};
use tonic::transport::{Channel, Endpoint};

const REVIEWS: &str = "reviews-token-0123456789abcdef";
const NAMESPACE: &str = "namespace-token-0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef";

fn token_file(dir: &Path) -> String {
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!(
            "{REVIEWS} xds reviews namespace=default serviceAccount=reviews\n\
             {NAMESPACE} xds default-ns namespace=default\n{ADMIN} rw admin\n"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// `CreateCertificate` with a CSR for `identity` made with a new key.
async fn create(
    channel: &Channel,
    token: Option<&str>,
    identity: &SpiffeId,
    ttl_seconds: i64,
) -> Result<Vec<String>, tonic::Status> {
    let key = WorkloadKey::generate().unwrap();
    common::ca::create_with_csr(channel, token, key.csr_pem(identity).unwrap(), ttl_seconds).await
}

fn id(namespace: &str, account: &str) -> SpiffeId {
    SpiffeId::new("cluster.local", namespace, account).unwrap()
}

fn metric(server: &TestServer, line_start: &str) -> u64 {
    let auth = format!("Bearer {ADMIN}");
    let (_, body) = server.request("GET", "/metrics", &[("authorization", &auth)], None);
    let body = String::from_utf8(body).unwrap();
    body.lines()
        .find_map(|line| line.strip_prefix(line_start)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {line_start} in\n{body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_gets_its_own_identity_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let server = TestServer::start(&["--token-file", &tokens]).await;
    let channel = channel(server.xds).await;

    let chain = create(&channel, Some(REVIEWS), &id("default", "reviews"), 3600)
        .await
        .unwrap();
    let root = chain.last().unwrap().clone();
    assert_eq!(
        verify_chain(&chain, &root, SystemTime::now()).unwrap(),
        id("default", "reviews")
    );

    let refused = create(&channel, Some(REVIEWS), &id("default", "ratings"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("the caller may only obtain spiffe://cluster.local/ns/default/sa/reviews"),
        "{refused:?}"
    );

    // A namespace token: any account of its namespace, no other namespace.
    let chain = create(&channel, Some(NAMESPACE), &id("default", "ratings"), 0)
        .await
        .unwrap();
    assert_eq!(
        verify_chain(&chain, &root, SystemTime::now()).unwrap(),
        id("default", "ratings")
    );
    let refused = create(&channel, Some(NAMESPACE), &id("prod", "ratings"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("namespace \"default\" only"),
        "{refused:?}"
    );

    // An operator's token names no workload.
    let refused = create(&channel, Some(ADMIN), &id("default", "reviews"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert!(
        refused.message().contains("workload credentials only"),
        "{refused:?}"
    );

    let refused = create(&channel, None, &id("default", "reviews"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    let refused = create(
        &channel,
        Some("wrong-token-0123456789abcdef"),
        &id("default", "reviews"),
        0,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");

    // Over the maximum lifetime (90 days by default).
    let refused = create(&channel, Some(REVIEWS), &id("default", "reviews"), 100 * 86_400)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");

    assert_eq!(metric(&server, "citadel_server_csr_count_total"), 8);
    assert_eq!(
        metric(&server, "citadel_server_success_cert_issuance_count_total"),
        2
    );
    assert_eq!(
        metric(&server, "pilot_ca_refused_total{reason=\"permission_denied\"}"),
        3
    );
    assert_eq!(
        metric(&server, "pilot_ca_refused_total{reason=\"unauthenticated\"}"),
        2
    );
    assert_eq!(
        metric(&server, "pilot_ca_refused_total{reason=\"invalid_argument\"}"),
        1
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_ads_port_gives_no_certificates() {
    let server = TestServer::start(&[]).await;
    let refused = create(&channel(server.xds).await, None, &id("default", "reviews"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(
        refused.message().contains("only to authenticated callers"),
        "{refused:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_in_the_ca_dir_survives_a_restart_and_signs_with_the_set_lifetime() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let ca_dir = dir.path().join("cacerts").display().to_string();
    let flags = [
        "--token-file",
        &tokens,
        "--ca-dir",
        &ca_dir,
        "--workload-cert-ttl",
        "1m",
    ];
    let mut roots = Vec::new();
    for _ in 0..2 {
        let server = TestServer::start(&flags).await;
        let chain = create(
            &channel(server.xds).await,
            Some(REVIEWS),
            &id("default", "reviews"),
            0,
        )
        .await
        .unwrap();
        let root = chain.last().unwrap().clone();
        verify_chain(&chain, &root, SystemTime::now()).unwrap();
        // Valid now, expired past the one-minute lifetime.
        let later = SystemTime::now() + std::time::Duration::from_secs(120);
        assert!(verify_chain(&chain, &root, later).is_err());
        roots.push(root);
        server.stop().await;
    }
    assert_eq!(
        roots[0], roots[1],
        "a restart signs with the root kept in --ca-dir"
    );
    let on_disk = std::fs::read_to_string(dir.path().join("cacerts/root-cert.pem")).unwrap();
    assert_eq!(on_disk, roots[0]);
}

/// A workload renews with the certificate it was given: the ADS port
/// trusts the CA's own root for client certificates (`--xds-client-ca`),
/// the CA is an operator's, given as files in `--ca-dir`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_certificate_is_a_credential_for_its_own_identity_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let pki = pilot_test_support::Pki::new(dir.path());
    pki.ca("tls-ca").unwrap();
    pki.leaf("server", "tls-ca", pilot_test_support::certs::SERVER)
        .unwrap();
    let ca_dir = dir.path().join("cacerts");
    std::fs::create_dir(&ca_dir).unwrap();
    let root = pilot_ca::generate_root("cluster.local", std::time::Duration::from_secs(86_400)).unwrap();
    std::fs::write(ca_dir.join("ca-cert.pem"), &root.cert_pem).unwrap();
    std::fs::write(ca_dir.join("ca-key.pem"), &root.key_pem).unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let ca_cert = ca_dir.join("ca-cert.pem").display().to_string();
    let flags = [
        "--token-file".to_string(),
        tokens,
        "--ca-dir".into(),
        ca_dir.display().to_string(),
        "--xds-tls-cert".into(),
        path("server.pem"),
        "--xds-tls-key".into(),
        path("server-key.pem"),
        "--xds-client-ca".into(),
        ca_cert,
    ];
    let server = TestServer::start(&flags.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let tls = || {
        tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(
                std::fs::read(path("tls-ca.pem")).unwrap(),
            ))
            .domain_name("localhost")
    };
    let connect = |tls: tonic::transport::ClientTlsConfig| async move {
        Endpoint::from_shared(format!("https://{}", server.xds))
            .unwrap()
            .tls_config(tls)
            .unwrap()
            .connect()
            .await
            .unwrap()
    };
    // The first certificate, with the token; the key stays here.
    let reviews = id("default", "reviews");
    let key = WorkloadKey::generate().unwrap();
    let mut request = tonic::Request::new(IstioCertificateRequest {
        csr: key.csr_pem(&reviews).unwrap(),
        validity_duration: 0,
        metadata: None,
    });
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {REVIEWS}").parse().unwrap());
    let mut grpc = tonic::client::Grpc::new(connect(tls()).await);
    grpc.ready().await.unwrap();
    let path_create =
        http::uri::PathAndQuery::from_static("/istio.v1.auth.IstioCertificateService/CreateCertificate");
    let chain = grpc
        .unary(request, path_create, tonic_prost::ProstCodec::default())
        .await
        .map(|response: tonic::Response<IstioCertificateResponse>| response.into_inner().cert_chain)
        .unwrap();
    assert_eq!(
        chain.last().unwrap().as_str(),
        root.cert_pem,
        "the operator's root signs"
    );
    // Then the certificate alone is the credential.
    let identity = tonic::transport::Identity::from_pem(chain[0].clone(), key.private_key_pem());
    let with_cert = connect(tls().identity(identity)).await;
    let renewed = create(&with_cert, None, &reviews, 3600).await.unwrap();
    assert_eq!(
        verify_chain(&renewed, &root.cert_pem, SystemTime::now()).unwrap(),
        reviews
    );
    let refused = create(&with_cert, None, &id("default", "ratings"), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    server.stop().await;
}

/// The root a workload's chain ends with, from `server`.
async fn root_of(server: &TestServer) -> String {
    let chain = create(
        &channel(server.xds).await,
        Some(REVIEWS),
        &id("default", "reviews"),
        0,
    )
    .await
    .unwrap();
    let root = chain.last().unwrap().clone();
    verify_chain(&chain, &root, SystemTime::now()).unwrap();
    root
}

/// Every object every REST list serves, as one text.
fn every_rest_list(server: &TestServer) -> String {
    let auth = format!("Bearer {ADMIN}");
    let get = |path: &str| {
        let (code, body) = server.request("GET", path, &[("authorization", &auth)], None);
        assert_eq!(code, 200, "GET {path}");
        serde_json::from_slice::<serde_json::Value>(&body).unwrap()
    };
    let mut text = String::new();
    for group in get("/apis")["groups"].as_array().unwrap() {
        for version in group["versions"].as_array().unwrap() {
            let group_version = version["groupVersion"].as_str().unwrap();
            let resources = get(&format!("/apis/{group_version}"));
            for resource in resources["resources"].as_array().unwrap() {
                let plural = resource["name"].as_str().unwrap();
                if !plural.contains('/') {
                    text.push_str(&get(&format!("/apis/{group_version}/{plural}")).to_string());
                }
            }
        }
    }
    text
}

/// Without `--ca-dir` the self-signed root is kept in etcd: two replicas
/// starting at once on one etcd sign with one root, and so does a
/// restart. The key lives in etcd, and nothing the REST API lists
/// serves it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_root_kept_in_etcd_is_shared_by_replicas_and_survives_a_restart() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let endpoint = etcd.endpoint();
    let flags = [
        "--token-file",
        &tokens,
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoint,
    ];
    let (first, second) = tokio::join!(TestServer::start(&flags), TestServer::start(&flags));
    let root = root_of(&first).await;
    assert_eq!(
        root_of(&second).await,
        root,
        "two replicas starting at once agree on one root"
    );
    let served = every_rest_list(&first);
    assert!(served.contains("\"items\""), "the lists were read: {served}");
    assert!(
        !served.contains("PRIVATE KEY") && !served.contains(root.lines().nth(1).unwrap()),
        "no REST list serves the CA: {served}"
    );
    first.stop().await;
    second.stop().await;

    let restarted = TestServer::start(&flags).await;
    assert_eq!(
        root_of(&restarted).await,
        root,
        "a restart signs with the root kept in etcd"
    );
    restarted.stop().await;

    let mut client = etcd_client::Client::connect([endpoint], None).await.unwrap();
    let kept = client.get("/pilot/config/_ca/root", None).await.unwrap();
    let files: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(kept.kvs()[0].value()).unwrap();
    assert_eq!(files["root-cert.pem"], root);
    assert!(files["ca-key.pem"].contains("PRIVATE KEY"));
}

/// On Kubernetes the root is kept in the Secret `pilot-ca-secret` of the
/// store's namespace: two replicas starting at once sign with the one
/// root the Secret holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_root_kept_in_a_kubernetes_secret_is_shared_by_replicas() {
    let fake = pilot_kube_fake::FakeApiServer::new();
    let cluster = pilot_test_support::FakeCluster::serve(&fake).await;
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let start = || {
        let (kubeconfig, tokens) = (cluster.kubeconfig().to_path_buf(), tokens.clone());
        tokio::task::spawn_blocking(move || {
            pilot_test_support::Discovery::start_with_env(
                &[
                    "--store",
                    "kubernetes",
                    "--install-crds",
                    "--token-file",
                    &tokens,
                    "--log-level",
                    "warn",
                ],
                &[("KUBECONFIG", kubeconfig.as_os_str())],
            )
        })
    };
    let (first, second) = tokio::join!(start(), start());
    let (first, second) = (first.unwrap(), second.unwrap());
    let mut roots = Vec::new();
    for replica in [&first, &second] {
        let address = ([127, 0, 0, 1], replica.xds_port).into();
        let chain = create(
            &channel(address).await,
            Some(REVIEWS),
            &id("default", "reviews"),
            0,
        )
        .await
        .unwrap();
        roots.push(chain.last().unwrap().clone());
    }
    assert_eq!(roots[0], roots[1], "two replicas agree on one root");
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(fake.client(), "default");
    let secret = secrets.get("pilot-ca-secret").await.unwrap();
    assert_eq!(secret.type_.as_deref(), Some("istio.io/ca-root"));
    let data = secret.data.unwrap();
    assert_eq!(String::from_utf8_lossy(&data["root-cert.pem"].0), roots[0]);
    assert!(String::from_utf8_lossy(&data["ca-key.pem"].0).contains("PRIVATE KEY"));
}

/// `pilotctl proxy-config secret` shows the certificate a proxy's agent
/// was issued: identity and expiry, found by the proxy's address and
/// namespace; a proxy whose agent asked for none is told so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pilotctl_shows_a_proxys_certificate_identity_and_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = token_file(dir.path());
    let server = TestServer::start(&["--token-file", &tokens, "--workload-cert-ttl", "2h"]).await;
    let before = SystemTime::now();
    create(
        &channel(server.xds).await,
        Some(REVIEWS),
        &id("default", "reviews"),
        0,
    )
    .await
    .unwrap();
    let after = SystemTime::now();

    let auth = format!("Bearer {ADMIN}");
    let node = "sidecar~127.0.0.1~reviews-v1.default~default.svc.cluster.local";
    let (code, body) = server.request(
        "GET",
        &format!("/debug/certificates?proxy={node}"),
        &[("authorization", &auth)],
        None,
    );
    assert_eq!(code, 200);
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let certificates = value["certificates"].as_array().unwrap();
    assert_eq!(certificates.len(), 1, "{value}");
    assert_eq!(
        certificates[0]["identity"],
        "spiffe://cluster.local/ns/default/sa/reviews"
    );
    let not_after = humantime::parse_rfc3339(certificates[0]["notAfter"].as_str().unwrap()).unwrap();
    let ttl = std::time::Duration::from_secs(2 * 3600);
    let second = std::time::Duration::from_secs(1);
    assert!(
        not_after + second >= before + ttl && not_after <= after + ttl,
        "the leaf's expiry, two hours after it was issued: {value}"
    );

    let url = format!("http://{}", server.rest);
    let shown = tokio::task::spawn_blocking(move || {
        let run = |proxy: &str| {
            pilot_test_support::pilotctl(
                Some(&url),
                &["--token", ADMIN, "proxy-config", "secret", proxy],
                &[],
                None,
            )
        };
        (
            run(node),
            run("sidecar~127.0.0.1~ratings-v1.prod~prod.svc.cluster.local"),
        )
    })
    .await
    .unwrap();
    let (reviews, other) = shown;
    assert_eq!(reviews.code, 0, "{reviews:?}");
    let row = reviews
        .stdout
        .lines()
        .find(|l| l.starts_with("default"))
        .unwrap_or_else(|| panic!("{reviews:?}"));
    assert!(
        row.contains("spiffe://cluster.local/ns/default/sa/reviews")
            && row.contains(certificates[0]["notAfter"].as_str().unwrap()),
        "{reviews:?}"
    );
    assert_eq!(other.code, 0, "{other:?}");
    assert!(other.stdout.starts_with("No certificate was issued"), "{other:?}");
    server.stop().await;
}
