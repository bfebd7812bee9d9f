//! Istio's security kinds (group `security.istio.io`, version `v1`):
//! [`PeerAuthentication`] (which mutual TLS a workload's inbound traffic
//! needs), [`RequestAuthentication`] (which JSON Web Tokens its requests
//! may carry) and [`AuthorizationPolicy`] (who may call it), with Istio's
//! validation (`pkg/config/validation`).
//!
//! Fields the data plane cannot honour here are rejected as "not
//! supported", never silently ignored. The AUDIT and CUSTOM actions are
//! validated as Istio does (`custom.rs`).
//!
//! ```
//! use pilot_model::KindRegistry;
//! use pilot_api::security;
//! let registry = KindRegistry::new();
//! security::register(&registry).unwrap();
//! assert_eq!(
//!     registry.kinds(),
//!     ["AuthorizationPolicy", "PeerAuthentication", "RequestAuthentication"]
//! );
//! ```

mod authorization_policy;
mod custom;
mod jwt_keys;
mod peer_authentication;
mod request_authentication;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use authorization_policy::{
    Action, AuthorizationPolicy, Condition, FILTER_METADATA_KEY, From, Operation, Provider, Rule, Source, To,
    WHEN_KEYS, filter_metadata_key, from_entry, to_entry,
};
pub use jwt_keys::AuthAttribute;
pub use peer_authentication::{MtlsMode, MutualTls, PeerAuthentication};
pub use request_authentication::{
    ClaimToHeader, GATEWAY_API_GROUP, GATEWAY_NAME_LABEL, JwksUri, JwtHeader, JwtRule, PolicyTargetReference,
    RequestAuthentication, check_jwks,
};

use pilot_model::{FieldErrors, KindRegistry, StoreError};

/// The API group of the security kinds.
pub const GROUP: &str = "security.istio.io";
/// The API version served for them.
pub const VERSION: &str = "v1";

/// Registers [`PeerAuthentication`], [`RequestAuthentication`] and
/// [`AuthorizationPolicy`].
pub fn register(registry: &KindRegistry) -> Result<(), StoreError> {
    registry.register::<PeerAuthentication>()?;
    registry.register::<RequestAuthentication>()?;
    registry.register::<AuthorizationPolicy>()
}

/// Which workloads of the object's namespace a policy applies to
/// (Istio's `type.v1beta1.WorkloadSelector`); none: all of them.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadSelector {
    /// Labels a workload must all carry.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl WorkloadSelector {
    /// Whether a workload with `labels` is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
    }

    /// The selector's labels, or `None` for a selector without any: Istio
    /// reads `selector: {}` as no selector (the policy applies to its
    /// namespace, or the mesh from the root namespace).
    pub fn labels(selector: Option<&Self>) -> Option<&BTreeMap<String, String>> {
        selector
            .map(|s| &s.match_labels)
            .filter(|labels| !labels.is_empty())
    }

    /// Records what is wrong with the selector at `path`, as Istio's
    /// `validateWorkloadSelector`: label syntax, no empty key, no
    /// wildcard. An empty selector is valid (it selects the namespace).
    pub(crate) fn validate(&self, errors: &mut FieldErrors, path: &str) {
        let path = format!("{path}.matchLabels");
        for (key, value) in &self.match_labels {
            if key.contains('*') || value.contains('*') {
                let mut at = path.clone();
                pilot_model::push_key(&mut at, key);
                errors.push(
                    at,
                    format!("wildcard is not supported in selector: \"{key}={value}\""),
                );
            }
        }
        errors.check_labels(&path, &self.match_labels);
    }
}

#[cfg(test)]
mod jwt_tests;
#[cfg(test)]
mod tests;
