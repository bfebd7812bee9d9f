//! The certificate authority of `pilot-discovery`: which root signs
//! (`--ca-dir`, or a self-signed root kept in the configured store), and
//! Istio's certificate service on the ADS port (`service.rs`; a node
//! proxy's requests for its node's workloads in `impersonation.rs`), with its
//! counts in `/metrics` and what it issued in `/debug/certificates`
//! (`issued.rs`).
//!
//! With `--ca-dir DIR` (Istio's `cacerts` layout): when `DIR/ca-cert.pem`
//! and `DIR/ca-key.pem` are there they sign (an operator's root or
//! intermediate, with `cert-chain.pem` and `root-cert.pem` beside them);
//! otherwise a self-signed root is made and kept there, created only if
//! absent, so every replica sharing the directory and every restart signs
//! with the same root (`dir.rs`). Without it the self-signed root is kept
//! in the configured store, created only if absent with the store's
//! compare-and-set (`kept.rs`, which also says where the key lives and who
//! can read it); only the memory store without `--data-dir` keeps it in
//! memory, and a restart then changes the root every workload trusts
//! (logged as a warning).
//!
//! A chain served ends with the trust bundle: the signing root first,
//! then the other roots (an operator's `root-cert.pem` may hold several;
//! the first is the one `ca-cert.pem` leads to). The self-signed root kept
//! in the store is renewed before it expires (`renew.rs`): when its
//! remaining lifetime falls below `--ca-root-renew-before`, a new root
//! signs, the cross-certificate (signed by the old root) is served as an
//! intermediate, and both roots are in the bundle until the old one
//! expires. The files of `--ca-dir` are the operator's and are never
//! rewritten.
//!
//! The same authority issues pilot-discovery's own ADS serving
//! certificate (`--xds-tls-dns-names`, `serving.rs`), and its trust bundle
//! is written into every namespace (`--root-cert-configmap`,
//! `publish.rs`), so injected proxies verify both with the mesh's roots.

mod dir;
mod impersonation;
mod issued;
mod kept;
mod proto;
pub(crate) mod publish;
mod renew;
mod service;
mod serving;

use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use pilot_ca::{CaOptions, CertificateAuthority};

pub(crate) use issued::IssuedCertificates;
pub(crate) use kept::RootStore;
pub(crate) use renew::Renewal;
pub(crate) use service::{CaCounts, CertificateService};
pub(crate) use serving::ServingCert;

pub(crate) use crate::args::RenewBefore;

/// The authority that signs now, swapped when the root is renewed.
#[derive(Clone)]
pub(crate) struct SharedCa(Arc<RwLock<Arc<CertificateAuthority>>>);

impl SharedCa {
    fn new(ca: CertificateAuthority) -> Self {
        SharedCa(Arc::new(RwLock::new(Arc::new(ca))))
    }

    /// The authority that signs now.
    pub(crate) fn current(&self) -> Arc<CertificateAuthority> {
        Arc::clone(&self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Signs with `ca` from now on.
    fn replace(&self, ca: CertificateAuthority) {
        *self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(ca);
    }
}

impl RenewBefore {
    /// Whether a root valid from `not_before` to `not_after` is due at
    /// `now`.
    pub(crate) fn due(self, not_before: SystemTime, not_after: SystemTime, now: SystemTime) -> bool {
        let left = not_after.duration_since(now).unwrap_or_default();
        let threshold = match self {
            RenewBefore::Share(share) => not_after
                .duration_since(not_before)
                .unwrap_or_default()
                .mul_f64(share),
            RenewBefore::Remaining(duration) => duration,
        };
        left < threshold
    }
}

use crate::args::Args;

/// The signing options `args` configure, checked before anything starts.
pub(crate) fn options(args: &Args) -> Result<CaOptions, String> {
    let mut options = CaOptions::new(args.trust_domain.clone());
    options.default_ttl = args.workload_cert_ttl;
    options.max_ttl = args.max_workload_cert_ttl;
    pilot_ca::SpiffeId::check_trust_domain(&options.trust_domain)
        .map_err(|e| format!("--trust-domain: {e}"))?;
    for alias in &args.trust_domain_aliases {
        pilot_ca::SpiffeId::check_trust_domain(alias).map_err(|e| format!("--trust-domain-alias: {e}"))?;
    }
    if options.default_ttl > options.max_ttl {
        return Err(format!(
            "--workload-cert-ttl {} is over --max-workload-cert-ttl {}",
            humantime::format_duration(options.default_ttl),
            humantime::format_duration(options.max_ttl)
        ));
    }
    Ok(options)
}

/// The authority `args` configure: the files of `--ca-dir`, else the root
/// kept in `store`, and for the latter the renewal to run beside the
/// server.
pub(crate) async fn open(args: &Args, store: &RootStore) -> Result<(SharedCa, Option<Renewal>), String> {
    let options = options(args)?;
    let (material, renew) = match &args.ca_dir {
        Some(dir) => {
            let (dir, domain, ttl) = (dir.clone(), args.trust_domain.clone(), args.ca_root_ttl);
            let material = tokio::task::spawn_blocking(move || dir::load_or_create(&dir, &domain, ttl))
                .await
                .map_err(|e| format!("reading --ca-dir: {e}"))??;
            (material, false)
        }
        None => (
            store.load_or_create(&args.trust_domain, args.ca_root_ttl).await?,
            true,
        ),
    };
    let serving = material
        .without_expired(SystemTime::now())
        .map_err(|e| format!("the certificate authority: {e}"))?;
    let ca = CertificateAuthority::new(&serving, options.clone())
        .map_err(|e| format!("the certificate authority: {e}"))?;
    let shared = SharedCa::new(ca);
    let renewal = renew.then(|| Renewal {
        store: store.clone(),
        shared: shared.clone(),
        options,
        material,
        serving,
        root_ttl: args.ca_root_ttl,
        renew_before: args.ca_root_renew_before,
        interval: args.ca_root_check_interval,
    });
    Ok((shared, renewal))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn renew_before_is_a_share_of_the_lifetime_or_a_duration() {
        let start = SystemTime::UNIX_EPOCH;
        let end = start + Duration::from_secs(100);
        let share = RenewBefore::parse("20%").unwrap();
        assert_eq!(share, RenewBefore::Share(0.2));
        assert!(!share.due(start, end, start + Duration::from_secs(79)));
        assert!(share.due(start, end, start + Duration::from_secs(81)));
        assert!(
            share.due(start, end, end + Duration::from_secs(1)),
            "expired is due"
        );
        let remaining = RenewBefore::parse("30s").unwrap();
        assert!(!remaining.due(start, end, start + Duration::from_secs(69)));
        assert!(remaining.due(start, end, start + Duration::from_secs(71)));
        for bad in ["0%", "100%", "soon"] {
            assert!(RenewBefore::parse(bad).is_err(), "{bad}");
        }
    }
}
