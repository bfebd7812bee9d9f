//! Who may open an ADS stream: TLS for the ADS port (`--xds-tls-cert`,
//! `--xds-tls-key`, or a certificate the mesh CA issues for
//! `--xds-tls-dns-names`, `ca/serving.rs`), client certificates from a CA (`--xds-client-ca`,
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
//!   any node id;
//! - with `--kube-token-review`, a bearer token not in the token file is
//!   a Kubernetes service-account token, reviewed by the API server
//!   ([`super::token_review`]): as a client certificate of
//!   `spiffe://<trust-domain>/ns/NS/sa/SA`;
//! - an `xds` token with `node=NODE`, or a reviewed token of a node
//!   proxy's service account bound to a node: ztunnel node ids of that
//!   node ([`super::node_proxy`]).
//!
//! A client certificate is refused unless it carries exactly one URI,
//! a SPIFFE workload identity that follows the SPIFFE ID rules, of this
//! mesh's trust domain (`--trust-domain`) or one of its aliases
//! (`--trust-domain-alias`): the client CA may sign for other meshes, and
//! their workloads are not this mesh's.

use std::path::Path;
use std::sync::Arc;

use pilot_ads::{Authenticate, Caller, NodeScope, Peer};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::node_proxy::Credential;
use super::token_review::TokenReviewer;
use super::tokens::Tokens;
use crate::args::Args;

/// The ADS authenticator of `pilot-discovery`.
pub(crate) struct XdsAuth {
    tokens: Option<Arc<Tokens>>,
    /// Kubernetes service-account tokens, with `--kube-token-review`.
    reviewer: Option<Arc<TokenReviewer>>,
    /// The trust domains whose client certificates are accepted: this
    /// mesh's, then its aliases.
    trust_domains: Vec<String>,
}

impl XdsAuth {
    /// Authentication for the options given; `None` when ADS is open (no
    /// token file and no client CA).
    pub(crate) fn from_args(
        args: &Args,
        tokens: Option<Arc<Tokens>>,
        reviewer: Option<Arc<TokenReviewer>>,
    ) -> Result<Option<Self>, String> {
        if tokens.is_none() && reviewer.is_none() && args.xds_client_ca.is_none() {
            let loopback = args.xds_listen.ip().is_loopback();
            if !loopback && !args.xds_allow_unauthenticated {
                return Err(format!(
                    "ADS would listen on {} without authentication: give --token-file, \
                     --kube-token-review and/or --xds-client-ca (with --xds-tls-cert/--xds-tls-key), or \
                     --xds-allow-unauthenticated to accept any client",
                    args.xds_listen
                ));
            }
            return Ok(None);
        }
        let mut trust_domains = vec![args.trust_domain.clone()];
        trust_domains.extend(args.trust_domain_aliases.iter().cloned());
        for domain in &trust_domains {
            pilot_ca::SpiffeId::check_trust_domain(domain)
                .map_err(|e| format!("--trust-domain/--trust-domain-alias {domain:?}: {e}"))?;
        }
        Ok(Some(XdsAuth {
            tokens,
            reviewer,
            trust_domains,
        }))
    }
}

/// The TLS configuration of the ADS port, when `--xds-tls-cert` is given:
/// its identity, and with `--xds-client-ca` client certificates verified
/// against that CA (optional when tokens are accepted too).
pub(crate) fn tls_config(
    args: &Args,
    tokens_too: bool,
    serving: Option<&Arc<crate::ca::ServingCert>>,
) -> Result<Option<Arc<rustls::ServerConfig>>, String> {
    if let Some(serving) = serving {
        // The mesh CA's own certificate (`--xds-tls-dns-names`), current
        // at every handshake.
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("ADS TLS: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(serving) as Arc<dyn rustls::server::ResolvesServerCert>);
        config.alpn_protocols = vec![b"h2".to_vec()];
        return Ok(Some(Arc::new(config)));
    }
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
    fn authenticate<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
        extensions: &'a http::Extensions,
    ) -> pilot_ads::Authenticating<'a> {
        let identifying = self.identify(headers, extensions);
        Box::pin(async move { identifying.await.map(|credential| credential.caller) })
    }
}

