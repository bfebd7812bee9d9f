//! [`ServiceCache`]: services and instances held in memory with a change
//! stream and an immutable snapshot. It is the in-memory service registry
//! (re-exported by `pilot-store-memory` as `MemoryServiceRegistry`) and,
//! inside a [`FollowedRegistry`](crate::FollowedRegistry), the local cache
//! of registries that follow a source (etcd, Kubernetes, a file).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{
    Event, Labels, NetworkEndpoint, RegistrySnapshot, Service, ServiceDiscovery, ServiceEvent,
    ServiceInstance, Workload,
};
use tokio::sync::broadcast;

/// How many changes a subscriber may fall behind before it is told to
/// resync.
pub const EVENT_BUFFER: usize = 1024;

/// Why a registry change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The instance names a service the registry does not hold.
    #[error("no service with hostname {hostname:?}; add the service before its instances")]
    UnknownService {
        /// The hostname asked for.
        hostname: String,
    },
    /// The instance's endpoint serves a port its service does not have.
    #[error("service {hostname:?} has no port named {port:?}")]
    UnknownPort {
        /// The service's hostname.
        hostname: String,
        /// The port name asked for.
        port: String,
    },
}

/// An in-memory [`ServiceDiscovery`]: add and remove services and
/// instances (one at a time, or a whole desired state at once with
/// [`apply`](ServiceCache::apply), which emits only the real differences),
/// read them back, subscribe to the changes, take an immutable snapshot.
///
/// ```
/// use std::net::IpAddr;
/// use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery};
/// use pilot_store::ServiceCache;
///
/// let registry = ServiceCache::new();
/// let host = "reviews.default.svc.cluster.local";
/// registry.add_service(Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]));
/// for (ip, version) in [("10.0.0.1", "v1"), ("10.0.0.2", "v2")] {
///     let ip: IpAddr = ip.parse().unwrap();
///     registry.add_endpoints(host, ip, Labels::from_pairs([("version", version)])).unwrap();
/// }
/// let v2 = registry.instances(host, &["http"], &[Labels::from_pairs([("version", "v2")])]);
/// assert_eq!(v2.len(), 1);
/// assert_eq!(v2[0].endpoint.address.to_string(), "10.0.0.2");
/// ```
#[derive(Clone)]
pub struct ServiceCache {
    inner: Arc<Inner>,
}

struct Inner {
    state: RwLock<State>,
    events: broadcast::Sender<ServiceEvent>,
    /// The snapshot of the last version asked for, built on demand.
    snapshot: Mutex<Option<Arc<RegistrySnapshot>>>,
}

#[derive(Default)]
pub(crate) struct State {
    /// Bumped by every change (under the write lock, with its events).
    pub(crate) version: u64,
    pub(crate) services: BTreeMap<String, Arc<Service>>,
    /// Instances by hostname, each list ordered by [`endpoint_order`] and
    /// shared with the snapshots taken since it last changed.
    pub(crate) instances: BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    /// The workloads listed by themselves, by uid, shared with the
    /// snapshots taken since it last changed.
    pub(crate) workloads: Arc<BTreeMap<String, Arc<Workload>>>,
}

