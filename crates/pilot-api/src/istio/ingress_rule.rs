//! `IngressRule`: traffic entering the mesh on an ingress proxy's port.

use serde::{Deserialize, Serialize};

use super::common::{IstioService, MatchCondition};
use super::{GROUP, VERSION};
use pilot_model::{ConfigKind, FieldErrors, dns1123_label};

/// Routes traffic arriving at the ingress on `port` to a destination.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngressRule {
    /// The ingress port; 0 (or absent, as Istio's own rules and its
    /// Kubernetes Ingress conversion left it) is the default port:
    /// [`IngressRule::listener_port`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub port: i32,
    /// The secret holding the TLS certificate for this port.
    #[serde(alias = "tls_secret", default, skip_serializing_if = "String::is_empty")]
    pub tls_secret: String,
    /// Higher precedence rules are evaluated first.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub precedence: i32,
    /// Which requests the rule applies to.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub match_condition: Option<MatchCondition>,
    /// Where the traffic goes (no labels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<IstioService>,
    /// The destination's port by number.
    #[serde(alias = "destination_port", default, skip_serializing_if = "Option::is_none")]
    pub destination_port: Option<i32>,
    /// The destination's port by name.
    #[serde(
        alias = "destination_port_name",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub destination_port_name: Option<String>,
}

/// The ingress port of a rule with a TLS secret and no port (Istio's
/// ingress served such rules on 443).
pub const DEFAULT_TLS_PORT: i32 = 443;
/// The ingress port of a rule with neither a port nor a TLS secret (Istio's
/// ingress served such rules on 80).
pub const DEFAULT_PORT: i32 = 80;

impl IngressRule {
    /// The port the ingress serves this rule on: `port` when given, else
    /// [`DEFAULT_TLS_PORT`] with a TLS secret and [`DEFAULT_PORT`] without,
    /// as Istio's ingress did.
    ///
    /// ```
    /// use pilot_api::istio::IngressRule;
    /// let mut rule = IngressRule::default();
    /// assert_eq!(rule.listener_port(), 80);
    /// rule.tls_secret = "ingress-certs".into();
    /// assert_eq!(rule.listener_port(), 443);
    /// rule.port = 8443;
    /// assert_eq!(rule.listener_port(), 8443);
    /// ```
    pub fn listener_port(&self) -> i32 {
        match (self.port, self.tls_secret.is_empty()) {
            (0, true) => DEFAULT_PORT,
            (0, false) => DEFAULT_TLS_PORT,
            (port, _) => port,
        }
    }
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}

impl ConfigKind for IngressRule {
    const KIND: &'static str = "IngressRule";
    const PLURAL: &'static str = "ingressrules";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        match &self.destination {
            Some(destination) => destination.validate_without_labels("spec.destination", errors),
            None => errors.push("spec.destination", "an ingress rule needs a destination service"),
        }
        if self.port != 0 && !(1..=65535).contains(&self.port) {
            errors.push("spec.port", format!("port must be 1 to 65535, got {}", self.port));
        }
        if let Some(condition) = &self.match_condition {
            condition.validate("spec.match", errors);
        }
        match (self.destination_port, &self.destination_port_name) {
            (Some(_), Some(_)) => errors.push(
                "spec.destinationPort",
                "give destinationPort or destinationPortName, not both",
            ),
            (None, None) => errors.push(
                "spec.destinationPort",
                "give destinationPort or destinationPortName",
            ),
            (Some(port), None) if !(1..=65535).contains(&port) => errors.push(
                "spec.destinationPort",
                format!("port must be 1 to 65535, got {port}"),
            ),
            (None, Some(name)) => {
                if let Err(message) = dns1123_label(name) {
                    errors.push("spec.destinationPortName", message);
                }
            }
            _ => {}
        }
    }
}
