//! The REST API's patches: JSON merge patch, JSON patch and server-side
//! apply, sent through `pilot_apiserver`'s router (no listener) to an
//! in-memory store holding one VirtualService.

use std::sync::Arc;

use pilot_apiserver::ApiServer;
use pilot_apiserver::axum::Router;
use pilot_apiserver::axum::body::{Body, to_bytes};
use pilot_apiserver::axum::http::{Method, Request, StatusCode};
use pilot_store_memory::MemoryConfigStore;
use serde_json::Value;
use tower::ServiceExt;

/// The object every input patches.
const OBJECT: &str = "/apis/networking.istio.io/v1/namespaces/default/virtualservices/reviews";

/// Where it is created.
const COLLECTION: &str = "/apis/networking.istio.io/v1/namespaces/default/virtualservices?fieldManager=seed";

/// It, as its owner created it (the `seed` field manager owns its fields).
const SEED: &str = r#"{"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
  "metadata": {"name": "reviews", "namespace": "default", "labels": {"app": "reviews"}},
  "spec": {"hosts": ["reviews"], "http": [{"match": [{"headers": {"end-user": {"exact": "jason"}}}],
    "route": [{"destination": {"host": "reviews", "subset": "v2"}}]},
    {"route": [{"destination": {"host": "reviews", "subset": "v1"}, "weight": 80},
               {"destination": {"host": "reviews", "subset": "v3"}, "weight": 20}]}]}}"#;

/// `data` as a JSON merge patch of the stored object.
pub(crate) fn merge_patch(data: &[u8]) {
    patched(data, "application/merge-patch+json", "");
}

/// `data` as a JSON patch of the stored object.
pub(crate) fn json_patch(data: &[u8]) {
    patched(data, "application/json-patch+json", "");
}

/// `data` as a server-side apply configuration of a second manager; a
/// conflict with the first is applied again with `force`, which takes the
/// fields and is never a conflict.
pub(crate) fn apply(data: &[u8]) {
    const APPLY: &str = "application/apply-patch+yaml";
    let Some(status) = patched(data, APPLY, "?fieldManager=fuzz") else {
        return;
    };
    if status == StatusCode::CONFLICT {
        let forced = patched(data, APPLY, "?fieldManager=fuzz&force=true");
        let pinned = String::from_utf8_lossy(data).contains("resourceVersion");
        assert!(
            pinned || forced != Some(StatusCode::CONFLICT),
            "a forced apply is refused as a conflict"
        );
    }
}

/// Sends `data` as a PATCH of `content_type` to a new store holding
/// [`SEED`], and checks what a client would then see: an accepted patch
/// answers the object a read returns, and a replace with that object is
/// accepted. The patch's status, `None` when it was not sent.
fn patched(data: &[u8], content_type: &str, query: &str) -> Option<StatusCode> {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => panic!("a runtime for the fuzz target: {e}"),
    };
    runtime.block_on(async {
        let store = Arc::new(MemoryConfigStore::new(pilot_api::default_registry()));
        let api = ApiServer::new(store).into_router();
        let (status, _) = send(&api, Method::POST, COLLECTION, "application/json", SEED.into()).await;
        assert!(
            status == StatusCode::CREATED,
            "the seed object is refused: {status}"
        );

        let url = format!("{OBJECT}{query}");
        let (status, answered) = send(&api, Method::PATCH, &url, content_type, data.to_vec()).await;
        assert!(
            !status.is_server_error(),
            "a {content_type} patch is answered {status}: {answered}"
        );
        if !status.is_success() {
            return Some(status);
        }
        let (read_status, read) = send(&api, Method::GET, OBJECT, "application/json", Vec::new()).await;
        assert!(
            read_status == StatusCode::OK,
            "the patched object cannot be read: {read_status}"
        );
        assert!(
            read == answered,
            "the patch answered {answered}, a read returns {read}"
        );
        let body = read.to_string().into_bytes();
        let (replaced, after) = send(&api, Method::PUT, OBJECT, "application/json", body).await;
        assert!(
            replaced == StatusCode::OK,
            "the patched object, sent back as it was read, is refused: {replaced}: {after}\nread: {read}"
        );
        assert!(
            after.get("spec") == read.get("spec"),
            "replacing the object with itself changed its spec: {after}, not {read}"
        );
        Some(status)
    })
}

/// One request through the router: its status and its body as JSON
/// (`Null` when the body is not JSON).
async fn send(
    api: &Router,
    method: Method,
    url: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let request = match Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", content_type)
        .body(Body::from(body))
    {
        Ok(request) => request,
        Err(e) => panic!("a request to {url}: {e}"),
    };
    let response = match api.clone().oneshot(request).await {
        Ok(response) => response,
        Err(infallible) => match infallible {},
    };
    let status = response.status();
    let bytes = match to_bytes(response.into_body(), usize::MAX).await {
        Ok(bytes) => bytes,
        Err(e) => panic!("the answer to {url}: {e}"),
    };
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(name: &str) -> Vec<u8> {
        let path = format!("{}/../../fuzz/corpus/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn the_corpus_reaches_accepted_and_refused_patches() {
        let merge = "application/merge-patch+json";
        let json = "application/json-patch+json";
        let apply = "application/apply-patch+yaml";
        for (input, content_type, query, expected) in [
            (
                "apiserver_merge_patch/labels-and-weights.json",
                merge,
                "",
                StatusCode::OK,
            ),
            (
                "apiserver_merge_patch/not-an-object.json",
                merge,
                "",
                StatusCode::BAD_REQUEST,
            ),
            ("apiserver_json_patch/ops.json", json, "", StatusCode::OK),
            (
                "apiserver_json_patch/missing-path.json",
                json,
                "",
                StatusCode::UNPROCESSABLE_ENTITY,
            ),
            (
                "apiserver_apply/second-manager.yaml",
                apply,
                "?fieldManager=fuzz",
                StatusCode::CONFLICT,
            ),
            (
                "apiserver_apply/second-manager.yaml",
                apply,
                "?fieldManager=fuzz&force=true",
                StatusCode::OK,
            ),
        ] {
            let status = patched(&corpus(input), content_type, query);
            assert_eq!(status, Some(expected), "{input} {query}");
        }
    }
}
