//! `EgressRule`: which external hosts or address blocks the mesh may reach.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::common::IstioService;
use super::{GROUP, VERSION};
use crate::primitives::{cidr, not_supported};
use pilot_model::{ConfigKind, FieldErrors};

/// Allows traffic to a destination outside the mesh.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressRule {
    /// `service` is a domain (optionally a `*.` wildcard) or a CIDR block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<IstioService>,
    /// The ports to allow, with their protocols.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<EgressPort>,
    /// Route through an egress proxy (not supported).
    #[serde(
        alias = "use_egress_proxy",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub use_egress_proxy: bool,
}

/// A port of an external destination.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressPort {
    /// The port number.
    pub port: i32,
    /// One of HTTP, HTTP2, GRPC, HTTPS, TCP, MONGO.
    pub protocol: String,
}

/// Protocols an egress port may declare.
pub const EGRESS_PROTOCOLS: [&str; 6] = ["HTTP", "HTTP2", "GRPC", "HTTPS", "TCP", "MONGO"];
/// Protocols allowed for CIDR destinations (no host name to route on).
pub const CIDR_PROTOCOLS: [&str; 2] = ["TCP", "MONGO"];

impl ConfigKind for EgressRule {
    const KIND: &'static str = "EgressRule";
    const PLURAL: &'static str = "egressrules";
    const GROUP: &'static str = GROUP;
    const VERSION: &'static str = VERSION;

    #[cfg(feature = "schema")]
    fn openapi_schema() -> Option<serde_json::Value> {
        Some(crate::primitives::openapi_schema::<Self>())
    }

    fn validate(&self, errors: &mut FieldErrors) {
        let mut is_cidr = false;
        match &self.destination {
            None => errors.push("spec.destination", "an egress rule needs a destination"),
            Some(destination) => {
                if !destination.name.is_empty()
                    || !destination.namespace.is_empty()
                    || !destination.domain.is_empty()
                {
                    errors.push(
                        "spec.destination",
                        "an egress destination is given by service (a domain or CIDR), not by name, namespace or domain",
                    );
                }
                if !destination.labels.is_empty() {
                    errors.push(
                        "spec.destination.labels",
                        "an egress destination cannot have labels",
                    );
                }
                let service = destination.service.as_str();
                if service.is_empty() {
                    errors.push(
                        "spec.destination.service",
                        "give a domain such as *.example.com or a CIDR block",
                    );
                } else if service.contains('/') || service.parse::<std::net::IpAddr>().is_ok() {
                    is_cidr = true;
                    if let Err(message) = cidr(service) {
                        errors.push("spec.destination.service", message);
                    }
                } else if let Err(message) = crate::primitives::wildcard_host(service) {
                    errors.push("spec.destination.service", message);
                }
            }
        }
        if self.use_egress_proxy {
            not_supported(errors, "spec.useEgressProxy", "routing through an egress proxy");
        }
        if self.ports.is_empty() {
            errors.push("spec.ports", "an egress rule needs at least one port");
        }
        let mut seen = BTreeSet::new();
        for (i, port) in self.ports.iter().enumerate() {
            let path = format!("spec.ports[{i}]");
            if !(1..=65535).contains(&port.port) {
                errors.push(
                    format!("{path}.port"),
                    format!("port must be 1 to 65535, got {}", port.port),
                );
            } else if !seen.insert(port.port) {
                errors.push(
                    format!("{path}.port"),
                    format!("port {} is listed twice", port.port),
                );
            }
            let protocol = port.protocol.to_ascii_uppercase();
            if !EGRESS_PROTOCOLS.contains(&protocol.as_str()) {
                errors.push(
                    format!("{path}.protocol"),
                    format!(
                        "{:?} is not one of {}",
                        port.protocol,
                        EGRESS_PROTOCOLS.join(", ")
                    ),
                );
            } else if is_cidr && !CIDR_PROTOCOLS.contains(&protocol.as_str()) {
                errors.push(
                    format!("{path}.protocol"),
                    format!(
                        "a CIDR destination allows only {}; {} needs a host name",
                        CIDR_PROTOCOLS.join(" or "),
                        port.protocol
                    ),
                );
            }
        }
    }
}
