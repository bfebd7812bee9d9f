//! pilot-discovery's `--etcd-user` and `--etcd-password-file` against a
//! real etcd with authentication on: the right password serves and writes,
//! a wrong one stops the start with an error that says so.

mod common;

use std::time::Duration;

use common::{TestServer, rule, rules};
use pilot_server::Args;
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::EtcdServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_user_and_password_flags_against_an_etcd_with_authentication() {
    let etcd = EtcdServer::start().expect("etcd (run scripts/install-deps)");
    let endpoint = etcd.endpoint();
    let mut admin = EtcdConfigStore::connect(
        &EtcdOptions::new([endpoint.clone()]),
        pilot_api::istio::registry(),
    )
    .await
    .unwrap()
    .client();
    admin.user_add("root", "root-secret-0001", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let right = dir.path().join("password");
    std::fs::write(&right, "root-secret-0001\n").unwrap();
    let wrong = dir.path().join("wrong");
    std::fs::write(&wrong, "not-the-password\n").unwrap();

    let server = TestServer::start(&[
        "--store",
        "etcd",
        "--etcd-endpoints",
        &endpoint,
        "--etcd-user",
        "root",
        "--etcd-password-file",
        right.to_str().unwrap(),
    ])
    .await;
    let (code, body) = server.json("POST", &rules("default"), Some(&rule("authenticated", "v1")));
    assert_eq!(code, 201, "{body}");
    let (code, list) = server.json("GET", &rules("default"), None);
    assert_eq!(
        (code, list["items"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{list}"
    );
    server.stop().await;

    let args = Args::parse_with_config(
        [
            "pilot-discovery",
            "--listen",
            "127.0.0.1:0",
            "--xds-listen",
            "127.0.0.1:0",
            "--store",
            "etcd",
            "--etcd-endpoints",
            &endpoint,
            "--etcd-user",
            "root",
            "--etcd-password-file",
            wrong.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec(),
    )
    .unwrap();
    let started = pilot_server::run(args, std::future::pending(), |_| {
        panic!("a server with a wrong etcd password must not start")
    });
    let error = tokio::time::timeout(Duration::from_secs(60), started)
        .await
        .expect("a wrong password fails the start, it does not hang")
        .unwrap_err();
    let message = error.to_string();
    assert_eq!(error.exit_code(), 1, "{message}");
    assert!(
        message.contains(&format!("cannot connect to etcd at {endpoint}"))
            && message.contains("authentication failed"),
        "{message}"
    );
}
