//! The networking.istio.io kinds over REST: served at v1, v1beta1 and
//! v1alpha3 with one schema, stored once (at v1) and shown at the version
//! each request names; discovery lists every served version and the short
//! names; refusals carry field paths.

mod common;

use common::TestServer;
use serde_json::{Value, json};

fn virtual_service(name: &str, version: &str) -> Value {
    json!({
        "apiVersion": format!("networking.istio.io/{version}"),
        "kind": "VirtualService",
        "metadata": {"name": name},
        "spec": {
            "hosts": ["reviews"],
            "http": [{"route": [
                {"destination": {"host": "reviews", "subset": "v1"}, "weight": 75},
                {"destination": {"host": "reviews", "subset": "v2"}, "weight": 25},
            ]}],
        },
    })
}

fn path(version: &str) -> String {
    format!("/apis/networking.istio.io/{version}/namespaces/default/virtualservices")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_at_every_served_version() {
    let server = TestServer::start(&[]).await;

    let (code, created) = server.json(
        "POST",
        &path("v1alpha3"),
        Some(&virtual_service("reviews", "v1alpha3")),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "networking.istio.io/v1alpha3");

    for version in ["v1", "v1beta1", "v1alpha3"] {
        let (code, got) = server.json("GET", &format!("{}/reviews", path(version)), None);
        assert_eq!(code, 200, "{got}");
        assert_eq!(got["apiVersion"], format!("networking.istio.io/{version}"));
        assert_eq!(got["spec"]["http"][0]["route"][1]["weight"], 25);
        let (code, list) = server.json("GET", &path(version), None);
        assert_eq!(code, 200, "{list}");
        assert_eq!(list["apiVersion"], format!("networking.istio.io/{version}"));
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{list}");
        assert_eq!(items[0]["apiVersion"], format!("networking.istio.io/{version}"));
    }

    // A replace through another version is the same object.
    let (_, current) = server.json("GET", &format!("{}/reviews", path("v1")), None);
    let mut replaced = current.clone();
    replaced["apiVersion"] = json!("networking.istio.io/v1beta1");
    replaced["spec"]["hosts"] = json!(["reviews", "reviews.example.com"]);
    let (code, answer) = server.json("PUT", &format!("{}/reviews", path("v1beta1")), Some(&replaced));
    assert_eq!(code, 200, "{answer}");
    let (_, got) = server.json("GET", &format!("{}/reviews", path("v1alpha3")), None);
    assert_eq!(got["spec"]["hosts"], json!(["reviews", "reviews.example.com"]));

    // An unserved version is a 404 naming what is served.
    let (code, status) = server.json("GET", &path("v2"), None);
    assert_eq!(code, 404, "{status}");
    let message = status["message"].as_str().unwrap();
    assert!(
        message.contains("/apis/networking.istio.io/v1alpha3/virtualservices"),
        "{message}"
    );

    // Discovery: the group with three versions, v1 preferred; short names.
    let (code, group) = server.json("GET", "/apis/networking.istio.io", None);
    assert_eq!(code, 200, "{group}");
    let versions: Vec<&str> = group["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1", "v1alpha3"]);
    assert_eq!(group["preferredVersion"]["version"], "v1");
    let (code, resources) = server.json("GET", "/apis/networking.istio.io/v1alpha3", None);
    assert_eq!(code, 200, "{resources}");
    let mut short: Vec<(String, String)> = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        // Istio's Sidecar has no short name.
        .filter(|r| r["name"] != "sidecars")
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_string(),
                r["shortNames"][0].as_str().unwrap().to_string(),
            )
        })
        .collect();
    short.sort();
    assert_eq!(
        short,
        [
            ("destinationrules", "dr"),
            ("gateways", "gw"),
            ("serviceentries", "se"),
            ("virtualservices", "vs"),
            ("workloadentries", "we"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );

    // OpenAPI v3: one document per group-version.
    let (code, index) = server.json("GET", "/openapi/v3", None);
    assert_eq!(code, 200, "{index}");
    for version in ["v1", "v1beta1", "v1alpha3"] {
        let key = format!("apis/networking.istio.io/{version}");
        assert!(index["paths"].get(&key).is_some(), "{key} not in {index}");
        let (code, document) = server.json("GET", &format!("/openapi/v3/{key}"), None);
        assert_eq!(code, 200, "{document}");
        let name = format!("io.istio.networking.{version}.VirtualService");
        assert!(document["components"]["schemas"].get(&name).is_some(), "{name}");
    }

    // Refusals name the field path.
    let mut bad = virtual_service("bad", "v1");
    bad["spec"]["http"][0]["route"][0]["weight"] = json!(-70);
    let (code, status) = server.json("POST", &path("v1"), Some(&bad));
    assert_eq!(code, 422, "{status}");
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(
        fields.iter().any(|f| f.starts_with("spec.http[0].route")),
        "{status}"
    );
    let (code, _) = server.json("GET", &format!("{}/bad", path("v1")), None);
    assert_eq!(code, 404);

    server.stop().await;
}
