//! `ServiceEntry`: services the platform's registry does not know (external
//! APIs, VMs), added to the mesh's registry.

use serde::{Deserialize, Serialize};

use super::common::LabelSelector;
use super::workload_entry::WorkloadEntry;

/// A service added to the registry.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceEntry {
    /// The service's hostnames (required); `*.` wildcards allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// Virtual IP addresses or CIDR blocks of the service.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<String>,
    /// The service's ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<ServicePort>,
    /// Whether the service is inside the mesh (MESH_EXTERNAL when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    /// How instances are found (NONE when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
    /// The instances (STATIC addresses or DNS names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub endpoints: Vec<WorkloadEntry>,
    /// Selects WorkloadEntries (and pods) as instances instead of
    /// `endpoints`.
    #[serde(default, alias = "workload_selector", skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<LabelSelector>,
    /// The namespaces this entry is visible to (`.` its own, `*` all).
    #[serde(default, alias = "export_to", skip_serializing_if = "Vec::is_empty")]
    pub export_to: Vec<String>,
    /// Identities the service's instances may present.
    #[serde(default, alias = "subject_alt_names", skip_serializing_if = "Vec::is_empty")]
    pub subject_alt_names: Vec<String>,
}

/// A port of a service entry.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicePort {
    /// The port number (required).
    #[serde(default)]
    pub number: u32,
    /// The protocol: HTTP, HTTPS, GRPC, HTTP2, MONGO, TCP or TLS.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The port's name (required).
    #[serde(default)]
    pub name: String,
    /// The instances' port, when it differs.
    #[serde(default, alias = "target_port", skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u32>,
}

/// Whether a service entry is part of the mesh.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Location {
    /// Outside the mesh (no mutual TLS, no sidecar).
    MeshExternal,
    /// Inside the mesh.
    MeshInternal,
}

/// How the instances of a service entry are found.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Resolution {
    /// Connections go to the address the client asked for.
    None,
    /// The endpoints' addresses.
    Static,
    /// DNS names resolved asynchronously, every address used.
    Dns,
    /// DNS names resolved, the first address used.
    DnsRoundRobin,
    /// Resolved per request (not supported).
    DynamicDns,
}
