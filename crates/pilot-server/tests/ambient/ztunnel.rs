//! pilot-discovery serving a ztunnel, driven by a delta xDS client that
//! speaks as ztunnel does: a bearer token and a `clusterid` header, a
//! `ztunnel~<ip>~<pod>.<ns>~<ns>.svc.cluster.local` node id with NAME,
//! NAMESPACE, INSTANCE_IPS and NODE_NAME metadata, wildcard subscriptions
//! to `istio.workload.Address` and `istio.security.Authorization`, ACKs, a
//! NACK, and a reconnect naming what it holds. The registry is the services
//! file (its workloads), the policies are written through the REST API.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::Duration;

use common::TestServer;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DeltaDiscoveryRequest, DeltaDiscoveryResponse};
use envoy_types::pb::google::protobuf::{Struct, Value, value};
use envoy_types::pb::google::rpc::Status as RpcStatus;
use pilot_xds::ambient::proto::security::Authorization;
use pilot_xds::ambient::proto::workload::{Address, TunnelProtocol, Workload, address};
use prost::Message;
use serde_json::json;
use tokio::sync::mpsc;

const ADDRESS: &str = "type.googleapis.com/istio.workload.Address";
const AUTHORIZATION: &str = "type.googleapis.com/istio.security.Authorization";
const ZTUNNEL_TOKEN: &str = "ztunnel-node-1-token-0123456789";
const ADMIN: &str = "admin-token-0123456789abcdef";
const NODE_ID: &str = "ztunnel~10.0.0.100~ztunnel-x7k2p.istio-system~istio-system.svc.cluster.local";

const SERVICES: &str = "\
services:
- hostname: reviews.default.svc.cluster.local
  address: 10.96.0.10
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances:
  - {address: 10.0.0.3, port: 8080, portName: http, name: reviews-v1-1, namespace: default,
     serviceAccount: reviews, node: node-1, labels: {app: reviews, version: v1, istio.io/dataplane-mode: ambient}}
  - {address: 10.0.0.4, port: 8080, portName: http, name: reviews-v2-1, namespace: default,
     serviceAccount: reviews, node: node-2, labels: {app: reviews, version: v2}}
workloads:
- {name: curl-1, namespace: tools, serviceAccount: curl, node: node-1, addresses: [10.0.0.9],
   labels: {istio.io/dataplane-mode: ambient}}
";

/// The same, with one more workload (a pod scheduled on node-2).
fn services_with_pod() -> String {
    format!(
        "{SERVICES}- {{name: batch-1, namespace: jobs, serviceAccount: batch, node: node-2, addresses: [10.0.0.10]}}\n"
    )
}

fn string(text: &str) -> Value {
    Value {
        kind: Some(value::Kind::StringValue(text.into())),
    }
}

/// The node ztunnel sends.
fn node() -> Node {
    let fields = [
        ("NAME", "ztunnel-x7k2p"),
        ("NAMESPACE", "istio-system"),
        ("INSTANCE_IPS", "10.0.0.100"),
        ("NODE_NAME", "node-1"),
        ("CLUSTER_ID", "Kubernetes"),
    ];
    Node {
        id: NODE_ID.into(),
        metadata: Some(Struct {
            fields: fields.iter().map(|(k, v)| (k.to_string(), string(v))).collect(),
        }),
        ..Default::default()
    }
}

/// One delta stream as ztunnel opens it.
struct Ztunnel {
    requests: mpsc::Sender<DeltaDiscoveryRequest>,
    responses: tonic::Streaming<DeltaDiscoveryResponse>,
}

