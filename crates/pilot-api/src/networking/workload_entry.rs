//! `WorkloadEntry`: a workload outside the platform (a VM, a bare-metal
//! host), as an instance with labels.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A non-platform workload; also the shape of a ServiceEntry's endpoints.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEntry {
    /// The IP address or DNS name of the workload (or `unix://` socket).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub address: String,
    /// Port numbers by service port name, when they differ from the
    /// service's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub ports: BTreeMap<String, u32>,
    /// The workload's labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The network the workload is on.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub network: String,
    /// The workload's locality (`region/zone/subzone`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub locality: String,
    /// Load-balancing weight (1 when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// The workload's service account.
    #[serde(default, alias = "service_account", skip_serializing_if = "String::is_empty")]
    pub service_account: String,
}
