//! Types shared by the networking kinds: destinations, port selectors,
//! string matches, percentages, header operations and workload selectors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where traffic is sent: a host in the registry (a service's hostname or a
/// [`super::ServiceEntry`] host), optionally a subset defined by a
/// [`super::DestinationRule`] and a port.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Destination {
    /// The destination host: a short name (resolved in the rule's
    /// namespace) or a fully qualified name.
    #[serde(default)]
    pub host: String,
    /// The name of a subset of the host's instances, defined by a
    /// DestinationRule for the host.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subset: String,
    /// The port of the host; may be omitted when the host has one port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<PortSelector>,
}

/// A port by number.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PortSelector {
    /// The port number.
    #[serde(default)]
    pub number: u32,
}

/// How a string is matched: at most one of `exact`, `prefix` or `regex`
/// (RE2 syntax). An empty match (none given) matches presence, in header
/// and query-parameter matches.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StringMatch {
    /// Exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// RE2 regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// A percentage, 0.0 to 100.0.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Percent {
    /// The percentage.
    #[serde(default)]
    pub value: f64,
}

/// Header manipulation for requests and responses.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Headers {
    /// Operations on the request headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<HeaderOperations>,
    /// Operations on the response headers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<HeaderOperations>,
}

/// Headers to set (overwrite), add (append) and remove.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderOperations {
    /// Headers set to these values, replacing any present.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub set: BTreeMap<String, String>,
    /// Headers appended with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub add: BTreeMap<String, String>,
    /// Headers removed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
}

/// Selects workloads by their labels: Istio's `type.v1beta1.WorkloadSelector`
/// (`matchLabels`), the selector of DestinationRule and of the security
/// kinds. Sidecar and ServiceEntry use [`LabelSelector`] (`labels`).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadSelector {
    /// Labels a workload must carry, all of them.
    #[serde(default, alias = "match_labels", skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
}

/// Selects workloads by their labels: Istio's
/// `networking.v1alpha3.WorkloadSelector` (`labels`), the selector of
/// Sidecar, ServiceEntry and EnvoyFilter, where DestinationRule and the
/// security kinds say `matchLabels` ([`WorkloadSelector`]).
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LabelSelector {
    /// Labels a workload must carry, all of them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}
