//! The certificate authority of `pilot-discovery`: which root signs
//! (`--ca-dir`, or a self-signed root kept in the configured store), and
//! Istio's certificate service on the ADS port (`service.rs`), with its
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

mod dir;
mod issued;
mod kept;
mod proto;
mod service;

use std::sync::Arc;

use pilot_ca::{CaOptions, CertificateAuthority};

pub(crate) use issued::IssuedCertificates;
pub(crate) use kept::RootStore;
pub(crate) use service::{CaCounts, CertificateService};

use crate::args::Args;

/// The signing options `args` configure, checked before anything starts.
pub(crate) fn options(args: &Args) -> Result<CaOptions, String> {
    let mut options = CaOptions::new(args.trust_domain.clone());
    options.default_ttl = args.workload_cert_ttl;
    options.max_ttl = args.max_workload_cert_ttl;
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
/// kept in `store`.
pub(crate) async fn open(args: &Args, store: &RootStore) -> Result<Arc<CertificateAuthority>, String> {
    let material = match &args.ca_dir {
        Some(dir) => {
            let (dir, domain, ttl) = (dir.clone(), args.trust_domain.clone(), args.ca_root_ttl);
            tokio::task::spawn_blocking(move || dir::load_or_create(&dir, &domain, ttl))
                .await
                .map_err(|e| format!("reading --ca-dir: {e}"))??
        }
        None => store.load_or_create(&args.trust_domain, args.ca_root_ttl).await?,
    };
    CertificateAuthority::new(&material, options(args)?)
        .map(Arc::new)
        .map_err(|e| format!("the certificate authority: {e}"))
}
