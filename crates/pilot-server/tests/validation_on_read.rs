//! Validation on read against a real etcd: a RouteRule put straight into
//! etcd (as `etcdctl put` would) whose only route weighs 30 is not listed,
//! not served, not watched and never pushed to a proxy; it is listed by
//! `/debug/quarantine` with its error and counted in `/metrics`. Fixed by
//! another direct put, it appears everywhere; deleted, it is forgotten.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{TestServer, next_event, rule, rules};
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::EtcdServer;
use serde_json::{Value, json};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const NODE: &str = "sidecar~10.0.0.1~productpage-v1.default~default.svc.cluster.local";
const KEY: &str = "/pilot/config/config.istio.io/RouteRule/default/reviews-v9";

fn services_file() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/server/services.yaml")
        .display()
        .to_string()
}

/// The stored form of a rule sending `weight` percent of reviews to v9.
fn body(weight: u32) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": "reviews-v9", "namespace": "default"},
        "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v9"}, "weight": weight}]},
    }))
    .unwrap()
}

fn listed(server: &TestServer) -> Vec<String> {
    let (code, list) = server.json("GET", &rules("default"), None);
    assert_eq!(code, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn quarantine(server: &TestServer) -> Vec<Value> {
    let (code, body) = server.json("GET", "/debug/quarantine", None);
    assert_eq!(code, 200, "{body}");
    body["items"].as_array().unwrap().clone()
}

/// A sample of `/metrics`, by its full name and labels.
fn metric(server: &TestServer, sample: &str) -> u64 {
    let (code, body) = server.request("GET", "/metrics", &[], None);
    assert_eq!(code, 200);
    let text = String::from_utf8(body).unwrap();
    let prefix = format!("{sample} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {sample} in /metrics:\n{text}"))
        .parse()
        .unwrap()
}

async fn until(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..300 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{what} never happened");
}

/// A proxy's ADS stream for clusters: every response's cluster names,
/// each response ACKed.
struct Proxy {
    requests: futures::channel::mpsc::UnboundedSender<DiscoveryRequest>,
    responses: tonic::Streaming<DiscoveryResponse>,
}

impl Proxy {
    async fn connect(address: std::net::SocketAddr) -> Self {
        let (requests, outgoing) = futures::channel::mpsc::unbounded();
        requests
            .unbounded_send(DiscoveryRequest {
                node: Some(Node {
                    id: NODE.into(),
                    ..Default::default()
                }),
                type_url: CDS.into(),
                ..Default::default()
            })
            .unwrap();
        let responses = AggregatedDiscoveryServiceClient::connect(format!("http://{address}"))
            .await
            .unwrap()
            .stream_aggregated_resources(outgoing)
            .await
            .unwrap()
            .into_inner();
        Proxy { requests, responses }
    }

    /// The next response's clusters (each cluster's encoded bytes hold its
    /// name), ACKed.
    async fn next_clusters(&mut self) -> Vec<String> {
        let response = tokio::time::timeout(Duration::from_secs(30), self.responses.message())
            .await
            .expect("a push in time")
            .unwrap()
            .expect("the stream stays open");
        self.requests
            .unbounded_send(DiscoveryRequest {
                version_info: response.version_info.clone(),
                response_nonce: response.nonce.clone(),
                type_url: CDS.into(),
                ..Default::default()
            })
            .unwrap();
        response
            .resources
            .iter()
            .map(|r| String::from_utf8_lossy(&r.value).to_string())
            .collect()
    }

    /// Responses until one has a cluster containing `marker`; panics if a
    /// cluster containing `never` comes first or with it.
    async fn until_cluster(&mut self, marker: &str, never: Option<&str>) {
        loop {
            let clusters = self.next_clusters().await;
            if let Some(never) = never {
                assert!(
                    clusters.iter().all(|c| !c.contains(never)),
                    "a proxy was sent a cluster for {never}"
                );
            }
            if clusters.iter().any(|c| c.contains(marker)) {
                return;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rule_put_straight_into_etcd_that_fails_validation_is_quarantined_until_fixed() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&[
        "--store",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint(),
        "--services",
        &services_file(),
    ])
    .await;
    let mut raw =
        EtcdConfigStore::connect(&EtcdOptions::new([etcd.endpoint()]), pilot_api::istio::registry())
            .await
            .unwrap()
            .client();
    let mut proxy = Proxy::connect(server.xds).await;
    let first = proxy.next_clusters().await;
    assert!(first.iter().all(|c| !c.contains("version=v9")));
    let mut watch = server.watch(&format!("{}?watch=true", rules("default")));

    // etcdctl put of a rule that fails validation.
    let put = raw.put(KEY, body(30), None).await.unwrap();
    let revision = put.header().unwrap().revision().to_string();
    until("the rule is quarantined", || !quarantine(&server).is_empty()).await;
    let items = quarantine(&server);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0]["kind"], "RouteRule");
    assert_eq!(items[0]["namespace"], "default");
    assert_eq!(items[0]["name"], "reviews-v9");
    assert_eq!(items[0]["resourceVersion"], revision.as_str());
    assert_eq!(
        items[0]["errors"],
        json!([{"field": "spec.route[0].weight", "message": "weights must sum to 100, got 30"}])
    );
    assert_eq!(metric(&server, "pilot_config_quarantined{kind=\"RouteRule\"}"), 1);
    assert_eq!(
        metric(&server, "pilot_config_rejected_total{kind=\"RouteRule\"}"),
        1
    );
    // REST neither lists nor gets it.
    assert!(listed(&server).is_empty());
    let (code, _) = server.json("GET", &format!("{}/reviews-v9", rules("default")), None);
    assert_eq!(code, 404);

    // A valid rule written after it reaches the proxy; the invalid one
    // never did (events are applied in order, so it would have by now).
    let (code, created) = server.json("POST", &rules("default"), Some(&rule("reviews-v7", "v7")));
    assert_eq!(code, 201, "{created}");
    proxy.until_cluster("version=v7", Some("version=v9")).await;
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("reviews-v7")),
        "the watch shows nothing of the invalid rule: {event}"
    );

    // Fixed with another direct put: listed, watched, pushed, released.
    raw.put(KEY, body(100), None).await.unwrap();
    until("the fixed rule is listed", || {
        listed(&server).contains(&"reviews-v9".to_string())
    })
    .await;
    assert!(quarantine(&server).is_empty());
    assert_eq!(metric(&server, "pilot_config_quarantined{kind=\"RouteRule\"}"), 0);
    assert_eq!(
        metric(&server, "pilot_config_rejected_total{kind=\"RouteRule\"}"),
        1
    );
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "ADDED", "{event}");
    assert_eq!(event["object"]["spec"]["route"][0]["weight"], 100, "{event}");
    proxy.until_cluster("version=v9", None).await;

    // Broken again and then deleted in etcd: forgotten.
    raw.put(KEY, body(30), None).await.unwrap();
    until("the rule is quarantined again", || quarantine(&server).len() == 1).await;
    assert!(!listed(&server).contains(&"reviews-v9".to_string()));
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("reviews-v9")),
        "a watched rule that turns invalid is deleted for the watcher: {event}"
    );
    raw.delete(KEY, None).await.unwrap();
    until("the deleted rule leaves quarantine", || {
        quarantine(&server).is_empty()
    })
    .await;
    assert_eq!(
        metric(&server, "pilot_config_rejected_total{kind=\"RouteRule\"}"),
        2
    );
    server.stop().await;
}

