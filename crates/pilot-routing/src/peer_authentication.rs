//! PeerAuthentications compiled ([`PeerAuthentications`]): the mutual
//! TLS mode of each namespace (its selector-less policy's), of the mesh
//! (the root namespace's), and of the workloads policies select, with
//! their per-port modes; and the mode a workload's port accepts, with
//! Istio's precedence.
//!
//! ```
//! use pilot_model::Labels;
//! use pilot_routing::{MtlsMode, RoutingConfigs};
//! let model = RoutingConfigs::default().compile();
//! // No PeerAuthentication: PERMISSIVE, as in Istio.
//! assert_eq!(model.peer_authentication().mtls_mode("default", &Labels::new(), 9080), MtlsMode::Permissive);
//! ```

use std::collections::BTreeMap;

use pilot_api::security::{MtlsMode, MutualTls, PeerAuthentication, WorkloadSelector};
use pilot_model::{Config, Labels};

use super::RoutingConfigs;

/// The PeerAuthentication modes of a model, by namespace and workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerAuthentications {
    /// The namespace of mesh-wide policy.
    root_namespace: String,
    /// By namespace, the mode of its oldest selector-less policy (`None`:
    /// that policy leaves it unset).
    namespaces: BTreeMap<String, Option<MtlsMode>>,
    /// By namespace, its policies with a selector, oldest first.
    workloads: BTreeMap<String, Vec<WorkloadMtls>>,
}

/// A PeerAuthentication selecting workloads, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkloadMtls {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The labels a workload must carry for it to apply.
    pub selector: Labels,
    /// Its mode (`None`: unset, the level above decides).
    pub mode: Option<MtlsMode>,
    /// Its modes of single ports (set ones only).
    pub ports: BTreeMap<u32, MtlsMode>,
}

impl PeerAuthentications {
    /// The PeerAuthentications of `configs`, compiled.
    pub(crate) fn compile(configs: &RoutingConfigs) -> Self {
        let mut policies: Vec<&Config<PeerAuthentication>> =
            configs.peer_authentications.iter().map(|c| &**c).collect();
        // Oldest first (then by name), as Istio picks among conflicting
        // ones; a stable sort keeps the objects' order among equals.
        policies.sort_by(|a, b| {
            (a.meta.creation_timestamp, &a.meta.name).cmp(&(b.meta.creation_timestamp, &b.meta.name))
        });
        let mut out = PeerAuthentications {
            root_namespace: configs.root_namespace.clone(),
            ..Default::default()
        };
        for policy in policies {
            let namespace = &policy.meta.namespace;
            let mode = set(policy.spec.mtls.as_ref());
            match WorkloadSelector::labels(policy.spec.selector.as_ref()) {
                None => {
                    out.namespaces.entry(namespace.clone()).or_insert(mode);
                }
                Some(selector) => out
                    .workloads
                    .entry(namespace.clone())
                    .or_default()
                    .push(WorkloadMtls {
                        namespace: namespace.clone(),
                        name: policy.meta.name.clone(),
                        selector: Labels(selector.clone()),
                        mode,
                        ports: policy
                            .spec
                            .port_level_mtls
                            .iter()
                            .filter_map(|(port, mtls)| Some((*port, set(Some(mtls))?)))
                            .collect(),
                    }),
            }
        }
        out
    }

    /// True when there is no PeerAuthentication at all.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.workloads.is_empty()
    }

    /// The level of `namespace` (of the mesh, for the root namespace):
    /// `None` when it has no selector-less PeerAuthentication, `Some(None)`
    /// when its oldest one leaves the mode unset, else that mode.
    pub fn namespace_level(&self, namespace: &str) -> Option<Option<MtlsMode>> {
        self.namespaces.get(namespace).copied()
    }

    /// The PeerAuthentications with a selector, by namespace, oldest first
    /// within a namespace.
    pub fn selecting(&self) -> impl Iterator<Item = &WorkloadMtls> {
        self.workloads.values().flatten()
    }

    /// The PeerAuthentication with a selector that decides for a workload
    /// of `namespace` carrying `labels`: the oldest of its namespace whose
    /// selector it matches.
    pub fn selecting_workload(&self, namespace: &str, labels: &Labels) -> Option<&WorkloadMtls> {
        self.workloads
            .get(namespace)
            .and_then(|policies| policies.iter().find(|p| p.selector.is_subset_of(labels)))
    }

    /// The mode a workload of `namespace` with `labels` accepts on its
    /// port `port` (the instance's own port, as `portLevelMtls` names it):
    /// the oldest PeerAuthentication selecting the workload (its port-level
    /// mode first), then its namespace's, then the mesh's (the root
    /// namespace's, no selector); a level whose mode is unset inherits.
    /// PERMISSIVE when none says: never [`MtlsMode::Unset`].
    pub fn mtls_mode(&self, namespace: &str, labels: &Labels, port: u16) -> MtlsMode {
        let workload = self.selecting_workload(namespace, labels);
        let from_workload = workload.and_then(|p| p.ports.get(&u32::from(port)).copied().or(p.mode));
        let level = |ns: &str| self.namespaces.get(ns).copied().flatten();
        from_workload
            .or_else(|| level(namespace))
            .or_else(|| level(&self.root_namespace))
            .unwrap_or(MtlsMode::Permissive)
    }
}

