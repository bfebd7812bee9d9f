//! One reconcile for every registry: a desired state (what a source says
//! the registry should hold) applied to a [`ServiceCache`] as a minimal
//! diff, so subscribers see only the real adds, updates and deletes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use pilot_model::{Event, NetworkEndpoint, Service, ServiceEvent, ServiceInstance, Workload};

use crate::service_cache::{State, endpoint_order};
use crate::{RegistryError, ServiceCache};

/// What a registry should hold: every service, by hostname, with its
/// instances, and the workloads it lists by themselves. A source turns
/// what it read into one of these; the [`ServiceCache`] works out the
/// difference.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DesiredState {
    /// Services by hostname.
    pub services: BTreeMap<String, DesiredService>,
    /// The workloads listed by themselves, by uid
    /// ([`ServiceDiscovery::workloads`](pilot_model::ServiceDiscovery::workloads)):
    /// at least those on no instance. A workload on instances is their
    /// [`ServiceInstance::workload`].
    pub workloads: BTreeMap<String, Arc<Workload>>,
}

/// One service and its instances, as a source describes them.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredService {
    /// The service.
    pub service: Arc<Service>,
    /// Its instances, in any order. Each instance's `service` is replaced
    /// by the stored service; an instance whose service port the service
    /// lacks is left out (and logged); of two instances on the same
    /// address, port and service port, the last wins.
    pub instances: Vec<ServiceInstance>,
}

/// How many changes an apply made (services, instances and listed
/// workloads together).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Applied {
    /// Services, instances and workloads added.
    pub added: usize,
    /// Services, instances and workloads changed.
    pub updated: usize,
    /// Services, instances and workloads removed.
    pub deleted: usize,
}

impl Applied {
    /// True when the apply changed nothing.
    pub fn is_empty(&self) -> bool {
        *self == Applied::default()
    }

    fn count<T>(&mut self, event: &Event<T>) {
        match event {
            Event::Added(_) => self.added += 1,
            Event::Updated { .. } => self.updated += 1,
            Event::Deleted(_) => self.deleted += 1,
        }
    }
}

impl DesiredState {
    /// An empty state: a registry that should hold nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `service` (replacing one with the same hostname) with no
    /// instances; returns it to add instances to.
    pub fn insert(&mut self, service: Service) -> &mut DesiredService {
        let hostname = service.hostname.clone();
        self.services
            .insert(hostname.clone(), DesiredService::new(service));
        self.services
            .get_mut(&hostname)
            .unwrap_or_else(|| unreachable!("inserted above"))
    }
}

impl DesiredService {
    /// A service with no instances.
    pub fn new(service: Service) -> Self {
        DesiredService {
            service: Arc::new(service),
            instances: Vec::new(),
        }
    }

    /// Adds an instance at `address`:`port` serving the service port named
    /// `port_name`, and returns it (to set its zone or service account).
    pub fn add_instance(
        &mut self,
        address: std::net::IpAddr,
        port: u16,
        port_name: &str,
        labels: pilot_model::Labels,
    ) -> Result<&mut ServiceInstance, RegistryError> {
        let service_port = self
            .service
            .port(port_name)
            .ok_or_else(|| RegistryError::UnknownPort {
                hostname: self.service.hostname.clone(),
                port: port_name.to_string(),
            })?
            .clone();
        self.instances.push(ServiceInstance::new(
            Arc::clone(&self.service),
            NetworkEndpoint::new(address, port, service_port),
            labels,
        ));
        Ok(self
            .instances
            .last_mut()
            .unwrap_or_else(|| unreachable!("pushed above")))
    }
}

impl ServiceCache {
    /// Makes the cache hold exactly `desired`, emitting only the
    /// differences: a service or instance that did not change gets no
    /// event, one that changed gets `Updated` (never a delete and an add),
    /// one that went away gets `Deleted` (a service's instances before the
    /// service). Readers see the old state or the new one per hostname.
    /// The listed workloads are reconciled the same way
    /// ([`ServiceEvent::Workload`]). A workload (listed or on instances)
    /// equal to one the cache holds becomes the held `Arc`, so a
    /// workload's instances share one `Arc` across services and applies.
    pub fn apply(&self, mut desired: DesiredState) -> Applied {
        let mut state = self.write();
        intern_workloads(&state, &mut desired);
        let DesiredState {
            services: mut desired,
            workloads,
        } = desired;
        let hosts: BTreeSet<String> = state.services.keys().chain(desired.keys()).cloned().collect();
        let mut applied = Applied::default();
        for host in hosts {
            let wanted = desired.remove(&host);
            self.reconcile(&mut state, &host, wanted, &mut applied);
        }
        self.reconcile_workloads(&mut state, workloads, &mut applied);
        applied
    }

