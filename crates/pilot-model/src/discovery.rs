//! The [`ServiceDiscovery`] contract and an aggregate over several registries.

use std::net::IpAddr;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{self, BoxStream, StreamExt};

use crate::{Event, Labels, RegistrySnapshot, Service, ServiceInstance};

/// A change in a service registry.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServiceEvent {
    /// A service appeared, changed or went away.
    Service(Event<Arc<Service>>),
    /// An instance appeared, changed or went away.
    Instance(Event<Arc<ServiceInstance>>),
    /// A workload the registry lists by itself
    /// ([`ServiceDiscovery::workloads`]) appeared, changed or went away.
    Workload(Event<Arc<crate::Workload>>),
    /// The subscriber fell behind and missed events: read the registry again.
    Resync,
}

/// A read-only view of services and their instances, served synchronously
/// from a cache, with a stream of changes.
///
/// An adapter that serves its reads from a registry it holds (a
/// `pilot_store::FollowedRegistry`, a `ServiceCache`) implements
/// [`RegistryAdapter`] instead, which forwards every method here, so none
/// falls back to a default by mistake.
///
/// # Rules
///
/// Every implementation keeps these; `pilot_store::testing`'s
/// `registry_conformance_suite!` (feature `testing` of `pilot-store`)
/// checks each of them and, when one is broken, names it with what it
/// expected and what the registry answered.
///
/// - **Reads agree.** At rest, [`services`](Self::services) (ordered by
///   hostname), [`get_service`](Self::get_service),
///   [`instances`](Self::instances), [`host_instances`](Self::host_instances)
///   and [`snapshot`](Self::snapshot) show the same services, ports and
///   instances.
/// - **Sync.** Once [`wait_synced`](Self::wait_synced) resolves,
///   [`has_synced`](Self::has_synced) is true and the registry holds its
///   source's state as of some moment after it started (never a partial
///   list); a registry on an empty source syncs too, empty.
/// - **Minimal diffs.** A change to the source emits events for what
///   changed only: an unchanged instance gets none, a changed one
///   `Updated` (never a delete and an add), a new one `Added` (then perhaps
///   updates), a removed one `Deleted`; a service event only for a service
///   that appeared, went, or changed its ports. The same holds for changes
///   made while the registry was cut off its source, once it is back: a
///   service deleted in the gap gets its `Deleted`.
/// - **Subscriptions** stay open while the registry lives; one that falls
///   behind gets [`ServiceEvent::Resync`], never a silent gap.
/// - **Snapshots** take a new [`version`](RegistrySnapshot::version) with
///   each change (the default, a copy at version 0, only suits a registry
///   that never changes).
///
/// ```
/// use pilot_model::{Labels, ServiceDiscovery};
/// fn v2_instances(registry: &dyn ServiceDiscovery) -> usize {
///     let v2 = Labels::from_pairs([("version", "v2")]);
///     registry.instances("reviews.default.svc.cluster.local", &[], &[v2]).len()
/// }
/// ```
pub trait ServiceDiscovery: Send + Sync {
    /// Every service, ordered by hostname.
    fn services(&self) -> Vec<Arc<Service>>;

    /// The service with `hostname`.
    fn get_service(&self, hostname: &str) -> Option<Arc<Service>>;

    /// The instances of `hostname` that serve one of `port_names` (all ports
    /// when empty) and whose labels match one of `labels` (all instances when
    /// empty).
    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance>;

    /// The instances whose endpoint address is one of `addresses`: what runs
    /// on a given host, such as the proxy asking for configuration.
    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance>;

    /// Changes from now on. A subscriber that falls behind receives
    /// [`ServiceEvent::Resync`] instead of silently losing events.
    fn subscribe(&self) -> BoxStream<'static, ServiceEvent>;

    /// The workloads the registry lists by themselves (`workload.rs`):
    /// at least those that back no service (a Pod no Service selects);
    /// those that do are also on their instances
    /// ([`ServiceInstance::workload`](crate::ServiceInstance::workload)).
    /// A change to them is announced as [`ServiceEvent::Resync`] or with an
    /// instance's event. The default lists none: a registry of services
    /// and instances only.
    fn workloads(&self) -> Vec<Arc<crate::Workload>> {
        Vec::new()
    }

    /// True once the registry holds its platform's state as of some moment
    /// after it started; false while a remote registry is still loading.
    /// Consumers that must not act on a partial view (the ADS server, which
    /// would otherwise push empty endpoints after a restart) wait for it.
    /// The default is for registries that are complete when built.
    fn has_synced(&self) -> bool {
        true
    }

