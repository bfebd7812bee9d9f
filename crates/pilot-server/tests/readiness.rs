//! `/readyz` follows the configuration store, and a write whose outcome
//! the store did not confirm is 504 ("may have been applied"), never a
//! plain failure: against a real etcd, killed and stalled.

mod common;

use std::time::Duration;

use common::{TestServer, http, rule, rules};
use pilot_test_support::{EtcdServer, signal};

/// Polls `/readyz` until its status is `code`; the body then.
async fn readyz_becomes(server: &TestServer, code: u16) -> String {
    for _ in 0..600 {
        let (status, body) = http(server.rest, "GET", "/readyz", &[], None);
        if status == code {
            return String::from_utf8_lossy(&body).to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("/readyz never answered {code}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readyz_is_503_while_etcd_is_down_or_stalled() {
    let mut etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &etcd.endpoint()]).await;
    readyz_becomes(&server, 200).await;

    etcd.kill();
    let reason = readyz_becomes(&server, 503).await;
    assert!(reason.contains("configuration store"), "{reason}");
    etcd.restart().unwrap();
    readyz_becomes(&server, 200).await;

    let pid = etcd.pid().unwrap();
    signal(pid, "STOP");
    let reason = readyz_becomes(&server, 503).await;
    signal(pid, "CONT");
    assert!(reason.contains("did not answer"), "{reason}");
    readyz_becomes(&server, 200).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_etcd_did_not_confirm_is_504_and_may_have_been_applied() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let server = TestServer::start(&["--store", "etcd", "--etcd-endpoints", &etcd.endpoint()]).await;
    let pid = etcd.pid().unwrap();
    let rest = server.rest;
    // etcd stalls: the request is sent, and no answer comes before the
    // client's request timeout.
    signal(pid, "STOP");
    let (code, body) = tokio::task::spawn_blocking(move || {
        let body = serde_json::to_vec(&rule("ambiguous", "v1")).unwrap();
        http(
            rest,
            "POST",
            &rules("default"),
            &[("content-type", "application/json")],
            Some(&body),
        )
    })
    .await
    .unwrap();
    signal(pid, "CONT");
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(code, 504, "{status}");
    assert_eq!(status["reason"], "Timeout", "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("may have been applied"),
        "{status}"
    );
    // Whether it was depends on where etcd stalled (here the request was
    // cut off before etcd read it); either way the server answers again.
    let mut answered = 0;
    for _ in 0..600 {
        answered = http(rest, "GET", &format!("{}/ambiguous", rules("default")), &[], None).0;
        if answered == 200 || answered == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered == 200 || answered == 404, "{answered}");
    server.stop().await;
}

/// `--etcd-ca-file`, `--etcd-cert` and `--etcd-key`: the server writes to
/// an etcd that accepts TLS clients with a certificate only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_reaches_etcd_over_tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certs = pilot_test_support::TestCerts::generate(dir.path()).expect("openssl");
    let etcd = EtcdServer::start_tls(&certs).unwrap();
    let path = |p: &std::path::Path| p.display().to_string();
    let server = TestServer::start(&[
        "--store",
        "etcd",
        "--etcd-endpoints",
        &etcd.endpoint(),
        "--etcd-ca-file",
        &path(&certs.ca),
        "--etcd-cert",
        &path(&certs.client_cert),
        "--etcd-key",
        &path(&certs.client_key),
    ])
    .await;
    let (code, body) = server.json("POST", &rules("default"), Some(&rule("over-tls", "v1")));
    assert_eq!(code, 201, "{body}");
    server.stop().await;
}
