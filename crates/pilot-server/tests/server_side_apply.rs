//! Server-side apply, field managers and `fieldValidation`, as
//! kube-apiserver serves them for a custom resource, on every store
//! (memory, the `--data-dir` journal across a restart, etcd, Kubernetes).

mod common;

use std::net::SocketAddr;

use common::{TestServer, rules};
use pilot_test_support::http::{Answer, request};
use serde_json::{Value, json};

const APPLY: &str = "application/apply-patch+yaml";

/// A REST client for one server.
struct Client(SocketAddr);

impl Client {
    fn send(&self, method: &str, path: &str, content_type: &str, body: &str) -> (Answer, Value) {
        let headers = [
            ("content-type", content_type),
            ("user-agent", "tester/1.0 (linux)"),
        ];
        let answer =
            request(self.0, method, path, &headers, body.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        (answer, value)
    }

    /// A server-side apply of `yaml` to `name` with these query parameters.
    fn apply(&self, name: &str, query: &str, yaml: &str) -> (u16, Value) {
        let (answer, value) = self.send(
            "PATCH",
            &format!("{}/{name}?{query}", rules("default")),
            APPLY,
            yaml,
        );
        (answer.code, value)
    }

    fn get(&self, name: &str) -> Value {
        let (answer, value) = self.send(
            "GET",
            &format!("{}/{name}", rules("default")),
            "application/json",
            "",
        );
        assert_eq!(answer.code, 200, "{value}");
        value
    }
}

/// A route rule apply configuration with these extra spec lines.
fn config(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata:\n  name: {name}\n  namespace: default\n\
         spec:\n  destination:\n    name: reviews\n{spec}"
    )
}

/// The managers of `object` as `manager/operation: fields`.
fn managers(object: &Value) -> Vec<String> {
    fn fields(trie: &Value, prefix: &str, out: &mut Vec<String>) {
        for (key, child) in trie.as_object().into_iter().flatten() {
            if key == "." {
                out.push(prefix.to_string());
            } else if let Some(field) = key.strip_prefix("f:") {
                let path = format!("{prefix}.{field}");
                if child.as_object().is_some_and(|m| m.is_empty()) {
                    out.push(path);
                } else {
                    fields(child, &path, out);
                }
            }
        }
    }
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            assert_eq!(entry["fieldsType"], "FieldsV1", "{entry}");
            assert_eq!(entry["apiVersion"], "config.istio.io/v1alpha2", "{entry}");
            assert!(
                entry["time"].as_str().is_some_and(|t| t.ends_with('Z')),
                "{entry}"
            );
            let mut list = Vec::new();
            fields(&entry["fieldsV1"], "", &mut list);
            format!(
                "{}/{}: {}",
                entry["manager"].as_str().unwrap(),
                entry["operation"].as_str().unwrap(),
                list.join(" ")
            )
        })
        .collect()
}

