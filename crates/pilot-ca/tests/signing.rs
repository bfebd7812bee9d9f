//! Signing workload certificates end to end: a key and CSR made as the
//! agent makes them, signed by a root or an intermediate, verified as a
//! peer verifies them; keys of each algorithm named as they are; a root
//! bundle of several roots; a self-signed root renewed with a
//! cross-certificate.

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
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let issued = ca.sign(&csr_for(&reviews), &reviews, None).unwrap();
    assert_eq!(issued.cert_chain.len(), 2, "leaf and root");
    assert_eq!(issued.cert_chain[1], ca.root_pem());
    assert_eq!(ca.trust_bundle_pem(), ca.root_pem(), "one root, one bundle");
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
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let ratings = SpiffeId::new("cluster.local", "default", "ratings").unwrap();
    let error = ca.sign(&csr_for(&ratings), &reviews, None).unwrap_err();
    assert!(matches!(error, CaError::Refused(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("asks for spiffe://cluster.local/ns/default/sa/ratings"),
        "{error}"
    );
    let elsewhere = SpiffeId::new("example.org", "default", "reviews").unwrap();
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
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
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
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
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

/// The DER SubjectPublicKeyInfo of the one PEM block in `pem` (a
/// certificate or a request), and the curve it names.
fn public_key_of(pem: &str) -> (Vec<u8>, String) {
    use x509_parser::prelude::FromDer;
    let block = pem::parse(pem).unwrap();
    let spki = if block.tag() == "CERTIFICATE" {
        let (_, cert) = x509_parser::certificate::X509Certificate::from_der(block.contents()).unwrap();
        cert.tbs_certificate.subject_pki.clone()
    } else {
        let (_, csr) =
            x509_parser::certification_request::X509CertificationRequest::from_der(block.contents()).unwrap();
        csr.certification_request_info.subject_pki.clone()
    };
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.as_oid().ok())
        .map(|oid| oid.to_id_string())
        .unwrap_or_default();
    (spki.raw.to_vec(), curve)
}

const P256: &str = "1.2.840.10045.3.1.7";
const P384: &str = "1.3.132.0.34";

/// A request whose key's algorithm differs from its signature's says
/// which key it holds in its SubjectPublicKeyInfo, and the certificate
/// carries that key as it is: P-256 and P-384 keys, each signed with its
/// own hash and with the other one's.
#[test]
fn the_certificate_names_the_requests_key_algorithm_whatever_its_signature() {
    let ca = authority();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let request_with = |alg: &'static rcgen::SignatureAlgorithm| {
        let key = rcgen::KeyPair::generate_for(alg).unwrap();
        let mut params = rcgen::CertificateParams::default();
        params.subject_alt_names = vec![rcgen::SanType::URI(reviews.uri().try_into().unwrap())];
        params.serialize_request(&key).unwrap().pem().unwrap()
    };
    let fixture = |name: &str| {
        std::fs::read_to_string(format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    for (what, request, curve) in [
        ("P-256 with SHA-256", request_with(&rcgen::PKCS_ECDSA_P256_SHA256), P256),
        ("P-384 with SHA-384", request_with(&rcgen::PKCS_ECDSA_P384_SHA384), P384),
        ("P-384 with SHA-256", fixture("p384-signed-sha256.csr.pem"), P384),
        ("P-256 with SHA-384", fixture("p256-signed-sha384.csr.pem"), P256),
    ] {
        let (requested, requested_curve) = public_key_of(&request);
        assert_eq!(requested_curve, curve, "{what}: the request's own key");
        let csr = Csr::from_pem(&request).unwrap_or_else(|e| panic!("{what}: {e}"));
        let issued = ca.sign(&csr, &reviews, None).unwrap();
        let (certified, certified_curve) = public_key_of(&issued.cert_chain[0]);
        assert_eq!(certified_curve, curve, "{what}: the certificate names the key's curve");
        assert_eq!(certified, requested, "{what}: the certificate carries the request's key");
        assert_eq!(
            verify_chain(&issued.cert_chain, ca.root_pem(), SystemTime::now()).unwrap(),
            reviews,
            "{what}"
        );
    }
}

/// A request naming an identity that breaks the SPIFFE rules is refused,
/// the offending part named.
#[test]
fn a_request_naming_an_identity_against_the_spiffe_rules_is_refused() {
    let long = "a".repeat(3000);
    for (account, expected) in [
        ("..", "relative path segment"),
        ("a;b,c=d\"e", "has ';'"),
        (long.as_str(), "over 2048"),
    ] {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::default();
        let uri = format!("spiffe://cluster.local/ns/default/sa/{account}");
        params.subject_alt_names = vec![rcgen::SanType::URI(uri.as_str().try_into().unwrap())];
        let csr = Csr::from_pem(&params.serialize_request(&key).unwrap().pem().unwrap()).unwrap();
        let error = csr.requested_identity().unwrap_err();
        assert!(matches!(error, CaError::InvalidIdentity { .. }), "{error}");
        assert!(error.to_string().contains(expected), "{expected}: {error}");
    }
}

/// An operator's bundle of the new and the previous root: the first
/// signs, both are served as the trust bundle, and a bundle whose first
/// root is not the signing certificate's is refused at load.
#[test]
fn a_root_bundle_of_several_roots_is_served_the_signing_root_first() {
    let new = generate_root("cluster.local", 24 * HOUR).unwrap();
    let old = generate_root("cluster.local", 24 * HOUR).unwrap();
    let bundle = format!("{}{}", new.cert_pem, old.cert_pem);
    let material = CaMaterial::from_pem(&new.cert_pem, &new.key_pem, None, Some(&bundle)).unwrap();
    assert_eq!(material.root_pem, new.cert_pem);
    assert_eq!(material.other_roots, vec![old.cert_pem.clone()]);
    let ca = CertificateAuthority::new(&material, CaOptions::new("cluster.local")).unwrap();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let issued = ca.sign(&csr_for(&reviews), &reviews, None).unwrap();
    assert_eq!(issued.cert_chain.len(), 2, "the leaf and the bundle");
    assert_eq!(issued.cert_chain[1], bundle, "the bundle, the signing root first");
    assert_eq!(
        verify_chain(&issued.cert_chain[..1], &issued.cert_chain[1], SystemTime::now()).unwrap(),
        reviews
    );

    let reversed = format!("{}{}", old.cert_pem, new.cert_pem);
    let material = CaMaterial::from_pem(&new.cert_pem, &new.key_pem, None, Some(&reversed)).unwrap();
    let error = CertificateAuthority::new(&material, CaOptions::new("cluster.local")).unwrap_err();
    assert!(
        error.to_string().contains("the root the signing certificate leads to must come first"),
        "{error}"
    );
}

/// A renewed self-signed root: what the old root signed and what the new
/// one signs both verify against the old root alone (through the
/// cross-certificate) and against the new bundle; once the old root has
/// expired it and its cross-certificate leave the material.
#[test]
fn a_renewed_root_is_trusted_through_the_old_one_until_the_old_one_expires() {
    let old = generate_root("cluster.local", 24 * HOUR).unwrap();
    let before = CertificateAuthority::new(&old, CaOptions::new("cluster.local")).unwrap();
    let renewed = pilot_ca::renew_root(&old, "cluster.local", 240 * HOUR).unwrap();
    assert_ne!(renewed.root_pem, old.root_pem, "a new root");
    assert_ne!(renewed.key_pem, old.key_pem, "with a new key");
    assert_eq!(renewed.chain_pem.len(), 1, "the cross-certificate");
    assert_eq!(renewed.other_roots, vec![old.root_pem.clone()]);
    let after = CertificateAuthority::new(&renewed, CaOptions::new("cluster.local")).unwrap();
    let reviews = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
    let issued_before = before.sign(&csr_for(&reviews), &reviews, None).unwrap();
    let issued_after = after.sign(&csr_for(&reviews), &reviews, None).unwrap();
    assert_eq!(issued_after.cert_chain.len(), 3, "leaf, cross-certificate, bundle");
    assert_eq!(issued_after.cert_chain[1], renewed.chain_pem[0]);
    assert_eq!(
        issued_after.cert_chain[2],
        format!("{}{}", renewed.root_pem, old.root_pem),
        "the bundle: the new root, then the old"
    );
    let now = SystemTime::now();
    for (what, chain) in [("before", &issued_before.cert_chain), ("after", &issued_after.cert_chain)] {
        let intermediates = &chain[..chain.len() - 1];
        assert_eq!(
            verify_chain(intermediates, &old.root_pem, now).unwrap(),
            reviews,
            "issued {what}: trusted by a peer that knows only the old root"
        );
        assert_eq!(
            verify_chain(intermediates, after.trust_bundle_pem(), now).unwrap(),
            reviews,
            "issued {what}: trusted through the new bundle"
        );
    }
    // Without the cross-certificate the old root does not reach the new.
    let error = verify_chain(&issued_after.cert_chain[..1], &old.root_pem, now).unwrap_err();
    assert!(error.to_string().contains("does not verify"), "{error}");
    assert_eq!(
        verify_chain(&issued_after.cert_chain[..1], &renewed.root_pem, now).unwrap(),
        reviews,
        "the new root alone verifies what it signs"
    );

    // A day and a bit later the old root has expired: only the new one is
    // left, and it still signs.
    let later = now + 25 * HOUR;
    let pruned = renewed.without_expired(later).unwrap();
    assert!(pruned.other_roots.is_empty() && pruned.chain_pem.is_empty(), "{pruned:?}");
    let pruned_ca = CertificateAuthority::new(&pruned, CaOptions::new("cluster.local")).unwrap();
    assert_eq!(pruned_ca.trust_bundle_pem(), renewed.root_pem);
    assert_eq!(renewed.without_expired(now).unwrap(), renewed, "nothing expired yet");
    // The renewed material loads back from its files.
    let loaded = CaMaterial::from_pem(
        &renewed.cert_pem,
        &renewed.key_pem,
        Some(&renewed.chain_pem.concat()),
        Some(&renewed.trust_bundle_pem()),
    )
    .unwrap();
    assert_eq!(loaded, renewed);
}
