//! The Kubernetes API conventions a client relies on, on every store
//! (memory, the `--data-dir` journal, etcd): `dryRun=All` stores and pushes
//! nothing, a body without Content-Type is JSON, every error is a `Status`,
//! deletecollection, field selectors and set-based label selectors, and a
//! write that changes nothing is not made.

mod common;

use common::{TestServer, next_event, rule, rules};
use serde_json::{Value, json};

/// `(code, body as JSON)` of a request with these headers.
fn send(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, Value) {
    let bytes = body.map(|b| serde_json::to_vec(b).unwrap());
    let (code, answer) = server.request(method, path, headers, bytes.as_deref());
    (code, serde_json::from_slice(&answer).unwrap_or(Value::Null))
}

/// The names and versions of the rules in `default`, and the list's version.
fn listing(server: &TestServer, query: &str) -> (Vec<(String, String)>, String) {
    let (code, list) = server.json("GET", &format!("{}{query}", rules("default")), None);
    assert_eq!(code, 200, "{list}");
    let items = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["metadata"]["name"].as_str().unwrap().to_string(),
                item["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    (
        items,
        list["metadata"]["resourceVersion"].as_str().unwrap().to_string(),
    )
}

fn names(server: &TestServer, query: &str) -> Vec<String> {
    listing(server, query)
        .0
        .into_iter()
        .map(|(name, _)| name)
        .collect()
}

