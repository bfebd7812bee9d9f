//! Envoy xDS v3 configuration generated from pilot's services and routing
//! rules: a pure function of a service registry snapshot, the routing
//! model (`pilot_routing::RoutingModel`, compiled from the routing,
//! Sidecar and security objects; held by [`MeshConfig`]) and the proxy
//! asking. Generation reads the model only, never the objects: this crate
//! does not depend on the crate that defines them.
//!
//! - CDS ([`Resources::clusters`]): an EDS cluster per service port and per
//!   subset of the model, with its traffic policy's load balancing,
//!   circuit breakers and outlier detection;
//!   inbound clusters to 127.0.0.1 for the proxy's own instances; clusters
//!   for egress hosts (DNS, or the original destination for wildcards and
//!   CIDR blocks) from the model's external services.
//! - EDS ([`Resources::endpoints`]): the matching instances of each EDS
//!   cluster, with their zone as locality.
//! - LDS ([`Resources::listeners`]): for sidecars with capture, the virtual
//!   listener (original destination), outbound listeners that do not bind,
//!   and inbound listeners (with the RBAC filters of the
//!   `AuthorizationPolicy` objects applying to the workload); without capture, outbound listeners bound on
//!   127.0.0.1 at each service port; for ingress proxies, listeners from
//!   the model's ingress servers; a Sidecar's egress listeners with a
//!   port (at their bind, bound under `captureMode: NONE`) and ingress
//!   listeners (to their default endpoint) under a scope
//!   ([`serving::generate_scoped_outbound`],
//!   [`serving::generate_scoped_inbound`]). HTTP gets the connection
//!   manager (RDS; fault, CORS and router filters), TCP a TCP proxy.
//! - RDS ([`Resources::routes`]): a route configuration per outbound HTTP
//!   port (services' and egress rules' HTTP ports) with a virtual host per
//!   service and per egress host (`*.foo.com`, `*` included), the model's
//!   HTTP routes of its host in order, with source matches honoured for
//!   the asking proxy.
//!
//! ```
//! use std::net::IpAddr;
//! use pilot_model::{Labels, Port, Protocol, Service};
//! use pilot_store_memory::MemoryServiceRegistry;
//! use pilot_xds::{MeshConfig, Proxy, generate};
//!
//! let registry = MemoryServiceRegistry::new();
//! registry.add_service(Service::new("reviews.default.svc.cluster.local", vec![Port::new("http", 9080, Protocol::Http)]));
//! registry.add_endpoints("reviews.default.svc.cluster.local", "10.0.0.1".parse::<IpAddr>().unwrap(), Labels::new()).unwrap();
//! let proxy = Proxy::from_node_id("sidecar~10.0.0.9~client.default~default.svc.cluster.local").unwrap();
//! let resources = generate(&proxy, &registry, &MeshConfig::default());
//! assert!(resources.clusters.iter().any(|c| c.name == "outbound|9080||reviews.default.svc.cluster.local"));
//! assert!(resources.check().is_ok());
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

// The layers, lowest first (`tests/module_layers.rs` checks that each
// imports only those below it, and that no file imports one that
// imports it): the vocabulary generation takes and gives; leaf builders
// (`build/`); sidecar assembly (`sidecar/`); gateway assembly
// (`gateway/`); and on top scopes, proxyless gRPC, whole generation and
// the parts pilot-ads assembles (`serving`).
mod error;
mod mesh;
mod names;
mod proxy;
mod resources;

mod build;

mod sidecar;

mod gateway;

pub mod ambient;
mod generate;
mod grpcgen;
mod scope;
pub mod serving;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

/// The Envoy API types this crate generates (its [`Resources`] hold their
/// messages). Use it instead of an envoy-types of your own so the versions
/// always match.
pub use envoy_types;

pub use build::cluster::PASSTHROUGH;
pub use build::destination::DESTINATION_HEADER;
pub use build::ext_authz::{HTTP_EXT_AUTHZ_FILTER, NETWORK_EXT_AUTHZ_FILTER};
pub use build::jwt_authn::{JWT_AUTHN_FILTER, JWT_PAYLOAD_KEY};
pub use build::rbac::{HTTP_RBAC_FILTER, NETWORK_RBAC_FILTER};
pub use build::routes::{CORS_FILTER, FAULT_FILTER, STATEFUL_SESSION_FILTER};
pub use build::security;
pub use error::XdsError;
pub use generate::generate;
pub use grpcgen::GRPC_SERVER_LISTENER_PREFIX;
pub use mesh::{MeshConfig, ServerCertificates};
pub use names::{ClusterName, Direction, host_namespace, route_config_name};
pub use pilot_proxy_api::{InterceptionMode, ProxyType};
pub use proxy::{Generator, Proxy};
pub use resources::Resources;
pub use scope::{BLACK_HOLE, BLOCK_ALL, HostReason, ProxyScope};
pub use sidecar::layout::{EgressPort, EgressSocket, SidecarListeners};
