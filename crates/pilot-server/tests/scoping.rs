//! Scoping as pilot-discovery serves it: an object's distribution status
//! over REST counts only the proxies whose scope holds it (a Sidecar in
//! namespace `a` importing `./*`, a proxy in `a` and one in `b` with no
//! Sidecar, both ACKing over real ADS streams); and a bad
//! `--default-export-to` stops the start with an error naming the flag.

mod common;

use std::time::Duration;

use common::TestServer;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use pilot_test_support::ads::{self, CDS, LDS, SotwStream};
use serde_json::{Value, json};

const SERVICES: &str = r#"
services:
- hostname: a1.a.svc.cluster.local
  ports: [{name: http, port: 80, protocol: HTTP}]
  instances: [{address: 10.0.0.1, port: 8080, labels: {app: a1}}]
- hostname: b1.b.svc.cluster.local
  ports: [{name: http, port: 80, protocol: HTTP}]
  instances: [{address: 10.0.1.1, port: 8080, labels: {app: b1}}]
"#;

/// A state-of-the-world client of `namespace` subscribed to clusters and
/// listeners, ACKing every response, until the test ends.
async fn acking_proxy(xds_port: u16, namespace: &str, ip: &str) {
    let node = format!("sidecar~{ip}~client.{namespace}~{namespace}.svc.cluster.local");
    let mut stream = SotwStream::open(xds_port, &ads::request(Some(&node), CDS, "", "")).await;
    stream.send(&ads::request(None, LDS, "", "")).await.unwrap();
    tokio::spawn(async move {
        while let Ok(Some(response)) = stream.message().await {
            let ack = DiscoveryRequest {
                type_url: response.type_url.clone(),
                version_info: response.version_info.clone(),
                response_nonce: response.nonce.clone(),
                ..Default::default()
            };
            if stream.send(&ack).await.is_err() {
                return;
            }
        }
    });
}

fn create(server: &TestServer, plural: &str, namespace: &str, object: Value) {
    let path = format!("/apis/networking.istio.io/v1/namespaces/{namespace}/{plural}");
    let (code, answer) = server.json("POST", &path, Some(&object));
    assert_eq!(code, 201, "{answer}");
}

/// Waits until the object's status at its current version counts
/// `proxies` proxies, all of them ACKed.
async fn counts(server: &TestServer, plural: &str, namespace: &str, name: &str, proxies: u64) {
    let path = format!("/apis/networking.istio.io/v1/namespaces/{namespace}/{plural}/{name}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, object) = server.json("GET", &path, None);
        let status = &object["status"];
        if status["observedVersion"] == object["metadata"]["resourceVersion"]
            && status["proxies"] == proxies
            && status["acked"] == proxies
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name}: expected {proxies}/{proxies}, got {object}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_only_the_proxies_whose_scope_holds_the_object() {
    let dir = tempfile::tempdir().unwrap();
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    let server = TestServer::start(&[
        "--services",
        services.to_str().unwrap(),
        "--status-interval",
        "100ms",
    ])
    .await;
    create(
        &server,
        "sidecars",
        "a",
        json!({
            "apiVersion": "networking.istio.io/v1", "kind": "Sidecar",
            "metadata": {"name": "default", "namespace": "a"},
            "spec": {"egress": [{"hosts": ["./*"]}]},
        }),
    );
    acking_proxy(server.xds.port(), "a", "10.1.0.1").await;
    acking_proxy(server.xds.port(), "b", "10.1.0.2").await;
    let rule = |host: &str, namespace: &str| {
        json!({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "rule", "namespace": namespace},
            "spec": {"host": host, "subsets": [{"name": "v1", "labels": {"version": "v1"}}]},
        })
    };
    create(
        &server,
        "destinationrules",
        "b",
        rule("b1.b.svc.cluster.local", "b"),
    );
    create(
        &server,
        "destinationrules",
        "a",
        rule("a1.a.svc.cluster.local", "a"),
    );

    // b1 is out of a's scope: only b's proxy should have its rule.
    counts(&server, "destinationrules", "b", "rule", 1).await;
    // a1 is in both scopes (b has no Sidecar: the whole mesh).
    counts(&server, "destinationrules", "a", "rule", 2).await;
    // The Sidecar concerns the proxies it applies to: a's.
    counts(&server, "sidecars", "a", "default", 1).await;
    // A rule exported only to its own namespace concerns no other.
    create(
        &server,
        "destinationrules",
        "a",
        json!({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": "private", "namespace": "a"},
            "spec": {"host": "a1.a.svc.cluster.local", "exportTo": ["."]},
        }),
    );
    counts(&server, "destinationrules", "a", "private", 1).await;
    server.stop().await;
}

#[tokio::test]
async fn a_bad_default_export_to_is_refused_naming_the_flag() {
    for (value, entry) in [("*,Not_A_Namespace", "[1]"), ("a,a", "[1]"), ("", "[0]")] {
        let argv = [
            "pilot-discovery",
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
            "--default-export-to",
            value,
        ];
        let args =
            pilot_server::Args::parse_with_config(argv.map(String::from).to_vec()).expect("flags parse");
        let error = pilot_server::run(args, std::future::pending(), |_| {
            panic!("a server with --default-export-to {value:?} must not start")
        })
        .await
        .unwrap_err();
        let message = error.to_string();
        assert_eq!(error.exit_code(), 2, "{message}");
        assert!(
            message.contains(&format!("--default-export-to{entry}")),
            "{value:?}: {message}"
        );
    }
}
