//! A service registry wrapper that is still loading until told otherwise,
//! as a remote registry is before its first list.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use pilot_model::{Labels, Service, ServiceDiscovery, ServiceEvent, ServiceInstance};

/// Any [`ServiceDiscovery`] whose `has_synced` is false until
/// [`set_synced`](Self::set_synced).
pub struct SlowRegistry<R> {
    /// The wrapped registry.
    pub registry: R,
    synced: AtomicBool,
}

impl<R: ServiceDiscovery> SlowRegistry<R> {
    /// `registry`, synced or not.
    pub fn new(registry: R, synced: bool) -> Self {
        SlowRegistry {
            registry,
            synced: AtomicBool::new(synced),
        }
    }

    /// Says whether the registry has synced.
    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::SeqCst);
    }
}

impl<R: ServiceDiscovery> ServiceDiscovery for SlowRegistry<R> {
    fn services(&self) -> Vec<Arc<Service>> {
        self.registry.services()
    }
    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.registry.get_service(hostname)
    }
    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        self.registry.instances(hostname, port_names, labels)
    }
    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        self.registry.host_instances(addresses)
    }
    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        self.registry.subscribe()
    }
    fn has_synced(&self) -> bool {
        self.synced.load(Ordering::SeqCst) && self.registry.has_synced()
    }
}