/// Every server-side apply and field validation rule, on one server.
fn server_side_apply(client: &Client) {
    // fieldManager is required.
    let (code, status) = client.apply("applied", "", &config("applied", "  precedence: 1\n"));
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    assert!(
        status["message"].as_str().unwrap().contains("fieldManager"),
        "{status}"
    );

    // Absent: created, owned by the applier.
    let (code, created) = client.apply(
        "applied",
        "fieldManager=ci",
        &config("applied", "  precedence: 1\n"),
    );
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1, "{created}");
    assert!(created["metadata"]["uid"].is_string(), "{created}");
    assert_eq!(
        managers(&created),
        ["ci/Apply: .spec.destination.name .spec.precedence"]
    );

    // Applied again unchanged: no conflict with itself, no spec change.
    let (code, again) = client.apply(
        "applied",
        "fieldManager=ci",
        &config("applied", "  precedence: 1\n"),
    );
    assert_eq!(code, 200, "{again}");
    assert_eq!(again["metadata"]["generation"], 1, "{again}");
    assert_eq!(again["metadata"]["uid"], created["metadata"]["uid"]);

    // A merge patch without fieldManager: an Update by the user agent's
    // product, which takes the field it changed.
    let (answer, patched) = client.send(
        "PATCH",
        &format!("{}/applied", rules("default")),
        "application/merge-patch+json",
        r#"{"spec":{"precedence":2}}"#,
    );
    assert_eq!(answer.code, 200, "{patched}");
    assert_eq!(patched["metadata"]["generation"], 2, "{patched}");
    assert_eq!(
        managers(&patched),
        [
            "ci/Apply: .spec.destination.name",
            "tester/Update: .spec.precedence"
        ]
    );

    // The applier setting it back conflicts with that manager.
    let (code, status) = client.apply(
        "applied",
        "fieldManager=ci",
        &config("applied", "  precedence: 1\n"),
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    let message = status["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Apply failed with 1 conflict: conflict with \"tester\" using config.istio.io/v1alpha2 at "
        ) && message.ends_with(": .spec.precedence"),
        "{message}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"], "FieldManagerConflict",
        "{status}"
    );
    assert_eq!(
        status["details"]["causes"][0]["field"], ".spec.precedence",
        "{status}"
    );
    assert_eq!(client.get("applied")["spec"]["precedence"], 2);

    // A dry run of the forced apply changes nothing.
    let (code, dry) = client.apply(
        "applied",
        "fieldManager=ci&force=true&dryRun=All",
        &config("applied", "  precedence: 1\n"),
    );
    assert_eq!(code, 200, "{dry}");
    assert_eq!(dry["spec"]["precedence"], 1);
    assert_eq!(client.get("applied")["spec"]["precedence"], 2);

    // force takes the field; the other manager, left with nothing, goes.
    let (code, forced) = client.apply(
        "applied",
        "fieldManager=ci&force=true",
        &config("applied", "  precedence: 1\n"),
    );
    assert_eq!(code, 200, "{forced}");
    assert_eq!(forced["spec"]["precedence"], 1);
    assert_eq!(
        managers(&forced),
        ["ci/Apply: .spec.destination.name .spec.precedence"]
    );

    // A second applier sharing a value and adding a label.
    let shared = config("applied", "  precedence: 1\n").replace(
        "  namespace: default\n",
        "  namespace: default\n  labels:\n    team: mesh\n",
    );
    let (code, both) = client.apply("applied", "fieldManager=ops", &shared);
    assert_eq!(code, 200, "{both}");
    assert_eq!(both["metadata"]["labels"]["team"], "mesh");

    // A field the applier leaves out is removed unless another owns it:
    // precedence stays (ops owns it too), the route goes when ci drops it.
    let (code, _) = client.apply(
        "applied",
        "fieldManager=ci",
        &config(
            "applied",
            "  precedence: 1\n  route:\n  - labels:\n      version: v1\n",
        ),
    );
    assert_eq!(code, 200);
    let (code, dropped) = client.apply("applied", "fieldManager=ci", &config("applied", ""));
    assert_eq!(code, 200, "{dropped}");
    assert_eq!(dropped["spec"]["precedence"], 1, "{dropped}");
    assert!(dropped["spec"].get("route").is_none(), "{dropped}");
    assert_eq!(
        managers(&dropped),
        [
            "ci/Apply: .spec.destination.name",
            "ops/Apply: .metadata.labels.team .spec.destination.name .spec.precedence",
        ]
    );

    // Same validation and optimistic concurrency as a PUT.
    let (code, status) = client.apply(
        "applied",
        "fieldManager=ci",
        &config("applied", "  route:\n  - weight: 150\n"),
    );
    assert_eq!(
        (code, status["reason"].as_str()),
        (422, Some("Invalid")),
        "{status}"
    );
    let stale = config("applied", "").replace(
        "  namespace: default\n",
        "  namespace: default\n  resourceVersion: \"1\"\n",
    );
    let (code, status) = client.apply("applied", "fieldManager=ci", &stale);
    assert_eq!(
        (code, status["reason"].as_str()),
        (409, Some("Conflict")),
        "{status}"
    );
    let (code, status) = client.apply("applied", "fieldManager=ci&force=yes", &config("applied", ""));
    assert_eq!(code, 400, "{status}");

    // A PUT of the object as read keeps the managers; what it changes is
    // its manager's.
    let mut read = client.get("applied");
    read["spec"]["precedence"] = json!(3);
    let (answer, replaced) = client.send(
        "PUT",
        &format!("{}/applied?fieldManager=editor", rules("default")),
        "application/json",
        &read.to_string(),
    );
    assert_eq!(answer.code, 200, "{replaced}");
    assert_eq!(
        managers(&replaced),
        [
            "ci/Apply: .spec.destination.name",
            "ops/Apply: .metadata.labels.team .spec.destination.name",
            "editor/Update: .spec.precedence",
        ]
    );
}

