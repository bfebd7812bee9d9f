//! `KubeCredentials` on the fake API server: it reads the
//! `kubernetes.io/tls` Secrets (never another type's), follows their
//! changes and deletes, and leaves out one without a certificate or key;
//! and the ConfigMaps' `ca.crt` bundles, the same way.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::CredentialSource;
use pilot_store_k8s::KubeCredentials;

fn secret(name: &str, type_: &str, data: &[(&str, &str)]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        type_: Some(type_.into()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Default::default()
    }
}

const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

async fn patiently<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

#[tokio::test]
async fn tls_secrets_are_followed_and_others_never_read() {
    let fake = FakeApiServer::new();
    let secrets: Api<Secret> = Api::namespaced(fake.client(), "default");
    let create = |s: Secret| {
        let secrets = secrets.clone();
        async move { secrets.create(&PostParams::default(), &s).await.unwrap() }
    };
    create(secret(
        "shop",
        "kubernetes.io/tls",
        &[("tls.crt", CERT), ("tls.key", KEY), ("ca.crt", CERT)],
    ))
    .await;
    create(secret("token", "Opaque", &[("tls.crt", CERT), ("tls.key", KEY)])).await;
    create(secret("keyless", "kubernetes.io/tls", &[("tls.crt", CERT)])).await;

    let credentials = KubeCredentials::start(fake.client(), None);
    let mut changes = credentials.changes();
    patiently("the first list", async {
        while !credentials.has_synced() {
            changes.next().await;
        }
    })
    .await;
    let shop = credentials.get("default", "shop").expect("the TLS Secret");
    assert_eq!(shop.certificate_chain, CERT.as_bytes());
    assert_eq!(shop.private_key, KEY.as_bytes());
    assert_eq!(shop.ca_certificates.as_deref(), Some(CERT.as_bytes()));
    assert!(credentials.get("default", "token").is_none(), "an Opaque Secret");
    assert!(
        credentials.get("default", "keyless").is_none(),
        "a TLS Secret without its key"
    );

    // Rotated: the change is announced and the new content read.
    let rotated = CERT.replace("MIIB", "MIIC");
    let mut replaced = secret(
        "shop",
        "kubernetes.io/tls",
        &[("tls.crt", &rotated), ("tls.key", KEY)],
    );
    replaced.metadata.resource_version = secrets.get("shop").await.unwrap().metadata.resource_version;
    secrets
        .replace("shop", &PostParams::default(), &replaced)
        .await
        .unwrap();
    patiently("the rotation", async {
        while credentials.get("default", "shop").unwrap().certificate_chain != rotated.as_bytes() {
            changes.next().await;
        }
    })
    .await;
    assert_eq!(credentials.get("default", "shop").unwrap().ca_certificates, None);

    secrets.delete("shop", &DeleteParams::default()).await.unwrap();
    patiently("the delete", async {
        while credentials.get("default", "shop").is_some() {
            changes.next().await;
        }
    })
    .await;
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        data: Some(data.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
        ..Default::default()
    }
}

#[tokio::test]
async fn config_maps_ca_bundles_are_followed_and_an_emptied_one_is_gone() {
    let fake = FakeApiServer::new();
    let maps: Api<ConfigMap> = Api::namespaced(fake.client(), "default");
    for map in [
        config_map("ca", &[("ca.crt", CERT)]),
        config_map("settings", &[("mode", "fast")]),
        config_map("garbage", &[("ca.crt", "not a certificate")]),
    ] {
        maps.create(&PostParams::default(), &map).await.unwrap();
    }
    let credentials = KubeCredentials::start(fake.client(), None);
    let mut changes = credentials.changes();
    patiently("the first lists", async {
        while !credentials.has_synced() {
            changes.next().await;
        }
    })
    .await;
    assert_eq!(
        credentials.ca_bundle("default", "ca").unwrap().as_slice(),
        CERT.as_bytes()
    );
    assert!(
        credentials.get("default", "ca").is_none(),
        "a ConfigMap is no Secret"
    );
    for left_out in ["settings", "garbage"] {
        assert!(credentials.ca_bundle("default", left_out).is_none(), "{left_out}");
    }

    // Emptied, as the Gateway API's conformance does: gone; restored:
    // back.
    for (text, held) in [("", false), (CERT, true)] {
        let mut changed = config_map("ca", &[("ca.crt", text)]);
        changed.metadata.resource_version = maps.get("ca").await.unwrap().metadata.resource_version;
        maps.replace("ca", &PostParams::default(), &changed)
            .await
            .unwrap();
        patiently("the change", async {
            while credentials.ca_bundle("default", "ca").is_some() != held {
                changes.next().await;
            }
        })
        .await;
    }
    maps.delete("ca", &DeleteParams::default()).await.unwrap();
    patiently("the delete", async {
        while credentials.ca_bundle("default", "ca").is_some() {
            changes.next().await;
        }
    })
    .await;
}
