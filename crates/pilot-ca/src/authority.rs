//! Signing workload certificates: a [`Csr`] and the caller's
//! [`SpiffeId`] in, a chain (leaf, intermediates, root) out.
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
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
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
/// requester holds the key).
#[derive(Debug, Clone)]
pub struct Csr {
    params: CertificateSigningRequestParams,
}

impl Csr {
    /// Parses and verifies a PEM `CERTIFICATE REQUEST`.
    pub fn from_pem(pem: &str) -> Result<Self, CaError> {
        let params = CertificateSigningRequestParams::from_pem(pem).map_err(|e| CaError::Pem {
            what: "the certificate signing request".into(),
            reason: e.to_string(),
        })?;
        Ok(Csr { params })
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
    /// PEM certificates, leaf first, then the intermediates, the root
    /// last (the order of Istio's `IstioCertificateResponse.cert_chain`).
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
    /// intermediates above it: what goes between a leaf and the root.
    chain: Vec<String>,
    root_pem: String,
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
    /// An authority signing with `material` as `options` say.
    pub fn new(material: &CaMaterial, options: CaOptions) -> Result<Self, CaError> {
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
            chain.extend(material.chain_pem.iter().cloned());
        }
        Ok(CertificateAuthority {
            issuer,
            chain,
            root_pem: material.root_pem.clone(),
            options,
        })
    }

    /// The root certificate (PEM) every workload trusts.
    pub fn root_pem(&self) -> &str {
        &self.root_pem
    }

    /// How this authority signs.
    pub fn options(&self) -> &CaOptions {
        &self.options
    }

    /// Signs `csr` for `identity`, valid for `ttl` (`None` or zero: the
    /// default). Refused when `identity` is of another trust domain, when
    /// the request names another identity, or when `ttl` is over the
    /// maximum.
    pub fn sign(&self, csr: &Csr, identity: &SpiffeId, ttl: Option<Duration>) -> Result<Issued, CaError> {
        if identity.trust_domain != self.options.trust_domain {
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
        let signed = CertificateSigningRequestParams {
            params,
            public_key: csr.params.public_key.clone(),
        }
        .signed_by(&self.issuer)?;
        let mut cert_chain = vec![signed.pem()];
        cert_chain.extend(self.chain.iter().cloned());
        cert_chain.push(self.root_pem.clone());
        Ok(Issued {
            cert_chain,
            not_after: SystemTime::now() + ttl,
            identity: identity.clone(),
        })
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
