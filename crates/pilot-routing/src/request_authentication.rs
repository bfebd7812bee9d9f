//! RequestAuthentications compiled ([`RequestAuthentications`]): each
//! policy with the workloads it applies to and its JWT rules, for the
//! `jwt_authn` filter of the inbound listeners (pilot-xds).
//!
//! A policy applies to the workloads of its namespace (of the mesh, in
//! the root namespace) its selector matches; without a selector or a
//! `targetRef`, to all of them; with a `targetRef` to a Kubernetes
//! Gateway, to that gateway's pods (label
//! `gateway.networking.k8s.io/gateway-name`). Every rule of every policy
//! applying to a workload is a provider of its filter.

use pilot_api::security::RequestAuthentication;
use pilot_model::{Config, Labels};

pub use pilot_api::security::{ClaimToHeader, JwksUri, JwtHeader, JwtRule};

use super::RoutingConfigs;

/// The RequestAuthentications of a model, with the root namespace whose
/// policies apply to every namespace's workloads.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestAuthentications {
    root_namespace: String,
    policies: Vec<JwtPolicy>,
}

/// One RequestAuthentication.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct JwtPolicy {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The label sets a workload must carry one of for it to apply (a
    /// single empty set: every workload of its namespace; none: no
    /// workload, as for a `targetRef` to a Service).
    pub selectors: Vec<Labels>,
    /// Its JWT rules, in order.
    pub rules: Vec<JwtRule>,
}

impl RequestAuthentications {
    /// The RequestAuthentications of `configs`, compiled.
    pub(crate) fn compile(configs: &RoutingConfigs) -> Self {
        RequestAuthentications {
            root_namespace: configs.root_namespace.clone(),
            policies: configs
                .request_authentications
                .iter()
                .map(|c| JwtPolicy::of(c))
                .collect(),
        }
    }

    /// Every policy, in the order the objects came.
    pub fn policies(&self) -> &[JwtPolicy] {
        &self.policies
    }

    /// True when there is no policy.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The policies that apply to a workload of `namespace` carrying
    /// `labels`: those of its namespace or of the root namespace one of
    /// whose selectors it matches.
    pub fn applying(&self, namespace: &str, labels: &Labels) -> Vec<&JwtPolicy> {
        self.policies
            .iter()
            .filter(|p| {
                (p.namespace == self.root_namespace || p.namespace == namespace)
                    && p.selectors.iter().any(|s| s.is_subset_of(labels))
            })
            .collect()
    }
}

impl JwtPolicy {
    fn of(config: &Config<RequestAuthentication>) -> Self {
        JwtPolicy {
            namespace: config.meta.namespace.clone(),
            name: config.meta.name.clone(),
            selectors: config.spec.selected_labels().into_iter().map(Labels).collect(),
            rules: config.spec.jwt_rules.clone(),
        }
    }
}
