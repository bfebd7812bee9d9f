//! Signing workload certificates: a [`Csr`] and the caller's
//! [`SpiffeId`] in, a chain (leaf, intermediates, trust bundle) out.
//!
//! The issued certificate carries the request's public key with the
//! algorithm its SubjectPublicKeyInfo names (ECDSA P-256 or P-384,
//! Ed25519, RSA), never the one its signature names: a P-384 key in a
//! request signed with SHA-256 gets a P-384 certificate.
//!
//! As Istio's CA: the certificate carries only the identity as a URI SAN
//! (whatever else the request asked for), is valid for client and server
//! authentication, is not a CA, and lives [`CaOptions::default_ttl`]
//! unless the request asks for a lifetime, which may not exceed
//! [`CaOptions::max_ttl`]. A request whose subject alternative names name
//! another identity is refused, so a caller never gets a certificate for
//! someone else even by asking.

use std::time::{Duration, SystemTime};

use rcgen::{
    CertificateParams, CertificateSigningRequestParams, DistinguishedName, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber, SubjectPublicKeyInfo,
};

use crate::material::duration;
use crate::{CaError, CaMaterial, SpiffeId};

/// How the authority signs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CaOptions {
    /// The trust domain of every identity signed (`cluster.local`).
    pub trust_domain: String,
    /// A workload certificate's lifetime when the request asks none (24 h,
    /// as Istio's `DEFAULT_WORKLOAD_CERT_TTL`).
    pub default_ttl: Duration,
    /// The longest lifetime a request may ask (90 days, as Istio's
    /// `MAX_WORKLOAD_CERT_TTL`).
    pub max_ttl: Duration,
}

impl CaOptions {
    /// The defaults for `trust_domain`: 24 h, at most 90 days.
    pub fn new(trust_domain: impl Into<String>) -> Self {
        CaOptions {
            trust_domain: trust_domain.into(),
            default_ttl: Duration::from_secs(24 * 3600),
            max_ttl: Duration::from_secs(90 * 24 * 3600),
        }
    }
}

/// A parsed certificate signing request whose signature verified (the
/// requester holds the key), with its public key as its
/// SubjectPublicKeyInfo names it.
#[derive(Debug, Clone)]
pub struct Csr {
    params: CertificateSigningRequestParams,
    public_key: SubjectPublicKeyInfo,
}

impl Csr {
    /// Parses and verifies a PEM `CERTIFICATE REQUEST`; refused when its
    /// public key is of an algorithm this CA does not sign.
    pub fn from_pem(pem: &str) -> Result<Self, CaError> {
        use x509_parser::prelude::FromDer;
        let what = "the certificate signing request";
        let bad = |reason: String| CaError::Pem {
            what: what.into(),
            reason,
        };
        let parsed = pem::parse(pem).map_err(|e| bad(e.to_string()))?;
        if parsed.tag() != "CERTIFICATE REQUEST" && parsed.tag() != "NEW CERTIFICATE REQUEST" {
            return Err(bad(format!(
                "a {} PEM block, expected CERTIFICATE REQUEST",
                parsed.tag()
            )));
        }
        let der = parsed.contents();
        let params =
            CertificateSigningRequestParams::from_der(&der.into()).map_err(|e| bad(e.to_string()))?;
        let (_, request) = x509_parser::certification_request::X509CertificationRequest::from_der(der)
            .map_err(|e| bad(e.to_string()))?;
        let spki = &request.certification_request_info.subject_pki;
        let public_key = SubjectPublicKeyInfo::from_der(spki.raw).map_err(|_| {
            let mut algorithm = spki.algorithm.algorithm.to_id_string();
            if let Some(parameters) = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()) {
                algorithm = format!("{algorithm} ({})", parameters.to_id_string());
            }
            bad(format!(
                "its public key's algorithm {algorithm} is not one this CA signs \
                 (ECDSA P-256 or P-384, Ed25519, RSA)"
            ))
        })?;
        Ok(Csr { params, public_key })
    }

    /// The URIs the request asks for as subject alternative names.
    pub fn requested_uris(&self) -> Vec<String> {
        self.params
            .params
            .subject_alt_names
            .iter()
            .filter_map(|san| match san {
                SanType::URI(uri) => Some(uri.as_str().to_string()),
                _ => None,
            })
            .collect()
    }

    /// The one SPIFFE identity the request asks for, if it names one.
    pub fn requested_identity(&self) -> Result<Option<SpiffeId>, CaError> {
        match self.requested_uris().as_slice() {
            [] => Ok(None),
            [uri] => SpiffeId::parse(uri).map(Some),
            many => Err(CaError::Refused(format!(
                "the request names {} identities ({}); one certificate carries one",
                many.len(),
                many.join(", ")
            ))),
        }
    }
}