/// An object larger than the API's body limit (`--max-body-bytes`, 1 MiB
/// by default), put straight into etcd, is quarantined as an invalid one
/// is: not served, listed by `/debug/quarantine` with its size; brought
/// back under the limit, it is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_object_over_the_body_limit_put_straight_into_etcd_is_quarantined() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &etcd.endpoint()]).await;
    let mut raw =
        EtcdConfigStore::connect(&EtcdOptions::new([etcd.endpoint()]), pilot_api::istio::registry())
            .await
            .unwrap()
            .client();
    let with_note = |note: usize| {
        serde_json::to_vec(&json!({
            "apiVersion": "config.istio.io/v1alpha2",
            "kind": "RouteRule",
            "metadata": {"name": "reviews-v9", "namespace": "default", "annotations": {"note": "x".repeat(note)}},
            "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v9"}}]},
        }))
        .unwrap()
    };
    // The API refuses it.
    let (code, refused) = server.request(
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        Some(&with_note(1100 * 1024)),
    );
    assert_eq!(code, 413, "{}", String::from_utf8_lossy(&refused));
    // Put around it, it is quarantined.
    raw.put(KEY, with_note(1100 * 1024), None).await.unwrap();
    until("the large rule is quarantined", || {
        !quarantine(&server).is_empty()
    })
    .await;
    let items = quarantine(&server);
    assert_eq!(items[0]["name"], "reviews-v9", "{items:?}");
    let message = items[0]["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("more than the 1048576 bytes the API accepts"),
        "{message}"
    );
    assert!(listed(&server).is_empty());
    let (code, _) = server.json("GET", &format!("{}/reviews-v9", rules("default")), None);
    assert_eq!(code, 404);
    // Under the limit, it is served.
    raw.put(KEY, with_note(1024), None).await.unwrap();
    until("the rule leaves quarantine", || quarantine(&server).is_empty()).await;
    until("the rule is served", || {
        server
            .json("GET", &format!("{}/reviews-v9", rules("default")), None)
            .0
            == 200
    })
    .await;
    assert_eq!(listed(&server), ["reviews-v9"]);
    server.stop().await;
}
