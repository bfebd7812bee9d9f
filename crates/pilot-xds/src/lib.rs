//! Envoy xDS v3 configuration generated from pilot's services and routing
//! rules: a pure function of a service registry snapshot, the routing
//! configuration and the proxy asking.
//!
//! - CDS ([`Resources::clusters`]): an EDS cluster per service port and per
//!   version subset that a rule or policy names, with the destination
//!   policy's load balancing, circuit breakers and outlier detection;
//!   inbound clusters to 127.0.0.1 for the proxy's own instances; clusters
//!   for egress hosts (DNS, or the original destination for wildcards and
//!   CIDR blocks).
//! - EDS ([`Resources::endpoints`]): the matching instances of each EDS
//!   cluster, with their zone as locality.
//! - LDS ([`Resources::listeners`]): for sidecars with capture, the virtual
//!   listener (original destination), outbound listeners that do not bind,
//!   and inbound listeners; without capture, outbound listeners bound on
//!   127.0.0.1 at each service port; for ingress proxies, listeners from
//!   ingress rules. HTTP gets the connection manager (RDS; fault, CORS and
//!   router filters), TCP a TCP proxy.
//! - RDS ([`Resources::routes`]): a route configuration per outbound HTTP
//!   port with a virtual host per service, rules applied in precedence order
//!   with source matches honoured for the asking proxy.
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
#![forbid(unsafe_code)]

mod clusters;
mod grpcgen;
mod listeners;
mod mesh;
mod names;
mod proxy;
mod routes;
mod routes_shared;
mod server;
mod util;

#[cfg(feature = "testing")]
pub mod testing;

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};
use pilot_model::{ServiceDiscovery, ServiceInstance};

pub use clusters::{CONNECT_TIMEOUT, PASSTHROUGH};
pub use grpcgen::GRPC_SERVER_LISTENER_PREFIX;
pub use listeners::VIRTUAL_PORT;
pub use mesh::{MeshConfig, MeshIndex};
pub use names::{ClusterName, Direction, route_config_name};
pub use pilot_model::proxy::{InterceptionMode, ProxyType};
pub use proxy::{Generator, Proxy};
pub use routes::{CORS_FILTER, FAULT_FILTER};
pub use server::{
    AdsService, Authenticate, Caller, LISTEN_BACKLOG, MeshSnapshot, Nack, NodeScope, PUSHED_KINDS,
    ProxyStatus, PushInfo, PushRevisions, RefusedStreams, ServeOptions, StreamEnds, TYPES, TypeStatus,
    XdsOptions, XdsServer, XdsType, listen,
};

/// What can go wrong generating configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XdsError {
    /// The Envoy node id is not `type~ip~id~domain`.
    #[error("bad node id {node_id:?}: {reason}")]
    BadNodeId {
        /// The node id as sent.
        node_id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A resource name does not parse.
    #[error("bad resource name {name:?}: {reason}")]
    BadName {
        /// The name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A configuration object does not decode as its kind.
    #[error("bad configuration: {0}")]
    BadConfig(String),
    /// The generated resources refer to each other inconsistently.
    #[error("inconsistent resources: {0}")]
    Inconsistent(String),
}

/// The xDS resources for one proxy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// CDS.
    pub clusters: Vec<Cluster>,
    /// EDS: one load assignment per EDS cluster.
    pub endpoints: Vec<ClusterLoadAssignment>,
    /// LDS.
    pub listeners: Vec<Listener>,
    /// RDS.
    pub routes: Vec<RouteConfiguration>,
}

/// Generates every resource for `proxy` from the registry and the routing
/// configuration.
pub fn generate(proxy: &Proxy, registry: &dyn ServiceDiscovery, mesh: &MeshConfig) -> Resources {
    let own = registry.host_instances(&[proxy.ip]);
    let mut resources = generate_outbound(proxy, registry, mesh, &own);
    resources.extend(generate_inbound(proxy, &own));
    resources
}

/// Everything but the inbound side. It depends on the proxy only through
/// its type, capture mode, domain and labels and through which services (with
/// which labels) it runs, never on its address or its instances' ports: so
/// the sidecars of one deployment share it (see `server::generated`).
pub(crate) fn generate_outbound(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    mesh: &MeshConfig,
    own: &[ServiceInstance],
) -> Resources {
    if proxy.generator == Generator::Grpc {
        return grpcgen::outbound(proxy, registry, mesh, own);
    }
    let index = mesh.index();
    let (clusters, endpoints) = clusters::clusters(proxy, registry, mesh, &index);
    let mut resources = envoy_listeners_routes(proxy, registry, mesh, own, &index);
    resources.clusters = clusters;
    resources.endpoints = endpoints;
    resources
}

/// An Envoy's outbound listeners and route configurations (no clusters):
/// the part of its configuration that depends on its class (namespace,
/// source-matched rules), and only on the registry's services, never on
/// their endpoints.
pub(crate) fn envoy_listeners_routes(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    mesh: &MeshConfig,
    own: &[ServiceInstance],
    index: &MeshIndex<'_>,
) -> Resources {
    let plan = listeners::listeners(proxy, registry, mesh);
    let services = registry.services();
    let mut routes: Vec<RouteConfiguration> = plan
        .http_ports
        .iter()
        .map(|port| routes::route_configuration(*port, &services, mesh, proxy, own, index))
        .collect();
    routes.extend(plan.ingress_routes);
    Resources {
        listeners: plan.listeners,
        routes,
        ..Default::default()
    }
}

