//! Who may open an ADS stream: TLS for the ADS port (`--xds-tls-cert`,
//! `--xds-tls-key`), client certificates from a CA (`--xds-client-ca`,
//! mTLS), and bearer tokens in gRPC metadata (`authorization: Bearer T`,
//! from the same `--token-file` as the REST API).
//!
//! Secure by default: with a token file or a client CA configured, every
//! ADS stream needs one of those credentials; an ADS address that is not
//! loopback without any of them is refused at start unless
//! `--xds-allow-unauthenticated` says so. A credential also bounds which
//! proxies its holder may claim to be:
//!
//! - an `xds` token with `namespace=NS`: node ids of namespace `NS` only;
//! - an `xds` token with `namespace=NS serviceAccount=SA`, or a client
//!   certificate whose SPIFFE identity is `spiffe://DOMAIN/ns/NS/sa/SA`:
//!   node ids of namespace `NS` whose node metadata `SERVICE_ACCOUNT` is
//!   `SA` (a node without it is refused);
//! - an `xds` token without a namespace, or an `ro`/`rw` (operator) token:
//!   any node id.
//!
//! A client certificate without a SPIFFE identity is refused.

use std::path::Path;
use std::sync::Arc;

use pilot_ads::{Authenticate, Caller, NodeScope, Peer};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::tokens::Tokens;
use crate::args::Args;

/// The ADS authenticator of `pilot-discovery`.
pub(crate) struct XdsAuth {
    tokens: Option<Arc<Tokens>>,
}

impl XdsAuth {
    /// Authentication for the options given; `None` when ADS is open (no
    /// token file and no client CA).
    pub(crate) fn from_args(args: &Args, tokens: Option<Arc<Tokens>>) -> Result<Option<Self>, String> {
        if tokens.is_none() && args.xds_client_ca.is_none() {
            let loopback = args.xds_listen.ip().is_loopback();
            if !loopback && !args.xds_allow_unauthenticated {
                return Err(format!(
                    "ADS would listen on {} without authentication: give --token-file and/or \
                     --xds-client-ca (with --xds-tls-cert/--xds-tls-key), or \
                     --xds-allow-unauthenticated to accept any client",
                    args.xds_listen
                ));
            }
            return Ok(None);
        }
        Ok(Some(XdsAuth { tokens }))
    }
}

/// The TLS configuration of the ADS port, when `--xds-tls-cert` is given:
/// its identity, and with `--xds-client-ca` client certificates verified
/// against that CA (optional when tokens are accepted too).
pub(crate) fn tls_config(args: &Args, tokens_too: bool) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
    let (Some(cert), Some(key)) = (&args.xds_tls_cert, &args.xds_tls_key) else {
        if args.xds_client_ca.is_some() {
            return Err("--xds-client-ca needs --xds-tls-cert and --xds-tls-key".into());
        }
        return Ok(None);
    };
    let certs = read_certificates(cert, "ADS certificate")?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the ADS private key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("ADS TLS: {e}"))?;
    let builder = match &args.xds_client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for root in read_certificates(ca, "ADS client CA")? {
                roots
                    .add(root)
                    .map_err(|e| format!("the ADS client CA {}: {e}", ca.display()))?;
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            // With tokens too, a client may present a token instead.
            let verifier = if tokens_too {
                verifier.allow_unauthenticated()
            } else {
                verifier
            };
            let verifier = verifier
                .build()
                .map_err(|e| format!("the ADS client CA {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("ADS TLS: bad certificate or key {}: {e}", cert.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The certificates of a PEM file (at least one).
fn read_certificates(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("the {what} {} holds no certificate", path.display()));
    }
    Ok(certs)
}

impl Authenticate for XdsAuth {
    fn authenticate(
        &self,
        headers: &http::HeaderMap,
        extensions: &http::Extensions,
    ) -> Result<Caller, tonic::Status> {
        if let Some(value) = headers.get(http::header::AUTHORIZATION) {
            let token = value
                .to_str()
                .ok()
                .and_then(super::tokens::bearer)
                .ok_or_else(|| tonic::Status::unauthenticated("authorization is not `Bearer TOKEN`"))?;
            let found = self
                .tokens
                .as_ref()
                .and_then(|tokens| tokens.find(token))
                .ok_or_else(|| tonic::Status::unauthenticated("the bearer token is not valid"))?;
            return Ok(Caller {
                name: format!("token {}", found.name),
                scope: found.scope(),
            });
        }
        let certs = extensions.get::<Peer>().and_then(Peer::certificates);
        if let Some(leaf) = certs.and_then(|certs| certs.first()) {
            // rustls verified the chain against --xds-client-ca already.
            let identity = spiffe_identity(leaf).ok_or_else(|| {
                tonic::Status::unauthenticated(
                    "the client certificate carries no spiffe://DOMAIN/ns/NAMESPACE/sa/ACCOUNT URI",
                )
            })?;
            let (name, namespace, account) = identity;
            return Ok(Caller {
                name,
                scope: NodeScope::ServiceAccount { namespace, account },
            });
        }
        Err(tonic::Status::unauthenticated(
            "ADS on this server needs a credential: `authorization: Bearer TOKEN` metadata or a client certificate",
        ))
    }
}

/// A certificate's SPIFFE URI and the namespace and service account it
/// names.
fn spiffe_identity(cert: &rustls_pki_types::CertificateDer<'_>) -> Option<(String, String, String)> {
    let cert = webpki::EndEntityCert::try_from(cert).ok()?;
    cert.valid_uri_names().find_map(|uri| {
        let path = uri.strip_prefix("spiffe://")?.split_once('/')?.1;
        let mut parts = path.split('/');
        match (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) {
            (Some("ns"), Some(ns), Some("sa"), Some(sa), None) if !ns.is_empty() && !sa.is_empty() => {
                Some((uri.to_string(), ns.to_string(), sa.to_string()))
            }
            _ => None,
        }
    })
}
