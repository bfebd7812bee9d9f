//! The pinning rules on certificates made by pilot-ca: the mesh root, an
//! attacker's root, a `kube-system/admin` leaf, a rotation cross-signed
//! by the pinned root, and cross-certificates
//! that must not pass (another key; signed by a root that is not pinned,
//! even under the pinned root's name).

use std::time::{Duration, SystemTime};

use pilot_ca::{CaMaterial, CaOptions, CertificateAuthority, Csr, SpiffeId, WorkloadKey, generate_root};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use super::*;

const HOUR: Duration = Duration::from_secs(3600);

fn reviews() -> SpiffeId {
    SpiffeId::parse("spiffe://cluster.local/ns/default/sa/reviews").unwrap()
}

fn root() -> CaMaterial {
    generate_root("cluster.local", HOUR).unwrap()
}

/// The agent's key and its public key as the CSR carries it.
fn agent_key() -> (WorkloadKey, Vec<u8>) {
    let key = WorkloadKey::generate().unwrap();
    let public = csr_public_key(&key.csr_pem(&reviews()).unwrap()).unwrap();
    (key, public)
}

/// `ca`'s answer (leaf, intermediates, its root) for `key` and `identity`.
fn issue(ca: &CaMaterial, key: &WorkloadKey, identity: &SpiffeId) -> Vec<String> {
    let authority = CertificateAuthority::new(ca, CaOptions::new("cluster.local")).unwrap();
    let csr = Csr::from_pem(&key.csr_pem(identity).unwrap()).unwrap();
    authority.sign(&csr, identity, None).unwrap().cert_chain
}

/// The subject of `root`'s certificate, as rcgen writes it (pilot-ca's
/// roots name an organization and a common name).
fn subject_of(root: &CaMaterial) -> DistinguishedName {
    let der = single(&root.cert_pem, "CERTIFICATE", "root").unwrap();
    let cert = parse(&der, "root").unwrap();
    let mut name = DistinguishedName::new();
    for o in cert.subject().iter_organization() {
        name.push(DnType::OrganizationName, o.as_str().unwrap());
    }
    for cn in cert.subject().iter_common_name() {
        name.push(DnType::CommonName, cn.as_str().unwrap());
    }
    name
}

/// A CA certificate naming `subject_root`'s subject with the public key
/// of `key_pem`, issued and signed by `issuer`: a cross-certificate when
/// the key is the subject root's own.
fn cross(subject_root: &CaMaterial, key_pem: &str, issuer: &CaMaterial) -> String {
    let mut params = CertificateParams::default();
    params.distinguished_name = subject_of(subject_root);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + time::Duration::hours(1);
    let subject_key = KeyPair::from_pem(key_pem).unwrap();
    let signer =
        Issuer::from_ca_cert_pem(&issuer.cert_pem, KeyPair::from_pem(&issuer.key_pem).unwrap()).unwrap();
    params.signed_by(&subject_key, &signer).unwrap().pem()
}

/// A rotation's answer, as the contract says the CA renews its root: the
/// leaf signed by `new`, the cross-certificate of `new` by `old`, and the
/// bundle `new` then `old`.
fn rotation(old: &CaMaterial, new: &CaMaterial, key: &WorkloadKey) -> Vec<String> {
    let mut answer = issue(new, key, &reviews());
    answer.pop();
    answer.push(cross(new, &new.key_pem, old));
    answer.push(format!("{}{}", new.cert_pem, old.cert_pem));
    answer
}

fn pinned(roots: &[&CaMaterial]) -> Pinned {
    Pinned::from_pem(&roots.iter().map(|r| r.cert_pem.as_str()).collect::<String>()).unwrap()
}

fn check(chain: &[String], own: &[u8], pins: &Pinned) -> Result<Accepted, String> {
    check_answer(chain, own, &reviews().uri(), pins, SystemTime::now())
}

