//! The certificate authority of `pilot-discovery`: which root signs
//! (`--ca-dir`, or a self-signed root kept in memory), and Istio's
//! certificate service on the ADS port (`service.rs`), with its counts in
//! `/metrics`.
//!
//! With `--ca-dir DIR` (Istio's `cacerts` layout): when `DIR/ca-cert.pem`
//! and `DIR/ca-key.pem` are there they sign (an operator's root or
//! intermediate, with `cert-chain.pem` and `root-cert.pem` beside them);
//! otherwise a self-signed root is made and kept there, created only if
//! absent, so every replica sharing the directory and every restart signs
//! with the same root (`dir.rs`). Without it a self-signed root is made in
//! memory at each start, and a restart changes the root every workload
//! trusts (logged as a warning).

mod dir;
mod proto;
mod service;

use std::sync::Arc;

use pilot_ca::{CaMaterial, CaOptions, CertificateAuthority};

pub(crate) use service::{CaCounts, CertificateService};

use crate::args::Args;

/// The authority `args` configure.
pub(crate) fn from_args(args: &Args) -> Result<Arc<CertificateAuthority>, String> {
    let material = match &args.ca_dir {
        Some(dir) => dir::load_or_create(dir, &args.trust_domain, args.ca_root_ttl)?,
        None => {
            tracing::warn!(
                "the CA's root is self-signed and kept in memory (no --ca-dir): a restart makes a new root, and workloads must fetch it again"
            );
            self_signed(args)?
        }
    };
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
    CertificateAuthority::new(&material, options)
        .map(Arc::new)
        .map_err(|e| format!("the certificate authority: {e}"))
}

/// A new self-signed root for the trust domain.
fn self_signed(args: &Args) -> Result<CaMaterial, String> {
    pilot_ca::generate_root(&args.trust_domain, args.ca_root_ttl)
        .map_err(|e| format!("generating the CA root: {e}"))
}
