//! Checking a workload chain as a peer would: it leads to the root, is
//! valid now, and names one SPIFFE identity.

use std::time::SystemTime;

use rustls_pki_types::{CertificateDer, UnixTime};

use crate::material::certs;
use crate::{CaError, SpiffeId};

/// Verifies `chain` (PEM certificates, leaf first; a trailing root or
/// trust bundle is allowed) against `root_pem` at `now`, for client and server use, and
/// returns the leaf's SPIFFE identity.
pub fn verify_chain(chain: &[String], root_pem: &str, now: SystemTime) -> Result<SpiffeId, CaError> {
    let mut ders: Vec<CertificateDer<'static>> = Vec::new();
    for pem in chain {
        ders.extend(certs(pem, "the certificate chain")?);
    }
    let roots = certs(root_pem, "the root certificate")?;
    let anchors: Vec<_> = roots
        .iter()
        .map(|root| webpki::anchor_from_trusted_cert(root).map(|a| a.to_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| CaError::Verify(format!("the root: {e:?}")))?;
    let (leaf, intermediates) = ders
        .split_first()
        .ok_or_else(|| CaError::Verify("the chain is empty".into()))?;
    let leaf =
        webpki::EndEntityCert::try_from(leaf).map_err(|e| CaError::Verify(format!("the leaf: {e:?}")))?;
    let since = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_err(|_| CaError::Verify("the time is before 1970".into()))?;
    for usage in [webpki::KeyUsage::server_auth(), webpki::KeyUsage::client_auth()] {
        leaf.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &anchors,
            intermediates,
            UnixTime::since_unix_epoch(since),
            usage,
            None,
            None,
        )
        .map_err(|e| CaError::Verify(format!("{e:?}")))?;
    }
    let uris: Vec<&str> = leaf.valid_uri_names().collect();
    match uris.as_slice() {
        [uri] => SpiffeId::parse(uri),
        other => Err(CaError::Verify(format!(
            "the leaf names {} URIs, expected one SPIFFE identity",
            other.len()
        ))),
    }
}
