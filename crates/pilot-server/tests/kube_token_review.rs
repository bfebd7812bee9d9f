//! Workload identity from Kubernetes service-account tokens, as a
//! workload sees it: `pilot-discovery --kube-token-review` against the
//! fake API server (a real process reaching it through KUBECONFIG). A
//! token the fake issued for `bookinfo/reviews` with audience `istio-ca`
//! gets a certificate of `spiffe://cluster.local/ns/bookinfo/sa/reviews`
//! and an ADS stream for that service account's proxies, and may post
//! pilot-agent's reports of its namespace's proxies; a token for
//! another audience, an expired or an unknown one is `UNAUTHENTICATED`
//! naming why; with the TokenReview API down the call is `UNAVAILABLE`
//! (never trusted); the static token file keeps working beside it.

mod common;

use std::ffi::OsString;
use std::time::{Duration, SystemTime};

use common::ca::{channel, create_with_csr, write_token_file};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use futures::StreamExt as _;
use pilot_ca::{SpiffeId, WorkloadKey, verify_chain};
use pilot_kube_fake::FakeApiServer;
use pilot_test_support::{Discovery, FakeCluster};
use tonic::transport::Channel;

const HOUR: Duration = Duration::from_secs(3600);
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const STATIC: &str = "static-reviews-token-0123456789";
const ADMIN: &str = "admin-token-0123456789abcdef";
const NODE: &str = "sidecar~10.0.0.1~reviews-v1.bookinfo~bookinfo.svc.cluster.local";

/// The fake served on this runtime, and pilot-discovery using it with
/// `--kube-token-review` and a token file beside it.
async fn start(fake: &FakeApiServer, dir: &std::path::Path) -> (FakeCluster, Discovery) {
    let cluster = FakeCluster::serve(fake).await;
    let tokens = write_token_file(
        dir,
        &[
            &format!("{STATIC} xds static namespace=default serviceAccount=legacy"),
            &format!("{ADMIN} rw admin"),
        ],
    );
    let kubeconfig: OsString = cluster.kubeconfig().as_os_str().to_owned();
    let discovery = tokio::task::spawn_blocking(move || {
        Discovery::start_with_env(
            &["--kube-token-review", "--token-file", &tokens],
            &[("KUBECONFIG", &kubeconfig)],
        )
    })
    .await
    .unwrap();
    (cluster, discovery)
}

fn id(namespace: &str, account: &str) -> SpiffeId {
    SpiffeId::new("cluster.local", namespace, account).unwrap()
}

/// `CreateCertificate` for `identity` with `token`.
async fn create(channel: &Channel, token: &str, identity: &SpiffeId) -> Result<Vec<String>, tonic::Status> {
    let key = WorkloadKey::generate().unwrap();
    create_with_csr(channel, Some(token), key.csr_pem(identity).unwrap(), 3600).await
}

