//! `PeerAuthentication`: the mutual TLS a workload's inbound traffic
//! needs, for the mesh (in the root namespace, no selector), a namespace
//! (no selector) or selected workloads, with per-port exceptions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{GROUP, VERSION, WorkloadSelector};
use pilot_model::{ConfigKind, FieldErrors};

/// How a workload accepts inbound connections.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PeerAuthentication {
    /// The workloads it applies to; none: every workload of the namespace
    /// (of the mesh, in the root namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<WorkloadSelector>,
    /// The mode for every port (unless a port says otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtls: Option<MutualTls>,
    /// Modes of single ports (the workload's port numbers); needs a
    /// selector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub port_level_mtls: BTreeMap<u32, MutualTls>,
}

/// A mutual TLS setting.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MutualTls {
    /// The mode.
    #[serde(default)]
    pub mode: MtlsMode,
}

/// Istio's mutual TLS modes.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MtlsMode {
    /// Inherit from the parent policy (namespace, then mesh); PERMISSIVE
    /// when none says.
    #[default]
    Unset,
    /// Plaintext only.
    Disable,
    /// Mutual TLS and plaintext both accepted.
    Permissive,
    /// Mutual TLS only.
    Strict,
}

impl ConfigKind for PeerAuthentication {
    const KIND: &'static str = "PeerAuthentication";
    const PLURAL: &'static str = "peerauthentications";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;
    const SERVED_VERSIONS: &'static [&'static str] = &["v1beta1"];
    const SHORT_NAMES: &'static [&'static str] = &["pa"];

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        if let Some(selector) = &self.selector {
            selector.validate(errors, "spec.selector");
        }
        if !self.port_level_mtls.is_empty() && WorkloadSelector::labels(self.selector.as_ref()).is_none() {
            errors.push(
                "spec.portLevelMtls",
                "port-level mTLS needs a selector: a namespace- or mesh-wide policy cannot name workload ports",
            );
        }
        for port in self.port_level_mtls.keys() {
            if *port == 0 || *port > 65_535 {
                errors.push(
                    format!("spec.portLevelMtls[{port}]"),
                    format!("port {port} is not in 1..65535"),
                );
            }
        }
    }
}
