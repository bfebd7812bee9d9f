//! The CA's own certificates and key: a self-signed root made here
//! ([`generate_root`]), or a root or intermediate loaded from PEM
//! ([`CaMaterial::from_pem`], Istio's `cacerts` files: `ca-cert.pem`,
//! `ca-key.pem`, `cert-chain.pem`, `root-cert.pem`).

use std::time::{Duration, SystemTime};

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::CaError;

/// The signing certificate and its key, the intermediates above it and
/// the trusted roots, all PEM. Holds a private key: keep it where only the
/// control plane reads it.
///
/// During a root rotation the signing root is the new one, `chain_pem`
/// holds the cross-certificate (the new root's subject and key, signed by
/// the previous root) and `other_roots` the previous root, so a peer that
/// trusts only the previous root still verifies what the new one signs.
#[derive(Clone, PartialEq, Eq)]
pub struct CaMaterial {
    /// The certificate workload certificates are signed with (the root
    /// itself, or an intermediate).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
    /// The certificates between the signing certificate and a trusted
    /// root, nearest first: an operator's intermediates, or during a root
    /// rotation the cross-certificate (empty when the signing certificate
    /// is a root or is signed by it directly).
    pub chain_pem: Vec<String>,
    /// The root the signing certificate leads to, the first of the trust
    /// bundle.
    pub root_pem: String,
    /// The other roots served in the trust bundle after
    /// [`root_pem`](Self::root_pem) (the previous root during a rotation).
    pub other_roots: Vec<String>,
}
impl std::fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaMaterial")
            .field("intermediates", &self.chain_pem.len())
            .field("self_signed", &(self.cert_pem == self.root_pem))
            .field("other_roots", &self.other_roots.len())
            .finish_non_exhaustive()
    }
}

impl CaMaterial {
    /// Material from PEM text: the signing certificate and key, the chain
    /// from it to the root (Istio's `cert-chain.pem`: the signing
    /// certificate may come first and the roots last; they are dropped
    /// from [`chain_pem`](Self::chain_pem)), and the trust bundle (Istio's
    /// `root-cert.pem`: one or more roots, the one the signing certificate
    /// leads to first; `None`: the signing certificate is the root). The
    /// key must belong to the certificate.
    pub fn from_pem(
        cert_pem: &str,
        key_pem: &str,
        chain_pem: Option<&str>,
        root_pem: Option<&str>,
    ) -> Result<Self, CaError> {
        let cert = single_cert(cert_pem, "the CA certificate")?;
        let key = KeyPair::from_pem(key_pem).map_err(|e| CaError::Pem {
            what: "the CA private key".into(),
            reason: e.to_string(),
        })?;
        let parsed = webpki::EndEntityCert::try_from(&cert).map_err(|e| CaError::Pem {
            what: "the CA certificate".into(),
            reason: format!("{e:?}"),
        })?;
        use rcgen::PublicKeyData;
        if parsed.subject_public_key_info().as_ref() != key.subject_public_key_info().as_slice() {
            return Err(CaError::Material(
                "the private key does not belong to the CA certificate".into(),
            ));
        }
        let mut roots = match root_pem {
            Some(bundle) => certs(bundle, "the root certificate bundle")?
                .iter()
                .map(pem_of)
                .collect(),
            None => vec![pem_of(&cert)],
        };
        roots.dedup();
        let root = roots.remove(0);
        let mut chain = Vec::new();
        if let Some(text) = chain_pem {
            for der in certs(text, "the certificate chain")? {
                let pem = pem_of(&der);
                if der.as_ref() != cert.as_ref() && pem != root && !roots.contains(&pem) {
                    chain.push(pem);
                }
            }
        }
        Ok(CaMaterial {
            cert_pem: pem_of(&cert),
            key_pem: key.serialize_pem(),
            chain_pem: chain,
            root_pem: root,
            other_roots: roots,
        })
    }

    /// The trust bundle: the signing root, then the other roots, as one
    /// PEM text (Istio's `root-cert.pem`).
    pub fn trust_bundle_pem(&self) -> String {
        let mut bundle = self.root_pem.clone();
        for root in &self.other_roots {
            bundle.push_str(root);
        }
        bundle
    }

    /// When the signing root became valid and when it expires.
    pub fn root_validity(&self) -> Result<(SystemTime, SystemTime), CaError> {
        validity(&self.root_pem, "the root certificate")
    }

    /// This material without the other roots and chain certificates that
    /// have expired at `now` (a previous root and its cross-certificate
    /// once the rotation's overlap is over).
    pub fn without_expired(&self, now: SystemTime) -> Result<CaMaterial, CaError> {
        let live = |pems: &[String], what: &str| -> Result<Vec<String>, CaError> {
            let mut kept = Vec::new();
            for pem in pems {
                if validity(pem, what)?.1 > now {
                    kept.push(pem.clone());
                }
            }
            Ok(kept)
        };
        Ok(CaMaterial {
            chain_pem: live(&self.chain_pem, "the certificate chain")?,
            other_roots: live(&self.other_roots, "the root certificate bundle")?,
            ..self.clone()
        })
    }

    /// Whether the signing certificate is the root.
    pub fn is_self_signed(&self) -> bool {
        self.cert_pem == self.root_pem
    }
}

/// A new self-signed root for `trust_domain` (its organization, as
/// Istio's `O=cluster.local`), valid for `validity` from an hour ago (a
/// quarter of `validity` ago when that is shorter; so a clock slightly
/// behind still accepts it), with a new ECDSA P-256 key.
/// Each root's common name carries a random suffix, so a renewed root's
/// subject differs from its predecessor's.
pub fn generate_root(trust_domain: &str, validity: Duration) -> Result<CaMaterial, CaError> {
    let (key, params) = root_params(trust_domain, validity)?;
    let pem = params.self_signed(&key)?.pem();
    Ok(CaMaterial {
        cert_pem: pem.clone(),
        key_pem: key.serialize_pem(),
        chain_pem: Vec::new(),
        root_pem: pem,
        other_roots: Vec::new(),
    })
}

