//! Mutual TLS between workloads: which mode a workload's inbound port
//! accepts ([`SecurityPolicies::mtls_mode`], from the PeerAuthentications
//! with Istio's precedence), the inbound filter chains each mode makes
//! (`inbound.rs`) and the outbound clusters that originate mutual TLS
//! with the workload certificates (`outbound.rs`).
//!
//! Certificates come over SDS from the proxy's agent: [`DEFAULT_SECRET`]
//! (the workload's chain and key) and [`ROOT_SECRET`] (the root that
//! verifies peers), on the agent's [`SDS_CLUSTER`]. Proxyless gRPC gets
//! none of this: its clusters and listeners stay plaintext.
//!
//! ```
//! use pilot_model::Labels;
//! use pilot_api::security::MtlsMode;
//! use pilot_xds::security::SecurityPolicies;
//! let policies = SecurityPolicies::default();
//! // No PeerAuthentication: PERMISSIVE, as in Istio.
//! assert_eq!(policies.mtls_mode("default", &Labels::new(), 9080), MtlsMode::Permissive);
//! ```

mod inbound;
mod outbound;

use pilot_api::security::{MtlsMode, PeerAuthentication};
use pilot_model::{Config, ConfigKind, DynConfig, Labels, StoreError};

pub(crate) use inbound::secure_inbound;
pub(crate) use outbound::{endpoint_metadata, secure_outbound};

/// The SDS resource name of the workload certificate (chain and key).
pub const DEFAULT_SECRET: &str = "default";
/// The SDS resource name of the root that verifies peers.
pub const ROOT_SECRET: &str = "ROOTCA";
/// The cluster of the agent's SDS server in the proxy's bootstrap.
pub const SDS_CLUSTER: &str = "sds-grpc";
pub use pilot_routing::DEFAULT_ROOT_NAMESPACE;
/// The trust domain of workload identities, unless configured otherwise.
pub const DEFAULT_TRUST_DOMAIN: &str = "cluster.local";
/// The instance label that says the instance runs with a sidecar that
/// accepts mutual TLS (value [`TLS_MODE_ISTIO`]), as Istio's injector sets it.
pub const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";
/// The value of [`TLS_MODE_LABEL`] for instances in the mesh.
pub const TLS_MODE_ISTIO: &str = "istio";

/// The security objects of one push, with the mesh settings they are read
/// with.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SecurityPolicies {
    /// Every PeerAuthentication.
    pub peer_authentications: Vec<Config<PeerAuthentication>>,
    /// The namespace of mesh-wide policy (`--root-namespace`).
    pub root_namespace: String,
    /// The trust domain of workload identities (`--trust-domain`).
    pub trust_domain: String,
}

impl Default for SecurityPolicies {
    fn default() -> Self {
        SecurityPolicies {
            peer_authentications: Vec::new(),
            root_namespace: DEFAULT_ROOT_NAMESPACE.into(),
            trust_domain: DEFAULT_TRUST_DOMAIN.into(),
        }
    }
}

impl SecurityPolicies {
    /// The security kinds among `configs`, typed; other kinds are ignored.
    /// Fails on an object that does not decode as its kind.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, StoreError> {
        let mut out = SecurityPolicies::default();
        for config in configs {
            if config.meta.kind == PeerAuthentication::KIND {
                out.peer_authentications.push(Config::from_dyn(config)?);
            }
        }
        Ok(out)
    }

    /// The mode a workload of `namespace` with `labels` accepts on its
    /// port `port` (the instance's own port, as `portLevelMtls` names it):
    /// the oldest PeerAuthentication selecting the workload (its port-level
    /// mode first), then its namespace's, then the mesh's (the root
    /// namespace's, no selector); a level whose mode is unset inherits.
    /// PERMISSIVE when none says: never [`MtlsMode::Unset`].
    pub fn mtls_mode(&self, namespace: &str, labels: &Labels, port: u16) -> MtlsMode {
        let set = |mode: MtlsMode| (mode != MtlsMode::Unset).then_some(mode);
        let workload = self.oldest(|c| {
            c.meta.namespace == namespace && c.spec.selector.as_ref().is_some_and(|s| s.matches(&labels.0))
        });
        let from_workload = workload.and_then(|c| {
            c.spec
                .port_level_mtls
                .get(&u32::from(port))
                .and_then(|m| set(m.mode))
                .or_else(|| c.spec.mtls.as_ref().and_then(|m| set(m.mode)))
        });
        let level = |ns: &str| {
            self.oldest(|c| c.meta.namespace == ns && c.spec.selector.is_none())
                .and_then(|c| c.spec.mtls.as_ref().and_then(|m| set(m.mode)))
        };
        from_workload
            .or_else(|| level(namespace))
            .or_else(|| level(&self.root_namespace))
            .unwrap_or(MtlsMode::Permissive)
    }

    /// The SPIFFE identity of a service account of `namespace`.
    pub fn spiffe_id(&self, namespace: &str, service_account: &str) -> String {
        format!(
            "spiffe://{}/ns/{namespace}/sa/{service_account}",
            self.trust_domain
        )
    }

    /// The oldest policy `wanted` accepts (then the first by name), as
    /// Istio picks among conflicting ones.
    fn oldest(
        &self,
        wanted: impl Fn(&Config<PeerAuthentication>) -> bool,
    ) -> Option<&Config<PeerAuthentication>> {
        self.peer_authentications
            .iter()
            .filter(|c| wanted(c))
            .min_by(|a, b| {
                (a.meta.creation_timestamp, &a.meta.name).cmp(&(b.meta.creation_timestamp, &b.meta.name))
            })
    }
}

/// The namespace of a service hostname (`reviews.default.svc.cluster.local`
/// is in `default`); empty when the hostname has no second label.
pub(crate) fn namespace_of(hostname: &str) -> &str {
    hostname.split('.').nth(1).unwrap_or_default()
}

#[cfg(test)]
mod tests;
