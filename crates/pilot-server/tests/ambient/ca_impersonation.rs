//! Istio's shared mode as ztunnel sees it: a real gRPC client sends
//! `CreateCertificate` with `ImpersonatedIdentity` in the request's
//! metadata, with a node proxy's credential of node-1. It gets the
//! certificate of a workload of node-1 (one backing a service, one the
//! services file lists by itself), and `PERMISSION_DENIED` naming why for
//! a workload of node-2, an identity no workload has, and from a
//! credential that is not a node proxy's; a workload moved to another
//! node is refused from then on. The same with Kubernetes tokens
//! (`--kube-token-review` against the fake API server): a ztunnel pod's
//! token is its node's proxy, another account's pod token is not. On
//! ADS, the same credential opens a ztunnel stream of its node only.

use crate::common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::TestServer;
use common::ca::{Struct, Value, channel, create_with_metadata, impersonating, write_token_file};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use pilot_ca::{SpiffeId, WorkloadKey, verify_chain};
use pilot_kube_fake::FakeApiServer;
use pilot_test_support::{Discovery, FakeCluster};
use tonic::transport::Channel;

const ZTUNNEL_1: &str = "ztunnel-node-1-token-0123456789";
const BARE_NODE_1: &str = "bare-node-1-token-0123456789";
const REVIEWS: &str = "reviews-token-0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef";
const HOUR: Duration = Duration::from_secs(3600);

/// reviews (default/reviews) on node-1 and ratings (default/ratings) on
/// node-2 back services; batch-1 (jobs/batch) on node-1 backs none.
const SERVICES: &str = "\
services:
- hostname: reviews.default.svc.cluster.local
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.0.1.1, port: 9080, name: reviews-v1-1, namespace: default, serviceAccount: reviews,
     node: node-1}
- hostname: ratings.default.svc.cluster.local
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.0.2.1, port: 9080, name: ratings-v1-1, namespace: default, serviceAccount: ratings,
     node: node-2}
workloads:
- {name: batch-1, namespace: jobs, serviceAccount: batch, node: node-1, addresses: [10.0.1.9]}
";

fn services_file(dir: &Path) -> PathBuf {
    let path = dir.join("services.yaml");
    std::fs::write(&path, SERVICES).unwrap();
    path
}

fn id(namespace: &str, account: &str) -> SpiffeId {
    SpiffeId::new("cluster.local", namespace, account).unwrap()
}

/// `CreateCertificate` as ztunnel sends it: a CSR for `identity` and the
/// same identity as `ImpersonatedIdentity`.
async fn impersonate(
    channel: &Channel,
    token: &str,
    identity: &SpiffeId,
) -> Result<Vec<String>, tonic::Status> {
    let key = WorkloadKey::generate().unwrap();
    let csr = key.csr_pem(identity).unwrap();
    create_with_metadata(
        channel,
        Some(token),
        csr,
        3600,
        Some(impersonating(&identity.uri())),
    )
    .await
}

/// The identity a chain's leaf carries, checked against its own bundle.
fn identity_of(chain: &[String]) -> SpiffeId {
    let root = chain.last().unwrap();
    verify_chain(chain, root, SystemTime::now()).unwrap()
}

fn refused(result: Result<Vec<String>, tonic::Status>, code: tonic::Code, says: &str) {
    let status = result.expect_err("refused");
    assert_eq!(status.code(), code, "{status:?}");
    assert!(status.message().contains(says), "{says:?} in {status:?}");
}

