//! The CA's own certificates and key: a self-signed root made here
//! ([`generate_root`]), or a root or intermediate loaded from PEM
//! ([`CaMaterial::from_pem`], Istio's `cacerts` files: `ca-cert.pem`,
//! `ca-key.pem`, `cert-chain.pem`, `root-cert.pem`).

use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, KeyPair, KeyUsagePurpose};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::CaError;

/// The signing certificate and its key, the intermediates above it and
/// the root, all PEM. Holds a private key: keep it where only the control
/// plane reads it.
#[derive(Clone, PartialEq, Eq)]
pub struct CaMaterial {
    /// The certificate workload certificates are signed with (the root
    /// itself, or an intermediate).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
    /// The certificates between the signing certificate and the root,
    /// nearest first (empty when the signing certificate is the root or
    /// is signed by it directly).
    pub chain_pem: Vec<String>,
    /// The root every workload trusts.
    pub root_pem: String,
}

impl std::fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaMaterial")
            .field("intermediates", &self.chain_pem.len())
            .field("self_signed", &(self.cert_pem == self.root_pem))
            .finish_non_exhaustive()
    }
}

impl CaMaterial {
    /// Material from PEM text: the signing certificate and key, the chain
    /// from it to the root (Istio's `cert-chain.pem`: the signing
    /// certificate may come first and the root last; both are dropped
    /// from [`chain_pem`](Self::chain_pem)), and the root (`None`: the
    /// signing certificate is the root). The key must belong to the
    /// certificate.
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
        let root = match root_pem {
            Some(root) => pem_of(&single_cert(root, "the root certificate")?),
            None => pem_of(&cert),
        };
        let mut chain = Vec::new();
        if let Some(text) = chain_pem {
            for der in certs(text, "the certificate chain")? {
                let pem = pem_of(&der);
                if der.as_ref() != cert.as_ref() && pem != root {
                    chain.push(pem);
                }
            }
        }
        Ok(CaMaterial {
            cert_pem: pem_of(&cert),
            key_pem: key.serialize_pem(),
            chain_pem: chain,
            root_pem: root,
        })
    }

    /// Whether the signing certificate is the root.
    pub fn is_self_signed(&self) -> bool {
        self.cert_pem == self.root_pem
    }
}

/// A new self-signed root for `trust_domain` (its organization, as
/// Istio's `O=cluster.local`), valid for `validity` from an hour ago (so a
/// clock slightly behind still accepts it), with a new ECDSA P-256 key.
pub fn generate_root(trust_domain: &str, validity: Duration) -> Result<CaMaterial, CaError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, trust_domain);
    name.push(DnType::CommonName, "pilot root CA");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.serial_number = Some(crate::authority::random_serial()?);
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - time::Duration::hours(1);
    params.not_after = now + duration(validity);
    let cert = params.self_signed(&key)?;
    let pem = cert.pem();
    Ok(CaMaterial {
        cert_pem: pem.clone(),
        key_pem: key.serialize_pem(),
        chain_pem: Vec::new(),
        root_pem: pem,
    })
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
