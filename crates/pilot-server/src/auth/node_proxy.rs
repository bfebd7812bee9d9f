//! Node proxies' credentials: ztunnel, one per Kubernetes node, asks the
//! certificate service for the certificates of the workloads of its node
//! (Istio's shared mode), so its credential names the node it serves.
//!
//! - An `xds` token of `--token-file` with `node=NODE` (and, for its own
//!   certificate, `namespace=NS serviceAccount=SA`) is the node proxy of
//!   `NODE`.
//! - With `--kube-token-review`, a token whose review names a service
//!   account listed by `--ztunnel-service-account NS/SA` (Istio's
//!   `istio-system/ztunnel` by default) and returns the node it is bound
//!   to (`user.extra["authentication.kubernetes.io/node-name"]`, which a
//!   pod's projected token carries) is the node proxy of that node. A
//!   token of such an account bound to no node is that account's, as any
//!   other service account's.
//!
//! Either becomes a caller of scope [`NodeScope::Node`], and a
//! [`Credential`] keeps the identity of the credential itself for the
//! certificate service (a node proxy asking for its own certificate).

use pilot_ads::{Caller, NodeScope};

/// The key of a TokenReview's `user.extra` naming the node the token is
/// bound to (Kubernetes 1.30 and later put it in a pod's token).
pub(crate) const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// An authenticated caller, with the workload identity its credential
/// holds itself, when it holds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Credential {
    /// Who it is and which node ids it may claim.
    pub(crate) caller: Caller,
    /// The credential's own identity, `(namespace, service account)`:
    /// what the certificate service signs for it when it names no other
    /// (a node proxy's scope does not say it).
    pub(crate) identity: Option<(String, String)>,
}

impl Credential {
    /// A caller whose scope says its identity (or that it has none).
    pub(crate) fn of(caller: Caller) -> Self {
        let identity = match &caller.scope {
            NodeScope::ServiceAccount { namespace, account } => Some((namespace.clone(), account.clone())),
            _ => None,
        };
        Credential { caller, identity }
    }
}

/// The service accounts of `--ztunnel-service-account`, each `NS/SA`.
pub(crate) fn ztunnel_accounts(values: &[String]) -> Result<Vec<(String, String)>, String> {
    values
        .iter()
        .map(|value| {
            let (namespace, account) = value
                .split_once('/')
                .filter(|(ns, sa)| !ns.is_empty() && !sa.is_empty() && !sa.contains('/'))
                .ok_or_else(|| {
                    format!("--ztunnel-service-account {value:?}: expected NAMESPACE/SERVICE_ACCOUNT")
                })?;
            for (field, part) in [("namespace", namespace), ("service account", account)] {
                pilot_ca::SpiffeId::check_path_segment(field, part)
                    .map_err(|e| format!("--ztunnel-service-account {value:?}: {e}"))?;
            }
            Ok((namespace.to_string(), account.to_string()))
        })
        .collect()
}

/// The node a TokenReview's `user.extra` binds the token to.
pub(crate) fn bound_node(extra: Option<&std::collections::BTreeMap<String, Vec<String>>>) -> Option<&str> {
    extra?
        .get(NODE_NAME_EXTRA)?
        .first()
        .map(String::as_str)
        .filter(|node| !node.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ztunnel_accounts_are_namespace_slash_name() {
        assert_eq!(
            ztunnel_accounts(&["istio-system/ztunnel".into()]).unwrap(),
            [("istio-system".to_string(), "ztunnel".to_string())]
        );
        for bad in ["ztunnel", "/ztunnel", "istio-system/", "a/b/c"] {
            let error = ztunnel_accounts(&[bad.into()]).unwrap_err();
            assert!(error.contains("NAMESPACE/SERVICE_ACCOUNT"), "{bad}: {error}");
        }
        assert!(ztunnel_accounts(&["a;b/c".into()]).is_err());
    }

    #[test]
    fn the_bound_node_is_the_first_node_name_extra() {
        let extra = [(NODE_NAME_EXTRA.to_string(), vec!["node-1".to_string()])].into();
        assert_eq!(bound_node(Some(&extra)), Some("node-1"));
        assert_eq!(bound_node(Some(&Default::default())), None);
        assert_eq!(bound_node(None), None);
    }
}
