//! The validating webhook through the (fake) Kubernetes API server, as in
//! a cluster: pilot-discovery on `--store kubernetes` is given the
//! `ValidatingWebhookConfiguration` as shipped (`failurePolicy: Ignore`,
//! no caBundle) with `--validation-webhook-config`; it writes its CA into
//! the caBundle, its self-test (a dry-run create of an invalid object) is
//! denied by its webhook through the API server, and it sets `failurePolicy:
//! Fail`. Then real kubectl's `apply` of an invalid VirtualService is
//! refused naming the field, a valid one is accepted, and a dry run
//! (`--dry-run=server`) is judged alike and stores nothing. A configuration
//! re-applied as shipped is armed again.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use pilot_system_tests::{Store, discovery};
use pilot_test_support::{FakeCluster, TestCerts, eventually, free_port, workspace};

const CONFIGURATION: &str = "pilot-validator";

fn kubectl(cluster: &FakeCluster, home: &Path, args: &[&str]) -> Output {
    let kubectl: PathBuf = workspace().join(".tools/kubectl/bin/kubectl");
    assert!(
        kubectl.exists(),
        "{} is missing: run scripts/install-deps",
        kubectl.display()
    );
    Command::new(kubectl)
        .arg("--request-timeout=60s")
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig())
        // Discovery cached per test, not in the user's home.
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("cannot run kubectl")
}

/// The configuration as a manifest ships it: every networking.istio.io
/// write sent to `/validate` at `port`, failing open until pilot says.
fn shipped_configuration(port: u16) -> ValidatingWebhookConfiguration {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION},
        "webhooks": [{
            "name": "validation.pilot.istio.io",
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate")},
            "rules": [{"operations": ["CREATE", "UPDATE"],
                "apiGroups": ["networking.istio.io", "security.istio.io"],
                "apiVersions": ["*"], "resources": ["*"]}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    }))
    .unwrap()
}

const INVALID: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
      weight: -5
";

const VALID: &str = "apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: reviews
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
";

#[test]
fn pilot_arms_its_webhook_and_the_api_server_refuses_invalid_objects() {
    let cluster = FakeCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl (scripts/install-deps installs it)");
    let port = free_port();
    let configurations: Api<ValidatingWebhookConfiguration> = Api::all(cluster.client());
    cluster
        .block_on(configurations.create(&PostParams::default(), &shipped_configuration(port)))
        .unwrap();

    let webhook = format!("127.0.0.1:{port}");
    let (cert, key, ca) = (
        certs.server_cert.display().to_string(),
        certs.server_key.display().to_string(),
        certs.ca.display().to_string(),
    );
    let server = discovery(
        &Store::Kubernetes(&cluster),
        &[
            "--inject-webhook",
            &webhook,
            "--tls-cert",
            &cert,
            "--tls-key",
            &key,
            "--validation-webhook-config",
            CONFIGURATION,
            "--webhook-ca-bundle",
            &ca,
        ],
    );

    // pilot writes its CA and, after its self-test, fails closed.
    let ca_pem = std::fs::read(&certs.ca).unwrap();
    eventually(
        "the webhook configuration to carry the CA and fail closed",
        || {
            let current = cluster.block_on(configurations.get(CONFIGURATION)).unwrap();
            current.webhooks.unwrap_or_default().iter().all(|w| {
                w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca_pem)
                    && w.failure_policy.as_deref() == Some("Fail")
            })
        },
    );
    // The log line follows the write the test has just seen.
    eventually("the server to log what it did", || {
        let log = server.log();
        log.contains("caBundle written") && log.contains("failurePolicy set to Fail")
    });

    // kubectl's apply of an invalid VirtualService is refused naming the
    // field; nothing is stored.
    let files = tempfile::tempdir().unwrap();
    let (invalid, valid) = (files.path().join("invalid.yaml"), files.path().join("valid.yaml"));
    std::fs::write(&invalid, INVALID).unwrap();
    std::fs::write(&valid, VALID).unwrap();
    let home = files.path();
    let path = |p: &Path| p.display().to_string();
    for dry_run in [Some("--dry-run=server"), None] {
        let mut args = vec!["apply", "--validate=false", "-f"];
        let file = path(&invalid);
        args.push(&file);
        args.extend(dry_run);
        let refused = kubectl(&cluster, home, &args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{dry_run:?}: {refused:?}");
        // kubectl prints an Invalid status by its causes, as it prints the
        // REST API's own refusal.
        assert!(
            stderr.contains("The VirtualService \"reviews\" is invalid")
                && stderr.contains("spec.http[0].route[0].weight: weight -5 < 0"),
            "{dry_run:?}: {stderr}"
        );
    }
    let virtual_services: Api<DynamicObject> = Api::namespaced_with(
        cluster.client(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("networking.istio.io", "v1", "VirtualService"),
            "virtualservices",
        ),
    );
    assert!(
        cluster
            .block_on(virtual_services.get_opt("reviews"))
            .unwrap()
            .is_none()
    );
    // The refusal is the webhook's, as the API server words it.
    let object: DynamicObject = serde_json::from_value(
        serde_json::to_value(
            pilot_model::document::parse_values("invalid.yaml", INVALID).unwrap()[0].clone(),
        )
        .unwrap(),
    )
    .unwrap();
    let refused = cluster.block_on(virtual_services.create(&PostParams::default(), &object));
    let Err(kube::Error::Api(status)) = refused else {
        panic!("expected a refusal, got {refused:?}");
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (422, "Invalid"),
        "{status:?}"
    );
    assert_eq!(
        status.message,
        "admission webhook \"validation.pilot.istio.io\" denied the request: \
         VirtualService default/reviews is invalid: spec.http[0].route[0].weight: weight -5 < 0"
    );

    // A dry run of a valid one is accepted and stores nothing; the apply
    // itself stores it.
    let file = path(&valid);
    let dry = kubectl(
        &cluster,
        home,
        &["apply", "--validate=false", "--dry-run=server", "-f", &file],
    );
    assert!(dry.status.success(), "{dry:?}");
    assert!(
        cluster
            .block_on(virtual_services.get_opt("reviews"))
            .unwrap()
            .is_none()
    );
    let applied = kubectl(&cluster, home, &["apply", "--validate=false", "-f", &file]);
    assert!(applied.status.success(), "{applied:?}");
    assert!(
        String::from_utf8_lossy(&applied.stdout)
            .contains("virtualservice.networking.istio.io/reviews created"),
        "{applied:?}"
    );
    assert!(
        cluster
            .block_on(virtual_services.get_opt("reviews"))
            .unwrap()
            .is_some()
    );
    // A deploy tool re-applies the configuration as shipped: pilot writes
    // its CA again and, after a new self-test, fails closed again.
    let mut shipped = shipped_configuration(port);
    shipped.metadata.resource_version = cluster
        .block_on(configurations.get(CONFIGURATION))
        .unwrap()
        .metadata
        .resource_version;
    cluster
        .block_on(configurations.replace(CONFIGURATION, &PostParams::default(), &shipped))
        .unwrap();
    eventually("pilot to arm the re-applied configuration again", || {
        let current = cluster.block_on(configurations.get(CONFIGURATION)).unwrap();
        current.webhooks.unwrap_or_default().iter().all(|w| {
            w.client_config.ca_bundle.as_ref().map(|b| &b.0) == Some(&ca_pem)
                && w.failure_policy.as_deref() == Some("Fail")
        })
    });

    // The self-test's object was never stored.
    assert!(
        cluster
            .block_on(virtual_services.get_opt("pilot-webhook-self-test"))
            .unwrap()
            .is_none()
    );
}