/// What [`XdsAuth::identify`] returns.
pub(crate) type Identifying<'a> =
    std::pin::Pin<Box<dyn Future<Output = Result<Credential, tonic::Status>> + Send + 'a>>;

impl XdsAuth {
    /// The caller of a request, with the identity its credential holds
    /// (the certificate service's view; ADS needs the caller only).
    pub(crate) fn identify<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
        extensions: &'a http::Extensions,
    ) -> Identifying<'a> {
        if let Some(value) = headers.get(http::header::AUTHORIZATION) {
            let Some(token) = value.to_str().ok().and_then(super::tokens::bearer) else {
                return ready(Err(tonic::Status::unauthenticated(
                    "authorization is not `Bearer TOKEN`",
                )));
            };
            if let Some(found) = self.tokens.as_ref().and_then(|tokens| tokens.find(token)) {
                return ready(Ok(Credential {
                    caller: Caller {
                        name: format!("token {}", found.name),
                        scope: found.scope(),
                    },
                    identity: found.identity(),
                }));
            }
            return match &self.reviewer {
                Some(reviewer) => Box::pin(reviewer.authenticate(token)),
                None => ready(Err(tonic::Status::unauthenticated(
                    "the bearer token is not valid",
                ))),
            };
        }
        ready(self.certificate(extensions).map(Credential::of))
    }
}

/// An answer known at once.
fn ready<'a>(answer: Result<Credential, tonic::Status>) -> Identifying<'a> {
    Box::pin(std::future::ready(answer))
}

impl XdsAuth {
    /// The caller of the connection's client certificate, if it has one.
    fn certificate(&self, extensions: &http::Extensions) -> Result<Caller, tonic::Status> {
        let certs = extensions.get::<Peer>().and_then(Peer::certificates);
        if let Some(leaf) = certs.and_then(|certs| certs.first()) {
            // rustls verified the chain against --xds-client-ca already.
            let identity =
                spiffe_identity(leaf, &self.trust_domains).map_err(tonic::Status::unauthenticated)?;
            return Ok(Caller {
                name: identity.uri(),
                scope: NodeScope::ServiceAccount {
                    namespace: identity.namespace().to_string(),
                    account: identity.service_account().to_string(),
                },
            });
        }
        Err(tonic::Status::unauthenticated(
            "ADS on this server needs a credential: `authorization: Bearer TOKEN` metadata or a client certificate",
        ))
    }
}

/// The SPIFFE identity of a client certificate: its one URI, a workload
/// identity of one of `trust_domains`; otherwise why it is refused.
fn spiffe_identity(
    cert: &rustls_pki_types::CertificateDer<'_>,
    trust_domains: &[String],
) -> Result<pilot_ca::SpiffeId, String> {
    let cert = webpki::EndEntityCert::try_from(cert)
        .map_err(|e| format!("the client certificate cannot be read: {e:?}"))?;
    let uris: Vec<&str> = cert.valid_uri_names().collect();
    let uri = match uris.as_slice() {
        [uri] => *uri,
        [] => {
            return Err(
                "the client certificate carries no spiffe://DOMAIN/ns/NAMESPACE/sa/ACCOUNT URI".into(),
            );
        }
        many => {
            return Err(format!(
                "the client certificate carries {} URIs; exactly one SPIFFE identity is accepted",
                many.len()
            ));
        }
    };
    let identity =
        pilot_ca::SpiffeId::parse(uri).map_err(|e| format!("the client certificate's URI: {e}"))?;
    if !trust_domains
        .iter()
        .any(|domain| domain == identity.trust_domain())
    {
        return Err(format!(
            "the client certificate's identity {identity} is of trust domain {:?}, not this mesh's \
             ({}; aliases come from --trust-domain-alias)",
            identity.trust_domain(),
            trust_domains.join(", ")
        ));
    }
    Ok(identity)
}