/// Every convention, on one server.
async fn conventions(server: &TestServer) {
    let path = rules("default");
    let (code, created) = server.json("POST", &path, Some(&rule("kept", "v1")));
    assert_eq!(code, 201, "{created}");
    let before = listing(server, "");

    // A watch from now: the first event it sees must be the real write at
    // the end, not anything a dry run did.
    let mut watch = server.watch(&format!("{path}?watch=true&resourceVersion={}", before.1));

    // dryRun=All: a create answers the object, stores nothing.
    let (code, dry) = server.json("POST", &format!("{path}?dryRun=All"), Some(&rule("dry", "v1")));
    assert_eq!(code, 201, "{dry}");
    assert_eq!(dry["metadata"]["name"], "dry");
    assert!(dry["metadata"].get("resourceVersion").is_none(), "{dry}");
    // ... and makes every check a create makes.
    let (code, status) = server.json("POST", &format!("{path}?dryRun=All"), Some(&rule("kept", "v1")));
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("AlreadyExists")),
        "{status}"
    );
    let mut invalid = rule("dry-invalid", "v1");
    invalid["spec"]["route"][0]["weight"] = json!(150);
    let (code, status) = server.json("POST", &format!("{path}?dryRun=All"), Some(&invalid));
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    // A replace and a delete too.
    let mut changed = created.clone();
    changed["spec"]["route"][0]["labels"]["version"] = json!("v2");
    let (code, dry) = server.json("PUT", &format!("{path}/kept?dryRun=All"), Some(&changed));
    assert_eq!(code, 200, "{dry}");
    assert_eq!(dry["spec"]["route"][0]["labels"]["version"], "v2");
    let mut stale = changed.clone();
    stale["metadata"]["resourceVersion"] = json!("1000");
    let (code, status) = server.json("PUT", &format!("{path}/kept?dryRun=All"), Some(&stale));
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    let (code, status) = server.json("DELETE", &format!("{path}/kept?dryRun=All"), None);
    assert_eq!(code, 200, "{status}");
    let (code, status) = server.json("DELETE", &format!("{path}/absent?dryRun=All"), None);
    assert_eq!(
        (code, status["reason"].as_str()),
        (404, Some("NotFound")),
        "{status}"
    );
    let (code, status) = server.json("DELETE", &format!("{path}?dryRun=All"), None);
    assert_eq!(code, 200, "{status}");
    assert_eq!(status["items"].as_array().map(Vec::len), Some(1), "{status}");
    let (code, status) = server.json("POST", &format!("{path}?dryRun=Some"), Some(&rule("dry", "v1")));
    assert_eq!(code, 400, "{status}");
    // Nothing stored: the same objects at the same versions (the store's
    // own revision may move: etcd also holds the replicas' records), and
    // the watch below sees no event before the real write.
    assert_eq!(listing(server, "").0, before.0);

    // A body without Content-Type is JSON.
    let body = serde_json::to_vec(&rule("untyped", "v1")).unwrap();
    let (code, answer) = server.request("POST", &path, &[], Some(&body));
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    // The first event the watch sees is that create: no dry run reached it.
    let event = next_event(&mut watch).expect("an event");
    assert_eq!(
        (
            event["type"].as_str(),
            event["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("untyped")),
        "{event}"
    );
    drop(watch);

    // Every error is a Status whose details.kind is the resource.
    let (code, status) = server.json("GET", &format!("{path}/absent"), None);
    assert_eq!(code, 404);
    assert_eq!(
        (
            status["kind"].as_str(),
            status["apiVersion"].as_str(),
            status["code"].as_u64()
        ),
        (Some("Status"), Some("v1"), Some(404))
    );
    assert_eq!(status["details"]["kind"], "routerules", "{status}");
    assert_eq!(status["details"]["group"], "config.istio.io", "{status}");
    assert_eq!(status["details"]["name"], "absent", "{status}");
    for (method, target, expected) in [
        ("PATCH", "/apis/config.istio.io/v1alpha2/routerules", 405),
        ("POST", "/healthz", 405),
        ("GET", "/no/such/path", 404),
        (
            "GET",
            "/apis/config.istio.io/v1alpha2/namespaces/default/widgets",
            404,
        ),
    ] {
        let (code, status) = send(server, method, target, &[], None);
        assert_eq!(code, expected, "{method} {target}: {status}");
        assert_eq!(status["kind"], "Status", "{method} {target}: {status}");
        assert_eq!(status["code"], json!(expected), "{method} {target}: {status}");
        assert!(status["reason"].is_string(), "{method} {target}: {status}");
    }

    // Field selectors and set-based label selectors, on list.
    let mut labelled = rule("canary", "v2");
    labelled["metadata"]["labels"] = json!({"app": "ratings", "track": "canary"});
    assert_eq!(server.json("POST", &path, Some(&labelled)).0, 201);
    assert_eq!(names(server, "?fieldSelector=metadata.name%3Dkept"), ["kept"]);
    assert_eq!(
        names(
            server,
            "?fieldSelector=metadata.name!%3Dkept,metadata.namespace%3Ddefault"
        ),
        ["canary", "untyped"]
    );
    assert_eq!(
        names(server, "?labelSelector=app%20in%20(ratings,details)"),
        ["canary"]
    );
    assert_eq!(
        names(server, "?labelSelector=app%20notin%20(ratings)"),
        ["kept", "untyped"]
    );
    assert_eq!(names(server, "?labelSelector=!track"), ["kept", "untyped"]);
    let (code, status) = server.json("GET", &format!("{path}?fieldSelector=spec.hosts%3Dx"), None);
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    // ... and on watch.
    let mut watch = server.watch(&format!("{path}?watch=true&fieldSelector=metadata.name%3Dcanary"));
    let event = next_event(&mut watch).expect("an event");
    assert_eq!(event["object"]["metadata"]["name"], "canary", "{event}");
    drop(watch);

    // Metadata: uid kept, generation moves on spec changes only, and an
    // exported object (managedFields, uid, generation) is accepted.
    let (_, kept) = server.json("GET", &format!("{path}/kept"), None);
    let uid = kept["metadata"]["uid"].as_str().expect("a uid").to_string();
    assert_eq!(kept["metadata"]["generation"], 1, "{kept}");
    assert!(kept["metadata"]["creationTimestamp"].is_string(), "{kept}");
    let mut labelled = kept.clone();
    labelled["metadata"]["labels"]["extra"] = json!("yes");
    labelled["metadata"]["managedFields"] = json!([{"manager": "kubectl", "operation": "Update"}]);
    labelled["metadata"]["uid"] = json!("00000000-0000-0000-0000-000000000000");
    labelled["metadata"]["generation"] = json!(40);
    let (code, relabelled) = server.json("PUT", &format!("{path}/kept"), Some(&labelled));
    assert_eq!(code, 200, "{relabelled}");
    assert_eq!(
        (
            relabelled["metadata"]["uid"].as_str(),
            relabelled["metadata"]["generation"].as_i64()
        ),
        (Some(uid.as_str()), Some(1))
    );
    let mut respecced = relabelled.clone();
    respecced["spec"]["route"][0]["labels"]["version"] = json!("v3");
    let (code, respecced) = server.json("PUT", &format!("{path}/kept"), Some(&respecced));
    assert_eq!(code, 200, "{respecced}");
    assert_eq!(
        (
            respecced["metadata"]["uid"].as_str(),
            respecced["metadata"]["generation"].as_i64()
        ),
        (Some(uid.as_str()), Some(2))
    );
    let (_, untyped) = server.json("GET", &format!("{path}/untyped"), None);
    assert_ne!(untyped["metadata"]["uid"].as_str(), Some(uid.as_str()));

    unchanged_writes(server).await;

    // PATCH: merge and JSON patch validated as a replace, strategic merge 415.
    let merge = ("content-type", "application/merge-patch+json");
    let (code, patched) = send(
        server,
        "PATCH",
        &format!("{path}/kept"),
        &[merge],
        Some(&json!({"spec": {"precedence": 4}})),
    );
    assert_eq!(code, 200, "{patched}");
    assert_eq!(
        (
            patched["spec"]["precedence"].as_i64(),
            patched["metadata"]["generation"].as_i64()
        ),
        (Some(4), Some(3))
    );
    let (code, status) = send(
        server,
        "PATCH",
        &format!("{path}/kept"),
        &[("content-type", "application/json-patch+json")],
        Some(&json!([{"op": "replace", "path": "/spec/route/0/weight", "value": 150}])),
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let (code, status) = send(
        server,
        "PATCH",
        &format!("{path}/kept"),
        &[("content-type", "application/strategic-merge-patch+json")],
        Some(&json!({"spec": {}})),
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType")),
        "{status}"
    );
    let (code, dry) = send(
        server,
        "PATCH",
        &format!("{path}/kept?dryRun=All"),
        &[merge],
        Some(&json!({"spec": {"precedence": 9}})),
    );
    assert_eq!(
        (code, dry["spec"]["precedence"].as_i64()),
        (200, Some(9)),
        "{dry}"
    );
    let (_, read) = server.json("GET", &format!("{path}/kept"), None);
    assert_eq!(
        read["spec"]["precedence"], 4,
        "a dry-run patch was stored: {read}"
    );

    // deletecollection takes DeleteOptions as kube-apiserver does: dryRun
    // (in the body too) deletes nothing, preconditions hold for every
    // object (one that does not match is a 409), policies are validated.
    let selected = format!("{path}?labelSelector=app%3Dreviews");
    let delete_with = |options: Value| {
        let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
        if let (Some(body), Some(options)) = (body.as_object_mut(), options.as_object()) {
            body.extend(options.clone());
        }
        send(
            server,
            "DELETE",
            &selected,
            &[("content-type", "application/json")],
            Some(&body),
        )
    };
    let (code, dry) = delete_with(json!({"dryRun": ["All"]}));
    assert_eq!(code, 200, "{dry}");
    assert_eq!(dry["items"].as_array().map(Vec::len), Some(2), "{dry}");
    let (code, status) = delete_with(json!({"preconditions": {"uid": uid}}));
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("Precondition failed: UID in precondition")),
        "{status}"
    );
    let (code, status) = delete_with(json!({"propagationPolicy": "Later"}));
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    // The precondition held for `kept`, the first object: it alone went.
    assert_eq!(names(server, ""), ["canary", "untyped"]);
    let (code, kept_again) = server.json("POST", &path, Some(&rule("kept", "v1")));
    assert_eq!(code, 201, "{kept_again}");

    // deletecollection: what the selector selects, answered as a list.
    let (code, deleted) = delete_with(json!({"propagationPolicy": "Background"}));
    assert_eq!(code, 200, "{deleted}");
    let mut gone: Vec<&str> = deleted["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    gone.sort();
    assert_eq!(gone, ["kept", "untyped"]);
    assert_eq!(names(server, ""), ["canary"]);
}

/// A write that changes nothing (a replace with the object as read, a
/// patch to the values it has, a server-side apply made twice) is not
/// made: the object keeps its resourceVersion, generation and
/// managedFields, and no watch sees an event for it.
async fn unchanged_writes(server: &TestServer) {
    let object = format!("{}/kept", rules("default"));
    let apply = ("content-type", "application/apply-patch+yaml");
    let configuration = "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata:\n  name: kept\n\
                         spec:\n  destination:\n    name: reviews\n";
    let (code, applied) = server.request(
        "PATCH",
        &format!("{object}?fieldManager=tester"),
        &[apply],
        Some(configuration.as_bytes()),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&applied));
    let (_, current) = server.json("GET", &object, None);
    let version = current["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut watch = server.watch(&format!(
        "{}?watch=true&resourceVersion={version}",
        rules("default")
    ));

    let (code, replaced) = server.json("PUT", &object, Some(&current));
    assert_eq!(code, 200, "{replaced}");
    let (code, patched) = send(
        server,
        "PATCH",
        &object,
        &[("content-type", "application/merge-patch+json")],
        Some(&json!({"metadata": {"labels": {"extra": "yes"}}})),
    );
    assert_eq!(code, 200, "{patched}");
    let (code, reapplied) = server.request(
        "PATCH",
        &format!("{object}?fieldManager=tester"),
        &[apply],
        Some(configuration.as_bytes()),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&reapplied));
    let reapplied: Value = serde_json::from_slice(&reapplied).unwrap();
    for answered in [&replaced, &patched, &reapplied] {
        for field in ["resourceVersion", "generation", "managedFields"] {
            assert_eq!(
                answered["metadata"][field], current["metadata"][field],
                "{field}: {answered}"
            );
        }
    }
    let (_, read) = server.json("GET", &object, None);
    assert_eq!(read["metadata"], current["metadata"], "{read}");

    // The first event the watch sees is a real change, made last.
    let mut changed = read.clone();
    changed["metadata"]["labels"]["extra"] = json!("changed");
    let (code, changed) = server.json("PUT", &object, Some(&changed));
    assert_eq!(code, 200, "{changed}");
    assert_ne!(
        changed["metadata"]["resourceVersion"],
        current["metadata"]["resourceVersion"]
    );
    let event = next_event(&mut watch).expect("an event");
    assert_eq!(
        event["object"]["metadata"]["labels"]["extra"], "changed",
        "an unchanged write reached the watch: {event}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conventions_on_the_memory_store() {
    let server = TestServer::start(&[]).await;
    conventions(&server).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conventions_on_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&["--data-dir", dir.path().to_str().unwrap()]).await;
    conventions(&server).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn conventions_on_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &etcd.endpoint()]).await;
    conventions(&server).await;
    server.stop().await;
}