fn refused(result: Result<Vec<String>, tonic::Status>, code: tonic::Code, says: &str) {
    let status = result.expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(status.message().contains(says), "{says:?} in {status:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_token_gets_its_identity_and_bad_or_unverifiable_ones_do_not() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::new();
    let (_cluster, discovery) = start(&fake, dir.path()).await;
    let channel = channel(([127, 0, 0, 1], discovery.xds_port).into()).await;

    let token = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let chain = create(&channel, &token, &id("bookinfo", "reviews"))
        .await
        .unwrap();
    let root = chain.last().unwrap().clone();
    assert_eq!(
        verify_chain(&chain, &root, SystemTime::now()).unwrap(),
        id("bookinfo", "reviews")
    );
    // The token names the identity: a CSR for another is refused.
    refused(
        create(&channel, &token, &id("bookinfo", "ratings")).await,
        tonic::Code::PermissionDenied,
        "spiffe://cluster.local/ns/bookinfo/sa/reviews",
    );

    let other = fake.issue_token("bookinfo", "reviews", &["other"], HOUR);
    refused(
        create(&channel, &other, &id("bookinfo", "reviews")).await,
        tonic::Code::Unauthenticated,
        r#"token audiences ["other"] is invalid for the target audiences ["istio-ca"]"#,
    );
    let expired = fake.issue_token("bookinfo", "reviews", &["istio-ca"], Duration::ZERO);
    refused(
        create(&channel, &expired, &id("bookinfo", "reviews")).await,
        tonic::Code::Unauthenticated,
        "service account token has expired",
    );
    refused(
        create(&channel, "not-a-token-anyone-issued", &id("bookinfo", "reviews")).await,
        tonic::Code::Unauthenticated,
        "the bearer token is not valid",
    );

    // The static token file keeps working beside TokenReview.
    let legacy = create(&channel, STATIC, &id("default", "legacy")).await.unwrap();
    assert_eq!(
        verify_chain(&legacy, &root, SystemTime::now()).unwrap(),
        id("default", "legacy")
    );

    // The API server down: a token not reviewed yet is UNAVAILABLE with the
    // reason, never trusted; one accepted a moment ago is remembered.
    let reviews = fake.token_reviews();
    fake.refuse_token_reviews(true);
    let fresh = fake.issue_token("bookinfo", "ratings", &["istio-ca"], HOUR);
    refused(
        create(&channel, &fresh, &id("bookinfo", "ratings")).await,
        tonic::Code::Unavailable,
        "503 ServiceUnavailable",
    );
    create(&channel, &token, &id("bookinfo", "reviews"))
        .await
        .unwrap();
    assert_eq!(
        fake.token_reviews(),
        reviews,
        "the remembered token was not reviewed again"
    );
    fake.refuse_token_reviews(false);
    create(&channel, &fresh, &id("bookinfo", "ratings"))
        .await
        .unwrap();
    let metrics = discovery.get_as("/metrics", ADMIN).1;
    assert!(
        metrics.contains("pilot_ca_refused_total{reason=\"unavailable\"} 1"),
        "{metrics}"
    );
}

/// Opens an ADS stream as `NODE` with SERVICE_ACCOUNT `account` and
/// `token`: its first response, or the status it ended with.
async fn first_response(
    channel: Channel,
    token: &str,
    account: &str,
) -> Result<DiscoveryResponse, tonic::Status> {
    let metadata = envoy_types::pb::google::protobuf::Struct {
        fields: [(
            "SERVICE_ACCOUNT".to_string(),
            envoy_types::pb::google::protobuf::Value {
                kind: Some(envoy_types::pb::google::protobuf::value::Kind::StringValue(
                    account.into(),
                )),
            },
        )]
        .into(),
    };
    let first = DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            metadata: Some(metadata),
            ..Default::default()
        }),
        type_url: CDS.into(),
        ..Default::default()
    };
    let requests = futures::stream::iter([first]).chain(futures::stream::pending());
    let mut request = tonic::Request::new(requests);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ads_takes_a_service_account_token_as_that_service_accounts_proxies() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::new();
    let (_cluster, discovery) = start(&fake, dir.path()).await;
    let channel = channel(([127, 0, 0, 1], discovery.xds_port).into()).await;

    let token = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let response = first_response(channel.clone(), &token, "reviews").await.unwrap();
    assert_eq!(response.type_url, CDS);
    // Bound to its service account, as a client certificate is.
    let other_account = first_response(channel.clone(), &token, "ratings")
        .await
        .unwrap_err();
    assert_eq!(
        other_account.code(),
        tonic::Code::PermissionDenied,
        "{other_account:?}"
    );
    assert!(
        other_account
            .message()
            .contains("spiffe://cluster.local/ns/bookinfo/sa/reviews"),
        "{other_account:?}"
    );

    let other = fake.issue_token("bookinfo", "reviews", &["other"], HOUR);
    let refused = first_response(channel.clone(), &other, "reviews")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{refused:?}");
    assert!(refused.message().contains("token audiences"), "{refused:?}");

    fake.refuse_token_reviews(true);
    let fresh = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let down = first_response(channel.clone(), &fresh, "reviews")
        .await
        .unwrap_err();
    assert_eq!(down.code(), tonic::Code::Unavailable, "{down:?}");
    assert!(down.message().contains("TokenReview"), "{down:?}");
    let metrics = discovery.get_as("/metrics", ADMIN).1;
    for line in [
        "pilot_xds_refused_streams_total{reason=\"unavailable\"} 1",
        "pilot_xds_refused_streams_total{reason=\"unauthenticated\"} 1",
        "pilot_xds_refused_streams_total{reason=\"permission_denied\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in {metrics}");
    }
}

/// Posts a report of `node` (pilot-agent's `exited` event) with `token`:
/// the status code and the body.
fn report(discovery: &Discovery, token: &str, node: &str) -> (u16, String) {
    let event = serde_json::json!({
        "node": node, "kind": "exited", "epoch": 0, "signal": 9, "restarts": 1,
        "time_ms": 1_700_000_000_000u64,
    });
    let answer = pilot_test_support::http::request(
        ([127, 0, 0, 1], discovery.port).into(),
        "POST",
        "/v1/proxy-events",
        &[
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {token}")),
        ],
        &serde_json::to_vec(&event).unwrap(),
    )
    .unwrap();
    (answer.code, String::from_utf8_lossy(&answer.body).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_reports_with_a_service_account_token_are_taken_for_its_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::new();
    let (_cluster, discovery) = start(&fake, dir.path()).await;
    let token = fake.issue_token("bookinfo", "reviews", &["istio-ca"], HOUR);
    let (code, body) = report(&discovery, &token, NODE);
    assert_eq!(code, 204, "{body}");
    let (code, body) = report(
        &discovery,
        &token,
        "sidecar~10.0.0.2~ratings-v1.prod~prod.svc.cluster.local",
    );
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("namespace \\\"bookinfo\\\""), "{body}");
    // The REST API is no wider: the token reads nothing.
    assert_eq!(discovery.get_as("/debug/proxy-status", &token).0, 401);

    let other = fake.issue_token("bookinfo", "reviews", &["other"], HOUR);
    let (code, body) = report(&discovery, &other, NODE);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("token audiences"), "{body}");
    fake.refuse_token_reviews(true);
    let fresh = fake.issue_token("bookinfo", "ratings", &["istio-ca"], HOUR);
    let (code, body) = report(&discovery, &fresh, NODE);
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("TokenReview"), "{body}");
}

#[test]
fn without_a_kubernetes_client_the_server_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
            "--kube-token-review",
        ])
        .env("KUBECONFIG", dir.path().join("missing-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--kube-token-review: cannot reach Kubernetes"),
        "{stderr}"
    );
}
