//! SDS over ADS, for both protocols against the real server on loopback:
//! a router proxy is sent the Secrets of its own namespace (the
//! certificate and key, and `-cacert` the CA), one of another namespace
//! only while a ReferenceGrant there lets its namespace's Gateways refer
//! to it; a sidecar never another namespace's, grant or not. A rotated
//! credential is sent again at once; a delta stream is told of a Secret
//! it may no longer read. Any proxy is sent the certificate authority
//! bundles a BackendTLSPolicy names (`configmap://`), never another
//! ConfigMap's.

mod support;

use std::sync::Arc;

use envoy_types::pb::envoy::config::core::v3::data_source::Specifier;
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{Secret, secret};
use pilot_api::default_registry;
use pilot_model::{ConfigStore, TlsCredential, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryCredentials, MemoryServiceRegistry};
use pilot_test_support::ads::{Client, Response, SDS};
use prost::Message;

const ROUTER: &str = "router~10.9.0.2~gateway-7d9f.gateways~gateways.svc.cluster.local";
const SIDECAR: &str = "sidecar~10.9.0.3~app.web~web.svc.cluster.local";

const GRANT: &str = "\
apiVersion: gateway.networking.k8s.io/v1beta1
kind: ReferenceGrant
metadata: {name: gateways-certificate, namespace: web}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: gateways}]
  to: [{group: \"\", kind: Secret, name: certificate}]
";

fn credential(chain: &str, ca: Option<&str>) -> TlsCredential {
    TlsCredential {
        certificate_chain: chain.as_bytes().to_vec(),
        private_key: format!("key of {chain}").into_bytes(),
        ca_certificates: ca.map(|ca| ca.as_bytes().to_vec()),
    }
}

/// What a response's Secrets say: (name, the certificate chain, or the
/// CA for a validation context), sorted.
fn said(response: &Response) -> Vec<(String, String)> {
    let inline = |source: &Option<envoy_types::pb::envoy::config::core::v3::DataSource>| match source
        .as_ref()
        .and_then(|s| s.specifier.as_ref())
    {
        Some(Specifier::InlineBytes(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        other => panic!("an inline secret, not {other:?}"),
    };
    let mut out: Vec<(String, String)> = response
        .resources
        .iter()
        .map(|(name, bytes)| {
            let secret = Secret::decode(bytes.as_slice()).unwrap();
            assert_eq!(&secret.name, name);
            let content = match secret.r#type {
                Some(secret::Type::TlsCertificate(tls)) => {
                    assert_eq!(
                        inline(&tls.private_key),
                        format!("key of {}", inline(&tls.certificate_chain))
                    );
                    inline(&tls.certificate_chain)
                }
                Some(secret::Type::ValidationContext(validation)) => inline(&validation.trusted_ca),
                other => panic!("{name}: {other:?}"),
            };
            (name.clone(), content)
        })
        .collect();
    out.sort();
    out
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// The next Secret response (others, the clusters sent on opening, are
/// passed over).
async fn next_secrets(client: &mut Client) -> Response {
    loop {
        let response = client.next().await;
        if response.type_url == SDS {
            return response;
        }
    }
}

/// Fails when a Secret response comes within a moment (what a state of
/// the world stream is not sent).
async fn no_secrets(client: &mut Client) {
    let waited = tokio::time::timeout(std::time::Duration::from_millis(300), next_secrets(client)).await;
    assert!(waited.is_err(), "unexpected {:?}", waited.map(|r| said(&r)));
}

async fn served_by_namespace_and_grant(delta: bool) {
    let credentials = MemoryCredentials::new();
    credentials.set("gateways", "shop", credential("shop chain", Some("shop ca")));
    credentials.set("web", "certificate", credential("web chain", None));
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let (server, port) = support::server::serve(controller, Arc::new(MemoryServiceRegistry::new()));
    let _server = server.with_credentials(Arc::new(credentials.clone()));

    let mut router = Client::open(port, ROUTER, delta).await;
    let names = [
        "kubernetes://shop",
        "kubernetes://shop-cacert",
        "kubernetes://web/certificate",
    ];
    router.subscribe(SDS, names.map(String::from).to_vec()).await;
    let first = next_secrets(&mut router).await;
    assert_eq!(
        said(&first),
        pairs(&[
            ("kubernetes://shop", "shop chain"),
            ("kubernetes://shop-cacert", "shop ca")
        ]),
        "its own namespace's, not web's without a grant"
    );
    router.answer(&first, None).await;

    // The grant: web's certificate follows (state of the world: with the
    // others again).
    let grant = document::parse("grant.yaml", GRANT, &default_registry())
        .unwrap()
        .remove(0);
    let grant_key = grant.key();
    store.create(grant).await.unwrap();
    let granted = next_secrets(&mut router).await;
    let web = ("kubernetes://web/certificate", "web chain");
    if delta {
        assert_eq!(said(&granted), pairs(&[web]));
    } else {
        assert_eq!(
            said(&granted),
            pairs(&[
                ("kubernetes://shop", "shop chain"),
                ("kubernetes://shop-cacert", "shop ca"),
                web
            ])
        );
    }
    router.answer(&granted, None).await;

    // A sidecar of web asks for its own namespace's and for the router's:
    // a grant to Gateways is none to it.
    let mut sidecar = Client::open(port, SIDECAR, delta).await;
    sidecar
        .subscribe(
            SDS,
            vec![
                "kubernetes://certificate".into(),
                "kubernetes://gateways/shop".into(),
            ],
        )
        .await;
    let own = next_secrets(&mut sidecar).await;
    assert_eq!(said(&own), pairs(&[("kubernetes://certificate", "web chain")]));

    // Rotated: sent again at once (delta: that one only).
    credentials.set("gateways", "shop", credential("shop chain 2", Some("shop ca")));
    let rotated = next_secrets(&mut router).await;
    if delta {
        assert_eq!(said(&rotated), pairs(&[("kubernetes://shop", "shop chain 2")]));
    } else {
        assert_eq!(
            said(&rotated),
            pairs(&[
                ("kubernetes://shop", "shop chain 2"),
                ("kubernetes://shop-cacert", "shop ca"),
                web
            ])
        );
    }
    router.answer(&rotated, None).await;

    // The grant withdrawn: a delta stream is told the Secret is gone; a
    // state-of-the-world one is no longer sent it.
    store.delete(&grant_key, None).await.unwrap();
    if delta {
        let withdrawn = next_secrets(&mut router).await;
        assert!(withdrawn.resources.is_empty(), "{:?}", said(&withdrawn));
        assert_eq!(withdrawn.removed, ["kubernetes://web/certificate"]);
        router.answer(&withdrawn, None).await;
    } else {
        no_secrets(&mut router).await;
    }
    credentials.set("web", "certificate", credential("web chain 2", None));
    credentials.set("gateways", "shop", credential("shop chain 3", Some("shop ca")));
    let after = next_secrets(&mut router).await;
    if delta {
        assert_eq!(said(&after), pairs(&[("kubernetes://shop", "shop chain 3")]));
    } else {
        assert_eq!(
            said(&after),
            pairs(&[
                ("kubernetes://shop", "shop chain 3"),
                ("kubernetes://shop-cacert", "shop ca")
            ])
        );
    }
    // The sidecar saw its own namespace's change, nothing of the router's.
    let sidecar_after = next_secrets(&mut sidecar).await;
    assert_eq!(
        said(&sidecar_after),
        pairs(&[("kubernetes://certificate", "web chain 2")])
    );
}

#[tokio::test]
async fn state_of_the_world_secrets_by_namespace_and_grant() {
    served_by_namespace_and_grant(false).await;
}

#[tokio::test]
async fn delta_secrets_by_namespace_and_grant() {
    served_by_namespace_and_grant(true).await;
}

const POLICY: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: api-tls, namespace: web}
spec:
  targetRefs: [{group: \"\", kind: Service, name: api}]
  validation:
    caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}, {group: \"\", kind: ConfigMap, name: other}]
    hostname: api.example.com
---
apiVersion: gateway.networking.k8s.io/v1
kind: BackendTLSPolicy
metadata: {name: billing-tls, namespace: web}
spec:
  targetRefs: [{group: \"\", kind: Service, name: billing}]
  validation:
    caCertificateRefs: [{group: \"\", kind: ConfigMap, name: ca}, {group: \"\", kind: ConfigMap, name: absent}]
    hostname: billing.example.com
";

async fn bundles_named_by_a_policy(delta: bool) {
    let credentials = MemoryCredentials::new();
    credentials.set_ca_bundle("web", "ca", b"ca one\n".to_vec());
    credentials.set_ca_bundle("web", "other", b"ca two".to_vec());
    credentials.set_ca_bundle("web", "unnamed", b"no policy names it\n".to_vec());
    let store = MemoryConfigStore::new(default_registry());
    for object in document::parse("policy.yaml", POLICY, &default_registry()).unwrap() {
        store.create(object).await.unwrap();
    }
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let (server, port) = support::server::serve(controller, Arc::new(MemoryServiceRegistry::new()));
    let _server = server.with_credentials(Arc::new(credentials.clone()));

    // A router of another namespace asks for the policy's bundles and for
    // a ConfigMap no policy names.
    let mut router = Client::open(port, ROUTER, delta).await;
    let both = "configmap://web/ca,other";
    router
        .subscribe(SDS, vec![both.into(), "configmap://web/unnamed".into()])
        .await;
    let first = next_secrets(&mut router).await;
    assert_eq!(
        said(&first),
        pairs(&[(both, "ca one\nca two\n")]),
        "the named bundles one after the other; never another ConfigMap"
    );
    router.answer(&first, None).await;

    // One of them changed: sent again at once.
    credentials.set_ca_bundle("web", "other", b"ca three\n".to_vec());
    let changed = next_secrets(&mut router).await;
    assert_eq!(said(&changed), pairs(&[(both, "ca one\nca three\n")]));
    router.answer(&changed, None).await;

    // One of them gone: the bundle is no longer whole, so it trusts a
    // certificate authority nothing chains to (connections that would
    // trust it fail; verification is never skipped).
    credentials.remove_ca_bundle("web", "other");
    let gone = next_secrets(&mut router).await;
    let nothing = said(&gone);
    assert_eq!(nothing.len(), 1, "{nothing:?}");
    assert_eq!(nothing[0].0, both);
    assert_trusts_nothing(&nothing[0].1);
    router.answer(&gone, None).await;
    // Back: the bundle again.
    credentials.set_ca_bundle("web", "other", b"ca two\n".to_vec());
    let back = next_secrets(&mut router).await;
    assert_eq!(said(&back), pairs(&[(both, "ca one\nca two\n")]));
    router.answer(&back, None).await;

    // A bundle of a ConfigMap that never was is answered at once too: a
    // proxy starting does not wait for it.
    let missing = "configmap://web/ca,absent";
    router.subscribe(SDS, vec![both.into(), missing.into()]).await;
    let answered = next_secrets(&mut router).await;
    let named = said(&answered);
    let stand_in = named.iter().find(|(name, _)| name == missing);
    let Some((_, pem)) = stand_in else {
        panic!("{missing} answered: {named:?}")
    };
    assert_trusts_nothing(pem);
    assert_eq!(pem, &nothing[0].1, "one stand-in for every missing bundle");
    router.answer(&answered, None).await;

    // A policy's reference to another kind than a ConfigMap: the same.
    let unresolved = "unresolved-ca://web/billing-tls";
    router
        .subscribe(SDS, vec![both.into(), missing.into(), unresolved.into()])
        .await;
    let answered = next_secrets(&mut router).await;
    let named = said(&answered);
    let Some((_, pem)) = named.iter().find(|(name, _)| name == unresolved) else {
        panic!("{unresolved} answered: {named:?}")
    };
    assert_eq!(pem, &nothing[0].1);
}

/// `pem` is the one certificate of the stand-in for a bundle that cannot
/// be read: a self-signed certificate authority, not one of the bundles.
fn assert_trusts_nothing(pem: &str) {
    assert_eq!(pem.matches("-----BEGIN CERTIFICATE-----").count(), 1, "{pem}");
    assert!(!pem.contains("ca one") && !pem.contains("ca two"), "{pem}");
}

#[tokio::test]
async fn state_of_the_world_ca_bundles_named_by_a_policy() {
    bundles_named_by_a_policy(false).await;
}

#[tokio::test]
async fn delta_ca_bundles_named_by_a_policy() {
    bundles_named_by_a_policy(true).await;
}
