//! The validating admission webhook (`POST /validate` on the webhook
//! listener) over HTTPS, called as the Kubernetes API server calls it
//! (AdmissionReview v1, `curl` verifying the server's certificate):
//! every document of Istio's validation corpus of a kind pilot serves is
//! judged as the REST API judges it (the invalid ones denied naming the
//! object and the field, the valid ones allowed), other kinds and deletes
//! are allowed, and bodies that cannot be decoded get a denial with the
//! reason, never a 500. (The Gateway API's corpus is not read: pilot
//! serves none of its kinds, which the webhook allows as any other kind it
//! does not serve.)

use std::path::Path;
use std::process::Command;

use pilot_server::{Args, Bound};
use serde_json::{Value, json};

struct Webhook {
    url: String,
    /// The REST API (HTTPS, the same certificate).
    rest: String,
    ca: std::path::PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), pilot_server::StartError>>,
    _dir: tempfile::TempDir,
}

async fn start() -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let certs = pilot_test_support::TestCerts::generate(dir.path())
        .expect("openssl (scripts/install-deps installs it)");
    let argv: Vec<String> = [
        "pilot-discovery",
        "--listen",
        "127.0.0.1:0",
        "--xds-listen",
        "127.0.0.1:0",
        "--inject-webhook",
        "127.0.0.1:0",
        "--tls-cert",
        &certs.server_cert.display().to_string(),
        "--tls-key",
        &certs.server_key.display().to_string(),
    ]
    .map(String::from)
    .to_vec();
    let args = Args::parse_with_config(argv).expect("flags");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (bound_tx, bound_rx) = tokio::sync::oneshot::channel::<Bound>();
    let task = tokio::spawn(pilot_server::run(
        args,
        async move {
            let _ = stopped.await;
        },
        move |bound| {
            let _ = bound_tx.send(bound);
        },
    ));
    let bound = bound_rx.await.expect("the server did not start");
    let address = bound.inject.expect("the webhook is bound");
    Webhook {
        url: format!("https://{address}/validate"),
        rest: format!("https://{}", bound.rest),
        ca: certs.ca.clone(),
        stop,
        task,
        _dir: dir,
    }
}

impl Webhook {
    /// POSTs `body` to `/validate`: the HTTP status and the body as JSON.
    async fn post(&self, body: &[u8]) -> (u16, Value) {
        self.post_to(&self.url, body).await
    }

    /// What the REST API answers to a dry-run create of `object` (strict
    /// field validation, as kubectl asks): the HTTP status and the body.
    async fn rest_dry_run(&self, object: &Value, plural: &str) -> (u16, Value) {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
        let url = format!(
            "{}/apis/{api_version}/namespaces/{namespace}/{plural}?dryRun=All&fieldValidation=Strict",
            self.rest
        );
        self.post_to(&url, object.to_string().as_bytes()).await
    }

    /// POSTs `body` over HTTPS, verifying the server's certificate.
    async fn post_to(&self, url: &str, body: &[u8]) -> (u16, Value) {
        let (url, ca) = (url.to_string(), self.ca.clone());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("review.json");
        std::fs::write(&file, body).unwrap();
        let out = tokio::task::spawn_blocking(move || {
            Command::new("curl")
                .args(["-sS", "--cacert"])
                .arg(&ca)
                .args(["-H", "content-type: application/json", "--data-binary"])
                .arg(format!("@{}", file.display()))
                .args(["-w", "\n%{http_code}", &url])
                .output()
                .expect("curl runs (scripts/install-deps installs it)")
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        let value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        (code.parse().unwrap(), value)
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// An AdmissionReview the API server would send for `operation` of
/// `object` (its kind and name read from it).
fn review(uid: &str, operation: &str, object: &Value, dry_run: bool) -> Vec<u8> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default");
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": object["kind"]},
            "resource": {"group": group, "version": version,
                "resource": format!("{}s", object["kind"].as_str().unwrap_or_default().to_lowercase())},
            "name": object["metadata"]["name"],
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin", "groups": ["system:masters"]},
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
        },
    })
    .to_string()
    .into_bytes()
}

