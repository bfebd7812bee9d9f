//! Conditions and validation messages on an object's status, in Istio's
//! shape (`status.conditions`, `status.validationMessages`): whether the
//! object is reconciled (`Reconciled`, with the generation it refers to),
//! and what analysis found wrong with it, so that `kubectl get -o yaml`
//! answers "why isn't my configuration applied?" without a tool.
//!
//! The Gateway API's kinds carry their own status shape beside them: a
//! route's `parents` ([`RouteParentStatus`]: `Accepted`, `ResolvedRefs`
//! for each parent it names), a Gateway's `listeners` ([`ListenerStatus`])
//! and the Gateway's and GatewayClass's own conditions (`Accepted`,
//! `Programmed`) in the same `conditions` list.
//!
//! Written by the elected status writer only (pilot-distribution), through
//! the status path; every list is optional in the record (see
//! `tests/records_across_versions.rs`).

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

/// The condition type the status writer sets.
pub const RECONCILED: &str = "Reconciled";

/// One condition of an object (Kubernetes' and Istio's `Condition`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// What it is about: [`RECONCILED`].
    #[serde(rename = "type")]
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    pub status: String,
    /// A word for why (CamelCase), e.g. `GatewayNotFound`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What a person reads.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The object's `metadata.generation` the condition was set for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed (RFC 3339).
    #[serde(
        serialize_with = "crate::config::serialize_time",
        deserialize_with = "crate::config::deserialize_time"
    )]
    pub last_transition_time: SystemTime,
}

impl Condition {
    /// True when both say the same (the time aside).
    pub fn same(&self, other: &Condition) -> bool {
        self.type_ == other.type_
            && self.status == other.status
            && self.reason == other.reason
            && self.message == other.message
            && self.observed_generation == other.observed_generation
    }
}

/// One analysis finding about an object (Istio's
/// `IstioValidationMessage`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValidationMessage {
    /// The finding's code and name.
    #[serde(rename = "type")]
    pub type_: MessageType,
    /// `ERROR`, `WARNING` or `INFO`.
    pub level: String,
    /// The field and what is wrong with it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

/// A finding's code (`PLT0210`) and name (`GatewayNotFound`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageType {
    /// Stable code.
    pub code: String,
    /// Its name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
}

impl ValidationMessage {
    /// True for level `ERROR`.
    pub fn is_error(&self) -> bool {
        self.level == "ERROR"
    }
}

/// The status of a route for one parent it names (the Gateway API's
/// `RouteParentStatus`): whether the parent accepted it and whether its
/// references resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteParentStatus {
    /// The parent reference as the route wrote it.
    pub parent_ref: serde_json::Value,
    /// The controller that wrote this entry (`pilot.io/gateway-controller`).
    pub controller_name: String,
    /// `Accepted` and `ResolvedRefs`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// The status of one listener of a Gateway (the Gateway API's
/// `ListenerStatus`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenerStatus {
    /// The listener's name.
    pub name: String,
    /// The route kinds the listener takes.
    #[serde(default)]
    pub supported_kinds: Vec<RouteGroupKind>,
    /// How many routes it accepted.
    pub attached_routes: i32,
    /// `Accepted`, `Programmed`, `ResolvedRefs`, `Conflicted`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

/// An address bound to a Gateway (the Gateway API's
/// `GatewayStatusAddress`): an IP address or a hostname at which its
/// proxies are reached.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayStatusAddress {
    /// `IPAddress` or `Hostname`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub value: String,
}

/// A route kind by group and name (the Gateway API's `RouteGroupKind`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteGroupKind {
    /// The kind's group.
    pub group: String,
    /// The kind's name (`HTTPRoute`).
    pub kind: String,
}

/// True when both lists say the same (the times aside).
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.same(b))
}

/// The status of a policy for one ancestor it applies under (the Gateway
/// API's `PolicyAncestorStatus`): a BackendTLSPolicy's, for each Gateway
/// whose routes send traffic to a Service it targets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyAncestorStatus {
    /// The ancestor (`group`, `kind`, `namespace`, `name`).
    pub ancestor_ref: serde_json::Value,
    /// The controller that wrote this entry (`pilot.io/gateway-controller`).
    pub controller_name: String,
    /// `Accepted` and `ResolvedRefs`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
}

impl PolicyAncestorStatus {
    /// True when both say the same (the times aside).
    pub fn same(&self, other: &PolicyAncestorStatus) -> bool {
        self.ancestor_ref == other.ancestor_ref
            && self.controller_name == other.controller_name
            && same_conditions(&self.conditions, &other.conditions)
    }
}

impl RouteParentStatus {
    /// True when both say the same (the times aside).
    pub fn same(&self, other: &RouteParentStatus) -> bool {
        self.parent_ref == other.parent_ref
            && self.controller_name == other.controller_name
            && same_conditions(&self.conditions, &other.conditions)
    }
}

impl ListenerStatus {
    /// True when both say the same (the times aside).
    pub fn same(&self, other: &ListenerStatus) -> bool {
        self.name == other.name
            && self.supported_kinds == other.supported_kinds
            && self.attached_routes == other.attached_routes
            && same_conditions(&self.conditions, &other.conditions)
    }
}

/// What the Gateway API's status of one object holds beside pilot's own:
/// its conditions (a GatewayClass's, a Gateway's `Accepted`,
/// `Programmed`), its listeners' and addresses (a Gateway's), its parents'
/// (a route's), its ancestors' (a policy's).
/// Computed by pilot-routing's `gateway_api_status` and written by the
/// status writer into [`ConfigStatus`](crate::ConfigStatus).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GatewayApiStatus {
    /// `Accepted` (and a Gateway's `Programmed`).
    pub conditions: Vec<Condition>,
    /// A Gateway's listeners.
    pub listeners: Vec<ListenerStatus>,
    /// A route's parents.
    pub parents: Vec<RouteParentStatus>,
    /// A policy's ancestors.
    pub ancestors: Vec<PolicyAncestorStatus>,
    /// A Gateway's addresses.
    pub addresses: Vec<GatewayStatusAddress>,
}

impl GatewayApiStatus {
    /// True when both say the same (the times aside).
    pub fn same(&self, other: &GatewayApiStatus) -> bool {
        self.addresses == other.addresses
            && same_conditions(&self.conditions, &other.conditions)
            && same_parts(&self.listeners, &other.listeners, &self.parents, &other.parents)
            && same_each(&self.ancestors, &other.ancestors, PolicyAncestorStatus::same)
    }
}

/// Whether two lists say the same, item by item, by `same`.
pub(crate) fn same_each<T>(a: &[T], b: &[T], same: impl Fn(&T, &T) -> bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same(a, b))
}

/// Whether two statuses' listeners and parents say the same (the times
/// aside).
pub(crate) fn same_parts(
    listeners: &[ListenerStatus],
    other_listeners: &[ListenerStatus],
    parents: &[RouteParentStatus],
    other_parents: &[RouteParentStatus],
) -> bool {
    same_each(listeners, other_listeners, ListenerStatus::same)
        && same_each(parents, other_parents, RouteParentStatus::same)
}