impl ServiceCache {
    /// An empty registry.
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(EVENT_BUFFER);
        ServiceCache {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                events,
                snapshot: Mutex::new(None),
            }),
        }
    }

    /// Adds a service, or replaces the one with the same hostname (its
    /// instances then refer to the new one). Returns the stored service.
    pub fn add_service(&self, service: Service) -> Arc<Service> {
        let service = Arc::new(service);
        let mut state = self.write();
        let old = state
            .services
            .insert(service.hostname.clone(), Arc::clone(&service));
        if let Some(instances) = state.instances.get_mut(&service.hostname) {
            for instance in Arc::make_mut(instances) {
                instance.service = Arc::clone(&service);
            }
        }
        state.version += 1;
        self.send(ServiceEvent::Service(match old {
            Some(old) => Event::Updated {
                old,
                new: Arc::clone(&service),
            },
            None => Event::Added(Arc::clone(&service)),
        }));
        service
    }

    /// Removes a service and its instances; returns the service.
    pub fn remove_service(&self, hostname: &str) -> Option<Arc<Service>> {
        let mut state = self.write();
        let removed = state.services.remove(hostname)?;
        state.version += 1;
        for instance in state.instances.remove(hostname).iter().flat_map(|l| l.iter()) {
            self.send(ServiceEvent::Instance(Event::Deleted(Arc::new(instance.clone()))));
        }
        self.send(ServiceEvent::Service(Event::Deleted(Arc::clone(&removed))));
        Some(removed)
    }

    /// Adds an instance, or replaces the one with the same service, address
    /// and port. Its service must be in the registry and have the endpoint's
    /// service port.
    pub fn add_instance(&self, mut instance: ServiceInstance) -> Result<(), RegistryError> {
        let mut state = self.write();
        let hostname = instance.service.hostname.clone();
        let service =
            state
                .services
                .get(&hostname)
                .cloned()
                .ok_or_else(|| RegistryError::UnknownService {
                    hostname: hostname.clone(),
                })?;
        if service.port(&instance.endpoint.service_port.name).is_none() {
            return Err(RegistryError::UnknownPort {
                hostname,
                port: instance.endpoint.service_port.name.clone(),
            });
        }
        instance.service = service;
        state.version += 1;
        let list = Arc::make_mut(state.instances.entry(hostname).or_default());
        let position = list.binary_search_by(|i| endpoint_order(i).cmp(&endpoint_order(&instance)));
        let event = match position {
            Ok(at) => Event::Updated {
                old: Arc::new(std::mem::replace(&mut list[at], instance.clone())),
                new: Arc::new(instance),
            },
            Err(at) => {
                list.insert(at, instance.clone());
                Event::Added(Arc::new(instance))
            }
        };
        self.send(ServiceEvent::Instance(event));
        Ok(())
    }

    /// Adds one instance of `hostname` at `address` for every port of the
    /// service (endpoint port = service port), with `labels`.
    pub fn add_endpoints(
        &self,
        hostname: &str,
        address: IpAddr,
        labels: Labels,
    ) -> Result<Vec<ServiceInstance>, RegistryError> {
        let service = self
            .get_service(hostname)
            .ok_or_else(|| RegistryError::UnknownService {
                hostname: hostname.to_string(),
            })?;
        let instances: Vec<ServiceInstance> = service
            .ports
            .iter()
            .map(|port| {
                ServiceInstance::new(
                    Arc::clone(&service),
                    NetworkEndpoint::new(address, port.port, port.clone()),
                    labels.clone(),
                )
            })
            .collect();
        for instance in &instances {
            self.add_instance(instance.clone())?;
        }
        Ok(instances)
    }

    /// Removes the instances of `hostname` at `address` (on every port, or
    /// only on `port`); returns them.
    pub fn remove_instances(
        &self,
        hostname: &str,
        address: IpAddr,
        port: Option<u16>,
    ) -> Vec<ServiceInstance> {
        let mut state = self.write();
        let Some(list) = state.instances.get(hostname) else {
            return Vec::new();
        };
        let (removed, kept): (Vec<_>, Vec<_>) = list
            .iter()
            .cloned()
            .partition(|i| i.endpoint.address == address && port.is_none_or(|p| p == i.endpoint.port));
        if removed.is_empty() {
            return removed;
        }
        state.instances.insert(hostname.to_string(), Arc::new(kept));
        state.version += 1;
        for instance in &removed {
            self.send(ServiceEvent::Instance(Event::Deleted(Arc::new(instance.clone()))));
        }
        removed
    }

    /// Lists a workload by itself (one that may back no service), or
    /// replaces the one with the same uid; nothing changes (no event, no
    /// new version) when it is the same.
    pub fn set_workload(&self, workload: Workload) -> Arc<Workload> {
        let mut state = self.write();
        if let Some(same) = state.workloads.get(&workload.uid).filter(|w| ***w == workload) {
            return Arc::clone(same);
        }
        let workload = Arc::new(workload);
        let old = Arc::make_mut(&mut state.workloads).insert(workload.uid.clone(), Arc::clone(&workload));
        state.version += 1;
        self.send(ServiceEvent::Workload(match old {
            Some(old) => Event::Updated {
                old,
                new: Arc::clone(&workload),
            },
            None => Event::Added(Arc::clone(&workload)),
        }));
        workload
    }

    /// Removes the workload listed with `uid`; returns it.
    pub fn remove_workload(&self, uid: &str) -> Option<Arc<Workload>> {
        let mut state = self.write();
        let removed = Arc::make_mut(&mut state.workloads).remove(uid)?;
        state.version += 1;
        self.send(ServiceEvent::Workload(Event::Deleted(Arc::clone(&removed))));
        Some(removed)
    }

    /// The version of the cache's state: it grows with every change.
    pub fn version(&self) -> u64 {
        self.read().version
    }

    /// Sends an event. Callers hold the write lock, so an event is queued
    /// before any reader (or snapshot) can see its change.
    pub(crate) fn send(&self, event: ServiceEvent) {
        // No subscribers is fine: the event is simply not needed.
        let _ = self.inner.events.send(event);
    }

    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.inner.state.read().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.inner.state.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for ServiceCache {
    fn default() -> Self {
        Self::new()
    }
}

impl ServiceDiscovery for ServiceCache {
    fn services(&self) -> Vec<Arc<Service>> {
        self.read().services.values().cloned().collect()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.read().services.get(hostname).cloned()
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        let state = self.read();
        let Some(list) = state.instances.get(hostname) else {
            return Vec::new();
        };
        list.iter()
            .filter(|i| i.selected_by(port_names, labels))
            .cloned()
            .collect()
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        let state = self.read();
        state
            .instances
            .values()
            .flat_map(|l| l.iter())
            .filter(|i| addresses.contains(&i.endpoint.address))
            .cloned()
            .collect()
    }

