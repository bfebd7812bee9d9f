//! Two control-plane revisions side by side on one (fake) Kubernetes API
//! server, as a canary upgrade runs them: pilot-discovery without
//! `--revision` (the default revision) and with `--revision canary`, both
//! on the same custom resources. Each injection webhook injects only the
//! pods of its own revision (`istio.io/rev`) and points their sidecars at
//! its own Service; each ADS port serves the configuration of its own
//! revision (an object labelled `istio.io/rev: canary` is the canary's,
//! one without the label everyone's). Through the (fake) API server too:
//! with both revisions' MutatingWebhookConfigurations as `deploy/` renders
//! them, a pod created in a namespace labelled `pilot-injection: enabled`
//! is injected by the default revision, one in a namespace labelled
//! `istio.io/rev: canary` by the canary, one in neither is left alone.

use std::process::Command;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use pilot_test_support::ads::{self, CDS, SotwStream};
use pilot_test_support::{Discovery, FakeCluster, TestCerts, free_port};
use prost::Message;
use serde_json::{Value, json};

const SERVICES: &str = r#"
services:
- hostname: reviews.default.svc.cluster.local
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances: [{address: 10.0.0.1, port: 9080, labels: {app: reviews, version: v1}}]
- hostname: ratings.default.svc.cluster.local
  ports: [{name: http, port: 9080, protocol: HTTP}]
  instances: [{address: 10.0.0.2, port: 9080, labels: {app: ratings, version: v1}}]
"#;

/// One revision's pilot-discovery, its webhook's URL.
struct Revision {
    server: Discovery,
    inject: String,
}

fn start(cluster: &FakeCluster, certs: &TestCerts, services: &str, revision: Option<&str>) -> Revision {
    let inject = format!("127.0.0.1:{}", free_port());
    let mut args = vec![
        "--store",
        "kubernetes",
        "--install-crds",
        "--services",
        services,
        "--inject-webhook",
        &inject,
        "--tls-cert",
        certs.server_cert.to_str().unwrap(),
        "--tls-key",
        certs.server_key.to_str().unwrap(),
        "--replica-name",
        revision.unwrap_or("stable"),
    ];
    if let Some(revision) = revision {
        args.extend(["--revision", revision]);
    }
    let server = Discovery::start_with_env(&args, &cluster.env());
    Revision {
        server,
        inject: format!("https://{inject}/inject"),
    }
}

/// The webhook's answer to a pod CREATE review, over HTTPS (curl, the CA
/// of the test certificates), once the webhook listens.
fn review(url: &str, ca: &std::path::Path, pod: &Value) -> Value {
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "0b6e",
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "default",
            "operation": "CREATE",
            "object": pod,
        },
    })
    .to_string();
    let mut answer = None;
    pilot_test_support::eventually("the injection webhook to answer", || {
        let out = Command::new("curl")
            .args(["-sS", "--fail-with-body", "--cacert"])
            .arg(ca)
            .args([
                "-H",
                "content-type: application/json",
                "--data-binary",
                &body,
                url,
            ])
            .output()
            .expect("curl runs (scripts/install-deps installs it)");
        if out.status.success() {
            answer = Some(serde_json::from_slice(&out.stdout).expect("a JSON review"));
        }
        out.status.success()
    });
    answer.unwrap()
}

fn pod(revision: Option<&str>) -> Value {
    let mut labels = json!({"app": "reviews"});
    if let Some(revision) = revision {
        labels["istio.io/rev"] = json!(revision);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "reviews-v1-7d9f", "namespace": "default", "labels": labels},
        "spec": {"containers": [{"name": "reviews", "image": "reviews:1", "ports": [{"containerPort": 9080}]}]},
    })
}

