//! The fake API server's admission webhooks, through a real
//! `kube::Client`, against an HTTPS webhook served by the test: the
//! webhook configurations are resources; matching writes are sent to the
//! webhooks as AdmissionReviews; a denial answers the client as the
//! Kubernetes API server does; mutating webhooks' patches are stored and
//! seen by the validating ones; the failure policy decides about webhooks
//! that cannot be called; a dry run is admitted and never stored.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, Status};
use pilot_kube_fake::FakeApiServer;
use serde_json::{Value, json};

/// A webhook served over HTTPS on a loopback port: the reviews it got, and
/// how it answers them.
struct Webhook {
    url: String,
    ca_bundle: String,
    reviews: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Webhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Judge = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

async fn webhook(judge: impl Fn(&Value) -> Value + Send + Sync + 'static) -> Webhook {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let reviews = Arc::new(Mutex::new(Vec::new()));
    let judge: Judge = Arc::new(judge);
    let seen = Arc::clone(&reviews);
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, judge, seen) = (acceptor.clone(), Arc::clone(&judge), Arc::clone(&seen));
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let service =
                    hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
                        let (judge, seen) = (Arc::clone(&judge), Arc::clone(&seen));
                        async move {
                            let body = request.into_body().collect().await.unwrap().to_bytes();
                            let review: Value = serde_json::from_slice(&body).unwrap();
                            let answer = judge(&review);
                            seen.lock().unwrap().push(review);
                            Ok::<_, Infallible>(http::Response::new(Full::new(Bytes::from(
                                answer.to_string(),
                            ))))
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Webhook {
        url: format!("https://{address}/validate"),
        ca_bundle: base64(ca.pem().as_bytes()),
        reviews,
        task,
    }
}

fn answer(review: &Value, response: Value) -> Value {
    let mut response = response;
    response["uid"] = review["request"]["uid"].clone();
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
}

/// Refuses config maps whose data has `bad`, as pilot's webhook refuses an
/// invalid object.
fn refuse_bad(review: &Value) -> Value {
    if review["request"]["object"]["data"]["bad"].is_string() {
        answer(
            review,
            json!({"allowed": false, "status": {"code": 422, "reason": "Invalid",
                "message": "ConfigMap default/x is invalid: data.bad: not allowed"}}),
        )
    } else {
        answer(review, json!({"allowed": true}))
    }
}

fn configuration(kind: &str, name: &str, webhooks: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": webhooks,
    }))
    .unwrap()
}

fn config_map_webhook(name: &str, url: &str, ca_bundle: &str, policy: &str) -> Value {
    json!({
        "name": name,
        "clientConfig": {"url": url, "caBundle": ca_bundle},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
            "resources": ["configmaps"], "scope": "Namespaced"}],
        "failurePolicy": policy, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "timeoutSeconds": 5,
    })
}

fn api(fake: &FakeApiServer, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(fake.client(), &ApiResource::from_gvk_with_plural(&gvk, plural))
}

