//! Conditions and validation messages on an object's status, in Istio's
//! shape (`status.conditions`, `status.validationMessages`): whether the
//! object is reconciled (`Reconciled`, with the generation it refers to),
//! and what analysis found wrong with it, so that `kubectl get -o yaml`
//! answers "why isn't my configuration applied?" without a tool.
//!
//! Written by the elected status writer only (pilot-distribution), through
//! the status path; both lists are optional in the record (see
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