    /// Makes the listed workloads equal `desired`, with an event for each
    /// one added, changed or gone.
    fn reconcile_workloads(
        &self,
        state: &mut State,
        desired: BTreeMap<String, Arc<Workload>>,
        applied: &mut Applied,
    ) {
        if *state.workloads == desired {
            return;
        }
        let mut events = Vec::new();
        let mut next = BTreeMap::new();
        for (uid, workload) in desired {
            match state.workloads.get(&uid) {
                Some(held) if **held == *workload => {
                    next.insert(uid, Arc::clone(held));
                }
                held => {
                    events.push(match held {
                        Some(old) => Event::Updated {
                            old: Arc::clone(old),
                            new: Arc::clone(&workload),
                        },
                        None => Event::Added(Arc::clone(&workload)),
                    });
                    next.insert(uid, workload);
                }
            }
        }
        for (uid, gone) in state.workloads.iter() {
            if !next.contains_key(uid) {
                events.push(Event::Deleted(Arc::clone(gone)));
            }
        }
        state.workloads = Arc::new(next);
        state.version += 1;
        for event in events {
            applied.count(&event);
            self.send(ServiceEvent::Workload(event));
        }
    }

    /// Makes the cache's view of `hostname` equal `desired` (`None`: no
    /// such service), as [`apply`](Self::apply) does for every hostname;
    /// the other hostnames are left alone. For sources that know which
    /// hostnames an event touched.
    pub fn apply_service(&self, hostname: &str, desired: Option<DesiredService>) -> Applied {
        let mut state = self.write();
        let mut applied = Applied::default();
        let desired = desired.filter(|d| {
            let same = d.service.hostname == hostname;
            if !same {
                tracing::warn!(hostname, other = %d.service.hostname, "desired service under another hostname; ignored");
            }
            same
        });
        self.reconcile(&mut state, hostname, desired, &mut applied);
        applied
    }

    fn reconcile(
        &self,
        state: &mut State,
        host: &str,
        desired: Option<DesiredService>,
        applied: &mut Applied,
    ) {
        let before = *applied;
        let mut emit = |cache: &ServiceCache, event: ServiceEvent| {
            match &event {
                ServiceEvent::Service(e) => applied.count(e),
                ServiceEvent::Instance(e) => applied.count(e),
                // Resync, and any kind of event added later: nothing to count.
                _ => {}
            }
            cache.send(event);
        };
        let Some(desired) = desired else {
            if let Some(removed) = state.services.remove(host) {
                for instance in state.instances.remove(host).iter().flat_map(|l| l.iter()) {
                    emit(
                        self,
                        ServiceEvent::Instance(Event::Deleted(Arc::new(instance.clone()))),
                    );
                }
                emit(self, ServiceEvent::Service(Event::Deleted(removed)));
                state.version += 1;
            }
            return;
        };
        let service = match state.services.get(host).cloned() {
            Some(current) if *current == *desired.service => current,
            current => {
                let event = match current {
                    Some(old) => Event::Updated {
                        old,
                        new: Arc::clone(&desired.service),
                    },
                    None => Event::Added(Arc::clone(&desired.service)),
                };
                state
                    .services
                    .insert(host.to_string(), Arc::clone(&desired.service));
                // Instances refer to the new service (its own event says it
                // changed; the instances did not).
                if let Some(list) = state.instances.get_mut(host) {
                    for instance in Arc::make_mut(list) {
                        instance.service = Arc::clone(&desired.service);
                    }
                }
                emit(self, ServiceEvent::Service(event));
                Arc::clone(&desired.service)
            }
        };
        let mut wanted: Vec<ServiceInstance> = Vec::with_capacity(desired.instances.len());
        for mut instance in desired.instances {
            if service.port(&instance.endpoint.service_port.name) != Some(&instance.endpoint.service_port) {
                tracing::warn!(
                    hostname = host,
                    port = %instance.endpoint.service_port.name,
                    address = %instance.endpoint.address,
                    "instance of a service port the service does not have; left out"
                );
                continue;
            }
            instance.service = Arc::clone(&service);
            wanted.push(instance);
        }
        // Stable: of equal endpoints the last given is kept.
        wanted.sort_by(|a, b| endpoint_order(a).cmp(&endpoint_order(b)));
        wanted.reverse();
        wanted.dedup_by(|a, b| endpoint_order(a) == endpoint_order(b));
        wanted.reverse();
        let current = state.instances.get(host).cloned().unwrap_or_default();
        let (mut old, mut new) = (current.iter().peekable(), wanted.iter().peekable());
        loop {
            let order = match (old.peek(), new.peek()) {
                (None, None) => break,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(o), Some(n)) => endpoint_order(o).cmp(&endpoint_order(n)),
            };
            match order {
                Ordering::Less => {
                    let gone = old.next().unwrap_or_else(|| unreachable!("peeked"));
                    emit(
                        self,
                        ServiceEvent::Instance(Event::Deleted(Arc::new(gone.clone()))),
                    );
                }
                Ordering::Greater => {
                    let added = new.next().unwrap_or_else(|| unreachable!("peeked"));
                    emit(
                        self,
                        ServiceEvent::Instance(Event::Added(Arc::new(added.clone()))),
                    );
                }
                Ordering::Equal => {
                    let (o, n) = (
                        old.next().unwrap_or_else(|| unreachable!("peeked")),
                        new.next().unwrap_or_else(|| unreachable!("peeked")),
                    );
                    if o != n {
                        emit(
                            self,
                            ServiceEvent::Instance(Event::Updated {
                                old: Arc::new(o.clone()),
                                new: Arc::new(n.clone()),
                            }),
                        );
                    }
                }
            }
        }
        if *applied != before {
            state.instances.insert(host.to_string(), Arc::new(wanted));
            state.version += 1;
        }
    }
}