    /// Resolves once [`has_synced`](Self::has_synced) is true, without
    /// polling. The default (ready at once) is for registries that are
    /// complete when built: a registry that overrides `has_synced`
    /// overrides this too (`pilot_store::FollowedRegistry` does both from
    /// one `tokio::sync::watch`); consumers that must not act early (the
    /// ADS server) still check `has_synced` after it resolves.
    fn wait_synced(&self) -> BoxFuture<'static, ()> {
        futures::future::ready(()).boxed()
    }

    /// The registry's state now, immutable and shared: readers hold no lock
    /// while they use it, and every change whose event was sent before this
    /// call is in it. The default copies the registry
    /// ([`RegistrySnapshot::capture`], version 0); registries kept in a
    /// `pilot_store::ServiceCache` hand out the cache's own snapshot,
    /// swapped on change and versioned, without copying.
    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        Arc::new(RegistrySnapshot::capture(self, 0))
    }
}

/// A platform adapter that serves its reads from a registry it holds,
/// typically a `pilot_store::FollowedRegistry` that the adapter's follower
/// task keeps equal to its source. Naming that registry is all an adapter
/// writes: every [`ServiceDiscovery`] method (`services`, `get_service`,
/// `instances`, `host_instances`, `subscribe`, `has_synced`, `wait_synced`
/// and `snapshot`) is the held registry's, so none can be forgotten into
/// the trait's defaults.
///
/// A method of the adapter's own type with the name of one of these
/// (an inherent `wait_synced`, say) takes precedence in method-call
/// syntax: `adapter.wait_synced()` calls it, not the registry's. Give it
/// another name, or call the trait's explicitly,
/// `ServiceDiscovery::wait_synced(&adapter)`.
///
/// ```
/// use pilot_model::{AggregateDiscovery, RegistryAdapter, ServiceDiscovery};
///
/// /// A registry with methods of its own (here: a name) beside its reads.
/// struct Named {
///     name: String,
///     reads: AggregateDiscovery,
/// }
///
/// impl RegistryAdapter for Named {
///     type Registry = AggregateDiscovery;
///     fn registry(&self) -> &AggregateDiscovery {
///         &self.reads
///     }
/// }
///
/// let named = Named { name: "empty".into(), reads: AggregateDiscovery::new(vec![]) };
/// assert!(named.services().is_empty() && named.has_synced());
/// # let _ = named.name;
/// ```
pub trait RegistryAdapter: Send + Sync {
    /// The registry the reads are served from.
    type Registry: ServiceDiscovery + ?Sized;

    /// The registry the reads are served from.
    fn registry(&self) -> &Self::Registry;
}

// Every method of `ServiceDiscovery`, defaults included: a method added to
// the trait is forwarded here too, and checked by
// `tests::an_adapter_answers_every_method_from_its_registry`.
impl<A: RegistryAdapter> ServiceDiscovery for A {
    fn services(&self) -> Vec<Arc<Service>> {
        self.registry().services()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.registry().get_service(hostname)
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        self.registry().instances(hostname, port_names, labels)
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        self.registry().host_instances(addresses)
    }

    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        self.registry().subscribe()
    }

    fn workloads(&self) -> Vec<Arc<crate::Workload>> {
        self.registry().workloads()
    }

    fn has_synced(&self) -> bool {
        self.registry().has_synced()
    }

    fn wait_synced(&self) -> BoxFuture<'static, ()> {
        self.registry().wait_synced()
    }

    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        self.registry().snapshot()
    }
}

/// Several registries seen as one: services from all of them (the first
/// registry that knows a hostname wins), instances from every registry.
#[derive(Clone, Default)]
pub struct AggregateDiscovery {
    registries: Vec<Arc<dyn ServiceDiscovery>>,
}

impl AggregateDiscovery {
    /// An aggregate of `registries`, in priority order.
    pub fn new(registries: Vec<Arc<dyn ServiceDiscovery>>) -> Self {
        AggregateDiscovery { registries }
    }

    /// Adds a registry with the lowest priority.
    pub fn push(&mut self, registry: Arc<dyn ServiceDiscovery>) {
        self.registries.push(registry);
    }
}

