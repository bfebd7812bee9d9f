//! The xDS resources generated for one proxy, and the check that they
//! refer to each other consistently.

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::{Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, ScopedRouteConfiguration};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager,
};

use crate::XdsError;

/// The xDS resources for one proxy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// CDS.
    pub clusters: Vec<Cluster>,
    /// EDS: one load assignment per EDS cluster.
    pub endpoints: Vec<ClusterLoadAssignment>,
    /// LDS.
    pub listeners: Vec<Listener>,
    /// SRDS: an edge proxy's scopes, each naming its route configuration.
    pub scoped_routes: Vec<ScopedRouteConfiguration>,
    /// RDS.
    pub routes: Vec<RouteConfiguration>,
}

impl Resources {
    /// Adds `other`'s resources after these.
    pub fn extend(&mut self, other: Resources) {
        self.clusters.extend(other.clusters);
        self.endpoints.extend(other.endpoints);
        self.listeners.extend(other.listeners);
        self.scoped_routes.extend(other.scoped_routes);
        self.routes.extend(other.routes);
    }

    /// Checks that the resources refer to each other consistently: unique
    /// names, a load assignment for every EDS cluster and no other, a route
    /// configuration for every RDS name a listener or a scope uses and no
    /// other, scopes only when a listener takes its routes from them, and
    /// a cluster for every cluster a route or TCP proxy sends to.
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
            .map(|c| match &c.eds_cluster_config {
                // A cluster reading another one's load assignment.
                Some(eds) if !eds.service_name.is_empty() => eds.service_name.clone(),
                _ => c.name.clone(),
            })
            .collect();
        if eds != assignments {
            return Err(XdsError::Inconsistent(format!(
                "EDS clusters without load assignments: {:?}; load assignments without clusters: {:?}",
                eds.difference(&assignments).collect::<Vec<_>>(),
                assignments.difference(&eds).collect::<Vec<_>>()
            )));
        }
        let mut rds = BTreeSet::new();
        unique(
            "scoped route configurations",
            self.scoped_routes.iter().map(|s| s.name.as_str()).collect(),
        )?;
        // The scopes' route configurations, once some connection manager
        // takes its routes from scopes.
        let mut scoped = false;
        let mut rds_of = |any: &envoy_types::pb::google::protobuf::Any| -> Option<String> {
            let manager = <HttpConnectionManager as prost::Message>::decode(any.value.as_slice()).ok()?;
            match manager.route_specifier {
                Some(http_connection_manager::RouteSpecifier::Rds(rds)) => Some(rds.route_config_name),
                Some(http_connection_manager::RouteSpecifier::ScopedRoutes(_)) => {
                    scoped = true;
                    None
                }
                _ => None,
            }
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
        if scoped {
            rds.extend(
                self.scoped_routes
                    .iter()
                    .map(|s| s.route_configuration_name.clone()),
            );
        } else if !self.scoped_routes.is_empty() {
            return Err(XdsError::Inconsistent(
                "scoped route configurations, and no listener takes its routes from scopes".into(),
            ));
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
                        // A destination naming no service (`outbound|port||`,
                        // an invalid reference) has no cluster: its share is
                        // answered the route's cluster-not-found status.
                        if !clusters.contains(&target) && !target.ends_with("||") {
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
fn route_targets(route: &envoy_types::pb::envoy::config::route::v3::Route) -> Vec<String> {
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
