//! Leaf builders: Envoy messages from the routing model, one concern
//! each, assembled by the layers above (`sidecar/`, `gateway/`, and
//! generation on top). A builder imports only other builders and the
//! crate's vocabulary (`names.rs`, `proxy.rs`, `mesh.rs`, ...), never an
//! assembly.
//!
//! - Clusters: one cluster's shape and a traffic policy applied to it
//!   (`cluster.rs`), clusters resolved by DNS or passed through
//!   (`resolved.rs`), the mesh's CDS and EDS (`clusters.rs`), session
//!   affinity (`hash_policy.rs`), TLS a cluster originates
//!   (`upstream_tls.rs`).
//! - Listeners: a listener, the HTTP connection manager, a TCP proxy
//!   (`listeners.rs`); TCP and TLS routes as filter chains (`l4.rs`);
//!   TLS a listener terminates (`downstream_tls.rs`); authorization as
//!   RBAC filters (`rbac.rs`); mutual TLS between workloads (`security/`).
//! - Routes: the model's HTTP routes as Envoy routes (`routes.rs`), a
//!   sidecar's route configuration of an outbound port (`route_config.rs`)
//!   with the external services' virtual hosts (`egress.rs`); routing by
//!   a Service's address where the Gateway API's routes ask for it
//!   (`destination.rs`).
//! - `util.rs`: small conversions into Envoy's protobuf types.

pub(crate) mod cluster;
pub(crate) mod clusters;
pub(crate) mod destination;
pub(crate) mod downstream_tls;
pub(crate) mod edge_routes;
pub(crate) mod egress;
pub(crate) mod ext_authz;
pub(crate) mod hash_policy;
pub(crate) mod jwt_authn;
pub(crate) mod l4;
pub(crate) mod listeners;
pub(crate) mod rbac;
pub(crate) mod resolved;
pub(crate) mod route_config;
pub(crate) mod routes;
pub mod security;
pub(crate) mod upstream_tls;
pub(crate) mod util;
