//! A workload's side: its key and the signing request it sends (what
//! `pilot-agent` makes; the key never leaves it).

use rcgen::{CertificateParams, DistinguishedName, KeyPair, SanType};

use crate::{CaError, SpiffeId};

/// A workload's ECDSA P-256 key.
pub struct WorkloadKey {
    key: KeyPair,
}

impl std::fmt::Debug for WorkloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkloadKey(..)")
    }
}

impl WorkloadKey {
    /// A new key.
    pub fn generate() -> Result<Self, CaError> {
        Ok(WorkloadKey {
            key: KeyPair::generate()?,
        })
    }

    /// The private key, PKCS#8 PEM (for Envoy over SDS).
    pub fn private_key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A PEM certificate signing request for `identity`, signed with this
    /// key.
    pub fn csr_pem(&self, identity: &SpiffeId) -> Result<String, CaError> {
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        let uri = identity.uri();
        params.subject_alt_names =
            vec![SanType::URI(uri.as_str().try_into().map_err(
                |e: rcgen::Error| CaError::Refused(format!("{uri}: {e}")),
            )?)];
        Ok(params.serialize_request(&self.key)?.pem()?)
    }
}
