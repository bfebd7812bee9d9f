//! pilot-discovery's own serving certificate for the ADS port
//! (`--xds-tls-dns-names`): issued by the mesh's CA for the Service's DNS
//! names, as istiod serves its secure port, so that a proxy verifies
//! pilot-discovery with the mesh's trust bundle (the ConfigMap `publish.rs`
//! writes into every namespace) and needs no other CA.
//!
//! The certificate is issued before the port serves, then again at half its
//! life and whenever the signing root changes (a renewal, here or by
//! another replica); TLS handshakes take whichever is current
//! ([`ServingCert`] is the rustls resolver). An issue that fails is logged
//! and retried; the certificate in use stays until it expires.

use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::sync::watch;

use super::SharedCa;

/// The current serving certificate, for rustls.
#[derive(Default)]
pub(crate) struct ServingCert {
    current: RwLock<Option<Current>>,
}

struct Current {
    key: Arc<CertifiedKey>,
    /// The root it was issued under, and when to issue the next one.
    root_pem: String,
    renew_at: SystemTime,
}

impl std::fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.read().as_ref().map(|current| Arc::clone(&current.key))
    }
}

impl ServingCert {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Current>> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Issues a certificate for `names` with the authority that signs
    /// now, valid for `ttl`, and serves it from now on.
    pub(crate) fn issue(&self, ca: &SharedCa, names: &[String], ttl: Duration) -> Result<(), String> {
        let authority = ca.current();
        let issued = authority
            .issue_serving(names, ttl)
            .map_err(|e| format!("the ADS serving certificate for {}: {e}", names.join(", ")))?;
        let chain: Vec<CertificateDer<'static>> = issued
            .chain_pem
            .iter()
            .map(|pem| CertificateDer::from_pem_slice(pem.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the ADS serving certificate: {e}"))?;
        let key = PrivateKeyDer::from_pem_slice(issued.key_pem.as_bytes())
            .map_err(|e| format!("the ADS serving key: {e}"))?;
        let provider = rustls::crypto::ring::default_provider();
        let key = CertifiedKey::from_der(chain, key, &provider)
            .map_err(|e| format!("the ADS serving certificate: {e}"))?;
        let now = SystemTime::now();
        let life = issued.not_after.duration_since(now).unwrap_or_default();
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Current {
            key: Arc::new(key),
            root_pem: authority.root_pem().to_string(),
            renew_at: now + life / 2,
        });
        tracing::info!(
            names = %names.join(","),
            valid_for = %humantime::format_duration(Duration::from_secs(life.as_secs())),
            "ADS serving certificate issued by the mesh CA"
        );
        Ok(())
    }

    /// Whether a new certificate is due: half its life is gone, or the
    /// signing root is not the one it was issued under.
    fn due(&self, ca: &SharedCa) -> bool {
        match &*self.read() {
            None => true,
            Some(current) => {
                SystemTime::now() >= current.renew_at || current.root_pem != ca.current().root_pem()
            }
        }
    }

    /// Reissues when due, checking every `check` (and retrying a failed
    /// issue as often), until `shutdown` turns true.
    pub(crate) async fn run(
        self: Arc<Self>,
        ca: SharedCa,
        names: Vec<String>,
        ttl: Duration,
        check: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(check) => {}
                () = crate::shutdown::closed(&mut shutdown) => return,
            }
            if self.due(&ca)
                && let Err(error) = self.issue(&ca, &names, ttl)
            {
                tracing::error!(%error, "cannot renew the ADS serving certificate; the current one is kept");
            }
        }
    }
}