impl ServiceDiscovery for AggregateDiscovery {
    fn services(&self) -> Vec<Arc<Service>> {
        let mut all: Vec<Arc<Service>> = Vec::new();
        for registry in &self.registries {
            for service in registry.services() {
                if !all.iter().any(|s| s.hostname == service.hostname) {
                    all.push(service);
                }
            }
        }
        all.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        all
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.registries.iter().find_map(|r| r.get_service(hostname))
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        self.registries
            .iter()
            .flat_map(|r| r.instances(hostname, port_names, labels))
            .collect()
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        self.registries
            .iter()
            .flat_map(|r| r.host_instances(addresses))
            .collect()
    }

    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        stream::select_all(self.registries.iter().map(|r| r.subscribe())).boxed()
    }

    /// Every registry's, the first registry's winning a uid several list.
    fn workloads(&self) -> Vec<Arc<crate::Workload>> {
        let mut seen = std::collections::BTreeSet::new();
        self.registries
            .iter()
            .flat_map(|r| r.workloads())
            .filter(|w| seen.insert(w.uid.clone()))
            .collect()
    }

    fn has_synced(&self) -> bool {
        self.registries.iter().all(|r| r.has_synced())
    }

    fn wait_synced(&self) -> BoxFuture<'static, ()> {
        let waits: Vec<_> = self.registries.iter().map(|r| r.wait_synced()).collect();
        futures::future::join_all(waits).map(|_| ()).boxed()
    }

    /// Every registry's snapshot combined ([`RegistrySnapshot::aggregate`]).
    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        let parts: Vec<_> = self.registries.iter().map(|r| r.snapshot()).collect();
        Arc::new(RegistrySnapshot::aggregate(&parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NetworkEndpoint, Port, Protocol};

    /// A registry whose every answer, defaults' included, differs from the
    /// trait's defaults: not synced, never ready, a versioned snapshot.
    struct Marked {
        service: Arc<Service>,
        instance: ServiceInstance,
        snapshot: Arc<RegistrySnapshot>,
    }

    impl ServiceDiscovery for Marked {
        fn services(&self) -> Vec<Arc<Service>> {
            vec![Arc::clone(&self.service)]
        }
        fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
            (hostname == self.service.hostname).then(|| Arc::clone(&self.service))
        }
        fn instances(&self, _: &str, _: &[&str], _: &[Labels]) -> Vec<ServiceInstance> {
            vec![self.instance.clone()]
        }
        fn host_instances(&self, _: &[IpAddr]) -> Vec<ServiceInstance> {
            vec![self.instance.clone(), self.instance.clone()]
        }
        fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
            stream::iter([ServiceEvent::Resync]).boxed()
        }
        fn has_synced(&self) -> bool {
            false
        }
        fn wait_synced(&self) -> BoxFuture<'static, ()> {
            futures::future::pending().boxed()
        }
        fn snapshot(&self) -> Arc<RegistrySnapshot> {
            Arc::clone(&self.snapshot)
        }
        fn workloads(&self) -> Vec<Arc<crate::Workload>> {
            vec![Arc::new(crate::Workload::new(
                crate::WorkloadKind::Pod,
                "ns",
                "marked",
            ))]
        }
    }

    struct Adapter(Marked);

    impl RegistryAdapter for Adapter {
        type Registry = Marked;
        fn registry(&self) -> &Marked {
            &self.0
        }
    }

    #[test]
    fn an_adapter_answers_every_method_from_its_registry() {
        let port = Port::new("http", 80, Protocol::Http);
        let service = Arc::new(Service::new("a.ns.svc", vec![port.clone()]));
        let instance = ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new("10.0.0.1".parse().unwrap(), 8080, port),
            Labels::new(),
        );
        let empty = AggregateDiscovery::new(vec![]);
        let snapshot = Arc::new(RegistrySnapshot::capture(&empty, 7));
        let adapter = Adapter(Marked {
            service,
            instance,
            snapshot: Arc::clone(&snapshot),
        });
        let inner = &adapter.0;
        assert_eq!(adapter.services(), inner.services());
        assert_eq!(adapter.get_service("a.ns.svc"), inner.get_service("a.ns.svc"));
        assert_eq!(
            adapter.instances("a.ns.svc", &[], &[]),
            inner.instances("a.ns.svc", &[], &[])
        );
        assert_eq!(
            adapter.host_instances(&[]).len(),
            2,
            "host_instances is the registry's"
        );
        assert_eq!(
            adapter.subscribe().next().now_or_never(),
            Some(Some(ServiceEvent::Resync)),
            "subscribe is the registry's"
        );
        assert!(
            !adapter.has_synced(),
            "has_synced is the registry's, not the default"
        );
        assert!(
            adapter.wait_synced().now_or_never().is_none(),
            "wait_synced is the registry's, not the default (ready at once)"
        );
        assert_eq!(
            adapter.workloads(),
            inner.workloads(),
            "workloads are the registry's, not the default (none)"
        );
        assert!(
            Arc::ptr_eq(&adapter.snapshot(), &snapshot),
            "snapshot is the registry's, not the default copy"
        );
    }
}
