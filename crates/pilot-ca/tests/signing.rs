//! Signing workload certificates end to end: a key and CSR made as the
//! agent makes them, signed by a root or an intermediate, verified as a
//! peer verifies them.

use std::time::{Duration, SystemTime};

use pilot_ca::{
    CaError, CaMaterial, CaOptions, CertificateAuthority, Csr, SpiffeId, WorkloadKey, generate_root,
    verify_chain,
};

const HOUR: Duration = Duration::from_secs(3600);

fn authority() -> CertificateAuthority {
    let root = generate_root("cluster.local", 24 * HOUR).unwrap();
    CertificateAuthority::new(&root, CaOptions::new("cluster.local")).unwrap()
}

fn csr_for(identity: &SpiffeId) -> Csr {
    let key = WorkloadKey::generate().unwrap();
    Csr::from_pem(&key.csr_pem(identity).unwrap()).unwrap()
}

#[test]
fn the_callers_identity_is_signed_and_verifies_against_the_root() {
    let ca = authority();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews");
    let issued = ca.sign(&csr_for(&reviews), &reviews, None).unwrap();
    assert_eq!(issued.cert_chain.len(), 2, "leaf and root");
    assert_eq!(issued.cert_chain[1], ca.root_pem());
    let left = issued.not_after.duration_since(SystemTime::now()).unwrap();
    assert!(left > 23 * HOUR && left <= 24 * HOUR, "{left:?}");
    assert_eq!(
        verify_chain(&issued.cert_chain, ca.root_pem(), SystemTime::now()).unwrap(),
        reviews
    );
    // A request naming no identity gets the caller's.
    let issued = ca
        .sign(&Csr::from_pem(&bare_csr()).unwrap(), &reviews, Some(HOUR))
        .unwrap();
    assert_eq!(
        verify_chain(&issued.cert_chain, ca.root_pem(), SystemTime::now()).unwrap(),
        reviews
    );
}

/// A CSR without subject alternative names, as clients other than the
/// agent may send.
fn bare_csr() -> String {
    let pair = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::default()
        .serialize_request(&pair)
        .unwrap()
        .pem()
        .unwrap()
}

#[test]
fn another_identity_another_domain_and_a_long_lifetime_are_refused() {
    let ca = authority();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews");
    let ratings = SpiffeId::new("cluster.local", "default", "ratings");
    let error = ca.sign(&csr_for(&ratings), &reviews, None).unwrap_err();
    assert!(matches!(error, CaError::Refused(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("asks for spiffe://cluster.local/ns/default/sa/ratings"),
        "{error}"
    );
    let elsewhere = SpiffeId::new("example.org", "default", "reviews");
    let error = ca.sign(&csr_for(&elsewhere), &elsewhere, None).unwrap_err();
    assert!(error.to_string().contains("trust domain"), "{error}");
    let error = ca
        .sign(&csr_for(&reviews), &reviews, Some(100 * 24 * HOUR))
        .unwrap_err();
    assert!(
        matches!(
            error,
            CaError::TtlOverMax {
                max_secs: 7_776_000,
                ..
            }
        ),
        "{error}"
    );
    assert!(
        Csr::from_pem("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n")
            .is_err()
    );
}

#[test]
fn a_wrong_root_or_an_expired_certificate_does_not_verify() {
    let ca = authority();
    let other = authority();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews");
    let issued = ca
        .sign(&csr_for(&reviews), &reviews, Some(Duration::from_secs(60)))
        .unwrap();
    let error = verify_chain(&issued.cert_chain[..1], other.root_pem(), SystemTime::now()).unwrap_err();
    assert!(error.to_string().contains("does not verify"), "{error}");
    let later = SystemTime::now() + Duration::from_secs(120);
    let error = verify_chain(&issued.cert_chain, ca.root_pem(), later).unwrap_err();
    assert!(error.to_string().contains("Expired"), "{error}");
}

#[test]
fn an_intermediate_from_files_signs_and_the_chain_reaches_the_root() {
    // The root signs an intermediate (as an operator's offline root would),
    // which is loaded as Istio's cacerts files.
    let root = generate_root("cluster.local", 24 * HOUR).unwrap();
    let root_key = rcgen::KeyPair::from_pem(&root.key_pem).unwrap();
    let root_issuer = rcgen::Issuer::from_ca_cert_pem(&root.cert_pem, root_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "intermediate");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let intermediate = params.signed_by(&key, &root_issuer).unwrap().pem();
    let chain_file = format!("{intermediate}{}", root.cert_pem);
    let material = CaMaterial::from_pem(
        &intermediate,
        &key.serialize_pem(),
        Some(&chain_file),
        Some(&root.cert_pem),
    )
    .unwrap();
    assert!(!material.is_self_signed());
    assert!(
        material.chain_pem.is_empty(),
        "the signing certificate and the root are not repeated"
    );
    let ca = CertificateAuthority::new(&material, CaOptions::new("cluster.local")).unwrap();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews");
    let issued = ca.sign(&csr_for(&reviews), &reviews, None).unwrap();
    assert_eq!(issued.cert_chain.len(), 3, "leaf, intermediate, root");
    assert_eq!(
        verify_chain(&issued.cert_chain, &root.cert_pem, SystemTime::now()).unwrap(),
        reviews
    );
    // Without the intermediate the leaf does not reach the root.
    let error = verify_chain(&issued.cert_chain[..1], &root.cert_pem, SystemTime::now()).unwrap_err();
    assert!(error.to_string().contains("does not verify"), "{error}");
}