/// A setting's mode, if set.
fn set(mtls: Option<&MutualTls>) -> Option<MtlsMode> {
    mtls.map(|m| m.mode).filter(|mode| *mode != MtlsMode::Unset)
}

#[cfg(test)]
mod tests {
    //! Mode resolution: precedence, inheritance of unset modes, the oldest
    //! of conflicting policies.

    use std::sync::Arc;
    use std::time::{Duration, SystemTime};

    use super::*;

    fn peer(
        namespace: &str,
        name: &str,
        age: u64,
        spec: serde_json::Value,
    ) -> Arc<Config<PeerAuthentication>> {
        let mut config = Config::new(namespace, name, serde_json::from_value(spec).unwrap());
        config.meta.creation_timestamp = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 - age));
        Arc::new(config)
    }

    fn reviews() -> Labels {
        Labels([("app".to_string(), "reviews".to_string())].into())
    }

    fn compiled(configs: &RoutingConfigs) -> PeerAuthentications {
        PeerAuthentications::compile(configs)
    }

    #[test]
    fn levels_inherit_and_the_oldest_wins() {
        let mut configs = RoutingConfigs {
            peer_authentications: vec![
                peer(
                    "istio-system",
                    "mesh",
                    1,
                    serde_json::json!({"mtls": {"mode": "STRICT"}}),
                ),
                // Unset at the namespace level: the mesh's STRICT.
                peer("default", "ns", 1, serde_json::json!({"mtls": {}})),
            ],
            ..Default::default()
        };
        assert_eq!(
            compiled(&configs).mtls_mode("default", &reviews(), 9080),
            MtlsMode::Strict
        );
        // Two workload policies: the older decides.
        configs.peer_authentications.extend([
            peer(
                "default",
                "newer",
                1,
                serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "PERMISSIVE"}}),
            ),
            peer(
                "default",
                "older",
                5,
                serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "DISABLE"}}),
            ),
        ]);
        assert_eq!(
            compiled(&configs).mtls_mode("default", &reviews(), 9080),
            MtlsMode::Disable
        );
        // Another namespace only has the mesh's.
        assert_eq!(
            compiled(&configs).mtls_mode("other", &reviews(), 9080),
            MtlsMode::Strict
        );
        // Another root namespace: no mesh policy.
        configs.root_namespace = "mesh-root".into();
        assert_eq!(
            compiled(&configs).mtls_mode("other", &reviews(), 9080),
            MtlsMode::Permissive
        );
    }

    #[test]
    fn a_port_level_mode_comes_first_and_an_unset_one_inherits() {
        let configs = RoutingConfigs {
            peer_authentications: vec![
                peer(
                    "default",
                    "ns",
                    1,
                    serde_json::json!({"mtls": {"mode": "STRICT"}}),
                ),
                peer(
                    "default",
                    "reviews",
                    1,
                    serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}},
                    "portLevelMtls": {"9080": {"mode": "DISABLE"}, "9090": {}}}),
                ),
            ],
            ..Default::default()
        };
        let modes = compiled(&configs);
        assert_eq!(modes.mtls_mode("default", &reviews(), 9080), MtlsMode::Disable);
        assert_eq!(modes.mtls_mode("default", &reviews(), 9090), MtlsMode::Strict);
        assert_eq!(modes.mtls_mode("default", &Labels::new(), 9080), MtlsMode::Strict);
    }

    #[test]
    fn levels_tell_an_unset_mode_from_no_policy_and_the_oldest_selecting_policy_decides() {
        let mut configs = RoutingConfigs {
            peer_authentications: vec![peer("default", "ns", 1, serde_json::json!({"mtls": {}}))],
            ..Default::default()
        };
        let modes = compiled(&configs);
        assert!(!modes.is_empty());
        assert_eq!(modes.namespace_level("default"), Some(None));
        assert_eq!(modes.namespace_level("other"), None);
        assert!(modes.selecting_workload("default", &reviews()).is_none());
        configs.peer_authentications.extend([
            peer(
                "default",
                "newer",
                1,
                serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "mtls": {"mode": "STRICT"}}),
            ),
            peer(
                "default",
                "older",
                5,
                serde_json::json!({"selector": {"matchLabels": {"app": "reviews"}}, "portLevelMtls": {"8080": {"mode": "DISABLE"}}}),
            ),
        ]);
        let modes = compiled(&configs);
        let older = modes.selecting_workload("default", &reviews()).unwrap();
        assert_eq!(
            (older.namespace.as_str(), older.name.as_str(), older.mode),
            ("default", "older", None)
        );
        assert_eq!(older.ports, BTreeMap::from([(8080, MtlsMode::Disable)]));
        let names: Vec<&str> = modes.selecting().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["older", "newer"]);
        assert!(compiled(&RoutingConfigs::default()).is_empty());
    }
}