    fn workloads(&self) -> Vec<Arc<Workload>> {
        self.read().workloads.values().cloned().collect()
    }

    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        let receiver = self.inner.events.subscribe();
        futures::stream::unfold(receiver, |mut receiver| async move {
            match receiver.recv().await {
                Ok(event) => Some((event, receiver)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((ServiceEvent::Resync, receiver)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
        .boxed()
    }

    /// The state as of the last change, shared: built once per version (a
    /// pointer per service; instance lists are shared with the cache until
    /// they change), then handed out to every caller until the next change.
    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        let state = self.read();
        let mut slot = self.inner.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(snapshot) = slot.as_ref().filter(|s| s.version() == state.version) {
            return Arc::clone(snapshot);
        }
        let (services, instances) = (state.services.clone(), state.instances.clone());
        let snapshot = match slot.as_deref() {
            Some(previous) => {
                RegistrySnapshot::from_parts_after(previous, state.version, services, instances)
            }
            None => RegistrySnapshot::from_parts(state.version, services, instances),
        };
        let snapshot = Arc::new(snapshot.with_workloads(Arc::clone(&state.workloads)));
        *slot = Some(Arc::clone(&snapshot));
        snapshot
    }
}

/// The order of a hostname's instances, and what tells them apart: the
/// address, port and service port an instance serves.
pub(crate) fn endpoint_order(instance: &ServiceInstance) -> (IpAddr, u16, &str) {
    (
        instance.endpoint.address,
        instance.endpoint.port,
        instance.endpoint.service_port.name.as_str(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::{Port, Protocol};

    const HOST: &str = "reviews.default.svc.cluster.local";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn registry() -> ServiceCache {
        let registry = ServiceCache::new();
        registry.add_service(Service::new(
            HOST,
            vec![
                Port::new("http", 9080, Protocol::Http),
                Port::new("tcp-admin", 9090, Protocol::Tcp),
            ],
        ));
        registry
    }

    #[test]
    fn instances_filter_by_port_and_labels() {
        let registry = registry();
        registry
            .add_endpoints(HOST, ip("10.0.0.1"), Labels::from_pairs([("version", "v1")]))
            .unwrap();
        registry
            .add_endpoints(
                HOST,
                ip("10.0.0.2"),
                Labels::from_pairs([("version", "v2"), ("canary", "true")]),
            )
            .unwrap();
        assert_eq!(registry.instances(HOST, &[], &[]).len(), 4);
        assert_eq!(registry.instances(HOST, &["http"], &[]).len(), 2);
        let v2 = Labels::from_pairs([("version", "v2")]);
        let v1 = Labels::from_pairs([("version", "v1")]);
        let only_v2 = registry.instances(HOST, &["http"], std::slice::from_ref(&v2));
        assert_eq!(only_v2.len(), 1);
        assert_eq!(only_v2[0].endpoint.address, ip("10.0.0.2"));
        assert_eq!(registry.instances(HOST, &["http"], &[v1, v2]).len(), 2);
        assert!(registry.instances(HOST, &["grpc"], &[]).is_empty());
        assert!(registry.instances("nope", &[], &[]).is_empty());
        assert_eq!(registry.host_instances(&[ip("10.0.0.1")]).len(), 2);
        assert_eq!(
            registry.remove_instances(HOST, ip("10.0.0.1"), Some(9080)).len(),
            1
        );
        assert_eq!(registry.host_instances(&[ip("10.0.0.1")]).len(), 1);
    }

    #[test]
    fn instances_need_their_service_and_port() {
        let registry = registry();
        assert!(matches!(
            registry.add_endpoints("other", ip("10.0.0.1"), Labels::new()),
            Err(RegistryError::UnknownService { .. })
        ));
        let mut instance = registry
            .add_endpoints(HOST, ip("10.0.0.1"), Labels::new())
            .unwrap()[0]
            .clone();
        instance.endpoint.service_port.name = "grpc".into();
        assert!(matches!(
            registry.add_instance(instance),
            Err(RegistryError::UnknownPort { .. })
        ));
    }

    #[tokio::test]
    async fn subscribers_see_changes_in_order_and_resync_when_behind() {
        let registry = registry();
        let mut events = registry.subscribe();
        registry
            .add_endpoints(HOST, ip("10.0.0.1"), Labels::new())
            .unwrap();
        registry.remove_service(HOST);
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(match events.next().await.unwrap() {
                ServiceEvent::Instance(Event::Added(_)) => "instance+",
                ServiceEvent::Instance(Event::Deleted(_)) => "instance-",
                ServiceEvent::Service(Event::Deleted(_)) => "service-",
                other => panic!("unexpected {other:?}"),
            });
        }
        assert_eq!(
            seen,
            ["instance+", "instance+", "instance-", "instance-", "service-"]
        );

        let mut slow = registry.subscribe();
        for i in 0..(EVENT_BUFFER + 10) {
            registry.add_service(Service::new(format!("s{i}"), vec![]));
        }
        assert_eq!(slow.next().await, Some(ServiceEvent::Resync));
        assert!(registry.get_service("s0").is_some());
    }
}