fn validating(fake: &FakeApiServer) -> Api<DynamicObject> {
    api(
        fake,
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    )
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

fn api_error(error: kube::Error) -> Box<Status> {
    match error {
        kube::Error::Api(status) => status,
        other => panic!("expected a Status from the API server, got {other}"),
    }
}

fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

#[tokio::test]
async fn a_validating_webhook_refuses_writes_as_the_api_server_answers() {
    let fake = FakeApiServer::new();
    let hook = webhook(refuse_bad).await;
    let configurations = validating(&fake);
    let webhooks = json!([config_map_webhook(
        "check.example.com",
        &hook.url,
        &hook.ca_bundle,
        "Fail"
    )]);
    configurations
        .create(
            &PostParams::default(),
            &configuration("ValidatingWebhookConfiguration", "check", webhooks),
        )
        .await
        .unwrap();
    // Cluster-scoped, listed like any resource.
    let listed = configurations.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);

    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let refused = api_error(
        maps.create(&PostParams::default(), &config_map("x", json!({"bad": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422, "{refused:?}");
    assert_eq!(refused.reason, "Invalid");
    assert_eq!(
        refused.message,
        "admission webhook \"check.example.com\" denied the request: ConfigMap default/x is invalid: data.bad: not allowed"
    );
    assert!(
        maps.get_opt("x").await.unwrap().is_none(),
        "a refused object is not stored"
    );

    let created = maps
        .create(&PostParams::default(), &config_map("x", json!({"good": "1"})))
        .await
        .unwrap();
    // An update is reviewed with the old object.
    let mut changed = created.clone();
    changed.data = Some([("bad".to_string(), "2".to_string())].into());
    let refused = api_error(
        maps.replace("x", &PostParams::default(), &changed)
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    {
        let reviews = hook.reviews.lock().unwrap();
        let last = &reviews.last().unwrap()["request"];
        assert_eq!(last["operation"], "UPDATE");
        assert_eq!(last["oldObject"]["data"]["good"], "1");
        assert_eq!(
            last["kind"],
            json!({"group": "", "version": "v1", "kind": "ConfigMap"})
        );
        assert_eq!(
            last["resource"],
            json!({"group": "", "version": "v1", "resource": "configmaps"})
        );
        assert_eq!(
            (&last["name"], &last["namespace"]),
            (&json!("x"), &json!("default"))
        );
        assert_eq!(last["dryRun"], false);
        assert!(last["userInfo"]["username"].is_string());
    }
    // Deletes are not in the rules: not reviewed.
    let before = hook.reviews.lock().unwrap().len();
    maps.delete("x", &DeleteParams::default()).await.unwrap();
    assert_eq!(hook.reviews.lock().unwrap().len(), before);
}

#[tokio::test]
async fn mutating_webhooks_patch_before_validating_ones_see_the_object() {
    let fake = FakeApiServer::new();
    let mutator = webhook(|review| {
        let patch = json!([{"op": "add", "path": "/data/injected", "value": "yes"}]);
        answer(
            review,
            json!({"allowed": true, "patchType": "JSONPatch", "patch": base64(patch.to_string().as_bytes())}),
        )
    })
    .await;
    let validator = webhook(|review| answer(review, json!({"allowed": true}))).await;
    api(
        &fake,
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    )
    .create(
        &PostParams::default(),
        &configuration(
            "MutatingWebhookConfiguration",
            "inject",
            json!([config_map_webhook(
                "inject.example.com",
                &mutator.url,
                &mutator.ca_bundle,
                "Fail"
            )]),
        ),
    )
    .await
    .unwrap();
    validating(&fake)
        .create(
            &PostParams::default(),
            &configuration(
                "ValidatingWebhookConfiguration",
                "check",
                json!([config_map_webhook(
                    "check.example.com",
                    &validator.url,
                    &validator.ca_bundle,
                    "Fail"
                )]),
            ),
        )
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let created = maps
        .create(&PostParams::default(), &config_map("m", json!({"a": "1"})))
        .await
        .unwrap();
    assert_eq!(created.data.unwrap()["injected"], "yes");
    assert_eq!(maps.get("m").await.unwrap().data.unwrap()["injected"], "yes");
    let seen = validator.reviews.lock().unwrap();
    assert_eq!(seen[0]["request"]["object"]["data"]["injected"], "yes");
}

#[tokio::test]
async fn the_failure_policy_decides_about_webhooks_that_cannot_be_called() {
    let fake = FakeApiServer::new();
    let hook = webhook(refuse_bad).await;
    // The right URL with another CA: TLS fails.
    let other = webhook(refuse_bad).await;
    let configurations = validating(&fake);
    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    for (policy, bundle) in [
        ("Ignore", ""),
        ("Ignore", other.ca_bundle.as_str()),
        ("Fail", ""),
        ("Fail", other.ca_bundle.as_str()),
    ] {
        let name = format!("{}-{}", policy.to_lowercase(), bundle.len());
        let webhooks = json!([config_map_webhook("check.example.com", &hook.url, bundle, policy)]);
        configurations
            .create(
                &PostParams::default(),
                &configuration("ValidatingWebhookConfiguration", &name, webhooks),
            )
            .await
            .unwrap();
        let written = maps
            .create(&PostParams::default(), &config_map(&name, json!({"bad": "1"})))
            .await;
        match policy {
            "Ignore" => assert!(written.is_ok(), "{name}: {written:?}"),
            _ => {
                let failed = api_error(written.unwrap_err());
                assert_eq!(
                    (failed.code, failed.reason.as_str()),
                    (500, "InternalError"),
                    "{failed:?}"
                );
                assert!(
                    failed
                        .message
                        .contains("failed calling webhook \"check.example.com\""),
                    "{}",
                    failed.message
                );
            }
        }
        configurations
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
    }
    assert!(hook.reviews.lock().unwrap().is_empty(), "no call got through TLS");
    // A service reference cannot be resolved by the fake: a failed call.
    let mut unresolvable = config_map_webhook("svc.example.com", &hook.url, &hook.ca_bundle, "Fail");
    unresolvable["clientConfig"] =
        json!({"service": {"name": "pilot-discovery", "namespace": "pilot-system"}});
    configurations
        .create(
            &PostParams::default(),
            &configuration("ValidatingWebhookConfiguration", "svc", json!([unresolvable])),
        )
        .await
        .unwrap();
    let failed = api_error(
        maps.create(&PostParams::default(), &config_map("s", json!({})))
            .await
            .unwrap_err(),
    );
    assert!(
        failed.message.contains("clientConfig.service"),
        "{}",
        failed.message
    );
}

#[tokio::test]
async fn a_dry_run_is_reviewed_and_never_stored() {
    let fake = FakeApiServer::new();
    let hook = webhook(refuse_bad).await;
    let configurations = validating(&fake);
    let webhooks = json!([config_map_webhook(
        "check.example.com",
        &hook.url,
        &hook.ca_bundle,
        "Fail"
    )]);
    configurations
        .create(
            &PostParams::default(),
            &configuration("ValidatingWebhookConfiguration", "check", webhooks),
        )
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let revision = fake.revision();
    let refused = api_error(
        maps.create(&dry, &config_map("d", json!({"bad": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    let answered = maps
        .create(&dry, &config_map("d", json!({"good": "1"})))
        .await
        .unwrap();
    assert_eq!(answered.metadata.name.as_deref(), Some("d"));
    assert!(
        maps.get_opt("d").await.unwrap().is_none(),
        "a dry run is not stored"
    );
    assert_eq!(fake.revision(), revision, "a dry run moves no version");
    assert!(
        hook.reviews
            .lock()
            .unwrap()
            .iter()
            .all(|r| r["request"]["dryRun"] == true)
    );
    // A dry-run delete and apply are checked and forgotten too.
    maps.create(&PostParams::default(), &config_map("kept", json!({})))
        .await
        .unwrap();
    let dry_delete = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    maps.delete("kept", &dry_delete).await.unwrap();
    assert!(maps.get_opt("kept").await.unwrap().is_some());
    let apply = PatchParams::apply("test").dry_run();
    maps.patch(
        "kept",
        &apply,
        &Patch::Apply(config_map("kept", json!({"new": "1"}))),
    )
    .await
    .unwrap();
    assert!(
        maps.get("kept")
            .await
            .unwrap()
            .data
            .is_none_or(|d| !d.contains_key("new"))
    );
    // A webhook with side effects refuses dry runs.
    let mut effects = configurations.get("check").await.unwrap();
    effects.data["webhooks"][0]["sideEffects"] = json!("Unknown");
    configurations
        .replace("check", &PostParams::default(), &effects)
        .await
        .unwrap();
    let refused = api_error(maps.create(&dry, &config_map("e", json!({}))).await.unwrap_err());
    assert_eq!(refused.code, 400);
    assert!(
        refused.message.contains("does not support dry run"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn selectors_choose_the_namespaces_and_objects_reviewed() {
    let fake = FakeApiServer::new();
    let hook = webhook(refuse_bad).await;
    let mut selective = config_map_webhook("check.example.com", &hook.url, &hook.ca_bundle, "Fail");
    selective["namespaceSelector"] = json!({"matchLabels": {"validate": "yes"}});
    selective["objectSelector"] = json!({"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]});
    validating(&fake)
        .create(
            &PostParams::default(),
            &configuration("ValidatingWebhookConfiguration", "check", json!([selective])),
        )
        .await
        .unwrap();
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(fake.client());
    let labelled: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(json!({"metadata": {"name": "checked", "labels": {"validate": "yes"}}}))
            .unwrap();
    namespaces
        .create(&PostParams::default(), &labelled)
        .await
        .unwrap();
    // Not selected: the default namespace has no label.
    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    maps.create(&PostParams::default(), &config_map("a", json!({"bad": "1"})))
        .await
        .unwrap();
    let checked: Api<ConfigMap> = Api::namespaced(fake.client(), "checked");
    let refused = api_error(
        checked
            .create(&PostParams::default(), &config_map("a", json!({"bad": "1"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(refused.code, 422);
    let mut skipped = config_map("b", json!({"bad": "1"}));
    skipped.metadata.labels = Some([("skip".to_string(), "1".to_string())].into());
    checked.create(&PostParams::default(), &skipped).await.unwrap();
    assert_eq!(hook.reviews.lock().unwrap().len(), 1);
}
