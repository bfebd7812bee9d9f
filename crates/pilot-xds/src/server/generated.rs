//! Generated configuration shared between connections: computed once per
//! push for each class of proxy, and encoded once.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use envoy_types::pb::google::protobuf::Any;
use pilot_model::{Labels, ServiceDiscovery};
use tokio::sync::OnceCell;

use crate::util::any;
use crate::{MeshConfig, Proxy, ProxyType, Resources, TrafficCapture, generate};

/// What a proxy's configuration depends on besides the mesh: proxies equal
/// here get equal configuration, so it is generated once for all of them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ProxyClass {
    proxy_type: ProxyType,
    capture: TrafficCapture,
    domain: String,
    labels: Labels,
    /// The proxy's own instances: (hostname, address, port, service port, labels).
    own: Vec<(String, String, u16, u16, Labels)>,
}

impl ProxyClass {
    pub(crate) fn of(proxy: &Proxy, registry: &dyn ServiceDiscovery) -> Self {
        let mut own: Vec<_> = registry
            .host_instances(&[proxy.ip])
            .into_iter()
            .map(|i| {
                (
                    i.service.hostname.clone(),
                    i.endpoint.address.to_string(),
                    i.endpoint.port,
                    i.endpoint.service_port.port,
                    i.labels,
                )
            })
            .collect();
        own.sort();
        ProxyClass {
            proxy_type: proxy.proxy_type,
            capture: proxy.capture,
            domain: proxy.domain.clone(),
            labels: proxy.labels.clone(),
            own,
        }
    }
}

/// One type's resources, encoded, with a digest of the whole set and a
/// version per resource.
pub(crate) struct EncodedType {
    pub(crate) resources: Vec<(String, Any, String)>,
}

impl EncodedType {
    /// A digest of the resources that `wanted` selects.
    pub(crate) fn digest(&self, wanted: impl Fn(&str) -> bool) -> u64 {
        let mut hasher = DefaultHasher::new();
        for (name, _, version) in self.resources.iter().filter(|(n, _, _)| wanted(n)) {
            name.hash(&mut hasher);
            version.hash(&mut hasher);
        }
        hasher.finish()
    }
}

/// A proxy class's configuration for one push, encoded per type (in
/// [`ORDER`]).
pub(crate) struct Generated {
    pub(crate) types: HashMap<&'static str, EncodedType>,
}

/// The configurations generated for one push, by proxy class.
#[derive(Default)]
pub(crate) struct GeneratedCache {
    by_class: Mutex<HashMap<ProxyClass, Arc<OnceCell<Arc<Generated>>>>>,
}

impl GeneratedCache {
    /// The configuration of `proxy`'s class, generating it if no proxy of
    /// the class has yet for this push.
    pub(crate) async fn get(
        &self,
        proxy: &Proxy,
        registry: &dyn ServiceDiscovery,
        mesh: &MeshConfig,
    ) -> Arc<Generated> {
        let class = ProxyClass::of(proxy, registry);
        let cell = Arc::clone(
            self.by_class
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(class)
                .or_default(),
        );
        cell.get_or_init(|| async {
            let resources = generate(proxy, registry, mesh);
            let types = ORDER
                .iter()
                .map(|(short, _)| {
                    let resources = named(&resources, short)
                        .into_iter()
                        .map(|(name, any)| {
                            let version = version_of(&any);
                            (name, any, version)
                        })
                        .collect();
                    (*short, EncodedType { resources })
                })
                .collect();
            Arc::new(Generated { types })
        })
        .await
        .clone()
    }
}

/// A resource's version: a digest of its encoding.
pub(crate) fn version_of(any: &Any) -> String {
    let mut hasher = DefaultHasher::new();
    any.value.hash(&mut hasher);
    format!("{:016x}", hasher.finish())
}

/// The xDS types this server serves, in push order.
pub(crate) const ORDER: [(&str, &str); 4] = [
    ("CDS", "type.googleapis.com/envoy.config.cluster.v3.Cluster"),
    (
        "EDS",
        "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment",
    ),
    ("LDS", "type.googleapis.com/envoy.config.listener.v3.Listener"),
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
        _ => resources
            .routes
            .iter()
            .map(|r| (r.name.clone(), any(r)))
            .collect(),
    }
}
