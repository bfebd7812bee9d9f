//! `istio.v1.auth.IstioCertificateService/CreateCertificate` on the ADS
//! port: a CSR in, a signed chain out (the leaf, the intermediates, and
//! last the trust bundle, the signing root first).
//!
//! Calls are authenticated by the credentials ADS accepts (the same
//! [`Authenticate`]), and the credential decides the identity:
//!
//! - a client certificate `spiffe://…/ns/NS/sa/SA` (of this mesh's trust
//!   domain or an alias; see `auth/xds.rs`), or an `xds` token with
//!   `namespace=NS serviceAccount=SA`: only `spiffe://<trust-domain>/ns/NS/sa/SA`
//!   (the CSR may name it or nothing);
//! - an `xds` token with `namespace=NS` only: the identity the CSR names,
//!   in namespace `NS`;
//! - an operator token (`ro`, `rw`) or an `xds` token without a
//!   namespace: nothing (`PERMISSION_DENIED`): such a credential may read
//!   any proxy's configuration, but a certificate is a workload's own
//!   identity, and only a workload credential names one.
//!
//! With `--kube-token-review`, a Kubernetes service-account token is such
//! a credential: the TokenReview's `system:serviceaccount:NS:SA` makes it
//! `spiffe://<trust-domain>/ns/NS/sa/SA`, as a client certificate; a
//! review that cannot be made fails the call `UNAVAILABLE` with the reason.
//!
//! A node proxy's credential (ztunnel's: an `xds` token with `node=NODE`,
//! or a reviewed `--ztunnel-service-account` token bound to a node) gets
//! its own identity when the token names one, and, when the request's
//! metadata names `ImpersonatedIdentity`, that identity if a workload of
//! it runs on the proxy's node (`impersonation.rs`); any other credential
//! naming `ImpersonatedIdentity` is `PERMISSION_DENIED`.
//!
//! A call without a valid credential is `UNAUTHENTICATED` (so is every
//! call when ADS accepts anyone: certificates are never given to anyone);
//! an identity the credential does not allow is `PERMISSION_DENIED` with
//! the reason; a bad CSR or lifetime, or an identity against the SPIFFE
//! rules, is `INVALID_ARGUMENT`. Each outcome
//! is counted ([`CaCounts`], in `/metrics`; certificates a node proxy got
//! for its workloads also as `impersonated`), and each certificate issued
//! recorded with its requester ([`IssuedCertificates`], in
//! `/debug/certificates`; for an impersonation, the node proxy).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use pilot_ads::{Caller, NodeScope};
use pilot_ca::{CaError, Csr, SpiffeId};
use pilot_model::ServiceDiscovery;
use tonic::body::Body;
use tonic::server::NamedService;

use super::SharedCa;
use super::impersonation::{self, Registries};
use super::issued::IssuedCertificates;
use super::proto::{IstioCertificateRequest, IstioCertificateResponse};
use crate::auth::node_proxy::Credential;
use crate::auth::xds::XdsAuth;

/// The service's gRPC name.
const SERVICE: &str = "istio.v1.auth.IstioCertificateService";
/// Its one method's path.
const CREATE_PATH: &str = "/istio.v1.auth.IstioCertificateService/CreateCertificate";

/// Certificates issued and refused since the start, for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct CaCounts {
    /// Signing requests received.
    pub(crate) requests: AtomicU64,
    /// Certificates issued.
    pub(crate) issued: AtomicU64,
    /// Of those, issued to a node proxy for a workload of its node.
    pub(crate) impersonated: AtomicU64,
    /// Refused: no valid credential.
    pub(crate) unauthenticated: AtomicU64,
    /// Refused: an identity the credential does not allow.
    pub(crate) permission_denied: AtomicU64,
    /// Refused: a bad CSR or lifetime.
    pub(crate) invalid_argument: AtomicU64,
    /// Failed: the credential could not be checked (a TokenReview
    /// unreachable).
    pub(crate) unavailable: AtomicU64,
    /// Failed: signing itself failed.
    pub(crate) internal: AtomicU64,
}

