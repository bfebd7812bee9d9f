//! The control plane's own serving certificate: a key made here and a
//! certificate for DNS names (`pilot-discovery.pilot-system.svc`), signed
//! by the mesh's CA, as istiod serves its secure port with a certificate its
//! own CA issues. Proxies then verify pilot-discovery with the mesh's trust
//! bundle, the same roots they verify each other with; no other CA is
//! needed.

use std::time::{Duration, SystemTime};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

use crate::material::duration;
use crate::{CaError, CertificateAuthority};

/// A serving certificate and its key.
#[derive(Clone)]
pub struct ServingCertificate {
    /// PEM: the leaf, then the intermediates up to (not including) the
    /// root: what a TLS server presents.
    pub chain_pem: Vec<String>,
    /// The private key, PKCS#8 PEM.
    pub key_pem: String,
    /// When the leaf expires.
    pub not_after: SystemTime,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate")
            .field("chain", &self.chain_pem.len())
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// A new key and a certificate for `dns_names` (server authentication
    /// only, not a CA), valid for `ttl` but never beyond the signing
    /// certificate. Refused without a name, or with a name that is not a
    /// DNS name.
    pub fn issue_serving(&self, dns_names: &[String], ttl: Duration) -> Result<ServingCertificate, CaError> {
        let Some(first) = dns_names.first() else {
            return Err(CaError::Refused(
                "a serving certificate needs at least one DNS name".into(),
            ));
        };
        let mut params = CertificateParams::default();
        let mut subject = DistinguishedName::new();
        subject.push(DnType::CommonName, first.as_str());
        params.distinguished_name = subject;
        params.subject_alt_names = dns_names
            .iter()
            .map(|name| {
                if !is_dns_name(name) {
                    return Err(CaError::Refused(format!(
                        "{name:?} is not a DNS name (labels of letters, digits and '-', dot separated)"
                    )));
                }
                Ok(SanType::DnsName(name.as_str().try_into().map_err(
                    |e: rcgen::Error| CaError::Refused(format!("{name:?} is not a DNS name: {e}")),
                )?))
            })
            .collect::<Result<_, _>>()?;
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(crate::authority::random_serial()?);
        let left = self
            .signer_expiry()
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let ttl = ttl.min(left);
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::minutes(1);
        params.not_after = now + duration(ttl);
        let key = KeyPair::generate()?;
        let leaf = params.signed_by(&key, self.issuer())?.pem();
        let mut chain_pem = vec![leaf];
        chain_pem.extend(self.intermediates().iter().cloned());
        Ok(ServingCertificate {
            chain_pem,
            key_pem: key.serialize_pem(),
            not_after: SystemTime::now() + ttl,
        })
    }
}

/// Whether `name` is a DNS host name: dot-separated labels of 1 to 63
/// letters, digits and hyphens, not starting or ending with a hyphen, at
/// most 253 characters, and not all digits (an address is not a name).
fn is_dns_name(name: &str) -> bool {
    name.len() <= 253
        && !name
            .split('.')
            .all(|label| label.bytes().all(|b| b.is_ascii_digit()))
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CaOptions, generate_root};
    use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

    /// Verifies `chain` as a TLS client verifies a server: for `name`,
    /// against the roots of `bundle_pem`.
    fn verify_server(chain: &[String], bundle_pem: &str, name: &str) -> Result<(), String> {
        let der =
            |pem: &str| -> Vec<CertificateDer<'static>> { crate::material::certs(pem, "test").unwrap() };
        let roots = der(bundle_pem);
        let anchors: Vec<_> = roots
            .iter()
            .map(|r| webpki::anchor_from_trusted_cert(r).unwrap().to_owned())
            .collect();
        let chain: Vec<CertificateDer<'static>> = chain.iter().flat_map(|pem| der(pem)).collect();
        let leaf = webpki::EndEntityCert::try_from(&chain[0]).map_err(|e| format!("{e:?}"))?;
        leaf.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            &chain[1..],
            UnixTime::now(),
            webpki::KeyUsage::server_auth(),
            None,
            None,
        )
        .map_err(|e| format!("{e:?}"))?;
        let name = ServerName::try_from(name.to_string()).unwrap();
        leaf.verify_is_valid_for_subject_name(&name)
            .map_err(|e| format!("{e:?}"))
    }

    #[test]
    fn a_serving_certificate_verifies_for_its_names_against_the_mesh_roots() {
        let root = generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
        let ca = CertificateAuthority::new(&root, CaOptions::new("cluster.local")).unwrap();
        let names = [
            "pilot-discovery.pilot-system".to_string(),
            "pilot-discovery.pilot-system.svc".to_string(),
        ];
        let serving = ca.issue_serving(&names, Duration::from_secs(600)).unwrap();
        for name in &names {
            verify_server(&serving.chain_pem, ca.trust_bundle_pem(), name).unwrap();
        }
        let error = verify_server(&serving.chain_pem, ca.trust_bundle_pem(), "evil.example").unwrap_err();
        assert!(error.contains("NotValidForName"), "{error}");
        // Never longer than the signing root.
        let long = ca.issue_serving(&names, Duration::from_secs(86_400)).unwrap();
        assert!(long.not_after <= SystemTime::now() + Duration::from_secs(3600));
        // The key is the certificate's.
        assert!(serving.key_pem.contains("PRIVATE KEY"));
    }

    #[test]
    fn names_that_are_not_dns_names_are_refused() {
        let root = generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
        let ca = CertificateAuthority::new(&root, CaOptions::new("cluster.local")).unwrap();
        let ttl = Duration::from_secs(60);
        assert!(
            ca.issue_serving(&[], ttl)
                .unwrap_err()
                .to_string()
                .contains("at least one DNS name")
        );
        for bad in ["", "10.0.0.1", "bad name", "a..b", "-a.b"] {
            let error = ca.issue_serving(&[bad.to_string()], ttl).unwrap_err().to_string();
            assert!(error.contains("is not a DNS name"), "{bad}: {error}");
        }
    }
}
