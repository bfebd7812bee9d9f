//! An immutable copy of a service registry's state at one moment, shared
//! behind an `Arc`: what a push reads, so every proxy of the push sees the
//! same services and instances however the live registry moves meanwhile.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::{Labels, Service, ServiceDiscovery, ServiceEvent, ServiceInstance};

/// A registry's services and instances as of one moment, with a version.
/// Reading it takes no lock; it implements [`ServiceDiscovery`] (with no
/// events: it never changes), so whatever reads a registry can read it.
///
/// ```
/// use pilot_model::{AggregateDiscovery, RegistrySnapshot, ServiceDiscovery};
///
/// let frozen = RegistrySnapshot::capture(&AggregateDiscovery::default(), 1);
/// assert_eq!(frozen.version(), 1);
/// assert!(frozen.services().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct RegistrySnapshot {
    version: u64,
    services: Vec<Arc<Service>>,
    by_host: HashMap<String, Arc<Service>>,
    instances: HashMap<String, Vec<ServiceInstance>>,
    by_address: HashMap<IpAddr, Vec<ServiceInstance>>,
}

impl RegistrySnapshot {
    /// Copies `registry`'s services and each one's instances; `version`
    /// names this state (it increases with every change the owner saw).
    pub fn capture(registry: &dyn ServiceDiscovery, version: u64) -> Self {
        let services = registry.services();
        let mut snapshot = RegistrySnapshot {
            version,
            by_host: services
                .iter()
                .map(|s| (s.hostname.clone(), Arc::clone(s)))
                .collect(),
            ..Default::default()
        };
        for service in &services {
            let instances = registry.instances(&service.hostname, &[], &[]);
            for instance in &instances {
                snapshot
                    .by_address
                    .entry(instance.endpoint.address)
                    .or_default()
                    .push(instance.clone());
            }
            snapshot.instances.insert(service.hostname.clone(), instances);
        }
        snapshot.services = services;
        snapshot
    }

    /// The version this state was captured at.
    pub fn version(&self) -> u64 {
        self.version
    }
}

impl ServiceDiscovery for RegistrySnapshot {
    fn services(&self) -> Vec<Arc<Service>> {
        self.services.clone()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.by_host.get(hostname).cloned()
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        let Some(list) = self.instances.get(hostname) else {
            return Vec::new();
        };
        list.iter()
            .filter(|i| i.selected_by(port_names, labels))
            .cloned()
            .collect()
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        addresses
            .iter()
            .flat_map(|a| self.by_address.get(a).into_iter().flatten())
            .cloned()
            .collect()
    }

    /// A snapshot never changes: the stream ends at once.
    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        futures::stream::empty().boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NetworkEndpoint, Port, Protocol};

    struct Fixed(Vec<ServiceInstance>);

    impl ServiceDiscovery for Fixed {
        fn services(&self) -> Vec<Arc<Service>> {
            let mut all: Vec<Arc<Service>> = self.0.iter().map(|i| Arc::clone(&i.service)).collect();
            all.dedup_by(|a, b| a.hostname == b.hostname);
            all
        }
        fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
            self.services().into_iter().find(|s| s.hostname == hostname)
        }
        fn instances(&self, hostname: &str, _: &[&str], _: &[Labels]) -> Vec<ServiceInstance> {
            self.0
                .iter()
                .filter(|i| i.service.hostname == hostname)
                .cloned()
                .collect()
        }
        fn host_instances(&self, _: &[IpAddr]) -> Vec<ServiceInstance> {
            unreachable!("a snapshot answers from its own copy")
        }
        fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
            futures::stream::empty().boxed()
        }
    }

    #[test]
    fn answers_like_the_registry_it_copied() {
        let http = Port::new("http", 80, Protocol::Http);
        let grpc = Port::new("grpc", 90, Protocol::Grpc);
        let service = Arc::new(Service::new("a.ns.svc", vec![http.clone(), grpc.clone()]));
        let instance = |ip: &str, port: &Port, version: &str| ServiceInstance {
            endpoint: NetworkEndpoint {
                address: ip.parse().unwrap(),
                port: port.port,
                service_port: port.clone(),
            },
            service: Arc::clone(&service),
            labels: Labels::from_pairs([("version", version)]),
            availability_zone: None,
            service_account: None,
        };
        let live = Fixed(vec![
            instance("10.0.0.1", &http, "v1"),
            instance("10.0.0.1", &grpc, "v1"),
            instance("10.0.0.2", &http, "v2"),
        ]);
        let snapshot = RegistrySnapshot::capture(&live, 7);
        assert_eq!(snapshot.version(), 7);
        assert_eq!(snapshot.services().len(), 1);
        assert!(snapshot.get_service("a.ns.svc").is_some());
        assert!(snapshot.get_service("b.ns.svc").is_none());
        assert_eq!(snapshot.instances("a.ns.svc", &["http"], &[]).len(), 2);
        let v2 = Labels::from_pairs([("version", "v2")]);
        assert_eq!(snapshot.instances("a.ns.svc", &[], &[v2]).len(), 1);
        assert_eq!(snapshot.host_instances(&["10.0.0.1".parse().unwrap()]).len(), 2);
        assert!(snapshot.host_instances(&["10.0.0.9".parse().unwrap()]).is_empty());
    }
}