/// The discovery address the webhook's patch gives the sidecar, or `None`
/// when it leaves the pod alone.
fn injected_address(answer: &Value) -> Option<String> {
    let response = &answer["response"];
    assert_eq!(response["allowed"], true, "{answer}");
    let patch = response["patch"].as_str()?;
    let out = Command::new("base64")
        .arg("-d")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(patch.as_bytes())?;
            child.wait_with_output()
        })
        .expect("base64 runs");
    let patch: Value = serde_json::from_slice(&out.stdout).expect("a JSONPatch");
    let sidecar = patch
        .as_array()
        .unwrap()
        .iter()
        .find(|op| op["value"]["name"] == "pilot-proxy")
        .expect("the patch adds the sidecar");
    let args: Vec<String> = serde_json::from_value(sidecar["value"]["args"].clone()).unwrap();
    let at = args.iter().position(|a| a == "--discovery-address").unwrap();
    Some(args[at + 1].clone())
}

/// The clusters a new proxy of namespace `default` is sent by the ADS
/// server on `port`.
async fn cluster_names(port: u16) -> Vec<String> {
    let node = ads::sidecar_id("client", "default", "10.0.9.1");
    let mut stream = SotwStream::open(port, &ads::request(Some(&node), CDS, "", "")).await;
    let response = stream.next().await;
    let mut names: Vec<String> = response
        .resources
        .iter()
        .map(|any| Cluster::decode(any.value.as_slice()).expect("a cluster").name)
        .collect();
    names.sort();
    names
}

#[test]
fn two_revisions_inject_and_serve_only_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl (scripts/install-deps installs it)");
    let services = dir.path().join("services.yaml");
    std::fs::write(&services, SERVICES).unwrap();
    let cluster = FakeCluster::start();
    let stable = start(&cluster, &certs, services.to_str().unwrap(), None);
    let canary = start(&cluster, &certs, services.to_str().unwrap(), Some("canary"));

    // Injection: a pod labelled for the canary is the canary's, pointed at
    // the canary's Service; one labelled `default` is the default
    // revision's; an unlabelled one is whoever's webhook its namespace
    // selects (both would inject it, each pointing at itself).
    let ca = &certs.ca;
    assert_eq!(
        injected_address(&review(&stable.inject, ca, &pod(Some("canary")))),
        None
    );
    assert_eq!(
        injected_address(&review(&canary.inject, ca, &pod(Some("canary")))).as_deref(),
        Some("pilot-discovery-canary.pilot-system:15010")
    );
    assert_eq!(
        injected_address(&review(&canary.inject, ca, &pod(Some("default")))),
        None
    );
    assert_eq!(
        injected_address(&review(&stable.inject, ca, &pod(Some("default")))).as_deref(),
        Some("pilot-discovery.pilot-system:15010")
    );
    assert_eq!(
        injected_address(&review(&canary.inject, ca, &pod(None))).as_deref(),
        Some("pilot-discovery-canary.pilot-system:15010")
    );

    // Through the API server: the two injectors' MutatingWebhookConfigurations
    // as deploy/ renders them (the fake cannot reach a Service: each points
    // at its pilot-discovery's address instead), namespaces labelled for
    // each revision, pods created in them.
    for (dir, url) in [
        ("deploy/base", &stable.inject),
        ("deploy/overlays/revision", &canary.inject),
    ] {
        create_injector(&cluster, dir, url, &certs.ca);
    }
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    for (name, labels) in [
        ("reviews-stable", json!({"pilot-injection": "enabled"})),
        ("reviews-canary", json!({"istio.io/rev": "canary"})),
        ("reviews-none", json!({})),
    ] {
        let namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
        cluster
            .block_on(namespaces.create(&PostParams::default(), &namespace))
            .unwrap();
    }
    for (namespace, address) in [
        ("reviews-stable", Some("pilot-discovery.pilot-system:15010")),
        (
            "reviews-canary",
            Some("pilot-discovery-canary.pilot-system:15010"),
        ),
        ("reviews-none", None),
    ] {
        let pods: Api<Pod> = Api::namespaced(cluster.client(), namespace);
        let mut object = pod(None);
        object["metadata"]["namespace"] = json!(namespace);
        let created = cluster
            .block_on(pods.create(&PostParams::default(), &serde_json::from_value(object).unwrap()))
            .unwrap_or_else(|e| panic!("a pod in {namespace}: {e}"));
        let sidecar = created
            .spec
            .unwrap()
            .containers
            .into_iter()
            .find(|c| c.name == "pilot-proxy");
        let dialled = sidecar.map(|c| {
            let args = c.args.unwrap_or_default();
            let at = args.iter().position(|a| a == "--discovery-address").unwrap();
            args[at + 1].clone()
        });
        assert_eq!(dialled.as_deref(), address, "the pod created in {namespace}");
    }

    // Serving: a DestinationRule labelled for the canary, then one for
    // everyone, written in the cluster as kubectl would.
    let rules: Api<DynamicObject> = Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "networking.istio.io",
            "v1",
            "DestinationRule",
        )),
    );
    let rule = |name: &str, host: &str, labels: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "networking.istio.io/v1", "kind": "DestinationRule",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"host": host, "subsets": [{"name": "v1", "labels": {"version": "v1"}}]},
        }))
        .unwrap()
    };
    let canary_rule = rule(
        "reviews",
        "reviews.default.svc.cluster.local",
        json!({"istio.io/rev": "canary"}),
    );
    let everyone = rule("ratings", "ratings.default.svc.cluster.local", json!({}));
    for object in [canary_rule, everyone] {
        cluster
            .block_on(rules.create(&PostParams::default(), &object))
            .expect("the fake stores the rule");
    }
    let reviews_v1 = "outbound|9080|version=v1|reviews.default.svc.cluster.local".to_string();
    let ratings_v1 = "outbound|9080|version=v1|ratings.default.svc.cluster.local".to_string();
    // Each revision has seen both rules once it serves the later one.
    let canary_clusters = wait_for(&cluster, canary.server.xds_port, &ratings_v1);
    assert!(canary_clusters.contains(&reviews_v1), "{canary_clusters:?}");
    let stable_clusters = wait_for(&cluster, stable.server.xds_port, &ratings_v1);
    assert!(
        !stable_clusters.contains(&reviews_v1),
        "the default revision serves the canary's rule: {stable_clusters:?}"
    );
    canary.server.terminate();
    stable.server.terminate();
}

