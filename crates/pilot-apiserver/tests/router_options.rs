//! What an embedder configures on `ApiServer`, through the router over the
//! in-memory store: writes and reads of one object through a cache, lists
//! from the store, validation on read, the body
//! limit and its setting's name, bodies that time out, watches that end on
//! shutdown and are observed, bearer authentication and documented routes
//! in `/openapi.json`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use pilot_apiserver::axum::Router;
use pilot_apiserver::axum::body::Body;
use pilot_apiserver::axum::http::{Request, StatusCode};
use pilot_apiserver::serde_json::{Value, json};
use pilot_apiserver::{ApiOptions, ApiServer, WatchObserver};
use pilot_model::{ConfigKey, ConfigStore};
use pilot_store::Controller;
use pilot_store_memory::MemoryConfigStore;
use tower::ServiceExt;

const RULES: &str = "/apis/config.istio.io/v1alpha2/namespaces/default/routerules";

fn store() -> Arc<MemoryConfigStore> {
    Arc::new(MemoryConfigStore::new(pilot_api::istio::registry()))
}

fn rule(name: &str) -> Value {
    json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": name},
        "spec": {"destination": {"name": "reviews"}, "route": [{"labels": {"version": "v1"}}]},
    })
}

/// The answer's status and body (as JSON when it is).
async fn call(router: &Router, method: &str, path: &str, body: Body) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn json_body(value: &Value) -> Body {
    Body::from(value.to_string())
}

