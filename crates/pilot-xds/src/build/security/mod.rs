//! Mutual TLS between workloads: which mode a workload's inbound port
//! accepts (the model's PeerAuthentication modes,
//! [`pilot_routing::PeerAuthentications`]), the inbound filter chains each
//! mode makes (`inbound.rs`) and the outbound clusters that originate
//! mutual TLS with the workload certificates (`outbound.rs`), read
//! through [`MeshTls`].
//!
//! Certificates come over SDS from the proxy's agent: [`DEFAULT_SECRET`]
//! (the workload's chain and key) and [`ROOT_SECRET`] (the root that
//! verifies peers), on the agent's [`SDS_CLUSTER`]. Proxyless gRPC gets
//! none of this: its clusters and listeners stay plaintext.
//!
//! ```
//! use pilot_model::Labels;
//! use pilot_routing::MtlsMode;
//! use pilot_xds::MeshConfig;
//! let mesh = MeshConfig::default();
//! // No PeerAuthentication: PERMISSIVE, as in Istio.
//! assert_eq!(mesh.mesh_tls().mtls_mode("default", &Labels::new(), 9080), MtlsMode::Permissive);
//! assert_eq!(mesh.mesh_tls().spiffe_id("default", "reviews"), "spiffe://cluster.local/ns/default/sa/reviews");
//! ```

mod inbound;
mod outbound;

pub use crate::mesh::{DEFAULT_TRUST_DOMAIN, MeshTls};
pub(crate) use inbound::secure_inbound;
pub(crate) use outbound::{endpoint_metadata, secure_outbound};

/// The SDS resource name of the workload certificate (chain and key).
pub const DEFAULT_SECRET: &str = "default";
/// The SDS resource name of the root that verifies peers.
pub const ROOT_SECRET: &str = "ROOTCA";
/// The cluster of the agent's SDS server in the proxy's bootstrap.
pub const SDS_CLUSTER: &str = "sds-grpc";
pub use pilot_routing::DEFAULT_ROOT_NAMESPACE;
/// The instance label that says the instance runs with a sidecar that
/// accepts mutual TLS (value [`TLS_MODE_ISTIO`]), as Istio's injector sets it.
pub const TLS_MODE_LABEL: &str = "security.istio.io/tlsMode";
/// The value of [`TLS_MODE_LABEL`] for instances in the mesh.
pub const TLS_MODE_ISTIO: &str = "istio";

/// The namespace of a service hostname (`reviews.default.svc.cluster.local`
/// is in `default`); empty when the hostname has no second label.
pub(crate) fn namespace_of(hostname: &str) -> &str {
    hostname.split('.').nth(1).unwrap_or_default()
}

#[cfg(test)]
mod tests;
