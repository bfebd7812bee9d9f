//! `DestinationRule`: what happens to traffic after routing, for one host:
//! its traffic policy and its named subsets.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::common::WorkloadSelector;
use super::traffic_policy::TrafficPolicy;

/// Policies and subsets of a host.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DestinationRule {
    /// The host (short name resolved in the rule's namespace, fully
    /// qualified name or `*.` wildcard).
    #[serde(default)]
    pub host: String,
    /// The policy for all traffic to the host.
    #[serde(default, alias = "traffic_policy", skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
    /// Named versions of the host, by instance labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subsets: Vec<Subset>,
    /// The namespaces this rule is visible to (`.` its own, `*` all).
    #[serde(default, alias = "export_to", skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Only the workloads (in the rule's namespace) with these labels use
    /// the rule.
    #[serde(default, alias = "workload_selector", skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
}

/// A named subset of a host's instances.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subset {
    /// The subset's name, a DNS-1123 label, used by routes.
    #[serde(default)]
    pub name: String,
    /// The labels an instance must carry to be in the subset.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// A policy for the subset, overriding the host's field by field.
    #[serde(default, alias = "traffic_policy", skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
}