fn documents(file: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(file).unwrap();
    pilot_model::document::parse_values(&file.display().to_string(), &text)
        .unwrap_or_else(|e| panic!("{}: {e:?}", file.display()))
}

/// Invalid documents of the corpus pilot's REST API admits, with why: the
/// test checks that the REST API still admits each (so an entry goes when
/// the validation learns the rule) and that the webhook agrees with it.
/// None today: every invalid document of the corpus is refused.
const ADMITTED_BY_THE_API: &[(&str, &str)] = &[];

#[tokio::test(flavor = "multi_thread")]
async fn istios_validation_corpus_is_judged_as_the_rest_api_judges_it() {
    let Some(dir) = pilot_test_support::corpus("istio-v1") else {
        return;
    };
    let registry = pilot_api::default_registry();
    let webhook = start().await;
    let (mut denied, mut allowed, mut foreign) = (0, 0, 0);
    let mut wrong = Vec::new();
    for file in pilot_test_support::corpus_files(&dir, &[".yaml", ".yml"]) {
        let file_name = file.file_name().unwrap().to_string_lossy().into_owned();
        let invalid = file_name.starts_with("invalid_");
        let known_gap = ADMITTED_BY_THE_API.iter().any(|(name, _)| *name == file_name);
        for (index, object) in documents(&file).into_iter().enumerate() {
            let kind = object["kind"].as_str().unwrap_or_default();
            let group = object["apiVersion"]
                .as_str()
                .and_then(|v| v.split_once('/'))
                .map(|(g, _)| g)
                .unwrap_or_default();
            let schema = registry.get(kind).filter(|s| s.group == group);
            let uid = format!("{file_name}-{index}");
            let dry_run = index % 2 == 1;
            let (code, answer) = webhook.post(&review(&uid, "CREATE", &object, dry_run)).await;
            assert_eq!(code, 200, "{uid}: {answer}");
            assert_eq!(answer["apiVersion"], "admission.k8s.io/v1", "{uid}");
            assert_eq!(answer["kind"], "AdmissionReview", "{uid}");
            let response = &answer["response"];
            assert_eq!(response["uid"], uid.as_str());
            let is_allowed = response["allowed"] == true;
            let Some(schema) = schema else {
                // Not pilot's kind: allowed, as Istio's webhook does.
                assert!(
                    is_allowed,
                    "{uid}: a kind pilot does not serve was denied: {answer}"
                );
                foreign += 1;
                continue;
            };
            // The REST API is the judge: the same verdict, the same message.
            let (rest_code, rest) = webhook.rest_dry_run(&object, &schema.plural).await;
            let message = response["status"]["message"].as_str().unwrap_or_default();
            if is_allowed != (rest_code == 201) {
                wrong.push(format!(
                    "{uid}: the webhook says allowed={is_allowed}, the REST API {rest_code}: {rest}"
                ));
                continue;
            }
            if !is_allowed {
                let rest_message = rest["message"].as_str().unwrap_or_default();
                if !message.ends_with(rest_message) || response["status"]["code"] != rest_code {
                    wrong.push(format!(
                        "{uid}: the webhook's denial {response} is not the REST API's {rest}"
                    ));
                    continue;
                }
            }
            if invalid && !known_gap {
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                let fields: Vec<&str> = response["status"]["details"]["causes"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["field"].as_str())
                    .filter(|f| !f.is_empty())
                    .collect();
                if is_allowed {
                    wrong.push(format!("{uid}: an invalid {kind} was allowed"));
                } else if !message.contains(&format!("{kind} default/{name}"))
                    || !fields.iter().any(|f| message.contains(f))
                {
                    wrong.push(format!(
                        "{uid}: the denial does not name the object and field: {response}"
                    ));
                } else {
                    denied += 1;
                }
            } else if invalid {
                assert!(
                    is_allowed,
                    "{uid} is refused now: remove it from ADMITTED_BY_THE_API"
                );
            } else if is_allowed {
                allowed += 1;
            } else {
                // A valid Istio document pilot refuses (a field its data
                // plane does not support): the REST API refuses it alike.
                eprintln!("{uid}: refused by the REST API and the webhook alike: {message}");
            }
        }
    }
    webhook.stop().await;
    assert!(
        wrong.is_empty(),
        "{} wrong answers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        denied > 40 && allowed > 40,
        "denied {denied}, allowed {allowed}, other kinds {foreign}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn deletes_updates_and_dry_runs_are_judged_as_istio_does() {
    let webhook = start().await;
    let invalid = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "reviews", "namespace": "bookinfo"},
        "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}, "weight": -1}]}]}});
    // A delete is allowed whatever the object.
    let (code, answer) = webhook.post(&review("d1", "DELETE", &invalid, false)).await;
    assert_eq!(
        (code, &answer["response"]["allowed"]),
        (200, &json!(true)),
        "{answer}"
    );
    // An update and a dry run are judged as a create.
    for (uid, operation, dry_run) in [("u1", "UPDATE", false), ("c1", "CREATE", true)] {
        let (code, answer) = webhook.post(&review(uid, operation, &invalid, dry_run)).await;
        assert_eq!(code, 200);
        assert_eq!(answer["response"]["uid"], uid);
        assert_eq!(answer["response"]["allowed"], false, "{answer}");
        let message = answer["response"]["status"]["message"].as_str().unwrap();
        assert!(
            message.contains("VirtualService bookinfo/reviews is invalid")
                && message.contains("spec.http[0].route[0].weight"),
            "{message}"
        );
    }
    // An update is also judged against the object it replaces: a
    // GatewayClass's controllerName is immutable (the CRD's transition
    // rule, which an API server without the Gateway API's CRDs would not
    // check).
    let class = |controller: &str| {
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass",
            "metadata": {"name": "edge", "namespace": "default"},
            "spec": {"controllerName": controller}})
    };
    for (uid, old, new, allowed) in [
        ("g1", "example.com/a", "example.com/a", true),
        ("g2", "example.com/a", "example.net/b", false),
    ] {
        let mut body: Value = serde_json::from_slice(&review(uid, "UPDATE", &class(new), false)).unwrap();
        body["request"]["oldObject"] = class(old);
        let (code, answer) = webhook.post(&serde_json::to_vec(&body).unwrap()).await;
        assert_eq!(
            (code, &answer["response"]["allowed"]),
            (200, &json!(allowed)),
            "{answer}"
        );
        if !allowed {
            let message = answer["response"]["status"]["message"].as_str().unwrap();
            assert!(
                message.contains("spec.controllerName") && message.contains("Value is immutable"),
                "{message}"
            );
        }
    }
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn undecodable_bodies_are_denied_with_the_reason_never_a_500() {
    let webhook = start().await;
    let valid = json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService",
        "metadata": {"name": "reviews"},
        "spec": {"hosts": ["reviews"], "http": [{"route": [{"destination": {"host": "reviews"}}]}]}});
    let with_object = |object: Value| {
        let mut review: Value = serde_json::from_slice(&review("o1", "CREATE", &valid, false)).unwrap();
        review["request"]["object"] = object;
        review.to_string().into_bytes()
    };
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        ("not JSON", b"{\"apiVersion\": ".to_vec(), 400, "not JSON"),
        ("not UTF-8", vec![0xff, 0xfe, 0x00], 400, "not JSON"),
        (
            "no uid",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#.to_vec(),
            400,
            "request.uid",
        ),
        (
            "another version",
            br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"b1"}}"#
                .to_vec(),
            200,
            "admission.k8s.io/v1",
        ),
        ("no object", with_object(Value::Null), 200, "request.object"),
        (
            "a string as object",
            with_object(json!("spec")),
            200,
            "request.object",
        ),
        (
            "an object without spec fields",
            with_object(
                json!({"apiVersion": "networking.istio.io/v1", "kind": "VirtualService", "metadata": {"name": "x"}, "spec": {"hosts": 7}}),
            ),
            200,
            "spec.hosts",
        ),
    ];
    for (what, body, expected_code, reason) in cases {
        let (code, answer) = webhook.post(&body).await;
        assert_eq!(code, expected_code, "{what}: {answer}");
        assert_eq!(answer["kind"], "AdmissionReview", "{what}: {answer}");
        assert_eq!(answer["response"]["allowed"], false, "{what}: {answer}");
        let message = answer["response"]["status"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(reason), "{what}: {message}");
    }
    webhook.stop().await;
}
