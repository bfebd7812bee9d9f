//! A proxy's configuration for one push, encoded per xDS type: the part
//! shared with its class and its own inbound part.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bytes::Bytes;
use envoy_types::pb::google::protobuf::Any;
use pilot_xds::Resources;
use pilot_xds::serving::any;

use super::encoded_type::{EncodedType, Selection};

/// A proxy's configuration for one push: the part shared with its class,
/// and its own inbound part (captured sidecars with instances only).
#[derive(Clone)]
pub(crate) struct ProxyConfig {
    pub(crate) shared: Arc<Generated>,
    pub(crate) own: Option<Arc<Generated>>,
    /// The scoped class it was generated for, to tell at the next push
    /// whether it is kept (`None`: unscoped, or without the objects the
    /// proxy rejected).
    pub(crate) held: Option<super::generation_cache::Held>,
}

impl ProxyConfig {
    /// Every resource of type `short`.
    #[cfg(test)]
    pub(crate) fn entries(&self, short: &str) -> impl Iterator<Item = &super::encoded_type::Entry> {
        self.shared.types[short].entries.iter().chain(
            self.own
                .iter()
                .flat_map(move |own| own.types[short].entries.iter()),
        )
    }

    /// What a state-of-the-world subscription (`None`: wildcard) selects:
    /// its digest and `DiscoveryResponse.resources`.
    pub(crate) fn sotw(
        &self,
        short: &'static str,
        names: &Option<Arc<BTreeSet<String>>>,
    ) -> (u64, Vec<Bytes>) {
        let shared = self.shared.select(short, names);
        let Some(own) = &self.own else {
            return (shared.digest, shared.resources.clone());
        };
        let wanted = |name: &str| names.as_ref().is_none_or(|names| names.contains(name));
        let own = &own.types[short];
        let mut hasher = DefaultHasher::new();
        shared.digest.hash(&mut hasher);
        own.digest(wanted).hash(&mut hasher);
        let mut resources = shared.resources.clone();
        resources.extend(own.sotw(|entry| wanted(&entry.name)));
        (hasher.finish(), resources)
    }
}

/// A proxy class's configuration for one push, encoded per type (in
/// [`ORDER`]).
pub(crate) struct Generated {
    /// Shared with other classes where they are equal (clusters, load
    /// assignments).
    pub(crate) types: HashMap<&'static str, Arc<EncodedType>>,
}

impl Generated {
    pub(crate) fn encode(resources: &Resources) -> Self {
        let types = ORDER
            .iter()
            .map(|&(short, url)| (short, Arc::new(EncodedType::new(url, named(resources, short)))))
            .collect();
        Generated { types }
    }

    pub(crate) fn from_types(types: [(&'static str, Arc<EncodedType>); ORDER.len()]) -> Self {
        Generated {
            types: types.into_iter().collect(),
        }
    }

    /// What `names` (`None`: every resource) selects of type `short`.
    pub(crate) fn select(
        &self,
        short: &'static str,
        names: &Option<Arc<BTreeSet<String>>>,
    ) -> Arc<Selection> {
        self.types[short].selection(names.as_ref())
    }
}

/// The xDS types this server serves, in push order.
pub(crate) const ORDER: [(&str, &str); 5] = [
    ("CDS", "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
    (
        "EDS",
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    ),
    ("LDS", "type.googleapis.com/envoy.config.listener.v3.Listener"),
    (
        "SRDS",
        "type.googleapis.com/envoy.config.route.v3.ScopedRouteConfiguration",
    ),
    (
        "RDS",
        "type.googleapis.com/envoy.config.route.v3.RouteConfiguration",
    ),
];

/// Every resource of a type, by name, encoded.
pub(crate) fn named(resources: &Resources, short: &str) -> Vec<(String, Any)> {
    match short {
        "CDS" => resources
            .clusters
            .iter()
            .map(|c| (c.name.clone(), any(c)))
            .collect(),
        "EDS" => resources
            .endpoints
            .iter()
            .map(|e| (e.cluster_name.clone(), any(e)))
            .collect(),
        "LDS" => resources
            .listeners
            .iter()
            .map(|l| (l.name.clone(), any(l)))
            .collect(),
        "SRDS" => resources
            .scoped_routes
            .iter()
            .map(|s| (s.name.clone(), any(s)))
            .collect(),
        _ => resources
            .routes
            .iter()
            .map(|r| (r.name.clone(), any(r)))
            .collect(),
    }
}
