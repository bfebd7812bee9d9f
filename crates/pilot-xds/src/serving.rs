//! What a server that shares generation between proxies assembles a push
//! from (pilot-ads): the same resources [`generate`] gives, in parts, so
//! that each part is built once for every proxy it is the same for.
//!
//! - A proxy's configuration in halves: the outbound half
//!   ([`generate_outbound`], shared by the proxies of one class) and the
//!   inbound half ([`generate_inbound`], of the proxy's own instances);
//!   each restricted to a proxy's scope ([`generate_scoped_outbound`],
//!   [`generate_scoped_inbound`]).
//! - Scopes: whether any proxy's is restricted ([`scoping_applies`]), a
//!   proxy's scope ([`scope_in`], over a [`ServiceIndex`] built once per
//!   set of services, or [`scope_of`]), and what proxies sharing a
//!   generation must agree on ([`ScopeKey`]).
//! - Clusters and load assignments, the same for every Envoy of a push
//!   but for capture and mutual TLS ([`outbound_clusters`],
//!   [`eds_clusters`], [`load_assignment`]), the client certificate an
//!   edge proxy presents to TLS backends
//!   ([`backend_client_credential`]), and an edge proxy's SNI-DNAT
//!   clusters ([`sni_dnat_clusters`], when
//!   [`serves_auto_passthrough`]).
//! - Listeners ([`listener_plan`]), and route configurations
//!   ([`route_configuration`]) or their virtual hosts' routes one by one
//!   ([`virtual_host_routes`], with the names a client may use for a
//!   service, [`domains`], and which matches admit the proxy,
//!   [`admitted`]), so that virtual hosts are encoded once and shared;
//!   the route configurations of a captured port that routes by Service
//!   address ([`destination_route_configurations`], for the plan's
//!   `destination_ports`); an edge proxy's route configurations come
//!   unbuilt ([`EdgeRouteConfiguration`]), so that its gateways' virtual
//!   hosts can be encoded once and kept while they do not change
//!   ([`GatewayVirtualHost`]).
//!
//! Each part reads the routing model ([`MeshConfig::model`]), compiled
//! once per push. Put together, the parts give what [`generate`] gives.
//!
//! [`generate`]: crate::generate
//! [`MeshConfig::model`]: crate::MeshConfig::model

pub use crate::build::clusters::{EdsCluster, eds_clusters, load_assignment, outbound as outbound_clusters};
pub use crate::build::destination::route_configurations as destination_route_configurations;
pub use crate::build::edge_routes::{
    EdgeRouteConfiguration, EdgeVirtualHost, GatewayVirtualHost, SCOPED_MIN_HOSTS,
};
pub use crate::build::listeners::ListenerPlan;
pub use crate::build::route_config::{domains, route_configuration};
pub use crate::build::routes::{admits, admitted, virtual_host_routes};
pub use crate::build::util::any;
pub use crate::gateway::SCOPE_HEADER;
pub use crate::gateway::backend_client_credential;
pub use crate::gateway::sni_dnat::{clusters as sni_dnat_clusters, serves_auto_passthrough};
pub use crate::generate::{
    edge_route_configurations_holding, generate_inbound, generate_outbound, listener_plan,
};
pub use crate::scope::{
    Applying, ScopeKey, ServiceIndex, generate_scoped_inbound, generate_scoped_outbound, scope_in, scope_of,
    scoping_applies,
};