/// Creates the MutatingWebhookConfiguration that `kubectl kustomize DIR`
/// renders, calling `url` (verified with `ca`) instead of the Service.
fn create_injector(cluster: &FakeCluster, dir: &str, url: &str, ca: &std::path::Path) {
    let kubectl = pilot_test_support::workspace().join(".tools/kubectl/bin/kubectl");
    let out = Command::new(&kubectl)
        .arg("kustomize")
        .arg(pilot_test_support::workspace().join(dir))
        .output()
        .expect("kubectl kustomize runs (scripts/install-deps installs kubectl)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let docs = pilot_model::document::parse_values(dir, &String::from_utf8(out.stdout).unwrap()).unwrap();
    let mut injector = docs
        .into_iter()
        .find(|d| d["kind"] == "MutatingWebhookConfiguration")
        .expect("a MutatingWebhookConfiguration");
    let bundle = std::fs::read(ca).unwrap();
    for webhook in injector["webhooks"].as_array_mut().unwrap() {
        webhook["clientConfig"] = json!({"url": url, "caBundle": pilot_inject::admission::base64(&bundle)});
    }
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
        ),
        "mutatingwebhookconfigurations",
    );
    let api: Api<DynamicObject> = Api::all_with(cluster.client(), &resource);
    cluster
        .block_on(api.create(&PostParams::default(), &serde_json::from_value(injector).unwrap()))
        .expect("the fake stores the webhook configuration");
}

/// The clusters of `port` once they include `name`.
fn wait_for(cluster: &FakeCluster, port: u16, name: &str) -> Vec<String> {
    let mut names = Vec::new();
    pilot_test_support::eventually(&format!("{name} to be served on port {port}"), || {
        names = cluster.block_on(cluster_names(port));
        names.iter().any(|n| n == name)
    });
    names
}
