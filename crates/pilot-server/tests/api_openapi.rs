//! `/openapi.json` as pilot-discovery serves it with tokens: the API's
//! routes and this server's (probes, `/metrics`, `/debug/`, proxy events)
//! in one document whose references all resolve, every operation but the
//! probes behind the bearer scheme, and the NACK types those ADS serves.

mod common;

use common::TestServer;
use serde_json::{Value, json};

async fn document_with_tokens() -> (TestServer, Value) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "admin-0123456789abcdef rw admin\n").unwrap();
    let server = TestServer::start(&["--token-file", tokens.to_str().unwrap()]).await;
    let (code, body) = server.request(
        "GET",
        "/openapi.json",
        &[("authorization", "Bearer admin-0123456789abcdef")],
        None,
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    (server, serde_json::from_slice(&body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_document_for_the_api_and_the_servers_routes_whose_references_resolve() {
    let (server, document) = document_with_tokens().await;
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/debug/proxy-status",
        "/v1/proxy-events",
        "/openapi.json",
        "/apis/config.istio.io/v1alpha2/namespaces/{namespace}/routerules/{name}",
    ] {
        assert!(document["paths"].get(path).is_some(), "{path} is not documented");
    }
    fn walk(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    found.push(reference.clone());
                }
                map.values().for_each(|v| walk(v, found));
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
            _ => {}
        }
    }
    let mut references = Vec::new();
    walk(&document, &mut references);
    assert!(!references.is_empty());
    for reference in references {
        let pointer = reference.trim_start_matches('#');
        assert!(
            document.pointer(pointer).is_some(),
            "{reference} does not resolve"
        );
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_every_operation_but_the_probes_needs_the_bearer() {
    let (server, document) = document_with_tokens().await;
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            let probe = path == "/healthz" || path == "/readyz";
            assert_eq!(operation.get("security").is_some(), !probe, "{method} {path}");
            assert_eq!(
                operation["responses"].get("401").is_some(),
                !probe,
                "{method} {path}"
            );
            let write = method != "get";
            assert_eq!(
                operation["responses"].get("403").is_some(),
                write,
                "{method} {path}"
            );
        }
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_names_a_type_the_ads_server_serves() {
    let (server, document) = document_with_tokens().await;
    let nack = &document["components"]["schemas"]["DistributionStatus"]["properties"]["nacks"]["items"];
    assert_eq!(nack["properties"]["type"]["enum"], json!(pilot_ads::TYPES));
    server.stop().await;
}