/// A signed workload certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issued {
    /// PEM texts, as Istio's `IstioCertificateResponse.cert_chain`: the
    /// leaf first, then the intermediates one each (during a root
    /// rotation, the cross-certificate), and last the trust bundle: one or
    /// more roots in one text, the signing root first.
    pub cert_chain: Vec<String>,
    /// When the leaf expires.
    pub not_after: SystemTime,
    /// The identity it carries.
    pub identity: SpiffeId,
}

/// Signs workload certificates with one signing certificate.
pub struct CertificateAuthority {
    issuer: Issuer<'static, KeyPair>,
    /// The signing certificate unless it is the root, then the
    /// intermediates above it (or the cross-certificate): what goes
    /// between a leaf and the roots.
    chain: Vec<String>,
    root_pem: String,
    bundle_pem: String,
    /// When the signing certificate expires: no leaf outlives it.
    signer_expiry: SystemTime,
    options: CaOptions,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("options", &self.options)
            .field("intermediates", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// An authority signing with `material` as `options` say. Refused
    /// when the trust domain breaks the SPIFFE rules, or when what the
    /// material signs does not verify against its first root.
    pub fn new(material: &CaMaterial, options: CaOptions) -> Result<Self, CaError> {
        SpiffeId::check_trust_domain(&options.trust_domain)?;
        let key = KeyPair::from_pem(&material.key_pem).map_err(|e| CaError::Pem {
            what: "the CA private key".into(),
            reason: e.to_string(),
        })?;
        let issuer = Issuer::from_ca_cert_pem(&material.cert_pem, key).map_err(|e| CaError::Pem {
            what: "the CA certificate".into(),
            reason: e.to_string(),
        })?;
        let mut chain = Vec::new();
        if !material.is_self_signed() {
            chain.push(material.cert_pem.clone());
        }
        chain.extend(material.chain_pem.iter().cloned());
        let authority = CertificateAuthority {
            issuer,
            chain,
            root_pem: material.root_pem.clone(),
            bundle_pem: material.trust_bundle_pem(),
            signer_expiry: crate::material::validity(&material.cert_pem, "the CA certificate")?.1,
            options,
        };
        authority.check_leads_to_root()?;
        Ok(authority)
    }

    /// The root (PEM) the signing certificate leads to, the first of the
    /// trust bundle.
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }

    /// The trust bundle every workload trusts: the signing root first,
    /// then the other roots (the previous root during a rotation), one
    /// PEM text.
    pub fn trust_bundle_pem(&self) -> &str {
        &self.bundle_pem
    }

    /// Signs a throwaway certificate and verifies it against the first
    /// root, so material whose chain or bundle is out of order is refused
    /// when loaded, not by every peer later.
    fn check_leads_to_root(&self) -> Result<(), CaError> {
        let key = KeyPair::generate()?;
        let public = SubjectPublicKeyInfo::from_der(&rcgen::PublicKeyData::subject_public_key_info(&key))?;
        let probe = SpiffeId::new(self.options.trust_domain.clone(), "pilot-ca", "probe")?;
        let leaf = self.leaf(&public, &probe, std::time::Duration::from_secs(60))?;
        let mut chain = vec![leaf];
        chain.extend(self.chain.iter().cloned());
        crate::verify_chain(&chain, &self.root_pem, SystemTime::now()).map_err(|e| {
            CaError::Material(format!(
                "a certificate it signs does not verify against the first root of the bundle \
                 (the root the signing certificate leads to must come first): {e}"
            ))
        })?;
        Ok(())
    }

