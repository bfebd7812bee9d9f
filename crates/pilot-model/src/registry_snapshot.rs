//! An immutable state of a service registry at one moment, shared behind an
//! `Arc`: what a push reads, so every proxy of the push sees the same
//! services and instances however the live registry moves meanwhile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::{Labels, Service, ServiceDiscovery, ServiceEvent, ServiceInstance, Workload};

/// A registry's services and instances as of one moment, with a version.
/// Reading it takes no lock; it implements [`ServiceDiscovery`] (with no
/// events: it never changes), so whatever reads a registry can read it.
///
/// Registries that keep their state in a `pilot_store::ServiceCache` hand
/// one out from [`ServiceDiscovery::snapshot`] without copying their
/// instances (each hostname's list is shared, not cloned); other registries
/// get one copied by [`RegistrySnapshot::capture`].
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
    services: BTreeMap<String, Arc<Service>>,
    /// Each hostname's instances, in the registry's order.
    instances: BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    /// Built on the first `host_instances`, or carried over from the
    /// snapshot before ([`RegistrySnapshot::from_parts_after`]).
    by_address: OnceLock<AddressIndex>,
    /// The workloads the registry lists by themselves, by uid: those that
    /// back no service, and any it lists besides ([`ServiceDiscovery::workloads`]).
    workloads: Arc<BTreeMap<String, Arc<Workload>>>,
}

/// Instances by address: a full index built from some snapshot's
/// instances (`base`, shared by the snapshots after it), and the hosts
/// whose instances differ from that snapshot's (`changed`), whose
/// instances are read from the snapshot's own lists instead. So a snapshot
/// one endpoint away from the last does not index the mesh again.
#[derive(Debug, Clone)]
struct AddressIndex {
    base: Arc<HashMap<IpAddr, Vec<ServiceInstance>>>,
    changed: BTreeSet<String>,
}

/// How many changed hosts an index carries before it is built afresh.
const MAX_CHANGED_HOSTS: usize = 64;

/// The hosts whose instance lists differ between `old` and `new` (by
/// pointer: lists are shared until they change), or `None` past `limit`.
fn changed_hosts(
    old: &BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    new: &BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    limit: usize,
) -> Option<BTreeSet<String>> {
    let mut changed = BTreeSet::new();
    let (mut old, mut new) = (old.iter().peekable(), new.iter().peekable());
    loop {
        let host = match (old.peek(), new.peek()) {
            (None, None) => return Some(changed),
            (Some((a, _)), Some((b, _))) if a < b => old.next().map(|(h, _)| h),
            (Some((a, _)), Some((b, _))) if a > b => new.next().map(|(h, _)| h),
            (Some(_), Some(_)) => {
                let ((host, a), (_, b)) = (old.next()?, new.next()?);
                if Arc::ptr_eq(a, b) {
                    continue;
                }
                Some(host)
            }
            (Some(_), None) => old.next().map(|(h, _)| h),
            (None, Some(_)) => new.next().map(|(h, _)| h),
        };
        changed.extend(host.cloned());
        if changed.len() > limit {
            return None;
        }
    }
}

impl RegistrySnapshot {
    /// Copies `registry`'s services and each one's instances; `version`
    /// names this state (it increases with every change the owner saw).
    pub fn capture<R: ServiceDiscovery + ?Sized>(registry: &R, version: u64) -> Self {
        let services: BTreeMap<String, Arc<Service>> = registry
            .services()
            .into_iter()
            .map(|s| (s.hostname.clone(), s))
            .collect();
        let instances = services
            .keys()
            .map(|host| (host.clone(), Arc::new(registry.instances(host, &[], &[]))))
            .collect();
        let workloads = registry
            .workloads()
            .into_iter()
            .map(|w| (w.uid.clone(), w))
            .collect();
        RegistrySnapshot::from_parts(version, services, instances).with_workloads(Arc::new(workloads))
    }

    /// The same state with `workloads` (by uid) as the workloads the
    /// registry lists by themselves.
    pub fn with_workloads(mut self, workloads: Arc<BTreeMap<String, Arc<Workload>>>) -> Self {
        self.workloads = workloads;
        self
    }

    /// The workloads the registry lists by themselves, by uid (those that
    /// back a service are also on its instances,
    /// [`ServiceInstance::workload`]).
    pub fn listed_workloads(&self) -> &Arc<BTreeMap<String, Arc<Workload>>> {
        &self.workloads
    }

    /// Every service's instances, by hostname.
    pub fn all_instances(&self) -> &BTreeMap<String, Arc<Vec<ServiceInstance>>> {
        &self.instances
    }

