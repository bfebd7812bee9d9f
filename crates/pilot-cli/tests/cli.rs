//! pilotctl without the happy path: local validation, usage errors and exit
//! codes, where the server address and token come from.

mod common;

use common::{Discovery, discovery_binary, pilotctl};

const BAD: &str = "\
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: reviews-split
spec:
  destination:
    name: reviews
  route:
  - labels: {version: v1}
    weight: 80
  - labels: {version: v2}
    weight: 10
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: typo
spec:
  destination:
    name: ratings
  precedance: 2
";

#[test]
fn validate_reports_every_error_offline_and_nothing_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.yaml");
    std::fs::write(&file, BAD).unwrap();
    let path = file.to_str().unwrap();
    // No server: validate never needs one.
    let validated = pilotctl(Some("http://127.0.0.1:1"), &["validate", "-f", path], &[], None);
    assert_eq!(validated.code, 1, "{validated:?}");
    let lines: Vec<&str> = validated.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            format!("{path}:12:5 spec.route[1].weight: weights must sum to 100, got 90").as_str(),
            format!("{path}:21:3 spec.precedance: unknown field `precedance`; did you mean `precedence`?")
                .as_str(),
            "2 errors found; nothing was sent to the server",
        ]
    );
    let good = pilotctl(None, &["validate", "-f", "examples/bookinfo"], &[], None);
    // Valid, and what analysis finds offline follows as warnings.
    assert_eq!(good.code, 0, "{good:?}");
    let lines: Vec<&str> = good.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{good:?}");
    assert_eq!(lines[0], "12 objects valid");
    assert!(
        lines[1].starts_with("examples/bookinfo/route-rule-reviews-timeout.yaml:10:3: warning PLT0104 "),
        "{good:?}"
    );

    // create, apply and replace validate first and send nothing.
    let server = Discovery::start(&[]);
    let mixed = format!(
        "{BAD}---\n{}",
        std::fs::read_to_string(common::workspace().join("examples/bookinfo/route-rule-all-v1.yaml"))
            .unwrap()
    );
    for command in ["create", "apply", "replace"] {
        let run = pilotctl(Some(&server.url), &[command, "-f", "-"], &[], Some(&mixed));
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr.contains("<stdin>:12:5 spec.route[1].weight"),
            "{run:?}"
        );
        assert_eq!(run.stdout, "", "{run:?}");
    }
    let (code, body) = server.get("/apis/config.istio.io/v1alpha2/routerules");
    assert_eq!(code, 200);
    let list: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["items"], serde_json::json!([]));
}

