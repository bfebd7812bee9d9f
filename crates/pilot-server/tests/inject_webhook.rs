//! The sidecar injection webhook over HTTPS, called as the Kubernetes API
//! server calls it (AdmissionReview v1, `curl` as the client): its patch
//! applied to the pod gives `pilotctl kube-inject`'s pod; malformed reviews
//! get an answer by the failure policy; no TLS, no webhook.

use std::process::Command;

use pilot_inject::{InjectTemplate, inject_object};
use pilot_server::{Args, Bound};
use serde_json::{Value, json};

struct Webhook {
    url: String,
    ca: std::path::PathBuf,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), pilot_server::StartError>>,
    _dir: tempfile::TempDir,
}

async fn start(extra: &[&str]) -> Webhook {
    let dir = tempfile::tempdir().unwrap();
    let certs = pilot_test_support::TestCerts::generate(dir.path())
        .expect("openssl (scripts/install-deps installs it)");
    let (cert, key) = (&certs.server_cert, &certs.server_key);
    let mut argv: Vec<String> = [
        "pilot-discovery",
        "--listen",
        "127.0.0.1:0",
        "--xds-listen",
        "127.0.0.1:0",
    ]
    .map(String::from)
    .to_vec();
    argv.extend(["--inject-webhook".into(), "127.0.0.1:0".into()]);
    argv.extend(["--tls-cert".into(), cert.display().to_string()]);
    argv.extend(["--tls-key".into(), key.display().to_string()]);
    argv.extend(extra.iter().map(|s| s.to_string()));
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
        url: format!("https://{address}/inject"),
        ca: certs.ca.clone(),
        stop,
        task,
        _dir: dir,
    }
}

impl Webhook {
    /// POSTs `body` over HTTPS, verifying the server's certificate.
    async fn post(&self, body: &str) -> Value {
        let (url, ca, body) = (self.url.clone(), self.ca.clone(), body.to_string());
        let out = tokio::task::spawn_blocking(move || {
            Command::new("curl")
                .args(["-sS", "--fail-with-body", "--cacert"])
                .arg(&ca)
                .args([
                    "-H",
                    "content-type: application/json",
                    "--data-binary",
                    &body,
                    &url,
                ])
                .output()
                .expect("curl runs (scripts/install-deps installs it)")
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

fn review(uid: &str, object: Value) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "bookinfo",
            "operation": "CREATE",
            "object": object,
        },
    })
    .to_string()
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "reviews-v1-", "labels": {"app": "reviews"}},
        "spec": {"containers": [{"name": "reviews", "image": "reviews:1", "ports": [{"containerPort": 9080}]}]},
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn the_patch_gives_kube_injects_pod() {
    let webhook = start(&[]).await;
    let answer = webhook.post(&review("a1b2", pod())).await;
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"], "a1b2");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let patch = decode64(response["patch"].as_str().unwrap());
    let patch: Value = serde_json::from_slice(&patch).unwrap();

    let mut patched = pod();
    for op in patch.as_array().unwrap() {
        assert_eq!(op["op"], "add");
        let path = op["path"].as_str().unwrap();
        if let Some(parent) = path.strip_suffix("/-") {
            patched
                .pointer_mut(parent)
                .unwrap()
                .as_array_mut()
                .unwrap()
                .push(op["value"].clone());
        } else {
            let (parent, key) = path.rsplit_once('/').unwrap();
            let key = key.replace("~1", "/").replace("~0", "~");
            patched.pointer_mut(parent).unwrap()[key] = op["value"].clone();
        }
    }
    let mut expected = pod();
    inject_object(&mut expected, &InjectTemplate::default()).unwrap();
    assert_eq!(patched, expected);
    webhook.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_reviews_are_answered_by_the_failure_policy() {
    let webhook = start(&[]).await;
    let answer = webhook.post("{\"kind\": \"AdmissionReview\"").await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(
        answer["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );
    webhook.stop().await;

    let webhook = start(&["--inject-failure-policy", "fail"]).await;
    let mut bad = pod();
    bad["metadata"]["annotations"] =
        json!({"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/99"});
    let answer = webhook.post(&review("c3", bad)).await;
    assert_eq!(answer["response"]["uid"], "c3");
    assert_eq!(answer["response"]["allowed"], false);
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("excludeOutboundIPRanges") && message.contains("prefix"),
        "{message}"
    );

    // Opted out: admitted unchanged.
    let mut out = pod();
    out["metadata"]["annotations"] = json!({"sidecar.istio.io/inject": "false"});
    let answer = webhook.post(&review("d4", out)).await;
    assert_eq!(answer["response"]["allowed"], true);
    assert!(answer["response"].get("patch").is_none());
    webhook.stop().await;
}

#[test]
fn the_webhook_needs_tls() {
    let error = Args::parse_with_config(
        ["pilot-discovery", "--inject-webhook", "127.0.0.1:0"]
            .map(String::from)
            .to_vec(),
    )
    .unwrap_err()
    .to_string();
    assert!(error.contains("--tls-cert"), "{error}");
}

fn decode64(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0);
    for c in text.bytes().filter(|c| *c != b'=') {
        buffer = (buffer << 6) | ALPHABET.iter().position(|a| *a == c).unwrap() as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}