    /// How this authority signs.
    pub fn options(&self) -> &CaOptions {
        &self.options
    }

    /// The signing certificate's issuer, for the other kinds of
    /// certificate this authority signs.
    pub(crate) fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }

    /// What goes between a leaf and the roots.
    pub(crate) fn intermediates(&self) -> &[String] {
        &self.chain
    }

    /// When the signing certificate expires.
    pub(crate) fn signer_expiry(&self) -> SystemTime {
        self.signer_expiry
    }

    /// Signs `csr` for `identity`, valid for `ttl` (`None` or zero: the
    /// default). Refused when `identity` is of another trust domain, when
    /// the request names another identity, or when `ttl` is over the
    /// maximum.
    pub fn sign(&self, csr: &Csr, identity: &SpiffeId, ttl: Option<Duration>) -> Result<Issued, CaError> {
        if identity.trust_domain() != self.options.trust_domain {
            return Err(CaError::Refused(format!(
                "{identity} is not of this CA's trust domain {:?}",
                self.options.trust_domain
            )));
        }
        let wanted = identity.uri();
        for uri in csr.requested_uris() {
            if uri != wanted {
                return Err(CaError::Refused(format!(
                    "the request asks for {uri}, the caller may only obtain {wanted}"
                )));
            }
        }
        let ttl = match ttl {
            None => self.options.default_ttl,
            Some(ttl) if ttl.is_zero() => self.options.default_ttl,
            Some(ttl) if ttl > self.options.max_ttl => {
                return Err(CaError::TtlOverMax {
                    requested_secs: ttl.as_secs(),
                    max_secs: self.options.max_ttl.as_secs(),
                });
            }
            Some(ttl) => ttl,
        };
        // A certificate never outlives the one that signs it (so a root
        // renewed and then dropped leaves no certificate behind).
        let left = self
            .signer_expiry
            .duration_since(SystemTime::now())
            .unwrap_or_default();
        let ttl = ttl.min(left);
        let leaf = self.leaf(&csr.public_key, identity, ttl)?;
        let mut cert_chain = vec![leaf];
        cert_chain.extend(self.chain.iter().cloned());
        cert_chain.push(self.bundle_pem.clone());
        Ok(Issued {
            cert_chain,
            not_after: SystemTime::now() + ttl,
            identity: identity.clone(),
        })
    }
}

impl CertificateAuthority {
    /// A workload certificate for `public_key` and `identity`, valid for
    /// `ttl`, PEM.
    fn leaf(
        &self,
        public_key: &SubjectPublicKeyInfo,
        identity: &SpiffeId,
        ttl: Duration,
    ) -> Result<String, CaError> {
        let wanted = identity.uri();
        let mut params = CertificateParams::default();
        // Istio's workload certificates have an empty subject.
        params.distinguished_name = DistinguishedName::new();
        params.subject_alt_names =
            vec![SanType::URI(wanted.as_str().try_into().map_err(
                |e: rcgen::Error| CaError::Refused(format!("{wanted}: {e}")),
            )?)];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.serial_number = Some(random_serial()?);
        let now = time::OffsetDateTime::now_utc();
        // A minute back, for peers whose clock is a little behind.
        params.not_before = now - time::Duration::minutes(1);
        params.not_after = now + duration(ttl);
        Ok(params.signed_by(public_key, &self.issuer)?.pem())
    }
}

/// A random positive 128-bit serial number.
pub(crate) fn random_serial() -> Result<SerialNumber, CaError> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| CaError::Signing("no system randomness for a serial number".into()))?;
    bytes[0] &= 0x7f;
    bytes[0] |= 0x01;
    Ok(SerialNumber::from_slice(&bytes))
}
