//! Connecting to etcd over TLS with a client certificate, and with a user
//! and password when etcd has authentication on.

use std::time::{Duration, Instant};

use pilot_model::{ConfigStore, StoreError};
use pilot_store::testing::{mock, registry};
use pilot_store_etcd::{EtcdConfigStore, EtcdOptions};
use pilot_test_support::{EtcdServer, TestCerts};

/// Creates an object, retrying while a just-started server warms up.
async fn create_eventually(store: &EtcdConfigStore, name: &str) -> Result<(), StoreError> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match store.create(mock("default", name, "v")).await {
            Err(StoreError::Unavailable { reason, .. })
                if Instant::now() < deadline && !reason.contains("permission") =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            other => return other.map(|_| ()),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).expect("openssl makes test certificates");
    let server = EtcdServer::start_tls(&certs).unwrap();
    assert!(server.endpoint().starts_with("https://"));

    let mut options = EtcdOptions::new([server.endpoint()]);
    options.ca_file = Some(certs.ca.clone());
    options.client_cert = Some((certs.client_cert.clone(), certs.client_key.clone()));
    let store = EtcdConfigStore::connect(&options, registry()).await.unwrap();
    create_eventually(&store, "over-tls")
        .await
        .expect("a write over TLS");
    assert_eq!(store.list("MockConfig", None).await.unwrap().len(), 1);

    // Without a client certificate the server refuses the client.
    let mut anonymous = EtcdOptions::new([server.endpoint()]);
    anonymous.ca_file = Some(certs.ca.clone());
    anonymous.connect_timeout = Duration::from_secs(2);
    anonymous.request_timeout = Duration::from_secs(2);
    let refused = match EtcdConfigStore::connect(&anonymous, registry()).await {
        Ok(store) => store.list("MockConfig", None).await.map(|_| ()),
        Err(error) => Err(error),
    };
    assert!(
        matches!(refused, Err(StoreError::Unavailable { .. })),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password() {
    let server = EtcdServer::start().unwrap();
    let mut admin = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    admin.user_add("root", "root-secret", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();

    let mut options = EtcdOptions::new([server.endpoint()]);
    options.user = Some(("root".into(), "root-secret".into()));
    let store = EtcdConfigStore::connect(&options, registry()).await.unwrap();
    create_eventually(&store, "authenticated")
        .await
        .expect("a write with a user");

    let anonymous = EtcdConfigStore::connect(&EtcdOptions::new([server.endpoint()]), registry())
        .await
        .unwrap();
    let refused = anonymous.create(mock("default", "anonymous", "v")).await;
    assert!(
        matches!(refused, Err(StoreError::Unavailable { .. })),
        "{refused:?}"
    );

    options.user = Some(("root".into(), "wrong".into()));
    let wrong = EtcdConfigStore::connect(&options, registry()).await;
    assert!(wrong.is_err(), "a wrong password is refused when connecting");
}
