//! The CA's signing path: `pilot_ca::Csr::from_pem`, the identity the
//! request asks for, and what signing checks on it.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use pilot_ca::{CaOptions, CertificateAuthority, Csr, SpiffeId, generate_root};
use x509_parser::certificate::X509Certificate;
use x509_parser::certification_request::X509CertificationRequest;
use x509_parser::prelude::FromDer;

/// The trust domain of the authority the requests are sent to.
const TRUST_DOMAIN: &str = "cluster.local";

/// One authority for every input: making a root per input would measure
/// key generation, not the parser.
fn authority() -> &'static CertificateAuthority {
    static AUTHORITY: OnceLock<CertificateAuthority> = OnceLock::new();
    AUTHORITY.get_or_init(|| {
        let root = match generate_root(TRUST_DOMAIN, Duration::from_secs(24 * 3600)) {
            Ok(root) => root,
            Err(e) => panic!("a root for the fuzz target: {e}"),
        };
        match CertificateAuthority::new(&root, CaOptions::new(TRUST_DOMAIN)) {
            Ok(ca) => ca,
            Err(e) => panic!("an authority for the fuzz target: {e}"),
        }
    })
}

/// `data` as a request: PEM text when it has a PEM header, else DER put
/// in a `CERTIFICATE REQUEST` block (so that the fuzzer mutates the
/// request, not its base64). What parses is signed for the identity it
/// asks for, or for a caller's identity when it asks none; the issued
/// chain must verify against the root, name that identity, and certify
/// the request's own public key. A request for another identity than the
/// caller's must be refused.
pub(crate) fn ca_csr(data: &[u8]) {
    let text = match std::str::from_utf8(data) {
        Ok(text) if text.contains("-----BEGIN") => text.to_string(),
        _ => pem::encode(&pem::Pem::new("CERTIFICATE REQUEST", data.to_vec())),
    };
    let Ok(csr) = Csr::from_pem(&text) else {
        return;
    };
    let caller = SpiffeId::new(TRUST_DOMAIN, "default", "fuzz").expect("the caller is a valid SPIFFE ID");
    let identity = match csr.requested_identity() {
        Ok(Some(identity)) => identity,
        Ok(None) => caller.clone(),
        Err(_) => return,
    };
    let ca = authority();
    let Ok(issued) = ca.sign(&csr, &identity, None) else {
        // Refused: another trust domain, a name the CA does not sign, a
        // key it does not take.
        return;
    };
    assert!(
        issued.identity == identity,
        "asked for {identity}, issued {}",
        issued.identity
    );
    match pilot_ca::verify_chain(&issued.cert_chain, ca.root_pem(), SystemTime::now()) {
        Ok(proved) => assert!(
            proved == identity,
            "issued for {identity}, the chain proves {proved}"
        ),
        Err(e) => panic!("the chain issued for {identity} does not verify: {e}"),
    }
    assert!(
        same_key(&text, &issued.cert_chain[0]),
        "the certificate issued for {identity} does not certify the request's key"
    );
    if identity != caller {
        assert!(
            ca.sign(&csr, &caller, None).is_err(),
            "a request for {identity} was signed for {caller}"
        );
    }
}

/// True when the leaf certifies the same SubjectPublicKeyInfo (algorithm,
/// parameters such as the curve, and key) as the request.
fn same_key(request_pem: &str, leaf_pem: &str) -> bool {
    let (Ok(request), Ok(leaf)) = (pem::parse(request_pem), pem::parse(leaf_pem)) else {
        return false;
    };
    let Ok((_, request)) = X509CertificationRequest::from_der(request.contents()) else {
        return false;
    };
    let Ok((_, leaf)) = X509Certificate::from_der(leaf.contents()) else {
        return false;
    };
    request.certification_request_info.subject_pki.raw == leaf.tbs_certificate.subject_pki.raw
}
