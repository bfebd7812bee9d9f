//! pilot-discovery in a pod, as far as this machine can make one: no
//! kubeconfig, `KUBERNETES_SERVICE_HOST`/`PORT` naming the fake API server
//! served over TLS (a certificate for 127.0.0.1 from the tests' CA), and a
//! service-account directory (`token`, `ca.crt`, `namespace`) given with
//! `--kube-service-account-dir`. The fake requires a valid bearer token of
//! every request. pilot-discovery starts with the Kubernetes store, keeps
//! its replica Lease in the pod's namespace, and when the token is rotated
//! in the file and the old one revoked, its writes keep working.

mod common;

use std::time::Duration;

use common::{rule, rules};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_test_support::{Discovery, TestCerts, eventually, http};

const HOUR: Duration = Duration::from_secs(3600);
const POD_NAMESPACE: &str = "pilot-system";

/// Replaces `path` with `text` as the kubelet does: a new file moved into
/// place.
fn rotate(path: &std::path::Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

/// POSTs a route rule named `name` to pilot's REST API: the status code.
fn create_rule(rest: std::net::SocketAddr, name: &str) -> u16 {
    let body = serde_json::to_vec(&rule(name, "v1")).unwrap();
    http::request(
        rest,
        "POST",
        &rules("default"),
        &[("content-type", "application/json")],
        &body,
    )
    .unwrap()
    .code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_pod_pilot_uses_the_service_account_over_tls_and_follows_token_rotation() {
    let certs_dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(certs_dir.path()).expect("openssl makes the test certificates");
    let fake = FakeApiServer::new();
    let listening = fake
        .listen_tls(
            &std::fs::read(&certs.server_cert).unwrap(),
            &std::fs::read(&certs.server_key).unwrap(),
        )
        .await
        .unwrap();
    Api::<Namespace>::all(fake.client())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": POD_NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    fake.require_authentication(true);

    let account = tempfile::tempdir().unwrap();
    let token_file = account.path().join("token");
    let first = fake.issue_token(POD_NAMESPACE, "pilot-discovery", &[], HOUR);
    std::fs::write(&token_file, &first).unwrap();
    std::fs::copy(&certs.ca, account.path().join("ca.crt")).unwrap();
    std::fs::write(account.path().join("namespace"), format!("{POD_NAMESPACE}\n")).unwrap();

    let account_dir = account.path().display().to_string();
    let port = listening.address().port().to_string();
    let discovery = tokio::task::spawn_blocking(move || {
        Discovery::start_with_env(
            &[
                "--store",
                "kubernetes",
                "--install-crds",
                "--kube-service-account-dir",
                &account_dir,
            ],
            &[
                ("KUBERNETES_SERVICE_HOST", "127.0.0.1".as_ref()),
                ("KUBERNETES_SERVICE_PORT", port.as_ref()),
            ],
        )
    })
    .await
    .unwrap();
    let rest: std::net::SocketAddr = ([127, 0, 0, 1], discovery.port).into();
    assert_eq!(create_rule(rest, "before-rotation"), 201, "{}", discovery.log());

    // The replica's Lease is in the pod's namespace (no --kube-namespace).
    let admin = fake.issue_token("kube-system", "admin", &[], HOUR);
    let leases: Api<Lease> = Api::namespaced(fake.client_as(&admin), POD_NAMESPACE);
    let found = leases.list(&ListParams::default()).await.unwrap().items;
    assert!(
        !found.is_empty(),
        "no Lease in {POD_NAMESPACE}: {}",
        discovery.log()
    );

    // The kubelet rotates the token; the old one is revoked at once.
    let second = fake.issue_token(POD_NAMESPACE, "pilot-discovery", &[], HOUR);
    rotate(&token_file, &second);
    assert!(fake.revoke_token(&first));
    assert_eq!(create_rule(rest, "after-rotation"), 201, "{}", discovery.log());
    tokio::task::spawn_blocking(move || {
        eventually("both rules listed by pilot", || {
            let (code, body) = discovery.get(&rules("default"));
            code == 200 && body.contains("before-rotation") && body.contains("after-rotation")
        })
    })
    .await
    .unwrap();
}