fn admin_get(server: &TestServer, path: &str) -> String {
    let auth = format!("Bearer {ADMIN}");
    let (code, body) = server.request("GET", path, &[("authorization", &auth)], None);
    assert_eq!(code, 200, "{path}");
    String::from_utf8(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_proxy_gets_the_certificates_of_its_node_s_workloads_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_token_file(
        dir.path(),
        &[
            &format!("{ZTUNNEL_1} xds ztunnel-1 namespace=istio-system serviceAccount=ztunnel node=node-1"),
            &format!("{BARE_NODE_1} xds bare-1 node=node-1"),
            &format!("{REVIEWS} xds reviews namespace=default serviceAccount=reviews"),
            &format!("{ADMIN} rw admin"),
        ],
    );
    let services = services_file(dir.path());
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--services",
        &services.display().to_string(),
        "--services-poll-ms",
        "20",
    ])
    .await;
    let channel = channel(server.xds).await;

    // Its node's workloads: one backing a service, one backing none.
    let chain = impersonate(&channel, ZTUNNEL_1, &id("default", "reviews"))
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), id("default", "reviews"));
    let chain = impersonate(&channel, ZTUNNEL_1, &id("jobs", "batch"))
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), id("jobs", "batch"));
    // A credential naming no identity of its own may impersonate too.
    let chain = impersonate(&channel, BARE_NODE_1, &id("default", "reviews"))
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), id("default", "reviews"));

    // Another node's workload, an unknown identity, another mesh's.
    refused(
        impersonate(&channel, ZTUNNEL_1, &id("default", "ratings")).await,
        tonic::Code::PermissionDenied,
        "no workload of spiffe://cluster.local/ns/default/sa/ratings runs on node \"node-1\" (the node proxy's); it runs on node \"node-2\"",
    );
    refused(
        impersonate(&channel, ZTUNNEL_1, &id("default", "nobody")).await,
        tonic::Code::PermissionDenied,
        "no workload of identity spiffe://cluster.local/ns/default/sa/nobody is known",
    );
    let foreign = SpiffeId::new("other.mesh", "default", "reviews").unwrap();
    refused(
        impersonate(&channel, ZTUNNEL_1, &foreign).await,
        tonic::Code::PermissionDenied,
        "of trust domain \"other.mesh\"",
    );
    // The CSR must ask for the identity impersonated (or none).
    let key = WorkloadKey::generate().unwrap();
    let csr = key.csr_pem(&id("default", "ratings")).unwrap();
    let metadata = impersonating(&id("default", "reviews").uri());
    let status = create_with_metadata(&channel, Some(ZTUNNEL_1), csr, 0, Some(metadata))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    // A value that is not a string is a bad request.
    let number = Struct {
        fields: [(
            "ImpersonatedIdentity".to_string(),
            Value {
                number_value: Some(1.0),
                ..Default::default()
            },
        )]
        .into(),
    };
    let csr = key.csr_pem(&id("default", "reviews")).unwrap();
    refused(
        create_with_metadata(&channel, Some(ZTUNNEL_1), csr, 0, Some(number)).await,
        tonic::Code::InvalidArgument,
        "metadata.ImpersonatedIdentity must be a string",
    );

    // Credentials that are not a node proxy's.
    for token in [REVIEWS, ADMIN] {
        refused(
            impersonate(&channel, token, &id("default", "reviews")).await,
            tonic::Code::PermissionDenied,
            "only a node proxy's credential may ask for another workload's certificate",
        );
    }

    // Without ImpersonatedIdentity, the node proxy's own identity.
    let key = WorkloadKey::generate().unwrap();
    let own = id("istio-system", "ztunnel");
    let chain = create_with_metadata(&channel, Some(ZTUNNEL_1), key.csr_pem(&own).unwrap(), 0, None)
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), own);
    refused(
        create_with_metadata(&channel, Some(BARE_NODE_1), key.csr_pem(&own).unwrap(), 0, None).await,
        tonic::Code::PermissionDenied,
        "names no identity of its own",
    );

    // Counted, and the record names the node proxy.
    let metrics = admin_get(&server, "/metrics");
    assert!(
        metrics.lines().any(|l| l == "pilot_ca_impersonated_total 3"),
        "{metrics}"
    );
    let debug: serde_json::Value = serde_json::from_str(&admin_get(&server, "/debug/certificates")).unwrap();
    let batch = debug["certificates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["identity"] == "spiffe://cluster.local/ns/jobs/sa/batch")
        .expect("batch's certificate is recorded");
    assert_eq!(batch["caller"], "token ztunnel-1 (node proxy of node-1)");

    // reviews moves to node-2: node-1's proxy is refused its certificate.
    std::fs::write(
        &services,
        SERVICES.replace(
            "serviceAccount: reviews,\n     node: node-1",
            "serviceAccount: reviews,\n     node: node-2",
        ),
    )
    .unwrap();
    let patience = std::time::Instant::now();
    loop {
        match impersonate(&channel, ZTUNNEL_1, &id("default", "reviews")).await {
            Ok(_) => {
                assert!(
                    patience.elapsed() < Duration::from_secs(60),
                    "reviews never left node-1"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(status) => {
                assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
                assert!(
                    status.message().contains("it runs on node \"node-2\""),
                    "{status:?}"
                );
                break;
            }
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ztunnel_pod_token_is_its_node_s_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeApiServer::new();
    let cluster = FakeCluster::serve(&fake).await;
    let tokens = write_token_file(dir.path(), &[&format!("{ADMIN} rw admin")]);
    let services = services_file(dir.path()).display().to_string();
    let kubeconfig: OsString = cluster.kubeconfig().as_os_str().to_owned();
    let discovery = tokio::task::spawn_blocking(move || {
        Discovery::start_with_env(
            &[
                "--kube-token-review",
                "--token-file",
                &tokens,
                "--services",
                &services,
            ],
            &[("KUBECONFIG", &kubeconfig)],
        )
    })
    .await
    .unwrap();
    let channel = channel(([127, 0, 0, 1], discovery.xds_port).into()).await;

    let ztunnel = |node: &str| {
        fake.issue_pod_token(
            "istio-system",
            "ztunnel",
            (&format!("ztunnel-{node}"), node),
            &["istio-ca"],
            HOUR,
        )
    };
    let node_1 = ztunnel("node-1");
    let chain = impersonate(&channel, &node_1, &id("default", "reviews"))
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), id("default", "reviews"));
    refused(
        impersonate(&channel, &node_1, &id("default", "ratings")).await,
        tonic::Code::PermissionDenied,
        "runs on node \"node-2\"",
    );
    refused(
        impersonate(&channel, &node_1, &id("default", "nobody")).await,
        tonic::Code::PermissionDenied,
        "is known to the registries",
    );
    let node_2 = ztunnel("node-2");
    let chain = impersonate(&channel, &node_2, &id("default", "ratings"))
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), id("default", "ratings"));

    // The reviews pod's own token, on node-1: a workload, not a node proxy.
    let reviews = fake.issue_pod_token(
        "default",
        "reviews",
        ("reviews-v1-1", "node-1"),
        &["istio-ca"],
        HOUR,
    );
    refused(
        impersonate(&channel, &reviews, &id("default", "reviews")).await,
        tonic::Code::PermissionDenied,
        "only a node proxy's credential",
    );
    // A ztunnel token bound to no pod names no node.
    let unbound = fake.issue_token("istio-system", "ztunnel", &["istio-ca"], HOUR);
    refused(
        impersonate(&channel, &unbound, &id("default", "reviews")).await,
        tonic::Code::PermissionDenied,
        "only a node proxy's credential",
    );
    // The node proxy's own certificate, without impersonation.
    let key = WorkloadKey::generate().unwrap();
    let own = id("istio-system", "ztunnel");
    let chain = create_with_metadata(&channel, Some(&node_1), key.csr_pem(&own).unwrap(), 0, None)
        .await
        .unwrap();
    assert_eq!(identity_of(&chain), own);
}