    /// A snapshot of these services (by hostname) and instances (by the
    /// hostname of their service; instances of a hostname with no service
    /// are never returned). Sharing the `Arc`s with a live cache is what
    /// makes a snapshot cheap: building one costs a pointer per service.
    pub fn from_parts(
        version: u64,
        services: BTreeMap<String, Arc<Service>>,
        mut instances: BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    ) -> Self {
        instances.retain(|host, _| services.contains_key(host));
        RegistrySnapshot {
            version,
            services,
            instances,
            by_address: OnceLock::new(),
            workloads: Arc::default(),
        }
    }

    /// [`RegistrySnapshot::from_parts`] for the state after `previous`
    /// (of the same registry): where `previous` has indexed its instances
    /// by address and only a few hosts' instance lists changed (lists are
    /// compared by pointer), the index is carried over with those hosts
    /// read afresh, instead of built again over the whole mesh.
    pub fn from_parts_after(
        previous: &RegistrySnapshot,
        version: u64,
        services: BTreeMap<String, Arc<Service>>,
        instances: BTreeMap<String, Arc<Vec<ServiceInstance>>>,
    ) -> Self {
        let snapshot = RegistrySnapshot::from_parts(version, services, instances);
        let Some(index) = previous.by_address.get() else {
            return snapshot;
        };
        let limit = MAX_CHANGED_HOSTS.saturating_sub(index.changed.len());
        if let Some(changed) = changed_hosts(&previous.instances, &snapshot.instances, limit) {
            let mut carried = index.clone();
            carried.changed.extend(changed);
            let _ = snapshot.by_address.set(carried);
        }
        snapshot
    }

    /// Several registries' snapshots seen as one, as
    /// [`AggregateDiscovery`](crate::AggregateDiscovery) sees their
    /// registries: a hostname's service from the first part that has it,
    /// instances from every part. Its version is the sum of the parts'
    /// versions, so it grows whenever one of them does.
    pub fn aggregate(parts: &[Arc<RegistrySnapshot>]) -> Self {
        let mut services = BTreeMap::new();
        let mut instances: BTreeMap<String, Arc<Vec<ServiceInstance>>> = BTreeMap::new();
        for part in parts {
            for (host, service) in &part.services {
                services
                    .entry(host.clone())
                    .or_insert_with(|| Arc::clone(service));
            }
            for (host, list) in &part.instances {
                match instances.get_mut(host) {
                    None => {
                        instances.insert(host.clone(), Arc::clone(list));
                    }
                    Some(existing) => Arc::make_mut(existing).extend(list.iter().cloned()),
                }
            }
        }
        let version = parts.iter().map(|p| p.version).fold(0u64, u64::wrapping_add);
        let mut workloads: Option<Arc<BTreeMap<String, Arc<Workload>>>> = None;
        for part in parts.iter().filter(|p| !p.workloads.is_empty()) {
            match workloads.as_mut() {
                None => workloads = Some(Arc::clone(&part.workloads)),
                Some(all) => {
                    let all = Arc::make_mut(all);
                    for (uid, workload) in part.workloads.iter() {
                        all.entry(uid.clone()).or_insert_with(|| Arc::clone(workload));
                    }
                }
            }
        }
        RegistrySnapshot::from_parts(version, services, instances)
            .with_workloads(workloads.unwrap_or_default())
    }

    /// The version this state was taken at.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// This state restricted to the services `in_scope` accepts, sharing
    /// their instance lists (a proxy's scope).
    pub fn scoped(&self, in_scope: impl Fn(&Service) -> bool) -> RegistrySnapshot {
        let services: BTreeMap<String, Arc<Service>> = self
            .services
            .iter()
            .filter(|(_, s)| in_scope(s))
            .map(|(h, s)| (h.clone(), Arc::clone(s)))
            .collect();
        let instances = services
            .keys()
            .filter_map(|h| Some((h.clone(), Arc::clone(self.instances.get(h)?))))
            .collect();
        RegistrySnapshot::from_parts(self.version, services, instances)
            .with_workloads(Arc::clone(&self.workloads))
    }

    /// [`scoped`](Self::scoped) to the services named `hosts`: each is
    /// looked up rather than every service tested (a proxy's scope holds a
    /// few hosts of thousands, and every class of proxies makes one).
    pub fn scoped_to<'a>(&self, hosts: impl IntoIterator<Item = &'a str>) -> RegistrySnapshot {
        let services: BTreeMap<String, Arc<Service>> = hosts
            .into_iter()
            .filter_map(|host| {
                let (h, s) = self.services.get_key_value(host)?;
                Some((h.clone(), Arc::clone(s)))
            })
            .collect();
        let instances = services
            .keys()
            .filter_map(|h| Some((h.clone(), Arc::clone(self.instances.get(h)?))))
            .collect();
        RegistrySnapshot::from_parts(self.version, services, instances)
            .with_workloads(Arc::clone(&self.workloads))
    }

    /// The instance list of `host`, shared: two snapshots hold the same
    /// instances of a host when these are the same list (by pointer).
    pub fn instance_list(&self, host: &str) -> Option<&Arc<Vec<ServiceInstance>>> {
        self.instances.get(host)
    }
}