/// DELETE with `preconditions` (uid, resourceVersion) in its
/// `DeleteOptions`: 409 on a mismatch, the object kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_preconditions() {
    let server = TestServer::start(&[]).await;
    let path = rules("default");
    let (code, created) = server.json("POST", &path, Some(&rule("guarded", "v1")));
    assert_eq!(code, 201, "{created}");
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let object = format!("{path}/guarded");
    let delete = |preconditions: Value| {
        let body = json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions});
        send(
            &server,
            "DELETE",
            &object,
            &[("content-type", "application/json")],
            Some(&body),
        )
    };

    let (code, status) = delete(json!({"uid": "00000000-0000-4000-8000-000000000000"}));
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        format!(
            "Operation cannot be fulfilled on routerules.config.istio.io \"guarded\": Precondition failed: \
             UID in precondition: 00000000-0000-4000-8000-000000000000, UID in object meta: {uid}"
        ),
        "{status}"
    );
    let stale = (version.parse::<u64>().unwrap() + 1000).to_string();
    let (code, status) = delete(json!({"uid": uid, "resourceVersion": stale}));
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    assert_eq!(server.json("GET", &object, None).0, 200);

    let (code, status) = delete(json!({"uid": uid, "resourceVersion": version}));
    assert_eq!(code, 200, "{status}");
    assert_eq!(server.json("GET", &object, None).0, 404);
    server.stop().await;
}
