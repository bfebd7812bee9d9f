//! pilot's certificate authority: the pure parts.
//!
//! - [`CaMaterial`]: the signing certificate and key, the chain above it
//!   and the trust bundle (the root it leads to first, then other roots),
//!   PEM; [`generate_root`] makes a self-signed root (on a control plane's
//!   first start), [`renew_root`] its successor with a cross-certificate
//!   signed by it (a rotation with overlap), [`CaMaterial::from_pem`] loads
//!   a root or an intermediate given as files, with a bundle of several
//!   roots.
//! - [`CertificateAuthority`]: signs a workload's certificate signing
//!   request ([`Csr`]) for one [`SpiffeId`]
//!   (`spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`), with
//!   a lifetime of [`CaOptions::default_ttl`] unless the request asks for
//!   another, never over [`CaOptions::max_ttl`]. The certificate names
//!   the key's algorithm as the request's SubjectPublicKeyInfo does. The
//!   chain it returns is Istio's `cert_chain`: the leaf, the intermediates
//!   one each, and last the trust bundle.
//! - [`SpiffeId`]: an identity that follows the SPIFFE ID rules (trust
//!   domain `[a-z0-9._-]`, path segments `[A-Za-z0-9._-]`, no empty, `.` or
//!   `..` segment, at most [`MAX_SPIFFE_ID_BYTES`]); it cannot be built
//!   otherwise.
//! - [`verify_chain`]: checks a workload chain against a root and returns
//!   the identity it proves (what a peer does in a handshake).
//!
//! The CA's own keys and the workload keys it makes are ECDSA P-256 with SHA-256, on ring (the crypto
//! backend rustls uses in this workspace). No runtime and no store:
//! `pilot-server` keeps the root and serves signing over gRPC.
//!
//! ```
//! use std::time::Duration;
//! use pilot_ca::{CaOptions, CertificateAuthority, Csr, SpiffeId, generate_root};
//!
//! let root = generate_root("cluster.local", Duration::from_secs(3600)).unwrap();
//! let ca = CertificateAuthority::new(&root, CaOptions::new("cluster.local")).unwrap();
//! let identity = SpiffeId::new("cluster.local", "default", "reviews").unwrap();
//! let key = pilot_ca::WorkloadKey::generate().unwrap();
//! let csr = Csr::from_pem(&key.csr_pem(&identity).unwrap()).unwrap();
//! let issued = ca.sign(&csr, &identity, None).unwrap();
//! let proved = pilot_ca::verify_chain(&issued.cert_chain, ca.root_pem(), std::time::SystemTime::now()).unwrap();
//! assert_eq!(proved, identity);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod authority;
mod error;
mod identity;
mod material;
mod serving;
mod verify;
mod workload;

pub use authority::{CaOptions, CertificateAuthority, Csr, Issued};
pub use error::CaError;
pub use identity::{MAX_SPIFFE_ID_BYTES, SpiffeId};
pub use material::{CaMaterial, generate_root, renew_root};
pub use serving::ServingCertificate;
pub use verify::verify_chain;
pub use workload::WorkloadKey;