/// `fieldValidation`: Warn (the default) and Ignore drop unknown fields,
/// Warn with a `Warning` header per field; Strict refuses them.
fn field_validation(client: &Client) {
    let with_unknown = |name: &str| {
        let mut rule = common::rule(name, "v1");
        rule["spec"]["zzz"] = json!(1);
        rule["spec"]["route"][0]["wieght"] = json!(100);
        rule.to_string()
    };
    let path = rules("default");
    let (answer, status) = client.send(
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        "application/json",
        &with_unknown("strict"),
    );
    assert_eq!(
        (answer.code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    assert_eq!(
        status["message"],
        "RouteRule in version \"v1alpha2\" cannot be handled as a RouteRule: strict decoding error: \
         unknown field \"spec.route[0].wieght\", unknown field \"spec.zzz\" \
         (spec.route[0].wieght: did you mean `weight`?)",
        "{status}"
    );
    assert_eq!(client.send("GET", &format!("{path}/strict"), "", "").0.code, 404);

    for (query, name) in [("", "warned"), ("?fieldValidation=Warn", "warned-too")] {
        let (answer, created) = client.send(
            "POST",
            &format!("{path}{query}"),
            "application/json",
            &with_unknown(name),
        );
        assert_eq!(answer.code, 201, "{created}");
        assert!(created["spec"].get("zzz").is_none(), "{created}");
        let head = answer.head.to_ascii_lowercase();
        assert!(
            head.contains(r#"warning: 299 - "unknown field \"spec.zzz\"""#),
            "{}",
            answer.head
        );
        assert!(
            head.contains(r#"warning: 299 - "unknown field \"spec.route[0].wieght\"""#),
            "{}",
            answer.head
        );
    }
    let (answer, created) = client.send(
        "POST",
        &format!("{path}?fieldValidation=Ignore"),
        "application/json",
        &with_unknown("ignored"),
    );
    assert_eq!(answer.code, 201, "{created}");
    assert!(
        !answer.head.to_ascii_lowercase().contains("warning:"),
        "{}",
        answer.head
    );

    // Finalizers are refused whatever fieldValidation asks (pilot deletes
    // at once); an empty list is none.
    for query in ["", "?fieldValidation=Ignore"] {
        let mut with_finalizer = common::rule("finalized", "v1");
        with_finalizer["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
        let (answer, status) = client.send(
            "POST",
            &format!("{path}{query}"),
            "application/json",
            &with_finalizer.to_string(),
        );
        assert_eq!(
            (answer.code, status["reason"].as_str()),
            (422, Some("Invalid")),
            "{status}"
        );
        assert_eq!(
            status["details"]["causes"][0]["field"], "metadata.finalizers",
            "{status}"
        );
    }
    let finalizer_yaml = config("finalized", "").replace(
        "  namespace: default\n",
        "  namespace: default\n  finalizers:\n  - example.com/cleanup\n",
    );
    let (code, status) = client.apply(
        "finalized",
        "fieldManager=ci&fieldValidation=Ignore",
        &finalizer_yaml,
    );
    assert_eq!(code, 422, "{status}");
    let mut no_finalizers = common::rule("unfinalized", "v1");
    no_finalizers["metadata"]["finalizers"] = json!([]);
    let (answer, created) = client.send("POST", &path, "application/json", &no_finalizers.to_string());
    assert_eq!(answer.code, 201, "{created}");

    // An apply with an unknown field: the same rules, and no one owns it.
    let yaml = config("applied-unknown", "  zzz: 1\n");
    let (code, status) = client.apply("applied-unknown", "fieldManager=ci&fieldValidation=Strict", &yaml);
    assert_eq!(
        (code, status["reason"].as_str()),
        (400, Some("BadRequest")),
        "{status}"
    );
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.ends_with(r#"strict decoding error: unknown field "spec.zzz""#)),
        "{status}"
    );
    let (code, created) = client.apply("applied-unknown", "fieldManager=ci", &yaml);
    assert_eq!(code, 201, "{created}");
    assert_eq!(managers(&created), ["ci/Apply: .spec.destination.name"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_side_apply_on_the_memory_store() {
    let server = TestServer::start(&[]).await;
    let client = Client(server.rest);
    tokio::task::block_in_place(|| {
        server_side_apply(&client);
        field_validation(&client);
    });
    server.stop().await;
}

/// On the journal, in a pilot-discovery process restarted on its
/// directory (the journal's lock is the process's until it exits).
#[test]
fn server_side_apply_on_the_journal_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--data-dir", dir.path().to_str().unwrap()];
    let server = pilot_test_support::Discovery::start(&flags);
    let client = Client(([127, 0, 0, 1], server.port).into());
    server_side_apply(&client);
    let before = client.get("applied");
    drop(server);
    let server = pilot_test_support::Discovery::start(&flags);
    let after = Client(([127, 0, 0, 1], server.port).into()).get("applied");
    assert_eq!(
        after["metadata"]["managedFields"],
        before["metadata"]["managedFields"]
    );
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(after["metadata"]["generation"], before["metadata"]["generation"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_side_apply_on_etcd() {
    let etcd = pilot_test_support::EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &etcd.endpoint()]).await;
    let client = Client(server.rest);
    tokio::task::block_in_place(|| {
        server_side_apply(&client);
        field_validation(&client);
    });
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_side_apply_on_kubernetes() {
    let fake = pilot_kube_fake::FakeApiServer::new();
    let on_fake = common::discovery_on_fake(&fake).await;
    let client = Client(on_fake.rest);
    tokio::task::block_in_place(|| server_side_apply(&client));
    // uid, generation and creation time are the API server's own.
    let object = tokio::task::block_in_place(|| client.get("applied"));
    let resource = kube::api::ApiResource {
        group: "config.istio.io".into(),
        version: "v1alpha2".into(),
        api_version: "config.istio.io/v1alpha2".into(),
        kind: "RouteRule".into(),
        plural: "routerules".into(),
    };
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(fake.client(), "default", &resource);
    let stored = serde_json::to_value(api.get("applied").await.unwrap()).unwrap();
    assert_eq!(object["metadata"]["uid"], stored["metadata"]["uid"], "{stored}");
    assert_eq!(
        object["metadata"]["generation"], stored["metadata"]["generation"],
        "{stored}"
    );
    assert_eq!(
        object["metadata"]["creationTimestamp"], stored["metadata"]["creationTimestamp"],
        "{stored}"
    );
}
