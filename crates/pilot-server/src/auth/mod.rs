//! Who may call the server: bearer tokens from `--token-file`
//! ([`tokens`]), checked on every REST request but the probes ([`rest`]),
//! and ADS callers' tokens, client certificates and the ADS port's TLS
//! ([`xds`]), which with `--kube-token-review` accepts Kubernetes
//! service-account tokens too ([`token_review`]); node proxies'
//! (ztunnel's) credentials name their node ([`node_proxy`]).

pub(crate) mod node_proxy;
pub(crate) mod rest;
pub(crate) mod token_review;
pub(crate) mod tokens;
pub(crate) mod xds;

pub(crate) use tokens::Tokens;