impl ServiceDiscovery for RegistrySnapshot {
    fn workloads(&self) -> Vec<Arc<Workload>> {
        self.workloads.values().cloned().collect()
    }

    fn services(&self) -> Vec<Arc<Service>> {
        self.services.values().cloned().collect()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.services.get(hostname).cloned()
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
        let index = self.by_address.get_or_init(|| {
            let mut by_address: HashMap<IpAddr, Vec<ServiceInstance>> = HashMap::new();
            for instance in self.instances.values().flat_map(|l| l.iter()) {
                by_address
                    .entry(instance.endpoint.address)
                    .or_default()
                    .push(instance.clone());
            }
            AddressIndex {
                base: Arc::new(by_address),
                changed: BTreeSet::new(),
            }
        });
        // (position in `addresses`, instance), per address in host order.
        let mut found: Vec<(usize, &ServiceInstance)> = Vec::new();
        for (at, address) in addresses.iter().enumerate() {
            for instance in index.base.get(address).into_iter().flatten() {
                if !index.changed.contains(&instance.service.hostname) {
                    found.push((at, instance));
                }
            }
        }
        if !index.changed.is_empty() {
            for host in &index.changed {
                for instance in self.instances.get(host).into_iter().flat_map(|l| l.iter()) {
                    for (at, _) in addresses
                        .iter()
                        .enumerate()
                        .filter(|(_, a)| **a == instance.endpoint.address)
                    {
                        found.push((at, instance));
                    }
                }
            }
            // As a full index orders them: by address asked, then host
            // (stable: each host's instances keep their list order).
            found.sort_by(|a, b| (a.0, &a.1.service.hostname).cmp(&(b.0, &b.1.service.hostname)));
        }
        found.into_iter().map(|(_, instance)| instance.clone()).collect()
    }