#[test]
fn usage_errors_exit_2_and_failures_exit_1() {
    let unknown = pilotctl(None, &["get", "widgets"], &[], None);
    assert_eq!(unknown.code, 2, "{unknown:?}");
    assert!(
        unknown.stderr.contains("unknown kind \"widgets\"; known kinds: "),
        "{unknown:?}"
    );
    assert!(
        unknown.stderr.contains("routerule (routerules, rr)"),
        "{unknown:?}"
    );
    let bad = pilotctl(None, &["frobnicate"], &[], None);
    assert_eq!(bad.code, 2, "{bad:?}");
    let no_files = pilotctl(None, &["create"], &[], None);
    assert_eq!(no_files.code, 2, "{no_files:?}");
    let delete = pilotctl(None, &["delete", "rr"], &[], None);
    assert_eq!(delete.code, 2, "{delete:?}");
    assert!(
        delete.stderr.contains("delete rr needs at least one NAME"),
        "{delete:?}"
    );

    let port = common::free_port();
    let unreachable = pilotctl(
        Some(&format!("http://127.0.0.1:{port}")),
        &["get", "rr"],
        &[],
        None,
    );
    assert_eq!(unreachable.code, 1, "{unreachable:?}");
    assert!(
        unreachable.stderr.starts_with(&format!(
            "cannot reach the pilot server at http://127.0.0.1:{port} (--server)"
        )),
        "{unreachable:?}"
    );

    let kubernetes = std::process::Command::new(discovery_binary())
        .args([
            "--store",
            "kubernetes",
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .output()
        .unwrap();
    assert_eq!(kubernetes.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&kubernetes.stderr);
    assert!(stderr.contains("cannot reach Kubernetes"), "{stderr}");
    assert!(stderr.contains("/nonexistent/kubeconfig"), "{stderr}");
    let etcd = std::process::Command::new(discovery_binary())
        .args(["--store", "etcd"])
        .output()
        .unwrap();
    assert_eq!(etcd.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&etcd.stderr).contains("--etcd-endpoints"));
}

#[test]
fn server_and_token_come_from_flag_env_then_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "pilot-admin-token-0001 rw admin\n").unwrap();
    let server = Discovery::start(&["--token-file", tokens.to_str().unwrap()]);
    let config = dir.path().join("config.yaml");
    let config_env = ("PILOT_CONFIG", config.to_str().unwrap());

    // No token: refused with a hint.
    let refused = pilotctl(Some(&server.url), &["get", "rr"], &[], None);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("pass --token"), "{refused:?}");
    // --token.
    let flagged = pilotctl(
        Some(&server.url),
        &["--token", "pilot-admin-token-0001", "get", "rr"],
        &[],
        None,
    );
    assert_eq!(flagged.code, 0, "{flagged:?}");
    // Server and token from the config file.
    std::fs::write(
        &config,
        format!("server: {}\ntoken: pilot-admin-token-0001\n", server.url),
    )
    .unwrap();
    let from_file = pilotctl(
        None,
        &["apply", "-f", "examples/bookinfo/route-rule-all-v1.yaml"],
        &[config_env],
        None,
    );
    assert_eq!(from_file.code, 0, "{from_file:?}");
    // PILOT_SERVER wins over the file; --server over both.
    let dead = format!("http://127.0.0.1:{}", common::free_port());
    let env = pilotctl(None, &["get", "rr"], &[config_env, ("PILOT_SERVER", &dead)], None);
    assert_eq!(env.code, 1, "{env:?}");
    assert!(env.stderr.contains("(PILOT_SERVER)"), "{env:?}");
    let flag = pilotctl(
        Some(&server.url),
        &["get", "rr"],
        &[config_env, ("PILOT_SERVER", &dead)],
        None,
    );
    assert_eq!(flag.code, 0, "{flag:?}");
    assert!(flag.stdout.contains("reviews-default"), "{flag:?}");
    // An unknown setting in the file is a usage error naming it.
    std::fs::write(&config, "sever: x\n").unwrap();
    let typo = pilotctl(None, &["get", "rr"], &[config_env], None);
    assert_eq!(typo.code, 2, "{typo:?}");
    assert!(typo.stderr.contains("unknown setting \"sever\""), "{typo:?}");
    server.terminate();
}

#[test]
fn tls_and_a_token_from_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let certs =
        pilot_test_support::TestCerts::generate(dir.path()).expect("openssl (run scripts/install-deps)");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "pilot-admin-token-0001 rw admin\n").unwrap();
    let server = Discovery::start(&[
        "--tls-cert",
        certs.server_cert.to_str().unwrap(),
        "--tls-key",
        certs.server_key.to_str().unwrap(),
        "--token-file",
        tokens.to_str().unwrap(),
    ]);
    assert!(server.url.starts_with("https://127.0.0.1:"), "{}", server.url);
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {}\ntoken: pilot-admin-token-0001\nca-file: {}\n",
            server.url,
            certs.ca.display()
        ),
    )
    .unwrap();
    let config_env = ("PILOT_CONFIG", config.to_str().unwrap());
    let applied = pilotctl(None, &["apply", "-f", "examples/bookinfo/"], &[config_env], None);
    assert_eq!(applied.code, 0, "{applied:?}");
    let got = pilotctl(None, &["get", "dp"], &[config_env], None);
    assert_eq!(got.code, 0, "{got:?}");
    assert!(got.stdout.contains("reviews-v1-cb"), "{got:?}");
    // Without the CA: a usage error that says what to pass.
    let no_ca = pilotctl(Some(&server.url), &["get", "dp"], &[], None);
    assert_eq!(no_ca.code, 2, "{no_ca:?}");
    assert!(no_ca.stderr.contains("--ca-file"), "{no_ca:?}");
    // Trusting another CA: the handshake fails.
    let other = tempfile::tempdir().unwrap();
    let other = pilot_test_support::TestCerts::generate(other.path()).unwrap();
    let wrong_ca = pilotctl(
        Some(&server.url),
        &["--ca-file", other.ca.to_str().unwrap(), "get", "dp"],
        &[],
        None,
    );
    assert_eq!(wrong_ca.code, 1, "{wrong_ca:?}");
    assert!(wrong_ca.stderr.contains("TLS handshake failed"), "{wrong_ca:?}");
    // Plain HTTP to the TLS port gets no answer it can use.
    let plain = server.url.replace("https://", "http://");
    let refused = pilotctl(Some(&plain), &["get", "dp"], &[], None);
    assert_eq!(refused.code, 1, "{refused:?}");
    server.terminate();
}