/// Replaces each workload of `desired` equal to one `state` holds (by
/// uid) with the held `Arc`.
fn intern_workloads(state: &State, desired: &mut DesiredState) {
    let held: HashMap<&str, &Arc<Workload>> = state
        .instances
        .values()
        .flat_map(|list| list.iter())
        .filter_map(|i| i.workload.as_ref())
        .chain(state.workloads.values())
        .map(|w| (w.uid.as_str(), w))
        .collect();
    if held.is_empty() {
        return;
    }
    let intern = |workload: &mut Arc<Workload>| {
        if let Some(same) = held.get(workload.uid.as_str())
            && !Arc::ptr_eq(same, workload)
            && ***same == **workload
        {
            *workload = Arc::clone(same);
        }
    };
    let on_instances = desired
        .services
        .values_mut()
        .flat_map(|s| s.instances.iter_mut())
        .filter_map(|i| i.workload.as_mut());
    on_instances
        .chain(desired.workloads.values_mut())
        .for_each(intern);
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use futures::StreamExt;
    use pilot_model::{Labels, Port, Protocol, ServiceDiscovery};

    use super::*;

    const HOST: &str = "reviews.default.svc.cluster.local";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn state(versions: &[(&str, &str)]) -> DesiredState {
        let mut state = DesiredState::new();
        let reviews = state.insert(Service::new(HOST, vec![Port::new("http", 9080, Protocol::Http)]));
        for (address, version) in versions {
            reviews
                .add_instance(
                    ip(address),
                    9080,
                    "http",
                    Labels::from_pairs([("version", *version)]),
                )
                .unwrap();
        }
        state.insert(Service::new("ratings.default.svc.cluster.local", vec![]));
        state
    }

    fn kind<T>(event: &Event<T>) -> &'static str {
        match event {
            Event::Added(_) => "+",
            Event::Updated { .. } => "~",
            Event::Deleted(_) => "-",
        }
    }

    /// Every event queued so far, as (what, kind, address or hostname).
    fn drain(events: &mut futures::stream::BoxStream<'static, ServiceEvent>) -> Vec<String> {
        let mut seen = Vec::new();
        while let Some(Some(event)) = events.next().now_or_never() {
            seen.push(match &event {
                ServiceEvent::Service(e) => format!("service{}{}", kind(e), e.object().hostname),
                ServiceEvent::Instance(e) => format!("instance{}{}", kind(e), e.object().endpoint.address),
                ServiceEvent::Workload(e) => format!("workload{}{}", kind(e), e.object().uid),
                ServiceEvent::Resync => "resync".into(),
                other => format!("{other:?}"),
            });
        }
        seen
    }

    use futures::FutureExt;

    #[test]
    fn one_changed_entry_is_one_update_not_a_delete_and_add() {
        let cache = ServiceCache::new();
        let applied = cache.apply(state(&[("10.0.0.1", "v1"), ("10.0.0.2", "v2")]));
        assert_eq!(applied.added, 4);
        let mut events = cache.subscribe();
        let version = cache.version();

        // The same state again: nothing.
        assert!(
            cache
                .apply(state(&[("10.0.0.2", "v2"), ("10.0.0.1", "v1")]))
                .is_empty()
        );
        assert_eq!(cache.version(), version);
        assert!(drain(&mut events).is_empty());

        // One label changes, one instance comes, none goes: exactly that.
        let applied = cache.apply(state(&[
            ("10.0.0.1", "v1"),
            ("10.0.0.2", "v3"),
            ("10.0.0.3", "v1"),
        ]));
        assert_eq!(
            applied,
            Applied {
                added: 1,
                updated: 1,
                deleted: 0
            }
        );
        assert_eq!(drain(&mut events), ["instance~10.0.0.2", "instance+10.0.0.3"]);

        // A service's port list changes: the service is updated, its
        // instances keep their identity and refer to the new service.
        let mut changed = state(&[("10.0.0.1", "v1")]);
        let reviews = changed.services.get_mut(HOST).unwrap();
        let mut service = (*reviews.service).clone();
        service.ports.push(Port::new("tcp-admin", 9090, Protocol::Tcp));
        reviews.service = Arc::new(service);
        cache.apply(changed);
        assert_eq!(
            drain(&mut events),
            [
                "service~reviews.default.svc.cluster.local",
                "instance-10.0.0.2",
                "instance-10.0.0.3"
            ]
        );
        let instances = cache.instances(HOST, &[], &[]);
        assert_eq!(instances.len(), 1);
        assert_eq!(instances[0].service.ports.len(), 2);

        // A service that goes: its instances first, then the service.
        cache.apply(DesiredState::new());
        assert_eq!(
            drain(&mut events),
            [
                "service-ratings.default.svc.cluster.local",
                "instance-10.0.0.1",
                "service-reviews.default.svc.cluster.local"
            ]
        );
        assert!(cache.services().is_empty());
    }

    #[test]
    fn apply_service_touches_one_hostname_and_snapshots_follow_versions() {
        let cache = ServiceCache::new();
        cache.apply(state(&[("10.0.0.1", "v1")]));
        let first = cache.snapshot();
        assert!(Arc::ptr_eq(&first, &cache.snapshot()), "one snapshot per version");
        let mut events = cache.subscribe();
        let reviews = state(&[("10.0.0.1", "v2")]).services.remove(HOST);
        let applied = cache.apply_service(HOST, reviews);
        assert_eq!(applied.updated, 1);
        assert_eq!(drain(&mut events), ["instance~10.0.0.1"]);
        let second = cache.snapshot();
        assert!(second.version() > first.version());
        // The first snapshot still shows what it was taken at.
        let v1 = [Labels::from_pairs([("version", "v1")])];
        assert_eq!(first.instances(HOST, &[], &v1).len(), 1);
        assert!(second.instances(HOST, &[], &v1).is_empty());
        assert!(second.get_service("ratings.default.svc.cluster.local").is_some());
        assert_eq!(second.host_instances(&[ip("10.0.0.1")]).len(), 1);

        cache.apply_service(HOST, None);
        assert_eq!(
            drain(&mut events),
            ["instance-10.0.0.1", "service-reviews.default.svc.cluster.local"]
        );
    }

    #[test]
    fn instances_of_unknown_ports_are_left_out() {
        let cache = ServiceCache::new();
        let mut desired = state(&[("10.0.0.1", "v1")]);
        let reviews = desired.services.get_mut(HOST).unwrap();
        assert!(matches!(
            reviews.add_instance(ip("10.0.0.9"), 1, "grpc", Labels::new()),
            Err(RegistryError::UnknownPort { .. })
        ));
        let mut stray = reviews.instances[0].clone();
        stray.endpoint.address = ip("10.0.0.9");
        stray.endpoint.service_port = Port::new("grpc", 1, Protocol::Grpc);
        reviews.instances.push(stray);
        cache.apply(desired);
        assert_eq!(cache.instances(HOST, &[], &[]).len(), 1);
    }

    #[test]
    fn listed_workloads_are_reconciled_with_events_and_kept_arcs() {
        use pilot_model::{Workload, WorkloadKind};
        let pod = |name: &str, node: &str| Workload::new(WorkloadKind::Pod, "default", name).with_node(node);
        let with = |workloads: &[Workload]| {
            let mut desired = state(&[]);
            desired.workloads = workloads
                .iter()
                .map(|w| (w.uid.clone(), Arc::new(w.clone())))
                .collect();
            desired
        };
        let cache = ServiceCache::new();
        cache.apply(with(&[pod("a", "n1"), pod("b", "n1")]));
        let mut events = cache.subscribe();
        let held = cache.workloads();
        assert_eq!(held.len(), 2);
        let version = cache.version();

        // The same workloads again: nothing, and the held Arcs stay.
        assert!(cache.apply(with(&[pod("b", "n1"), pod("a", "n1")])).is_empty());
        assert_eq!(cache.version(), version);
        assert!(drain(&mut events).is_empty());
        assert!(Arc::ptr_eq(&held[0], &cache.workloads()[0]));

        // One moves, one goes, one comes: exactly that, in the snapshot too.
        let applied = cache.apply(with(&[pod("a", "n1"), pod("b", "n2"), pod("c", "n1")]));
        assert_eq!(
            applied,
            Applied {
                added: 1,
                updated: 1,
                deleted: 0
            }
        );
        assert_eq!(
            drain(&mut events),
            [
                "workload~Kubernetes//Pod/default/b",
                "workload+Kubernetes//Pod/default/c"
            ]
        );
        assert!(Arc::ptr_eq(&held[0], &cache.workloads()[0]), "a did not change");
        let snapshot = cache.snapshot();
        assert!(snapshot.version() > version);
        let listed = snapshot.listed_workloads();
        assert_eq!(listed["Kubernetes//Pod/default/b"].node.as_deref(), Some("n2"));
        cache.apply(with(&[pod("c", "n1")]));
        assert_eq!(
            drain(&mut events),
            [
                "workload-Kubernetes//Pod/default/a",
                "workload-Kubernetes//Pod/default/b"
            ]
        );
        assert_eq!(cache.snapshot().listed_workloads().len(), 1);
    }

    #[test]
    fn a_workload_keeps_one_arc_across_services_and_applies() {
        use pilot_model::{Workload, WorkloadKind};
        let vm = |node: &str| Arc::new(Workload::new(WorkloadKind::Pod, "default", "vm").with_node(node));
        let with = |workload: Arc<Workload>, ratings_ports: u16| {
            let mut desired = state(&[("10.0.0.1", "v1")]);
            let reviews = desired.services.get_mut(HOST).unwrap();
            reviews.instances[0].workload = Some(Arc::clone(&workload));
            let ratings = desired.insert(Service::new(
                "ratings.default.svc.cluster.local",
                (0..ratings_ports)
                    .map(|i| Port::new(format!("http-{i}"), 9080 + i, Protocol::Http))
                    .collect(),
            ));
            ratings
                .add_instance(ip("10.0.0.1"), 9080, "http-0", Labels::new())
                .unwrap()
                .workload = Some(workload);
            desired
        };
        let on_vm = |cache: &ServiceCache| -> Vec<Arc<Workload>> {
            cache
                .host_instances(&[ip("10.0.0.1")])
                .into_iter()
                .filter_map(|i| i.workload)
                .collect()
        };
        let cache = ServiceCache::new();
        cache.apply(with(vm("n1"), 1));
        let first = on_vm(&cache);
        assert_eq!(first.len(), 2);
        // Only ratings changes (a port more), with an equal workload in a
        // new Arc: both services' instances still share the held one.
        cache.apply(with(vm("n1"), 2));
        let second = on_vm(&cache);
        assert_eq!(second.len(), 2);
        assert!(second.iter().all(|w| Arc::ptr_eq(w, &first[0])), "one Arc");
        // The workload changes: the new one, shared again.
        cache.apply(with(vm("n2"), 2));
        let third = on_vm(&cache);
        assert_eq!(third[0].node.as_deref(), Some("n2"));
        assert!(Arc::ptr_eq(&third[0], &third[1]));
    }
}
