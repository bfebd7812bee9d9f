//! Who may open an ADS stream, and which proxies it may claim to be.
//!
//! An [`Authenticate`] implementation (the embedding server's: tokens,
//! client certificates, a review by an identity provider) turns a
//! stream's request headers and connection information into a [`Caller`],
//! or refuses it with `UNAUTHENTICATED` (`UNAVAILABLE` when what it asks is
//! unreachable). It is asynchronous, and runs within the connection's
//! handshake deadline: a connection whose authentication has not
//! finished by then is closed like any connection not yet admitted.
//! The stream's first request then names the proxy; a caller bound to a
//! namespace may only claim node ids in that namespace (`PERMISSION_DENIED`
//! otherwise); a node proxy's credential ([`NodeScope::Node`]) only
//! ztunnel node ids whose `NODE_NAME` metadata names its node. Every refusal is counted
//! ([`RefusedStreams`](crate::RefusedStreams)).

use std::future::Future;
use std::pin::Pin;

use pilot_xds::Proxy;

/// Which node ids a caller may claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeScope {
    /// Any node id (an operator's credential).
    Any,
    /// Only proxies of this namespace: the node id's `<pod>.<namespace>`
    /// part and its DNS domain (`<namespace>.svc...`) must both name it.
    Namespace(String),
    /// Only proxies of this namespace (as [`NodeScope::Namespace`]) whose
    /// node metadata `SERVICE_ACCOUNT` names this service account.
    ServiceAccount {
        /// The namespace.
        namespace: String,
        /// The service account.
        account: String,
    },
    /// A node proxy (ztunnel) of this Kubernetes node: it may claim
    /// ztunnel node ids whose node metadata `NODE_NAME` names this node,
    /// and the certificate service signs for the workloads of this node
    /// on its behalf (Istio's impersonation).
    Node(String),
}

/// An authenticated ADS client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The credential's name (a token's name, a certificate's identity),
    /// for logs.
    pub name: String,
    /// The node ids it may claim.
    pub scope: NodeScope,
}

impl Caller {
    /// `Ok` when this caller may claim to be `proxy`; otherwise why not.
    pub fn permits(&self, proxy: &Proxy) -> Result<(), String> {
        let (namespace, account) = match &self.scope {
            NodeScope::Any => return Ok(()),
            NodeScope::Namespace(namespace) => (namespace, None),
            NodeScope::ServiceAccount { namespace, account } => (namespace, Some(account)),
            NodeScope::Node(node) => {
                // Only ztunnel node ids, of this node; sidecars, ingresses
                // and routers are not node proxies.
                if proxy.proxy_type != pilot_xds::ProxyType::Ztunnel {
                    return Err(format!(
                        "{:?} is the node proxy credential of node {node:?}: it may only claim ztunnel \
                         node ids of that node, not the {} node {:?}",
                        self.name,
                        proxy.proxy_type.as_str(),
                        proxy.node_id()
                    ));
                }
                return match &proxy.node_name {
                    Some(name) if name == node => Ok(()),
                    other => Err(format!(
                        "{:?} is the node proxy credential of node {node:?}, not of {} (ztunnel {:?})",
                        self.name,
                        other.as_ref().map_or_else(
                            || "a node it does not name (no NODE_NAME metadata)".to_string(),
                            |name| format!("node {name:?} (its NODE_NAME metadata)")
                        ),
                        proxy.node_id()
                    )),
                };
            }
        };
        let id_namespace = proxy.id.rsplit_once('.').map(|(_, ns)| ns);
        let domain_namespace = proxy.domain.split('.').next();
        if id_namespace != Some(namespace.as_str()) || domain_namespace != Some(namespace.as_str()) {
            return Err(format!(
                "{:?} may only claim proxies of namespace {namespace:?} (node id `type~ip~<pod>.{namespace}~{namespace}.svc...`), not {:?}",
                self.name,
                proxy.node_id()
            ));
        }
        match account {
            Some(account) if proxy.service_account.as_deref() != Some(account.as_str()) => Err(format!(
                "service account {account:?} of {:?} does not match {} of node {:?}",
                self.name,
                proxy.service_account.as_ref().map_or_else(
                    || "the missing SERVICE_ACCOUNT metadata".to_string(),
                    |sa| format!("SERVICE_ACCOUNT {sa:?}")
                ),
                proxy.node_id()
            )),
            _ => Ok(()),
        }
    }
}

/// What [`Authenticate::authenticate`] returns: the caller, or the status
/// to refuse the stream with, when it is known.
pub type Authenticating<'a> = Pin<Box<dyn Future<Output = Result<Caller, tonic::Status>> + Send + 'a>>;