/// The inbound side of a captured sidecar: a cluster and a listener for
/// each of its own instances; of a proxyless gRPC proxy, the listeners its
/// xDS-enabled servers ask for (nothing for other proxies).
pub(crate) fn generate_inbound(proxy: &Proxy, own: &[ServiceInstance]) -> Resources {
    if proxy.generator == Generator::Grpc {
        return grpcgen::inbound(own);
    }
    if proxy.proxy_type != ProxyType::Sidecar || !proxy.capture.captures() {
        return Resources::default();
    }
    Resources {
        clusters: clusters::inbound(own),
        listeners: listeners::inbound(own),
        ..Default::default()
    }
}

impl Resources {
    /// Adds `other`'s resources after these.
    pub fn extend(&mut self, other: Resources) {
        self.clusters.extend(other.clusters);
        self.endpoints.extend(other.endpoints);
        self.listeners.extend(other.listeners);
        self.routes.extend(other.routes);
    }

    /// Checks that the resources refer to each other consistently: unique
    /// names, a load assignment for every EDS cluster and no other, a route
    /// configuration for every RDS name a listener uses and no other, and a
    /// cluster for every cluster a route or TCP proxy sends to.
    pub fn check(&self) -> Result<(), XdsError> {
        let unique = |what: &str, names: Vec<&str>| -> Result<BTreeSet<String>, XdsError> {
            let mut set = BTreeSet::new();
            for name in names {
                if !set.insert(name.to_string()) {
                    return Err(XdsError::Inconsistent(format!("two {what} named {name:?}")));
                }
            }
            Ok(set)
        };
        let clusters = unique(
            "clusters",
            self.clusters.iter().map(|c| c.name.as_str()).collect(),
        )?;
        let assignments = unique(
            "load assignments",
            self.endpoints.iter().map(|e| e.cluster_name.as_str()).collect(),
        )?;
        unique(
            "listeners",
            self.listeners.iter().map(|l| l.name.as_str()).collect(),
        )?;
        let routes = unique(
            "route configurations",
            self.routes.iter().map(|r| r.name.as_str()).collect(),
        )?;
        let eds: BTreeSet<String> = self
            .clusters
            .iter()
            .filter(|c| {
                c.cluster_discovery_type
                    == Some(cluster::ClusterDiscoveryType::Type(
                        cluster::DiscoveryType::Eds as i32,
                    ))
            })
            .map(|c| c.name.clone())
            .collect();
        if eds != assignments {
            return Err(XdsError::Inconsistent(format!(
                "EDS clusters without load assignments: {:?}; load assignments without clusters: {:?}",
                eds.difference(&assignments).collect::<Vec<_>>(),
                assignments.difference(&eds).collect::<Vec<_>>()
            )));
        }
        let mut rds = BTreeSet::new();
        let rds_of = |any: &envoy_types::pb::google::protobuf::Any| {
            <HttpConnectionManager as prost::Message>::decode(any.value.as_slice())
                .ok()
                .and_then(|manager| match manager.route_specifier {
                    Some(http_connection_manager::RouteSpecifier::Rds(rds)) => Some(rds.route_config_name),
                    _ => None,
                })
        };
        for listener in &self.listeners {
            // A gRPC client's API listener.
            if let Some(any) = listener
                .api_listener
                .as_ref()
                .and_then(|a| a.api_listener.as_ref())
            {
                rds.extend(rds_of(any));
            }
            for chain in &listener.filter_chains {
                for filter in &chain.filters {
                    let Some(filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
                        continue;
                    };
                    if filter.name == "envoy.filters.network.http_connection_manager" {
                        rds.extend(rds_of(any));
                    }
                }
            }
        }
        if rds != routes {
            return Err(XdsError::Inconsistent(format!(
                "RDS names without route configurations: {:?}; route configurations no listener uses: {:?}",
                rds.difference(&routes).collect::<Vec<_>>(),
                routes.difference(&rds).collect::<Vec<_>>()
            )));
        }
        for config in &self.routes {
            for host in &config.virtual_hosts {
                for route in &host.routes {
                    for target in route_targets(route) {
                        if !clusters.contains(&target) {
                            return Err(XdsError::Inconsistent(format!(
                                "route {:?} in {:?} sends to missing cluster {target:?}",
                                route.name, config.name
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The clusters a route sends to (including mirrors).
pub fn route_targets(route: &envoy_types::pb::envoy::config::route::v3::Route) -> Vec<String> {
    use envoy_types::pb::envoy::config::route::v3::{route, route_action};
    let Some(route::Action::Route(action)) = &route.action else {
        return Vec::new();
    };
    let mut targets: Vec<String> = match &action.cluster_specifier {
        Some(route_action::ClusterSpecifier::Cluster(name)) => vec![name.clone()],
        Some(route_action::ClusterSpecifier::WeightedClusters(weighted)) => {
            weighted.clusters.iter().map(|c| c.name.clone()).collect()
        }
        _ => Vec::new(),
    };
    targets.extend(action.request_mirror_policies.iter().map(|m| m.cluster.clone()));
    targets
}