impl Ztunnel {
    /// Opens a stream to `server` with `token`; its first request (with the
    /// node) subscribes to addresses, holding `held`.
    async fn open(
        server: &TestServer,
        token: &str,
        node: Node,
        held: HashMap<String, String>,
    ) -> Result<Ztunnel, tonic::Status> {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.xds))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let (requests, mut rx) = mpsc::channel::<DeltaDiscoveryRequest>(8);
        requests
            .send(DeltaDiscoveryRequest {
                node: Some(node),
                type_url: ADDRESS.into(),
                initial_resource_versions: held,
                ..Default::default()
            })
            .await
            .unwrap();
        let outgoing = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
        let mut request = tonic::Request::new(outgoing);
        request
            .metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        request
            .metadata_mut()
            .insert("clusterid", "Kubernetes".parse().unwrap());
        let responses = AggregatedDiscoveryServiceClient::new(channel)
            .delta_aggregated_resources(request)
            .await?
            .into_inner();
        Ok(Ztunnel { requests, responses })
    }

    async fn send(&self, request: DeltaDiscoveryRequest) {
        self.requests.send(request).await.unwrap();
    }

    /// The next response (a hang fails the test after a minute).
    async fn next(&mut self) -> Result<DeltaDiscoveryResponse, tonic::Status> {
        tokio::time::timeout(Duration::from_secs(60), self.responses.message())
            .await
            .expect("a response within a minute")
            .and_then(|r| r.ok_or_else(|| tonic::Status::cancelled("the stream ended")))
    }

    async fn answer(&self, response: &DeltaDiscoveryResponse, error: Option<&str>) {
        self.send(DeltaDiscoveryRequest {
            type_url: response.type_url.clone(),
            response_nonce: response.nonce.clone(),
            error_detail: error.map(|message| RpcStatus {
                code: 3,
                message: message.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
        .await;
    }
}

fn files(dir: &Path) -> (String, String) {
    let services = dir.join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        format!("{ADMIN} rw admin\n{ZTUNNEL_TOKEN} xds ztunnel-node-1 namespace=istio-system node=node-1\n"),
    )
    .unwrap();
    (services.display().to_string(), tokens.display().to_string())
}

/// The addresses of a response, by name.
fn addresses(response: &DeltaDiscoveryResponse) -> BTreeMap<String, Address> {
    assert_eq!(response.type_url, ADDRESS);
    response
        .resources
        .iter()
        .map(|r| {
            let any = r.resource.as_ref().expect("a resource");
            assert_eq!(any.type_url, ADDRESS);
            (r.name.clone(), Address::decode(any.value.as_slice()).unwrap())
        })
        .collect()
}

fn workload(all: &BTreeMap<String, Address>, name: &str) -> Workload {
    match all.get(name).and_then(|a| a.r#type.clone()) {
        Some(address::Type::Workload(w)) => *w,
        other => panic!("{name} is not a workload: {other:?} (of {:?})", all.keys()),
    }
}

fn versions(response: &DeltaDiscoveryResponse) -> HashMap<String, String> {
    response
        .resources
        .iter()
        .map(|r| (r.name.clone(), r.version.clone()))
        .collect()
}

/// The proxy status record of the ztunnel, as `/debug/proxy-status` shows it.
fn status(server: &TestServer) -> serde_json::Value {
    let (code, body) = server.request(
        "GET",
        "/debug/proxy-status",
        &[("authorization", &format!("Bearer {ADMIN}"))],
        None,
    );
    assert_eq!(code, 200);
    let all: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let proxies = all["proxies"].as_array().cloned().unwrap_or_default();
    proxies
        .into_iter()
        .find(|p| p["node"] == NODE_ID)
        .unwrap_or_else(|| panic!("the ztunnel in {all}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ztunnel_gets_workloads_services_and_policies_and_each_change_once() {
    let dir = tempfile::tempdir().unwrap();
    let (services, tokens) = files(dir.path());
    let server = TestServer::start(&["--services", &services, "--token-file", &tokens]).await;

    // Without the token: refused.
    let refused = Ztunnel::open(&server, "not-a-token", node(), HashMap::new()).await;
    let refused = match refused {
        Ok(mut z) => z.next().await.map(|_| ()),
        Err(status) => Err(status),
    };
    assert_eq!(refused.unwrap_err().code(), tonic::Code::Unauthenticated);

    let mut ztunnel = Ztunnel::open(&server, ZTUNNEL_TOKEN, node(), HashMap::new())
        .await
        .unwrap();
    // Addresses at once: every workload and service.
    let first = ztunnel.next().await.unwrap();
    let all = addresses(&first);
    assert_eq!(
        all.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "Kubernetes/pilot.io/Registered/default/reviews-v1-1",
            "Kubernetes/pilot.io/Registered/default/reviews-v2-1",
            "Kubernetes/pilot.io/Registered/tools/curl-1",
            "default/reviews.default.svc.cluster.local",
        ]
    );
    assert!(first.removed_resources.is_empty());
    let v1 = workload(&all, "Kubernetes/pilot.io/Registered/default/reviews-v1-1");
    assert_eq!(v1.addresses, [vec![10, 0, 0, 3]]);
    assert_eq!(
        (v1.namespace.as_str(), v1.name.as_str()),
        ("default", "reviews-v1-1")
    );
    assert_eq!(v1.service_account, "reviews");
    assert_eq!(v1.trust_domain, "cluster.local");
    assert_eq!(v1.node, "node-1");
    assert_eq!(
        v1.tunnel_protocol,
        TunnelProtocol::Hbone as i32,
        "enrolled in ambient"
    );
    let ports = &v1.services["default/reviews.default.svc.cluster.local"].ports;
    assert_eq!((ports[0].service_port, ports[0].target_port), (9080, 8080));
    let v2 = workload(&all, "Kubernetes/pilot.io/Registered/default/reviews-v2-1");
    assert_eq!(v2.tunnel_protocol, TunnelProtocol::None as i32, "not enrolled");
    let curl = workload(&all, "Kubernetes/pilot.io/Registered/tools/curl-1");
    assert!(
        curl.services.is_empty(),
        "a workload that backs no service is served too"
    );
    match all["default/reviews.default.svc.cluster.local"].r#type.clone() {
        Some(address::Type::Service(s)) => {
            assert_eq!((s.name.as_str(), s.namespace.as_str()), ("reviews", "default"));
            assert_eq!(s.addresses[0].address, [10, 96, 0, 10]);
            assert_eq!(s.ports[0].service_port, 9080);
        }
        other => panic!("{other:?}"),
    }
    ztunnel.answer(&first, None).await;

    // Authorizations at once, even with no policy.
    ztunnel
        .send(DeltaDiscoveryRequest {
            type_url: AUTHORIZATION.into(),
            ..Default::default()
        })
        .await;
    let policies = ztunnel.next().await.unwrap();
    assert_eq!(policies.type_url, AUTHORIZATION);
    assert!(policies.resources.is_empty(), "{policies:?}");
    ztunnel.answer(&policies, None).await;

    // The console's service page says which ztunnel serves each workload,
    // and the proxy status names the ztunnel's node.
    let (code, page) = server.request(
        "GET",
        "/ui/services/reviews.default.svc.cluster.local",
        &[("authorization", &format!("Bearer {ADMIN}"))],
        None,
    );
    assert_eq!(code, 200);
    let page = String::from_utf8_lossy(&page);
    let table = page
        .split("<table class=\"workloads\">")
        .nth(1)
        .unwrap_or_else(|| panic!("a workloads table in {page}"));
    let row = |endpoint: &str| -> String {
        let at = table
            .find(endpoint)
            .unwrap_or_else(|| panic!("{endpoint} in {table}"));
        table[at..].split("</tr>").next().unwrap_or_default().to_string()
    };
    assert!(
        row("10.0.0.3:8080").contains("node-1"),
        "{}",
        row("10.0.0.3:8080")
    );
    assert!(
        row("10.0.0.3:8080").contains("ztunnel~10.0.0.100~ztunnel-x7k2p"),
        "{}",
        row("10.0.0.3:8080")
    );
    assert!(
        row("10.0.0.4:8080").contains("not in ambient mode"),
        "{}",
        row("10.0.0.4:8080")
    );
    assert_eq!(status(&server)["nodeName"], "node-1");

    // A policy of a namespace with a workload on node-1 is sent; one of a
    // namespace with none there is not.
    let policy = |namespace: &str| {
        json!({
            "apiVersion": "security.istio.io/v1", "kind": "AuthorizationPolicy",
            "metadata": {"name": "deny-curl", "namespace": namespace},
            "spec": {"action": "DENY", "rules": [{"from": [{"source": {"namespaces": ["tools"]}}],
                      "to": [{"operation": {"ports": ["9080"]}}]}]}
        })
    };
    for namespace in ["jobs", "default"] {
        let path = format!("/apis/security.istio.io/v1/namespaces/{namespace}/authorizationpolicies");
        let body = serde_json::to_vec(&policy(namespace)).unwrap();
        let (code, answer) = server.request(
            "POST",
            &path,
            &[
                ("authorization", &format!("Bearer {ADMIN}")),
                ("content-type", "application/json"),
            ],
            Some(&body),
        );
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    }
    // Pushes may come one per write: the one that sends the policy of
    // `default` holds it and nothing of `jobs`.
    let sent = loop {
        let response = ztunnel.next().await.unwrap();
        ztunnel.answer(&response, None).await;
        if response.type_url == AUTHORIZATION && !response.resources.is_empty() {
            break response;
        }
    };
    assert_eq!(
        sent.resources.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["default/deny-curl"]
    );
    let deny = Authorization::decode(sent.resources[0].resource.as_ref().unwrap().value.as_slice()).unwrap();
    assert_eq!(
        (deny.name.as_str(), deny.namespace.as_str()),
        ("deny-curl", "default")
    );

    // A pod scheduled: exactly one Address, that pod.
    std::fs::write(dir.path().join("services.yaml"), services_with_pod()).unwrap();
    let pushed = loop {
        let response = ztunnel.next().await.unwrap();
        if response.type_url == ADDRESS {
            break response;
        }
        ztunnel.answer(&response, None).await;
    };
    assert_eq!(
        pushed
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        ["Kubernetes/pilot.io/Registered/jobs/batch-1"]
    );
    assert!(pushed.removed_resources.is_empty());
    // NACKed: the proxy status says so.
    ztunnel.answer(&pushed, Some("cannot apply batch-1")).await;
    tokio::task::block_in_place(|| {
        pilot_test_support::eventually("the NACK in the proxy status", || {
            let record = status(&server);
            record["types"]["WDS"]["state"] == "NACKED"
                && record["types"]["WDS"]["nack"]["message"] == "cannot apply batch-1"
        })
    });
    let record = status(&server);
    assert_eq!(record["types"]["WADS"]["state"], "SYNCED", "{record}");
    assert_eq!(record["incremental"], true);

    // A reconnect naming what it holds: a stale version and a workload
    // since gone are answered; what it holds as it is, not.
    drop(ztunnel);
    let mut held = versions(&first);
    held.insert(
        "Kubernetes/pilot.io/Registered/default/reviews-v2-1".into(),
        "stale".into(),
    );
    held.insert("Kubernetes/pilot.io/Registered/default/gone-1".into(), "1".into());
    let mut again = Ztunnel::open(&server, ZTUNNEL_TOKEN, node(), held).await.unwrap();
    let resumed = again.next().await.unwrap();
    assert_eq!(
        resumed
            .resources
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>(),
        [
            "Kubernetes/pilot.io/Registered/default/reviews-v2-1",
            "Kubernetes/pilot.io/Registered/jobs/batch-1",
        ]
    );
    assert_eq!(
        resumed.removed_resources,
        ["Kubernetes/pilot.io/Registered/default/gone-1"]
    );
    again.answer(&resumed, None).await;

    // On demand, by address: the workload at it, the address as its alias.
    again
        .send(DeltaDiscoveryRequest {
            type_url: ADDRESS.into(),
            resource_names_subscribe: vec!["/10.0.0.10".into(), "/10.9.9.9".into()],
            ..Default::default()
        })
        .await;
    let demanded = again.next().await.unwrap();
    assert_eq!(demanded.resources.len(), 1, "{demanded:?}");
    assert_eq!(
        demanded.resources[0].name,
        "Kubernetes/pilot.io/Registered/jobs/batch-1"
    );
    assert_eq!(demanded.resources[0].aliases, ["/10.0.0.10"]);
    assert_eq!(
        demanded.removed_resources,
        ["/10.9.9.9"],
        "an address nothing has"
    );

    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ztunnel_without_its_node_or_over_state_of_the_world_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (services, tokens) = files(dir.path());
    let server = TestServer::start(&["--services", &services, "--token-file", &tokens]).await;
    let mut nameless = node();
    nameless.metadata.as_mut().unwrap().fields.remove("NODE_NAME");
    let mut stream = Ztunnel::open(&server, ZTUNNEL_TOKEN, nameless, HashMap::new())
        .await
        .unwrap();
    let status = stream.next().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(status.message().contains("NODE_NAME"), "{}", status.message());
    server.stop().await;
}