/// The first answer of a delta stream opened with `token` as the node
/// `node_id` of `node_name`, subscribing to addresses as ztunnel does.
async fn first_delta_answer(
    xds: std::net::SocketAddr,
    token: &str,
    node_id: &str,
    node_name: &str,
) -> Result<(), tonic::Status> {
    use envoy_types::pb::google::protobuf::{Struct as PbStruct, Value as PbValue, value::Kind};
    use futures::StreamExt as _;
    let metadata = [
        ("NAME", "ztunnel-x"),
        ("NAMESPACE", "istio-system"),
        ("NODE_NAME", node_name),
    ]
    .iter()
    .map(|(k, v)| {
        let value = PbValue {
            kind: Some(Kind::StringValue(v.to_string())),
        };
        (k.to_string(), value)
    })
    .collect();
    let first = DeltaDiscoveryRequest {
        node: Some(Node {
            id: node_id.into(),
            metadata: Some(PbStruct { fields: metadata }),
            ..Default::default()
        }),
        type_url: "type.googleapis.com/istio.workload.Address".into(),
        ..Default::default()
    };
    // The stream stays open (pending) after the first request.
    let requests = futures::stream::iter([first]).chain(futures::stream::pending());
    let mut request = tonic::Request::new(requests);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let mut client = AggregatedDiscoveryServiceClient::new(channel(xds).await);
    let mut responses = client.delta_aggregated_resources(request).await?.into_inner();
    tokio::time::timeout(Duration::from_secs(60), responses.message())
        .await
        .expect("an answer within a minute")?
        .map(|_| ())
        .ok_or_else(|| tonic::Status::cancelled("the stream ended"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_proxy_credential_opens_ztunnel_streams_of_its_node_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_token_file(
        dir.path(),
        &[&format!(
            "{ZTUNNEL_1} xds ztunnel-1 namespace=istio-system serviceAccount=ztunnel node=node-1"
        )],
    );
    let services = services_file(dir.path());
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--services",
        &services.display().to_string(),
    ])
    .await;
    let ztunnel = "ztunnel~10.0.1.100~ztunnel-x.istio-system~istio-system.svc.cluster.local";
    first_delta_answer(server.xds, ZTUNNEL_1, ztunnel, "node-1")
        .await
        .unwrap();
    let status = first_delta_answer(server.xds, ZTUNNEL_1, ztunnel, "node-2")
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status
            .message()
            .contains("node proxy credential of node \"node-1\", not of node \"node-2\""),
        "{status:?}"
    );
    let sidecar = "sidecar~10.0.1.1~reviews-v1-1.default~default.svc.cluster.local";
    let status = first_delta_answer(server.xds, ZTUNNEL_1, sidecar, "node-1")
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(status.message().contains("not the sidecar node"), "{status:?}");
    server.stop().await;
}