#[test]
fn an_answer_from_the_pinned_root_is_served_with_its_bundle() {
    let mesh = root();
    let (key, own) = agent_key();
    let answer = issue(&mesh, &key, &reviews());
    let accepted = check(&answer, &own, &pinned(&[&mesh])).unwrap();
    assert_eq!(accepted.bundle_pem, mesh.cert_pem);
    assert_eq!(accepted.chain_pem, answer[0]);
    assert!(accepted.added.is_empty(), "{:?}", accepted.added);
    assert_eq!(accepted.pinned, pinned(&[&mesh]));
}

#[test]
fn an_attacker_root_and_a_kube_system_admin_leaf_are_refused() {
    let mesh = root();
    let attacker = root();
    let (key, own) = agent_key();
    let pins = pinned(&[&mesh]);
    let admin = SpiffeId::parse("spiffe://cluster.local/ns/kube-system/sa/admin").unwrap();

    // The attacker's CA answers with its own root as the bundle.
    let forged = issue(&attacker, &key, &admin);
    let error = check(&forged, &own, &pins).unwrap_err();
    assert!(
        error.contains("the trust bundle") && error.contains("neither pinned nor cross-signed"),
        "{error}"
    );
    // ... or slips its root in beside the mesh's.
    let mut beside = forged.clone();
    *beside.last_mut().unwrap() = format!("{}{}", mesh.cert_pem, attacker.cert_pem);
    let error = check(&beside, &own, &pins).unwrap_err();
    assert!(
        error.contains("certificate 2") && error.contains("neither pinned"),
        "{error}"
    );
    // ... or keeps the mesh's bundle and hopes the leaf is not checked.
    let mut leaf_only = forged.clone();
    *leaf_only.last_mut().unwrap() = mesh.cert_pem.clone();
    let error = check(&leaf_only, &own, &pins).unwrap_err();
    assert!(
        error.contains("spiffe://cluster.local/ns/kube-system/sa/admin")
            && error.contains("expected exactly"),
        "{error}"
    );
    // Even with the identity asked for, its leaf chains to no pinned root.
    let mut right_name = issue(&attacker, &key, &reviews());
    *right_name.last_mut().unwrap() = mesh.cert_pem.clone();
    let error = check(&right_name, &own, &pins).unwrap_err();
    assert!(error.contains("does not chain to a pinned root"), "{error}");
    // The mesh's own CA, but an admin leaf: refused for its identity.
    let admin_leaf = issue(&mesh, &key, &admin);
    let error = check(&admin_leaf, &own, &pins).unwrap_err();
    assert!(error.contains("kube-system/sa/admin"), "{error}");
}

#[test]
fn a_leaf_for_another_key_is_refused() {
    let mesh = root();
    let (_, own) = agent_key();
    let (other, _) = agent_key();
    let answer = issue(&mesh, &other, &reviews());
    let error = check(&answer, &own, &pinned(&[&mesh])).unwrap_err();
    assert!(error.contains("another public key than the agent's"), "{error}");
}

#[test]
fn a_rotation_cross_signed_by_the_pinned_root_is_pinned_and_then_stands_alone() {
    let old = root();
    let new = root();
    let (key, own) = agent_key();
    let pins = pinned(&[&old]);
    let answer = rotation(&old, &new, &key);
    let accepted = check(&answer, &own, &pins).unwrap();
    assert_eq!(accepted.added.len(), 1, "{:?}", accepted.added);
    assert_eq!(accepted.pinned, pinned(&[&old, &new]));
    assert_eq!(accepted.bundle_pem, format!("{}{}", new.cert_pem, old.cert_pem));
    assert!(
        accepted.chain_pem.ends_with(&answer[1]),
        "the cross-certificate is served in the chain"
    );
    // Once pinned, the new root needs no cross-certificate any more.
    let later = issue(&new, &key, &reviews());
    let accepted = check(&later, &own, &accepted.pinned).unwrap();
    assert!(accepted.added.is_empty());
    // Without the pin it did.
    let error = check(&later, &own, &pins).unwrap_err();
    assert!(error.contains("no cross-certificate"), "{error}");
}

