//! Renewing the self-signed root kept in the store before it expires
//! ([`Renewal`]), every `--ca-root-check-interval`:
//!
//! 1. read the root the store keeps (another replica may have renewed
//!    it);
//! 2. if its remaining lifetime is under `--ca-root-renew-before`, make
//!    its successor ([`pilot_ca::renew_root`]: a new root, and the
//!    cross-certificate the old root signs) and replace the stored root
//!    only if it is still the one read (compare-and-swap); a replica that
//!    loses reads the winner's, so every replica signs with one root;
//! 3. serve what is kept, less the roots and cross-certificates that have
//!    expired: the old root leaves the bundle when it expires.
//!
//! A failed step is logged and tried again at the next check; the
//! authority already serving keeps signing meanwhile.

use std::time::{Duration, SystemTime};

use pilot_ca::{CaMaterial, CaOptions, CertificateAuthority};
use tokio::sync::watch;

use super::kept::{RootStore, Version};
use super::{RenewBefore, SharedCa};

/// The renewal loop of a root kept in the store.
pub(crate) struct Renewal {
    pub(super) store: RootStore,
    pub(super) shared: SharedCa,
    pub(super) options: CaOptions,
    /// The root as last read or written, expired parts included.
    pub(super) material: CaMaterial,
    /// What signs now: `material` less what has expired.
    pub(super) serving: CaMaterial,
    pub(super) root_ttl: Duration,
    pub(super) renew_before: RenewBefore,
    pub(super) interval: Duration,
}

impl Renewal {
    /// Checks every interval until `shutdown` turns true.
    pub(crate) async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let interval = self.interval.max(Duration::from_millis(100));
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = crate::shutdown::closed(&mut shutdown) => return,
            }
            if let Err(e) = self.check().await {
                tracing::warn!(error = %e, "checking the CA root for renewal failed; trying again at the next check");
            }
        }
    }

    /// One check.
    async fn check(&mut self) -> Result<(), String> {
        let (mut material, version) = match self.store.load().await? {
            Some(stored) => stored,
            None => (self.material.clone(), Version::Process),
        };
        let now = SystemTime::now();
        let (not_before, not_after) = material.root_validity().map_err(|e| e.to_string())?;
        if self.renew_before.due(not_before, not_after, now) {
            let renewed = pilot_ca::renew_root(&material, &self.options.trust_domain, self.root_ttl)
                .map_err(|e| format!("renewing the CA root: {e}"))?;
            if self.store.replace(&version, &renewed).await? {
                tracing::info!(
                    old_root_expires = %humantime::format_rfc3339_seconds(not_after),
                    "renewed the CA root: the new root signs, the old one stays in the trust bundle until it expires"
                );
                material = renewed;
            } else {
                tracing::info!("another replica renewed the CA root first; reading it");
                match self.store.load().await? {
                    Some((stored, _)) => material = stored,
                    None => return Err("the renewed CA root is gone from the store".into()),
                }
            }
        }
        let serving = material.without_expired(now).map_err(|e| e.to_string())?;
        if serving != self.serving {
            let ca = CertificateAuthority::new(&serving, self.options.clone())
                .map_err(|e| format!("the renewed certificate authority: {e}"))?;
            self.shared.replace(ca);
            tracing::info!(
                roots = 1 + serving.other_roots.len(),
                "the CA signs with the root kept in the store; trust bundle updated"
            );
            self.serving = serving;
        }
        self.material = material;
        Ok(())
    }
}