    /// A snapshot never changes: the stream ends at once.
    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        futures::stream::empty().boxed()
    }

    /// Itself (a copy of its maps of pointers; the instances are shared).
    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        Arc::new(self.clone())
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
        let instance = |ip: &str, port: &Port, version: &str| {
            ServiceInstance::new(
                Arc::clone(&service),
                NetworkEndpoint::new(ip.parse().unwrap(), port.port, port.clone()),
                Labels::from_pairs([("version", version)]),
            )
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

    #[test]
    fn a_snapshot_scoped_to_hosts_equals_the_snapshot_scoped_by_test() {
        let http = Port::new("http", 80, Protocol::Http);
        let instances: Vec<ServiceInstance> = ["a.ns.svc", "b.ns.svc", "c.other.svc"]
            .iter()
            .enumerate()
            .map(|(i, host)| {
                ServiceInstance::new(
                    Arc::new(Service::new(*host, vec![http.clone()])),
                    NetworkEndpoint::new(format!("10.0.0.{i}").parse().unwrap(), 80, http.clone()),
                    Labels::new(),
                )
            })
            .collect();
        let snapshot = RegistrySnapshot::capture(&Fixed(instances), 4);
        for hosts in [
            vec![],
            vec!["a.ns.svc"],
            vec!["c.other.svc", "a.ns.svc", "absent.ns.svc"],
            vec!["a.ns.svc", "b.ns.svc", "c.other.svc"],
        ] {
            let scoped = snapshot.scoped_to(hosts.iter().copied());
            let by_test = snapshot.scoped(|s| hosts.contains(&s.hostname.as_str()));
            let names = |s: &RegistrySnapshot| -> Vec<String> {
                s.services().iter().map(|s| s.hostname.clone()).collect()
            };
            assert_eq!(names(&scoped), names(&by_test), "{hosts:?}");
            assert_eq!(scoped.version(), by_test.version());
            for host in ["a.ns.svc", "b.ns.svc", "c.other.svc"] {
                assert_eq!(
                    scoped.instances(host, &[], &[]),
                    by_test.instances(host, &[], &[]),
                    "{host} in {hosts:?}"
                );
            }
        }
        assert_eq!(snapshot.scoped_to(["b.ns.svc"]).services().len(), 1);
    }

    #[test]
    fn an_aggregate_answers_like_the_aggregate_registry() {
        let http = Port::new("http", 80, Protocol::Http);
        let one = |host: &str, ip: &str, zone: &str| {
            let service = Arc::new(Service::new(host, vec![http.clone()]));
            let instance = ServiceInstance::new(
                Arc::clone(&service),
                NetworkEndpoint::new(ip.parse().unwrap(), 80, http.clone()),
                Labels::new(),
            )
            .with_availability_zone(zone.to_string());
            Arc::new(RegistrySnapshot::capture(&Fixed(vec![instance]), 3))
        };
        let parts = [
            one("a", "10.0.0.1", "first"),
            one("a", "10.0.0.2", "second"),
            one("b", "10.0.0.3", ""),
        ];
        let all = RegistrySnapshot::aggregate(&parts);
        assert_eq!(all.version(), 9);
        let hosts: Vec<_> = all.services().iter().map(|s| s.hostname.clone()).collect();
        assert_eq!(hosts, ["a", "b"]);
        assert_eq!(all.instances("a", &[], &[]).len(), 2);
        assert_eq!(all.host_instances(&["10.0.0.3".parse().unwrap()]).len(), 1);
        let live = crate::AggregateDiscovery::new(
            parts
                .iter()
                .map(|p| Arc::clone(p) as Arc<dyn ServiceDiscovery>)
                .collect(),
        );
        assert_eq!(
            live.snapshot().instances("a", &[], &[]),
            all.instances("a", &[], &[])
        );
        // The parts are untouched.
        assert_eq!(parts[0].instances("a", &[], &[]).len(), 1);
    }

    #[test]
    fn a_snapshot_after_another_carries_its_address_index_and_answers_the_same() {
        let http = Port::new("http", 80, Protocol::Http);
        let service = |host: &str| Arc::new(Service::new(host, vec![http.clone()]));
        let instance = |service: &Arc<Service>, ip: &str, version: &str| {
            ServiceInstance::new(
                Arc::clone(service),
                NetworkEndpoint::new(ip.parse().unwrap(), 80, http.clone()),
                Labels::from_pairs([("version", version)]),
            )
        };
        let hosts: Vec<Arc<Service>> = ["a", "b", "c", "d"].iter().map(|h| service(h)).collect();
        // Every host has an instance on 10.0.0.1 and one of its own.
        let lists: BTreeMap<String, Arc<Vec<ServiceInstance>>> = hosts
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let list = vec![
                    instance(s, "10.0.0.1", "v1"),
                    instance(s, &format!("10.0.1.{i}"), "v1"),
                ];
                (s.hostname.clone(), Arc::new(list))
            })
            .collect();
        let services: BTreeMap<String, Arc<Service>> = hosts
            .iter()
            .map(|s| (s.hostname.clone(), Arc::clone(s)))
            .collect();
        let first = RegistrySnapshot::from_parts(1, services.clone(), lists.clone());
        let asked: Vec<IpAddr> = ["10.0.1.2", "10.0.0.1", "10.0.1.9"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let _ = first.host_instances(&asked);

        // b moves to v2 and onto 10.0.1.9, d goes, e arrives on 10.0.0.1.
        let mut next = lists.clone();
        next.insert(
            "b".into(),
            Arc::new(vec![
                instance(&hosts[1], "10.0.0.1", "v2"),
                instance(&hosts[1], "10.0.1.9", "v2"),
            ]),
        );
        next.remove("d");
        let e = service("e");
        next.insert("e".into(), Arc::new(vec![instance(&e, "10.0.0.1", "v1")]));
        let mut next_services = services.clone();
        next_services.remove("d");
        next_services.insert("e".into(), e);
        let after = RegistrySnapshot::from_parts_after(&first, 2, next_services.clone(), next.clone());
        let carried = after.by_address.get().expect("carried over");
        assert!(Arc::ptr_eq(&carried.base, &first.by_address.get().unwrap().base));
        assert_eq!(
            carried.changed,
            ["b", "d", "e"].iter().map(|h| h.to_string()).collect()
        );
        let fresh = RegistrySnapshot::from_parts(2, next_services, next);
        for addresses in [asked.clone(), vec![asked[1]], vec![asked[2], asked[1], asked[1]]] {
            assert_eq!(
                after.host_instances(&addresses),
                fresh.host_instances(&addresses),
                "{addresses:?}"
            );
        }
        let on_shared = after.host_instances(&[asked[1]]);
        let hosts_on_shared: Vec<&str> = on_shared.iter().map(|i| i.service.hostname.as_str()).collect();
        assert_eq!(hosts_on_shared, ["a", "b", "c", "e"]);
        assert_eq!(on_shared[1].labels, Labels::from_pairs([("version", "v2")]));

        // Past the limit of changed hosts, a snapshot indexes afresh.
        let copies: BTreeMap<String, Arc<Vec<ServiceInstance>>> = lists
            .iter()
            .map(|(h, l)| (h.clone(), Arc::new((**l).clone())))
            .collect();
        assert_eq!(changed_hosts(&lists, &copies, 4).map(|c| c.len()), Some(4));
        assert_eq!(changed_hosts(&lists, &copies, 3), None);
        assert_eq!(changed_hosts(&lists, &lists, 0), Some(BTreeSet::new()));
    }
}