/// Decides who opened a stream, from its request headers (gRPC metadata
/// such as `authorization`) and the connection's extensions (the transport
/// puts the peer's verified certificates there).
///
/// An implementation that decides at once returns a ready future:
///
/// ```
/// use pilot_ads::{Authenticate, Authenticating, Caller, NodeScope};
///
/// struct OneToken;
///
/// impl Authenticate for OneToken {
///     fn authenticate<'a>(&'a self, headers: &'a http::HeaderMap, _: &'a http::Extensions) -> Authenticating<'a> {
///         let answer = match headers.get("authorization").map(|v| v.as_bytes()) {
///             Some(b"Bearer s3cr3t") => Ok(Caller { name: "proxy".into(), scope: NodeScope::Any }),
///             _ => Err(tonic::Status::unauthenticated("no valid token")),
///         };
///         Box::pin(std::future::ready(answer))
///     }
/// }
/// ```
pub trait Authenticate: Send + Sync + 'static {
    /// The caller, or the status to refuse the stream with
    /// (`UNAUTHENTICATED` with the reason for a bad credential,
    /// `UNAVAILABLE` when it cannot be checked now).
    fn authenticate<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
        extensions: &'a http::Extensions,
    ) -> Authenticating<'a>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_bound_caller_claims_only_its_namespace() {
        let caller = Caller {
            name: "reviews".into(),
            scope: NodeScope::Namespace("default".into()),
        };
        let proxy = |id: &str| Proxy::from_node_id(id).unwrap();
        assert!(
            caller
                .permits(&proxy(
                    "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local"
                ))
                .is_ok()
        );
        let refused = caller
            .permits(&proxy("sidecar~10.0.0.1~ratings.prod~prod.svc.cluster.local"))
            .unwrap_err();
        assert!(refused.contains("namespace \"default\""), "{refused}");
        // Both parts must agree: a pod of `default` in prod's domain is refused.
        assert!(
            caller
                .permits(&proxy("sidecar~10.0.0.1~x.default~prod.svc.cluster.local"))
                .is_err()
        );
        assert!(
            caller
                .permits(&proxy("sidecar~10.0.0.1~nodot~default.svc.cluster.local"))
                .is_err()
        );
        let bound = Caller {
            name: "spiffe://cluster.local/ns/default/sa/reviews".into(),
            scope: NodeScope::ServiceAccount {
                namespace: "default".into(),
                account: "reviews".into(),
            },
        };
        let with_account = |account: &str| {
            let metadata = [("SERVICE_ACCOUNT".to_string(), account.to_string())].into();
            proxy("sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local")
                .with_metadata(&metadata)
                .unwrap()
        };
        assert!(bound.permits(&with_account("reviews")).is_ok());
        let wrong = bound.permits(&with_account("ratings")).unwrap_err();
        assert!(wrong.contains("service account \"reviews\""), "{wrong}");
        assert!(
            wrong.contains("does not match SERVICE_ACCOUNT \"ratings\""),
            "{wrong}"
        );
        let missing = bound
            .permits(&proxy(
                "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local",
            ))
            .unwrap_err();
        assert!(
            missing.contains("does not match the missing SERVICE_ACCOUNT"),
            "{missing}"
        );
        // The namespace still binds.
        let mut elsewhere = with_account("reviews");
        elsewhere.id = "reviews-v1.prod".into();
        assert!(bound.permits(&elsewhere).is_err());
        let operator = Caller {
            name: "admin".into(),
            scope: NodeScope::Any,
        };
        assert!(
            operator
                .permits(&proxy("sidecar~10.0.0.1~ratings.prod~prod.svc.cluster.local"))
                .is_ok()
        );
    }

    #[test]
    fn a_node_proxy_credential_claims_no_sidecar() {
        let ztunnel = Caller {
            name: "spiffe://cluster.local/ns/istio-system/sa/ztunnel".into(),
            scope: NodeScope::Node("node-1".into()),
        };
        let refused = ztunnel
            .permits(
                &Proxy::from_node_id(
                    "sidecar~10.0.0.1~ztunnel-x.istio-system~istio-system.svc.cluster.local",
                )
                .unwrap(),
            )
            .unwrap_err();
        assert!(
            refused.contains("node proxy credential of node \"node-1\"")
                && refused.contains("not the sidecar node"),
            "{refused}"
        );
        let on = |node: &str| {
            let metadata = [("NODE_NAME".to_string(), node.to_string())].into();
            Proxy::from_node_id("ztunnel~10.0.0.5~ztunnel-x.istio-system~istio-system.svc.cluster.local")
                .unwrap()
                .with_metadata(&metadata)
                .unwrap()
        };
        assert!(ztunnel.permits(&on("node-1")).is_ok());
        let elsewhere = ztunnel.permits(&on("node-2")).unwrap_err();
        assert!(
            elsewhere.contains("not of node \"node-2\" (its NODE_NAME metadata)"),
            "{elsewhere}"
        );
    }
}
