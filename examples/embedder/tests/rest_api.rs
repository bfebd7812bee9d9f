//! The REST API over the file store: an object created through it is a
//! file of the store, read back through it, listed, and refused when
//! invalid, as on pilot-discovery.

use std::sync::Arc;

use http_body_util::BodyExt;
use pilot_api::istio;
use pilot_apiserver::axum::Router;
use pilot_apiserver::axum::body::Body;
use pilot_apiserver::axum::http::{Request, StatusCode};
use pilot_embedder_example::{FileConfigStore, rest_api};
use pilot_model::ConfigWatch;
use pilot_store::Controller;
use serde_json::{Value, json};
use tower::ServiceExt;

const RULES: &str = "/apis/config.istio.io/v1alpha2/namespaces/default/routerules";

/// The answer's status and JSON body.
async fn call(api: &Router, method: &str, path: &str, body: Option<&Value>) -> (StatusCode, Value) {
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = api.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn objects_written_through_the_rest_api_are_files_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FileConfigStore::open(dir.path(), istio::registry()).unwrap());
    let controller = Arc::new(Controller::new(Arc::clone(&store) as Arc<dyn ConfigWatch>));
    controller.run();
    controller.wait_synced().await;
    let api = rest_api(store, controller);

    let rule = json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": "reviews-v2"},
        "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v2"}}]},
    });
    let (status, created) = call(&api, "POST", RULES, Some(&rule)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let version = created["metadata"]["resourceVersion"].clone();

    // The store of one's own holds it, as one file.
    let file = dir.path().join("RouteRule/default/reviews-v2.json");
    let stored: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(stored["spec"]["destination"]["name"], "reviews");
    assert_eq!(stored["metadata"]["resourceVersion"], version);

    let (status, got) = call(&api, "GET", &format!("{RULES}/reviews-v2"), None).await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_eq!(got["metadata"]["resourceVersion"], version);
    assert_eq!(got["spec"]["route"][0]["labels"]["version"], "v2");

    let (status, list) = call(&api, "GET", RULES, None).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["kind"], "RouteRuleList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");

    // Validated before the store sees it: nothing written.
    let invalid = json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": "Bad_Name"},
        "spec": {"destination": {"name": "reviews"}},
    });
    let (status, refused) = call(&api, "POST", RULES, Some(&invalid)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["reason"], "Invalid");
    assert!(!dir.path().join("RouteRule/default/Bad_Name.json").exists());
}