#[tokio::test]
async fn a_write_through_the_cache_is_in_the_cache_when_it_answers() {
    let store = store();
    let controller = Arc::new(Controller::new(store.clone()));
    controller.run();
    controller.wait_synced().await;
    let router = ApiServer::new(store)
        .cache(Arc::clone(&controller) as Arc<dyn ConfigStore>)
        .into_router();
    let (status, created) = call(&router, "POST", RULES, json_body(&rule("a"))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let key = ConfigKey::new("RouteRule", "default", "a");
    let cached = controller.list_cached("RouteRule", None).unwrap();
    assert!(
        cached.iter().any(|c| c.key() == key),
        "the Controller's cache lacks the object the API answered"
    );
}

#[tokio::test]
async fn writes_and_reads_of_one_object_go_through_the_cache_lists_read_the_store() {
    // A "cache" that is another store makes each path visible.
    let (store, cache) = (store(), store());
    let router = ApiServer::new(store.clone())
        .cache(cache.clone() as Arc<dyn ConfigStore>)
        .into_router();
    let (status, created) = call(&router, "POST", RULES, json_body(&rule("a"))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let key = ConfigKey::new("RouteRule", "default", "a");
    assert!(
        cache.get(&key).await.unwrap().is_some(),
        "the write went to the cache"
    );
    assert!(
        store.get(&key).await.unwrap().is_none(),
        "the write went around the cache"
    );
    let (status, _) = call(&router, "GET", &format!("{RULES}/a"), Body::empty()).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a read of one object goes through the cache"
    );
    let (status, list) = call(&router, "GET", RULES, Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"], json!([]), "a list reads the store itself");
}

#[tokio::test]
async fn lists_show_only_what_the_check_admits() {
    let store = store();
    let router = ApiServer::new(store)
        .admits(|config| config.meta.name != "hidden")
        .into_router();
    for name in ["shown", "hidden"] {
        let (status, _) = call(&router, "POST", RULES, json_body(&rule(name))).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, list) = call(&router, "GET", RULES, Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shown"]);
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_naming_its_setting() {
    let mut options = ApiOptions::default();
    options.max_body_bytes = 64;
    options.max_body_bytes_setting = Some("--max-body-bytes".into());
    let router = ApiServer::new(store()).options(options).into_router();
    let (status, answer) = call(&router, "POST", RULES, json_body(&rule("large"))).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{answer}");
    assert_eq!(answer["reason"], "RequestEntityTooLarge");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains("limit of 64 bytes (--max-body-bytes)"),
        "{message}"
    );
}

#[tokio::test]
async fn a_body_that_times_out_is_answered_408_with_its_message() {
    let router = ApiServer::new(store()).into_router();
    let late = futures::stream::iter([Err::<bytes::Bytes, _>(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the body did not arrive within 300ms",
    ))]);
    let (status, answer) = call(&router, "POST", RULES, Body::from_stream(late)).await;
    assert_eq!(status, StatusCode::REQUEST_TIMEOUT, "{answer}");
    assert_eq!(answer["reason"], "Timeout");
    let message = answer["message"].as_str().unwrap();
    assert!(message.contains("within 300ms"), "{message}");
}

/// Counts watches opened and closed.
#[derive(Default)]
struct Watches {
    opened: AtomicUsize,
    closed: AtomicUsize,
}

impl WatchObserver for Watches {
    fn opened(&self) {
        self.opened.fetch_add(1, Ordering::SeqCst);
    }

    fn closed(&self) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_watch_ends_on_shutdown_and_is_observed_open_then_closed() {
    let watches = Arc::new(Watches::default());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = ApiServer::new(store())
        .watch_observer(Arc::clone(&watches) as Arc<dyn WatchObserver>)
        .shutdown(async {
            let _ = stopped.await;
        })
        .into_router();
    let request = Request::get(format!("{RULES}?watch=true"))
        .body(Body::empty())
        .unwrap();
    let response = router.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(watches.opened.load(Ordering::SeqCst), 1);
    assert_eq!(watches.closed.load(Ordering::SeqCst), 0);
    let _ = stop.send(());
    // The stream ends (a hang here is a failure, not a measurement).
    let body = tokio::time::timeout(Duration::from_secs(30), response.into_body().collect())
        .await
        .expect("the watch ended on shutdown")
        .unwrap();
    assert!(body.to_bytes().is_empty(), "no object, no event");
    assert_eq!(watches.closed.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_document_declares_bearer_auth_and_the_routes_served_beside_the_api() {
    let mut options = ApiOptions::default();
    options.bearer_auth = true;
    options.title = "my control plane".into();
    options.documented_routes = vec![
        (
            "/healthz".into(),
            json!({"get": {"x-access": "open", "responses": {"200": {"description": "alive"}}}}),
        ),
        (
            "/reload".into(),
            json!({"post": {"x-access": "write", "responses": {"204": {"description": "reloaded"}}}}),
        ),
    ];
    let router = ApiServer::new(store()).options(options).into_router();
    let (status, document) = call(&router, "GET", "/openapi.json", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(document["info"]["title"], "my control plane");
    assert_eq!(
        document["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
    let healthz = &document["paths"]["/healthz"]["get"];
    assert!(healthz.get("security").is_none(), "{healthz}");
    assert!(healthz.get("x-access").is_none(), "{healthz}");
    let reload = &document["paths"]["/reload"]["post"];
    assert_eq!(reload["security"], json!([{"bearer": []}]));
    assert!(reload["responses"]["403"].is_object(), "{reload}");
    let create = &document["paths"][RULES.replace("default", "{namespace}")]["post"];
    assert_eq!(create["security"], json!([{"bearer": []}]));
}

#[tokio::test]
async fn a_cluster_scoped_kind_is_served_at_its_own_paths_only() {
    let store = Arc::new(MemoryConfigStore::new(pilot_api::default_registry()));
    let router = ApiServer::new(store.clone()).into_router();
    let base = "/apis/gateway.networking.k8s.io/v1";
    let class = json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
        "metadata": {"name": "edge", "namespace": "default"},
        "spec": {"controllerName": "pilot.io/gateway-controller"},
    });
    // A GatewayClass's namespaced path does not exist; a Gateway's
    // cluster path neither.
    let (status, answer) = call(
        &router,
        "POST",
        &format!("{base}/namespaces/default/gatewayclasses"),
        json_body(&class),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("cluster-scoped"),
        "{answer}"
    );
    let (status, answer) = call(&router, "GET", &format!("{base}/gateways/edge"), Body::empty()).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("namespaced"),
        "{answer}"
    );

    // Created at the kind's path, the namespace written dropped.
    let (status, created) = call(
        &router,
        "POST",
        &format!("{base}/gatewayclasses"),
        json_body(&class),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(created["metadata"].get("namespace").is_none(), "{created}");
    let key = ConfigKey::new("GatewayClass.gateway.networking.k8s.io", "", "edge");
    assert!(store.get(&key).await.unwrap().is_some());
    let (status, got) = call(
        &router,
        "GET",
        &format!("{base}/gatewayclasses/edge"),
        Body::empty(),
    )
    .await;
    assert_eq!(
        (status, &got["spec"]["controllerName"]),
        (StatusCode::OK, &json!("pilot.io/gateway-controller"))
    );
    let (status, list) = call(&router, "GET", &format!("{base}/gatewayclasses"), Body::empty()).await;
    assert_eq!(
        (status, list["items"].as_array().map(Vec::len)),
        (StatusCode::OK, Some(1)),
        "{list}"
    );
    let (status, answer) = call(
        &router,
        "DELETE",
        &format!("{base}/gatewayclasses/edge"),
        Body::empty(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(store.get(&key).await.unwrap().is_none());

    // The document lists the kind's paths, without a namespace.
    let (_, document) = call(&router, "GET", "/openapi.json", Body::empty()).await;
    let paths = document["paths"].as_object().unwrap();
    assert!(paths.contains_key(&format!("{base}/gatewayclasses/{{name}}")));
    assert!(!paths.contains_key(&format!("{base}/namespaces/{{namespace}}/gatewayclasses")));
}
