//! The REST API as a client sees it: every status code, Status bodies,
//! label selectors, watches, authentication, and that refused writes leave
//! the store unchanged.

mod common;

use common::{TestServer, next_event, rule, rules};
use serde_json::{Value, json};

/// Every rule's name and version, as listed in all namespaces.
fn listing(server: &TestServer) -> Vec<(String, String)> {
    let (code, list) = server.json("GET", "/apis/config.istio.io/v1alpha2/routerules", None);
    assert_eq!(code, 200, "{list}");
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap().to_string(),
                item["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_status_code_with_a_status_body() {
    let server = TestServer::start(&["--max-body-bytes", "4096"]).await;
    let path = rules("default");

    // 201 created, with the stored object.
    let (code, created) = server.json("POST", &path, Some(&rule("reviews-default", "v1")));
    assert_eq!(code, 201, "{created}");
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(created["metadata"]["namespace"], "default");

    // 200 on read, list and replace.
    let (code, read) = server.json("GET", &format!("{path}/reviews-default"), None);
    assert_eq!((code, &read), (200, &created));
    let mut changed = created.clone();
    changed["spec"]["route"][0]["labels"]["version"] = json!("v2");
    let (code, replaced) = server.json("PUT", &format!("{path}/reviews-default"), Some(&changed));
    assert_eq!(code, 200, "{replaced}");
    let current = replaced["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(current, version);

    // 409: already exists, with the current version.
    let (code, status) = server.json("POST", &path, Some(&rule("reviews-default", "v1")));
    assert_eq!(code, 409);
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["reason"], "AlreadyExists");
    assert_eq!(status["details"]["currentResourceVersion"], json!(current));
    assert_eq!(
        status["message"],
        format!("RouteRule default/reviews-default already exists at resourceVersion {current}")
    );

    // 409: stale version, saying which was sent and which is current.
    let (code, status) = server.json("PUT", &format!("{path}/reviews-default"), Some(&changed));
    assert_eq!(code, 409);
    assert_eq!(status["reason"], "Conflict");
    assert_eq!(
        status["message"],
        format!(
            "stale resourceVersion for RouteRule default/reviews-default: you sent {version}, current is {current}"
        )
    );

    // 404: missing object, unknown kind.
    let (code, status) = server.json("GET", &format!("{path}/nope"), None);
    assert_eq!((code, status["reason"].as_str()), (404, Some("NotFound")));
    let (code, status) = server.json(
        "GET",
        "/apis/config.istio.io/v1alpha2/namespaces/default/widgets",
        None,
    );
    assert_eq!(code, 404);
    assert!(
        status["message"].as_str().unwrap().contains("routerules"),
        "{status}"
    );
    let (code, _) = server.json("DELETE", &format!("{path}/nope"), None);
    assert_eq!(code, 404);

    let before = listing(&server);

    // 400: not JSON; a body for another name than the URL.
    let (code, answer) = server.request(
        "POST",
        &path,
        &[("content-type", "application/json")],
        Some(b"{\"apiVersion\": "),
    );
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    let (code, status) = server.json("PUT", &format!("{path}/other"), Some(&changed));
    assert_eq!(code, 400);
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("does not match the URL's name"),
        "{status}"
    );
    // Another group's kind of the same name (as the Gateway API's Gateway
    // is to Istio's), and a server-set field of the wrong type, as
    // kube-apiserver refuses them.
    let mut other_group = changed.clone();
    other_group["apiVersion"] = json!("networking.istio.io/v1");
    let (code, status) = server.json("PUT", &format!("{path}/reviews-default"), Some(&other_group));
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("the API version in the data (networking.istio.io/v1) does not match"),
        "{status}"
    );
    let mut uid = changed.clone();
    uid["metadata"]["uid"] = json!({});
    let (code, status) = server.json("PUT", &format!("{path}/reviews-default"), Some(&uid));
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"].as_str().unwrap().contains("metadata.uid"),
        "{status}"
    );

    // 415: YAML is for pilotctl; the API takes JSON.
    let (code, answer) = server.request(
        "POST",
        &path,
        &[("content-type", "application/yaml")],
        Some(b"kind: RouteRule\n"),
    );
    let status: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );

    // 413: over --max-body-bytes.
    let mut huge = rule("huge", "v1");
    huge["metadata"]["annotations"] = json!({"padding": "x".repeat(8192)});
    let (code, status) = server.json("POST", &path, Some(&huge));
    assert_eq!(
        (code, status["reason"].as_str()),
        (413, Some("RequestEntityTooLarge")),
        "{status}"
    );

    // 422: every field error with its path.
    let invalid = json!({
        "apiVersion": "config.istio.io/v1alpha2",
        "kind": "RouteRule",
        "metadata": {"name": "Bad_Name", "namespace": "default"},
        "spec": {
            "destination": {"name": "reviews"},
            "route": [{"labels": {"version": "v1"}, "weight": 80}, {"labels": {"version": "v2"}, "weight": 10}],
        },
    });
    let (code, status) = server.json("POST", &path, Some(&invalid));
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let fields: Vec<&str> = status["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert!(fields.contains(&"metadata.name"), "{status}");
    assert!(fields.contains(&"spec.route[1].weight"), "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("weights must sum to 100, got 90"),
        "{status}"
    );

    // Nothing refused was stored.
    assert_eq!(listing(&server), before);

    // 200 on delete; a conditional delete at a stale version is 409.
    let (code, _) = server.json(
        "DELETE",
        &format!("{path}/reviews-default?resourceVersion={version}"),
        None,
    );
    assert_eq!(code, 409);
    let (code, status) = server.json(
        "DELETE",
        &format!("{path}/reviews-default?resourceVersion={current}"),
        None,
    );
    assert_eq!((code, status["status"].as_str()), (200, Some("Success")));
    assert!(listing(&server).is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lists_select_by_namespace_and_labels() {
    let server = TestServer::start(&[]).await;
    for (namespace, name, app) in [
        ("default", "a", "reviews"),
        ("default", "b", "ratings"),
        ("prod", "c", "reviews"),
    ] {
        let mut object = rule(name, "v1");
        object["metadata"]["namespace"] = json!(namespace);
        object["metadata"]["labels"] = json!({"app": app});
        let (code, answer) = server.json("POST", &rules(namespace), Some(&object));
        assert_eq!(code, 201, "{answer}");
    }
    let names = |path: &str| -> Vec<String> {
        let (code, list) = server.json("GET", path, None);
        assert_eq!(code, 200, "{list}");
        assert_eq!(list["kind"], "RouteRuleList");
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&rules("default")), ["a", "b"]);
    assert_eq!(
        names("/apis/config.istio.io/v1alpha2/routerules"),
        ["a", "b", "c"]
    );
    assert_eq!(
        names("/apis/config.istio.io/v1alpha2/routerules?labelSelector=app%3Dreviews"),
        ["a", "c"]
    );
    assert_eq!(
        names(&format!("{}?labelSelector=app!%3Dreviews", rules("default"))),
        ["b"]
    );
    let (code, _) = server.json(
        "GET",
        &format!("{}?labelSelector=bad%20key", rules("default")),
        None,
    );
    assert_eq!(code, 400);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_selector_watch_sees_objects_leave_and_join_the_selection() {
    let server = TestServer::start(&[]).await;
    let path = rules("default");
    let mut watch = server.watch(&format!("{path}?watch=true&labelSelector=team%3Da"));
    let mut object = rule("r", "v1");
    object["metadata"]["labels"] = json!({"team": "a"});
    let (code, created) = server.json("POST", &path, Some(&object));
    assert_eq!(code, 201, "{created}");
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "ADDED");
    // Relabelled out of the selection: DELETED, as Kubernetes sends it.
    let mut moved = created.clone();
    moved["metadata"]["labels"] = json!({"team": "b"});
    let (code, moved) = server.json("PUT", &format!("{path}/r"), Some(&moved));
    assert_eq!(code, 200, "{moved}");
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "DELETED");
    assert_eq!(event["object"]["metadata"]["labels"]["team"], "b");
    // And back in: ADDED.
    let mut back = moved.clone();
    back["metadata"]["labels"] = json!({"team": "a"});
    let (code, _) = server.json("PUT", &format!("{path}/r"), Some(&back));
    assert_eq!(code, 200);
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "ADDED");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watches_stream_changes_and_resume_after_a_version() {
    let server = TestServer::start(&[]).await;
    let path = rules("default");
    let (_, first) = server.json("POST", &path, Some(&rule("first", "v1")));
    let after = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();

    // From now: the current object as ADDED, then the changes.
    let mut watch = server.watch(&format!("{path}?watch=true"));
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("first"))
    );
    let (_, second) = server.json("POST", &path, Some(&rule("second", "v1")));
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("second"))
    );
    let mut changed = second.clone();
    changed["spec"]["route"][0]["labels"]["version"] = json!("v3");
    let (code, _) = server.json("PUT", &format!("{path}/second"), Some(&changed));
    assert_eq!(code, 200);
    let event = next_event(&mut watch).unwrap();
    assert_eq!(event["type"], "MODIFIED");
    assert_eq!(event["object"]["spec"]["route"][0]["labels"]["version"], "v3");
    let (code, _) = server.json("DELETE", &format!("{path}/first"), None);
    assert_eq!(code, 200);
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("first"))
    );

    // Resuming after the first write replays exactly what came after it.
    let mut resumed = server.watch(&format!("{path}?watch=true&resourceVersion={after}"));
    let kinds: Vec<String> = (0..3)
        .map(|_| {
            next_event(&mut resumed).unwrap()["type"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);

    // Shutdown ends open watches cleanly.
    server.stop().await;
    assert!(next_event(&mut watch).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_tokens_nothing_is_readable_or_writable_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "admin-0123456789abcdef rw admin\nviewer-0123456789abcdef ro viewer\n",
    )
    .unwrap();
    let server = TestServer::start(&["--token-file", tokens.to_str().unwrap()]).await;
    let path = rules("default");
    let body = serde_json::to_vec(&rule("r", "v1")).unwrap();
    let json = ("content-type", "application/json");
    let rw = ("authorization", "Bearer admin-0123456789abcdef");
    let ro = ("authorization", "Bearer viewer-0123456789abcdef");
    let wrong = ("authorization", "Bearer admin-0123456789abcdeX");

    for target in [path.as_str(), "/metrics", "/openapi.json", "/debug/proxy-status"] {
        assert_eq!(server.request("GET", target, &[], None).0, 401, "{target}");
        assert_eq!(server.request("GET", target, &[wrong], None).0, 401, "{target}");
    }
    assert_eq!(server.request("POST", &path, &[json], Some(&body)).0, 401);
    assert_eq!(server.request("POST", &path, &[json, wrong], Some(&body)).0, 401);
    let (code, answer) = server.request("POST", &path, &[json, ro], Some(&body));
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&answer));
    // Nothing was written by the refused requests.
    let (code, list) = server.request("GET", &path, &[ro], None);
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_slice::<Value>(&list).unwrap()["items"],
        json!([])
    );
    assert_eq!(server.request("POST", &path, &[json, rw], Some(&body)).0, 201);
    assert_eq!(server.request("GET", &format!("{path}/r"), &[ro], None).0, 200);
    // Probes stay open.
    assert_eq!(server.request("GET", "/healthz", &[], None).0, 200);
    assert_eq!(server.request("GET", "/readyz", &[], None).0, 200);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_count_requests_objects_and_pushes() {
    let server = TestServer::start(&[]).await;
    let (code, _) = server.json("POST", &rules("default"), Some(&rule("r", "v1")));
    assert_eq!(code, 201);
    let (code, _) = server.json("POST", &rules("default"), Some(&rule("r", "v1")));
    assert_eq!(code, 409);
    let (code, text) = server.request("GET", "/metrics", &[], None);
    assert_eq!(code, 200);
    let text = String::from_utf8(text).unwrap();
    for line in [
        "pilot_rest_requests_total{method=\"POST\",code=\"201\"} 1",
        "pilot_rest_requests_total{method=\"POST\",code=\"409\"} 1",
        "pilot_rest_request_duration_seconds_count{method=\"POST\",route=\"/apis/{group}/{version}/namespaces/{namespace}/{plural}\"} 2",
        "pilot_config_objects{kind=\"RouteRule\"} 1",
        "pilot_config_objects{kind=\"EgressRule\"} 0",
        "pilot_k8s_cfg_events_total{type=\"RouteRule\",event=\"add\"} 1",
        "pilot_xds 0",
        "pilot_xds_nacked_proxies{type=\"cds\"} 0",
        "pilot_total_xds_rejects_total{type=\"cds\"} 0",
        "pilot_xds_pushes_total{type=\"lds\"} 0",
        "pilot_rest_watches 0",
        "# TYPE pilot_proxy_convergence_time histogram",
        "# TYPE pilot_debounce_time histogram",
        "# TYPE pilot_pushcontext_init_seconds histogram",
        "# TYPE pilot_proxy_queue_time histogram",
        "# TYPE pilot_xds_push_time histogram",
        "pilot_xds_push_time_count{type=\"rds\"} 0",
        "pilot_xds_push_time_bucket{le=\"+Inf\",type=\"rds\"} 0",
        "# TYPE pilot_xds_pushes counter",
        "# EOF",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    // The write is pushed: that push's debounce and build are timed (no
    // proxy is connected: nothing is queued, sent or converged).
    let value = |text: &str, name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or(0.0)
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, text) = server.request("GET", "/metrics", &[], None);
        let text = String::from_utf8(text).unwrap();
        if value(&text, "pilot_debounce_time_count") >= 1.0 {
            assert!(value(&text, "pilot_debounce_time_sum") > 0.0, "{text}");
            assert!(
                value(&text, "pilot_pushcontext_init_seconds_count") >= 2.0,
                "{text}"
            );
            assert_eq!(value(&text, "pilot_proxy_convergence_time_count"), 0.0, "{text}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no push latency recorded:\n{text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // An open watch is counted while it lasts.
    let mut watch = server.watch(&format!("{}?watch=true", rules("default")));
    assert_eq!(next_event(&mut watch).unwrap()["type"], "ADDED");
    let (_, text) = server.request("GET", "/metrics", &[], None);
    let text = String::from_utf8(text).unwrap();
    assert!(text.lines().any(|l| l == "pilot_rest_watches 1"), "{text}");
    assert!(
        text.lines().any(|l| l == "pilot_rest_watches_opened_total 1"),
        "{text}"
    );
    drop(watch);
    server.stop().await;
}

/// Every operation the OpenAPI document lists is served, answering with a
/// status code the document lists for it; and the API's routes are all in
/// the document.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_openapi_document_matches_the_server() {
    let server = TestServer::start(&[]).await;
    let (code, document) = server.json("GET", "/openapi.json", None);
    assert_eq!(code, 200);
    assert_eq!(document["openapi"], "3.0.3");
    let paths = document["paths"].as_object().unwrap();
    for kind in ["routerules", "destinationpolicies", "egressrules", "ingressrules"] {
        for path in [
            format!("/apis/config.istio.io/v1alpha2/{kind}"),
            format!("/apis/config.istio.io/v1alpha2/namespaces/{{namespace}}/{kind}"),
            format!("/apis/config.istio.io/v1alpha2/namespaces/{{namespace}}/{kind}/{{name}}"),
        ] {
            assert!(paths.contains_key(&path), "{path} is served but not documented");
        }
    }
    // Every /debug route the router serves (read from its source, so a new
    // one is covered without touching this test).
    let router = include_str!("../src/router.rs");
    let debug: Vec<&str> = router
        .split(".route(\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .filter(|path| path.starts_with("/debug/"))
        .collect();
    assert!(debug.contains(&"/debug/scope"), "{debug:?}");
    assert!(debug.len() >= 5, "{debug:?}");
    for path in debug {
        assert!(paths.contains_key(path), "{path} is served but not documented");
    }
    let mut checked = 0;
    for (path, operations) in paths {
        let concrete = path
            .replace("{namespace}", "default")
            .replace("{name}", "missing");
        for (method, operation) in operations.as_object().unwrap() {
            if method == "parameters" {
                continue;
            }
            let body = operation
                .get("requestBody")
                .map(|_| json!({"not": "an object of this kind"}));
            let (code, _) = server.json(&method.to_uppercase(), &concrete, body.as_ref());
            let documented = operation["responses"].as_object().unwrap();
            assert!(
                documented.contains_key(&code.to_string()),
                "{} {concrete} answered {code}, not documented ({:?})",
                method.to_uppercase(),
                documented.keys().collect::<Vec<_>>()
            );
            checked += 1;
        }
    }
    assert!(checked > 20, "only {checked} operations checked");
    server.stop().await;
}

/// The same API over etcd (store and service registry): writes, lists and
/// a watch resumed after a version.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_api_over_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let server = TestServer::start(&[
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoint,
        "--registry",
        "etcd",
    ])
    .await;
    let path = rules("default");
    let (code, first) = server.json("POST", &path, Some(&rule("first", "v1")));
    assert_eq!(code, 201, "{first}");
    let after = first["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let (code, status) = server.json("POST", &path, Some(&rule("first", "v1")));
    assert_eq!(
        (code, status["details"]["currentResourceVersion"].as_str()),
        (409, Some(after.as_str()))
    );
    let (code, _) = server.json("POST", &path, Some(&rule("second", "v2")));
    assert_eq!(code, 201);
    let mut watch = server.watch(&format!("{path}?watch=true&resourceVersion={after}"));
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("second"))
    );
    let (code, _) = server.json("DELETE", &format!("{path}/first"), None);
    assert_eq!(code, 200);
    let event = next_event(&mut watch).unwrap();
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("DELETED"), Some("first"))
    );
    let names: Vec<String> = listing(&server).into_iter().map(|(name, _)| name).collect();
    assert_eq!(names, ["second"]);
    server.stop().await;
}