impl CaCounts {
    fn refused(&self, status: &tonic::Status) {
        let counter = match status.code() {
            tonic::Code::Unauthenticated => &self.unauthenticated,
            tonic::Code::PermissionDenied => &self.permission_denied,
            tonic::Code::InvalidArgument => &self.invalid_argument,
            tonic::Code::Unavailable => &self.unavailable,
            _ => &self.internal,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The certificate service, to add beside ADS.
#[derive(Clone)]
pub(crate) struct CertificateService {
    inner: Arc<Inner>,
}

struct Inner {
    ca: SharedCa,
    auth: Option<Arc<XdsAuth>>,
    counts: Arc<CaCounts>,
    issued: Arc<IssuedCertificates>,
    /// Where the workloads of a node proxy's node are found.
    registries: Registries,
}

impl CertificateService {
    /// Signs with `ca` for the callers `auth` authenticates (`None`: every
    /// call is refused), counting into `counts` and recording into
    /// `issued`.
    pub(crate) fn new(
        ca: SharedCa,
        auth: Option<Arc<XdsAuth>>,
        counts: Arc<CaCounts>,
        issued: Arc<IssuedCertificates>,
    ) -> Self {
        CertificateService {
            inner: Arc::new(Inner {
                ca,
                auth,
                counts,
                issued,
                registries: Registries::default(),
            }),
        }
    }

    /// The registries whose workloads node proxies may ask certificates
    /// for (until set, such requests fail `UNAVAILABLE`); set once.
    pub(crate) fn set_registries(&self, registries: Arc<dyn ServiceDiscovery>) {
        if self.inner.registries.set(registries).is_err() {
            tracing::warn!("the certificate service's registries were set twice; keeping the first");
        }
    }
}

impl NamedService for CertificateService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for CertificateService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        if request.uri().path() != CREATE_PATH {
            let status = tonic::Status::unimplemented(format!("no method {}", request.uri().path()));
            return Box::pin(std::future::ready(Ok(status.into_http())));
        }
        let inner = Arc::clone(&self.inner);
        let peer = peer(request.extensions());
        Box::pin(async move {
            let caller = match &inner.auth {
                Some(auth) => auth.identify(request.headers(), request.extensions()).await,
                None => Err(tonic::Status::unauthenticated(
                    "this server gives certificates only to authenticated callers, and its ADS port accepts anyone \
                     (no --token-file, --kube-token-review or --xds-client-ca)",
                )),
            };
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(Create { inner, caller, peer }, request).await)
        })
    }
}

/// One call's handler.
struct Create {
    inner: Arc<Inner>,
    caller: Result<Credential, tonic::Status>,
    /// The requester's address.
    peer: Option<std::net::SocketAddr>,
}

impl tonic::server::UnaryService<IstioCertificateRequest> for Create {
    type Response = IstioCertificateResponse;
    type Future = std::future::Ready<Result<tonic::Response<IstioCertificateResponse>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<IstioCertificateRequest>) -> Self::Future {
        let counts = &self.inner.counts;
        counts.requests.fetch_add(1, Ordering::Relaxed);
        let answer = match &self.caller {
            Err(status) => Err(status.clone()),
            Ok(credential) => self.inner.create(credential, self.peer, &request.into_inner()),
        };
        match &answer {
            Ok((_, impersonated)) => {
                counts.issued.fetch_add(1, Ordering::Relaxed);
                if *impersonated {
                    counts.impersonated.fetch_add(1, Ordering::Relaxed);
                }
            }
            Err(status) => {
                tracing::warn!(code = ?status.code(), reason = status.message(), "certificate request refused");
                counts.refused(status);
            }
        }
        std::future::ready(answer.map(|(response, _)| tonic::Response::new(response)))
    }
}

