//! Which identities the certificate service signs, as an attacker would
//! probe it: a client certificate of another trust domain or with two
//! URIs, identities against the SPIFFE rules, and a namespace credential
//! asking for many identities (the issued-certificates record stays
//! bounded).

mod common;

use std::path::Path;
use std::time::{Duration, SystemTime};

use common::TestServer;
use common::ca::{channel, create_with_csr, csr_for_uri, write_token_file};
use pilot_ca::{CaMaterial, SpiffeId, WorkloadKey, verify_chain};
use tonic::transport::Endpoint;

const NAMESPACE: &str = "namespace-token-0123456789abcdef";
const ADMIN: &str = "admin-token-0123456789abcdef";

fn tokens(dir: &Path) -> String {
    write_token_file(
        dir,
        &[
            &format!("{NAMESPACE} xds default-ns namespace=default"),
            &format!("{ADMIN} rw admin"),
        ],
    )
}

/// A client certificate for `uris`, signed by `ca`, and its key.
fn client_certificate(ca: &CaMaterial, uris: &[&str]) -> (String, String) {
    let ca_key = rcgen::KeyPair::from_pem(&ca.key_pem).unwrap();
    let issuer = rcgen::Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params.subject_alt_names = uris
        .iter()
        .map(|uri| rcgen::SanType::URI((*uri).try_into().unwrap()))
        .collect();
    params.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
    ];
    (params.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
}

/// The ADS port trusts the mesh CA's own root for client certificates,
/// as a workload renewing with its certificate would use it. A
/// certificate that root signed for another trust domain, with two URIs
/// or with an identity against the SPIFFE rules is refused; one of an
/// aliased trust domain renews into this mesh's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_must_carry_one_identity_of_this_mesh_or_an_alias() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = tokens(dir.path());
    let pki = pilot_test_support::Pki::new(dir.path());
    pki.ca("tls-ca").unwrap();
    pki.leaf("server", "tls-ca", pilot_test_support::certs::SERVER)
        .unwrap();
    let ca_dir = dir.path().join("cacerts");
    std::fs::create_dir(&ca_dir).unwrap();
    let root = pilot_ca::generate_root("cluster.local", Duration::from_secs(86_400)).unwrap();
    std::fs::write(ca_dir.join("ca-cert.pem"), &root.cert_pem).unwrap();
    std::fs::write(ca_dir.join("ca-key.pem"), &root.key_pem).unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let flags = [
        "--token-file".to_string(),
        tokens,
        "--ca-dir".into(),
        ca_dir.display().to_string(),
        "--xds-tls-cert".into(),
        path("server.pem"),
        "--xds-tls-key".into(),
        path("server-key.pem"),
        "--xds-client-ca".into(),
        ca_dir.join("ca-cert.pem").display().to_string(),
        "--trust-domain-alias".into(),
        "legacy.example".into(),
    ];
    let server = TestServer::start(&flags.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let tls_ca = std::fs::read(path("tls-ca.pem")).unwrap();
    let with_certificate = |(cert, key): (String, String)| {
        let tls = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(&tls_ca))
            .domain_name("localhost")
            .identity(tonic::transport::Identity::from_pem(cert, key));
        let address = server.xds;
        async move {
            Endpoint::from_shared(format!("https://{address}"))
                .unwrap()
                .tls_config(tls)
                .unwrap()
                .connect()
                .await
                .unwrap()
        }
    };
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let renew = |channel: tonic::transport::Channel| {
        let csr = WorkloadKey::generate().unwrap().csr_pem(&reviews).unwrap();
        async move { create_with_csr(&channel, None, csr, 0).await }
    };

    for (uris, expected) in [
        (
            vec!["spiffe://evil.example/ns/default/sa/reviews"],
            "is of trust domain \"evil.example\", not this mesh's (cluster.local, legacy.example",
        ),
        (
            vec![
                "spiffe://cluster.local/ns/default/sa/reviews",
                "spiffe://evil.example/ns/kube-system/sa/admin",
            ],
            "carries 2 URIs; exactly one SPIFFE identity is accepted",
        ),
        (
            vec!["spiffe://cluster.local/ns/default/sa/.."],
            "relative path segment",
        ),
    ] {
        let channel = with_certificate(client_certificate(&root, &uris)).await;
        let refused = renew(channel).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unauthenticated, "{uris:?}: {refused:?}");
        assert!(refused.message().contains(expected), "{uris:?}: {refused:?}");
    }

    // An aliased trust domain's workload is this mesh's workload.
    let legacy = client_certificate(&root, &["spiffe://legacy.example/ns/default/sa/reviews"]);
    let chain = renew(with_certificate(legacy).await).await.unwrap();
    assert_eq!(
        verify_chain(&chain, &root.cert_pem, SystemTime::now()).unwrap(),
        reviews,
        "renewed into this mesh's trust domain"
    );
    // And this mesh's own certificates still renew.
    let own = client_certificate(&root, &["spiffe://cluster.local/ns/default/sa/reviews"]);
    let chain = renew(with_certificate(own).await).await.unwrap();
    assert_eq!(verify_chain(&chain, &root.cert_pem, SystemTime::now()).unwrap(), reviews);
    server.stop().await;
}

