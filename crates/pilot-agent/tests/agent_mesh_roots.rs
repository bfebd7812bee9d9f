//! An injected sidecar's trust, end to end, without any CA but the mesh's:
//! pilot-discovery serves ADS with a certificate its own CA issued for its
//! name (`--xds-tls-dns-names`) and writes the mesh's trust bundle into
//! every namespace (`--root-cert-configmap`, on the fake API server); the
//! agent, given that bundle as `--discovery-ca-file` (what the injected
//! pod mounts from the ConfigMap) and the pod's service-account token, gets
//! the real Envoy synced over TLS. A namespace created later gets the
//! ConfigMap too; `openssl s_client` verifies the ADS certificate for the
//! Service's name with the bundle and refuses it for another name; when the
//! root is renewed, the ConfigMap carries both roots and the port a
//! certificate of the new one.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Agent, eventually, free_port};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use pilot_test_support::FakeCluster;

const ADMIN: &str = "admin-token-0123456789";
const NODE: &str = "sidecar~10.0.0.8~app-2.default~default.svc.cluster.local";
const CONFIGMAP: &str = "pilot-ca-root-cert";

/// The bundle of the ConfigMap in `namespace`, once it is there.
fn bundle(cluster: &FakeCluster, namespace: &str) -> Option<String> {
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), namespace);
    let map = cluster.block_on(api.get_opt(CONFIGMAP)).unwrap()?;
    map.data?.get("root-cert.pem").cloned()
}

/// Whether `openssl s_client` verifies the ADS port's certificate for
/// `name` with the roots of `ca_file`.
fn verifies(port: u16, name: &str, ca_file: &std::path::Path) -> bool {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            name,
        ])
        .args([
            "-verify_hostname",
            name,
            "-verify_return_error",
            "-alpn",
            "h2",
            "-CAfile",
        ])
        .arg(ca_file)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl runs (scripts/install-deps installs it)");
    out.status.success() && String::from_utf8_lossy(&out.stdout).contains("Verify return code: 0 (ok)")
}

#[test]
fn a_sidecar_verifies_pilot_with_the_roots_pilot_publishes() {
    let cluster = FakeCluster::start();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{ADMIN} rw admin\n")).unwrap();
    let services = common::services_file(dir.path(), free_port(), free_port());
    let discovery = common::Discovery::start_with_env(
        &[
            "--kube-token-review",
            "--token-file",
            tokens.to_str().unwrap(),
            "--services",
            services.to_str().unwrap(),
            "--xds-tls-dns-names",
            "localhost,pilot-discovery.pilot-system.svc",
            "--root-cert-configmap",
            CONFIGMAP,
            // A root that is renewed a few seconds in.
            "--ca-root-ttl",
            "20s",
            "--ca-root-renew-before",
            "12s",
            "--ca-root-check-interval",
            "200ms",
        ],
        &cluster.env(),
    );

    // The bundle is in every namespace, and in one made later.
    let mut published = String::new();
    eventually("the root ConfigMap in default and kube-system", || {
        match (bundle(&cluster, "default"), bundle(&cluster, "kube-system")) {
            (Some(a), Some(b)) if a == b => {
                published = a;
                true
            }
            _ => false,
        }
    });
    assert_eq!(published.matches("BEGIN CERTIFICATE").count(), 1, "{published}");
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    let bookinfo = serde_json::from_value(serde_json::json!({"metadata": {"name": "bookinfo"}})).unwrap();
    cluster
        .block_on(namespaces.create(&PostParams::default(), &bookinfo))
        .unwrap();
    eventually("the root ConfigMap in a new namespace", || {
        bundle(&cluster, "bookinfo").is_some()
    });

    // What the injected pod mounts: the bundle and its projected token.
    let roots = dir.path().join("root-cert.pem");
    std::fs::write(&roots, &published).unwrap();
    assert!(verifies(discovery.xds_port, "localhost", &roots));
    assert!(!verifies(discovery.xds_port, "evil.example", &roots));
    let token_file = dir.path().join("istio-token");
    std::fs::write(
        &token_file,
        cluster
            .fake
            .issue_token("default", "app", &["istio-ca"], Duration::from_secs(3600)),
    )
    .unwrap();
    // The Service's name, checked in the certificate; the address is
    // the loopback one pilot-discovery listens on.
    let xds = format!("127.0.0.1:{}", discovery.xds_port);
    let _agent = Agent::start(
        "sidecar",
        &[
            "--ip",
            "10.0.0.8",
            "--id",
            "app-2.default",
            "--service-account",
            "app",
            "--interception-mode",
            "NONE",
            "--label",
            "app=app",
            "--discovery-address",
            &xds,
            "--discovery-url",
            &discovery.url,
            "--discovery-token-file",
            token_file.to_str().unwrap(),
            "--discovery-ca-file",
            roots.to_str().unwrap(),
            "--discovery-server-name",
            "pilot-discovery.pilot-system.svc",
            "--max-retries",
            "2",
        ],
    );
    eventually("proxy-status SYNCED over TLS", || {
        let (code, out) = discovery.pilotctl(ADMIN, &["proxy-status"]);
        assert_eq!(code, 0, "{out}");
        out.lines()
            .find(|l| l.starts_with(NODE))
            .is_some_and(|row| row.split_whitespace().filter(|w| *w == "SYNCED").count() >= 2)
    });

    // The root is renewed: the ConfigMap holds both roots, and the port
    // serves a certificate of the new one (verified with it alone).
    let mut renewed = String::new();
    eventually("the renewed bundle in the ConfigMap", || {
        renewed = bundle(&cluster, "default").unwrap_or_default();
        renewed.matches("BEGIN CERTIFICATE").count() == 2
    });
    let new_root = dir.path().join("new-root.pem");
    let first = renewed
        .split_inclusive("-----END CERTIFICATE-----\n")
        .next()
        .unwrap();
    std::fs::write(&new_root, first).unwrap();
    assert_ne!(
        first.trim(),
        published.trim(),
        "the signing root comes first in the bundle"
    );
    eventually("the ADS certificate of the new root", || {
        verifies(discovery.xds_port, "localhost", &new_root)
    });
}