/// The successor of the self-signed root of `current`: a new root for
/// `trust_domain` valid for `validity`, which signs from now on, the
/// cross-certificate (the new root's subject and key, signed by the
/// current root and expiring with it) as the chain, and the current root
/// (with its still valid other roots) kept in the trust bundle after the
/// new one. A peer trusting only the current root verifies what the new
/// root signs through the cross-certificate.
pub fn renew_root(current: &CaMaterial, trust_domain: &str, validity: Duration) -> Result<CaMaterial, CaError> {
    if !current.is_self_signed() {
        return Err(CaError::Material(
            "only a self-signed root is renewed here; an operator's intermediate is renewed by the operator"
                .into(),
        ));
    }
    let old_key = KeyPair::from_pem(&current.key_pem).map_err(|e| CaError::Pem {
        what: "the CA private key".into(),
        reason: e.to_string(),
    })?;
    let old_issuer = Issuer::from_ca_cert_pem(&current.root_pem, old_key).map_err(|e| CaError::Pem {
        what: "the root certificate".into(),
        reason: e.to_string(),
    })?;
    let (_, old_expiry) = current.root_validity()?;
    let (key, mut params) = root_params(trust_domain, validity)?;
    let new_root = params.self_signed(&key)?.pem();
    // The cross-certificate: the same subject and key, issued by the
    // current root, never outliving it.
    params.serial_number = Some(crate::authority::random_serial()?);
    let old_expiry = time::OffsetDateTime::from(old_expiry);
    if params.not_after > old_expiry {
        params.not_after = old_expiry;
    }
    params.use_authority_key_identifier_extension = true;
    let cross = params.signed_by(&key, &old_issuer)?.pem();
    let now = SystemTime::now();
    let mut other_roots = vec![current.root_pem.clone()];
    other_roots.extend(current.without_expired(now)?.other_roots);
    Ok(CaMaterial {
        cert_pem: new_root.clone(),
        key_pem: key.serialize_pem(),
        chain_pem: vec![cross],
        root_pem: new_root,
        other_roots,
    })
}

/// A new key and the parameters of a root certificate for it.
fn root_params(trust_domain: &str, validity: Duration) -> Result<(KeyPair, CertificateParams), CaError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let serial = crate::authority::random_serial()?;
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, trust_domain);
    let suffix: String = serial.as_ref().iter().skip(1).take(4).map(|b| format!("{b:02x}")).collect();
    name.push(DnType::CommonName, format!("pilot root CA {suffix}"));
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(serial);
    let now = time::OffsetDateTime::now_utc();
    // Back an hour (a quarter of the validity when that is shorter), so a
    // clock slightly behind still accepts it.
    params.not_before = now - duration(validity / 4).min(time::Duration::hours(1));
    params.not_after = now + duration(validity);
    Ok((key, params))
}

/// When the one certificate of `pem` became valid and when it expires.
pub(crate) fn validity(pem: &str, what: &str) -> Result<(SystemTime, SystemTime), CaError> {
    use x509_parser::prelude::FromDer;
    let der = single_cert(pem, what)?;
    let (_, cert) = x509_parser::certificate::X509Certificate::from_der(der.as_ref()).map_err(|e| CaError::Pem {
        what: what.into(),
        reason: e.to_string(),
    })?;
    let at = |t: x509_parser::time::ASN1Time| SystemTime::from(t.to_datetime());
    Ok((at(cert.validity().not_before), at(cert.validity().not_after)))
}

/// `std` to `time` duration, saturating.
pub(crate) fn duration(value: Duration) -> time::Duration {
    time::Duration::try_from(value).unwrap_or(time::Duration::MAX)
}

/// Every certificate in `text`; at least one.
pub(crate) fn certs(text: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, CaError> {
    let parsed: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(text.as_bytes()).collect();
    let parsed = parsed.map_err(|e| CaError::Pem {
        what: what.into(),
        reason: e.to_string(),
    })?;
    if parsed.is_empty() {
        return Err(CaError::Pem {
            what: what.into(),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(parsed)
}

/// The one certificate in `text`.
fn single_cert(text: &str, what: &str) -> Result<CertificateDer<'static>, CaError> {
    let mut all = certs(text, what)?;
    if all.len() > 1 {
        return Err(CaError::Pem {
            what: what.into(),
            reason: format!("{} CERTIFICATE blocks, expected one", all.len()),
        });
    }
    Ok(all.remove(0))
}

/// A certificate as PEM.
pub(crate) fn pem_of(der: &CertificateDer<'_>) -> String {
    pem::encode_config(
        &pem::Pem::new("CERTIFICATE", der.as_ref().to_vec()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_root_loads_back_and_a_foreign_key_is_refused() {
        let root = generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
        assert!(root.is_self_signed());
        let loaded = CaMaterial::from_pem(&root.cert_pem, &root.key_pem, None, None).unwrap();
        assert_eq!(loaded.cert_pem, root.cert_pem);
        assert!(loaded.is_self_signed());
        let other = generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
        let error = CaMaterial::from_pem(&root.cert_pem, &other.key_pem, None, None).unwrap_err();
        assert!(error.to_string().contains("does not belong"), "{error}");
        let error = CaMaterial::from_pem("not pem", &root.key_pem, None, None).unwrap_err();
        assert!(error.to_string().contains("the CA certificate"), "{error}");
    }
}