/// A namespace credential names the identity in its CSR: one against the
/// SPIFFE rules (`..`, separators and quotes, 3,000 characters) is not
/// signed, and the answer names the offending part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identities_against_the_spiffe_rules_are_not_signed() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&["--token-file", &tokens(dir.path())]).await;
    let channel = channel(server.xds).await;
    let long = "a".repeat(3000);
    for (account, expected) in [
        ("..", "the service account is \"..\", a relative path segment"),
        ("a;b,c=d\"e", "has ';'"),
        (long.as_str(), "bytes, over 2048"),
    ] {
        let uri = format!("spiffe://cluster.local/ns/default/sa/{account}");
        let refused = create_with_csr(&channel, Some(NAMESPACE), csr_for_uri(&uri), 0)
            .await
            .unwrap_err();
        assert_eq!(refused.code(), tonic::Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(expected), "{expected}: {refused:?}");
    }
    // The rules allow what Kubernetes names.
    let uri = "spiffe://cluster.local/ns/default/sa/reviews-v1.2_x";
    let chain = create_with_csr(&channel, Some(NAMESPACE), csr_for_uri(uri), 0)
        .await
        .unwrap();
    assert_eq!(
        verify_chain(&chain, chain.last().unwrap(), SystemTime::now())
            .unwrap()
            .uri(),
        uri
    );
    server.stop().await;
}

/// A namespace credential asking for many identities with long names
/// grows the issued-certificates record to its cap, no further, and
/// `/debug/certificates` with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issued_certificates_record_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(&[
        "--token-file",
        &tokens(dir.path()),
        "--ca-issued-records-max",
        "40",
    ])
    .await;
    let channel = channel(server.xds).await;
    let prefix = "spiffe://cluster.local/ns/default/sa/".len();
    for n in 0..120 {
        // The longest names allowed (2,048 bytes each).
        let account = format!("{n:04}{}", "a".repeat(pilot_ca::MAX_SPIFFE_ID_BYTES - prefix - 4));
        let uri = format!("spiffe://cluster.local/ns/default/sa/{account}");
        create_with_csr(&channel, Some(NAMESPACE), csr_for_uri(&uri), 0)
            .await
            .unwrap();
    }
    let auth = format!("Bearer {ADMIN}");
    let (code, body) = server.request("GET", "/debug/certificates", &[("authorization", &auth)], None);
    assert_eq!(code, 200);
    let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let shown = value["certificates"].as_array().unwrap();
    assert_eq!(shown.len(), 40, "the cap, not the 120 issued");
    assert!(body.len() < 40 * 2_500, "{} bytes", body.len());
    // The newest are kept: the last identity issued is there, the first is not.
    let identities: Vec<&str> = shown.iter().map(|c| c["identity"].as_str().unwrap()).collect();
    assert!(identities.iter().any(|id| id.contains("/sa/0119")), "the newest is kept");
    assert!(!identities.iter().any(|id| id.contains("/sa/0000")), "the oldest went first");
    server.stop().await;
}