#[test]
fn cross_certificates_that_do_not_certify_the_new_root_are_refused() {
    let old = root();
    let new = root();
    let attacker = root();
    let (key, own) = agent_key();
    let pins = pinned(&[&old]);
    let answer_with = |cross_pem: String| {
        let mut answer = rotation(&old, &new, &key);
        answer[1] = cross_pem;
        answer
    };
    // Signed by the pinned root, naming the new root, but with another key.
    let error = check(&answer_with(cross(&new, &attacker.key_pem, &old)), &own, &pins).unwrap_err();
    assert!(error.contains("carries another public key"), "{error}");
    // The new root's subject and key, but signed by a root that is not
    // pinned.
    let error = check(&answer_with(cross(&new, &new.key_pem, &attacker)), &own, &pins).unwrap_err();
    assert!(error.contains("not signed by a pinned root"), "{error}");
    // The same, the attacker claiming the pinned root's name as issuer.
    let impostor = CaMaterial {
        cert_pem: cross(&old, &attacker.key_pem, &attacker),
        ..attacker.clone()
    };
    let error = check(&answer_with(cross(&new, &new.key_pem, &impostor)), &own, &pins).unwrap_err();
    assert!(error.contains("not signed by a pinned root"), "{error}");
    // Nothing was pinned by the refused answers.
    assert_eq!(pins, pinned(&[&old]));
}

#[test]
fn trust_on_first_use_pins_the_first_bundle() {
    let mesh = root();
    let (key, own) = agent_key();
    let answer = issue(&mesh, &key, &reviews());
    let accepted = check(&answer, &own, &Pinned::default()).unwrap();
    assert_eq!(accepted.added.len(), 1);
    assert_eq!(accepted.pinned, pinned(&[&mesh]));
    // First use still checks the leaf.
    let (_, stranger) = agent_key();
    let error = check(&answer, &stranger, &Pinned::default()).unwrap_err();
    assert!(error.contains("another public key"), "{error}");

    // Stored, loaded back, and a store that is not PEM is an error naming it.
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("state/mesh-roots.pem");
    let first_use = RootPinning::FirstUse(store.clone());
    assert!(Pinned::load(&first_use).unwrap().is_empty());
    accepted.pinned.store(&store).unwrap();
    assert_eq!(Pinned::load(&first_use).unwrap(), accepted.pinned);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o600
    );
    std::fs::write(&store, "not a certificate").unwrap();
    let error = Pinned::load(&first_use).unwrap_err().to_string();
    assert!(
        error.contains("mesh-roots.pem") && error.contains("no CERTIFICATE"),
        "{error}"
    );
    // A configured file must exist.
    let error = Pinned::load(&RootPinning::File(dir.path().join("absent.pem")))
        .unwrap_err()
        .to_string();
    assert!(error.contains("absent.pem"), "{error}");
}

#[test]
fn malformed_answers_name_the_element() {
    let mesh = root();
    let (key, own) = agent_key();
    let pins = pinned(&[&mesh]);
    let answer = issue(&mesh, &key, &reviews());
    let error = check(&answer[..1], &own, &pins).unwrap_err();
    assert!(error.contains("1 cert_chain elements"), "{error}");
    let two_leaves = vec![format!("{}{}", answer[0], answer[0]), answer[1].clone()];
    let error = check(&two_leaves, &own, &pins).unwrap_err();
    assert!(
        error.contains("cert_chain[0]") && error.contains("2 CERTIFICATE blocks"),
        "{error}"
    );
    let empty_bundle = vec![answer[0].clone(), String::new()];
    let error = check(&empty_bundle, &own, &pins).unwrap_err();
    assert!(error.contains("cert_chain[1] (the trust bundle)"), "{error}");
}