impl Inner {
    /// The response, and whether it was an impersonation.
    fn create(
        &self,
        credential: &Credential,
        peer: Option<std::net::SocketAddr>,
        request: &IstioCertificateRequest,
    ) -> Result<(IstioCertificateResponse, bool), tonic::Status> {
        let caller = &credential.caller;
        let impersonated = impersonation::requested(request.metadata.as_ref())?;
        let csr = Csr::from_pem(&request.csr).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let ttl = match u64::try_from(request.validity_duration) {
            Ok(0) => None,
            Ok(seconds) => Some(Duration::from_secs(seconds)),
            Err(_) => {
                return Err(tonic::Status::invalid_argument(format!(
                    "validity_duration {} is negative",
                    request.validity_duration
                )));
            }
        };
        // The authority of the moment: a root renewal swaps it.
        let ca = self.ca.current();
        let identity = match impersonated {
            Some(asked) => self.impersonate(&ca, caller, asked)?,
            None => self.identity(&ca, credential, &csr)?,
        };
        let issued = ca.sign(&csr, &identity, ttl).map_err(|e| match e {
            CaError::Refused(_) => tonic::Status::permission_denied(format!("{}: {e}", caller.name)),
            CaError::TtlOverMax { .. }
            | CaError::Pem { .. }
            | CaError::NotSpiffe { .. }
            | CaError::InvalidIdentity { .. } => tonic::Status::invalid_argument(e.to_string()),
            other => tonic::Status::internal(other.to_string()),
        })?;
        tracing::info!(caller = %caller.name, %identity, impersonated = impersonated.is_some(), "certificate issued");
        let requester = match (&caller.scope, impersonated) {
            (NodeScope::Node(node), Some(_)) => format!("{} (node proxy of {node})", caller.name),
            _ => caller.name.clone(),
        };
        self.issued.record(&issued, &requester, peer);
        let response = IstioCertificateResponse {
            cert_chain: issued.cert_chain,
        };
        Ok((response, impersonated.is_some()))
    }

    /// The identity `asked` (`ImpersonatedIdentity`) when `caller` is the
    /// node proxy of a node one of its workloads runs on.
    fn impersonate(
        &self,
        ca: &pilot_ca::CertificateAuthority,
        caller: &Caller,
        asked: &str,
    ) -> Result<SpiffeId, tonic::Status> {
        let denied = |why: String| tonic::Status::permission_denied(format!("{}: {why}", caller.name));
        let NodeScope::Node(node) = &caller.scope else {
            return Err(denied(format!(
                "{} {asked:?} refused: only a node proxy's credential may ask for another workload's \
                 certificate (an xds token with node=NODE, or with --kube-token-review a token of a \
                 --ztunnel-service-account bound to a node)",
                impersonation::IMPERSONATED_IDENTITY
            )));
        };
        impersonation::authorize(&self.registries, &ca.options().trust_domain, node, asked, denied)
    }

    /// The identity `credential` gets for `csr`.
    fn identity(
        &self,
        ca: &pilot_ca::CertificateAuthority,
        credential: &Credential,
        csr: &Csr,
    ) -> Result<SpiffeId, tonic::Status> {
        let caller = &credential.caller;
        let domain = &ca.options().trust_domain;
        let requested = csr
            .requested_identity()
            .map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let denied = |why: String| tonic::Status::permission_denied(format!("{}: {why}", caller.name));
        match &caller.scope {
            NodeScope::ServiceAccount { namespace, account } => {
                // The CA refuses a CSR naming anything else.
                SpiffeId::new(domain.clone(), namespace.clone(), account.clone())
                    .map_err(|e| denied(format!("the credential's identity: {e}")))
            }
            NodeScope::Namespace(namespace) => match requested {
                Some(id) if id.namespace() == namespace => Ok(id),
                Some(id) => Err(denied(format!(
                    "the credential allows identities of namespace {namespace:?} only, not {id}"
                ))),
                None => Err(tonic::Status::invalid_argument(format!(
                    "the CSR names no identity; this credential (namespace {namespace:?}) needs one of \
                     spiffe://{domain}/ns/{namespace}/sa/<service-account>"
                ))),
            },
            NodeScope::Node(node) => match &credential.identity {
                // Its own certificate: the identity its token names.
                Some((namespace, account)) => {
                    SpiffeId::new(domain.clone(), namespace.clone(), account.clone())
                        .map_err(|e| denied(format!("the credential's identity: {e}")))
                }
                None => Err(denied(format!(
                    "the node proxy credential of node {node:?} names no identity of its own \
                     (namespace=NS serviceAccount=SA); it may ask for its node's workloads' \
                     certificates with {}",
                    impersonation::IMPERSONATED_IDENTITY
                ))),
            },
            NodeScope::Any => Err(denied(
                "certificates are issued to workload credentials only: an xds token with namespace=NS \
                 [serviceAccount=SA], or a client certificate with a SPIFFE identity"
                    .into(),
            )),
        }
    }
}

/// The peer address of the connection a request came on.
fn peer(extensions: &http::Extensions) -> Option<std::net::SocketAddr> {
    extensions
        .get::<pilot_ads::Peer>()
        .and_then(pilot_ads::Peer::address)
}
