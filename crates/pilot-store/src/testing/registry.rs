//! The conformance suite every service registry runs: sync, minimal diffs
//! (no spurious delete and add), resync after a gap, deletes made in a gap;
//! throughout, the registry's snapshot agrees with its reads and takes a
//! new version with each change. These are the rules written on
//! [`ServiceDiscovery`]; a failed check names its rule, with what it
//! expected and what the registry answered. A wrapper that forwards
//! `ServiceDiscovery` by hand and forgets `snapshot` or `wait_synced`
//! fails here with a message saying so (implementing
//! [`RegistryAdapter`](pilot_model::RegistryAdapter) forwards them all).
//!
//! A registry provides a [`RegistryFactory`]: an async function returning
//! a fresh [`RegistrySource`], which writes services to the registry's
//! source (etcd keys, Kubernetes objects, a file...) and can cut the
//! registry off its source. [`registry_conformance_suite!`](crate::registry_conformance_suite)
//! expands to one test per property:
//!
//! ```
//! use std::sync::Arc;
//! use pilot_store::testing::{RegistrySource, SourceService, desired_state};
//! use pilot_store::ServiceCache;
//!
//! /// The in-memory registry is its own source.
//! struct Memory(ServiceCache);
//!
//! #[pilot_store::testing::async_trait]
//! impl RegistrySource for Memory {
//!     async fn write(&mut self, services: &[SourceService]) {
//!         self.0.apply(desired_state(services));
//!     }
//!     async fn registry(&mut self) -> Arc<dyn pilot_model::ServiceDiscovery> {
//!         Arc::new(self.0.clone())
//!     }
//!     async fn disconnect(&mut self) -> bool {
//!         false // nothing to cut: the changes simply arrive
//!     }
//!     async fn reconnect(&mut self) {}
//! }
//!
//! pilot_store::registry_conformance_suite!(|| async {
//!     Box::new(Memory(ServiceCache::new())) as Box<dyn RegistrySource>
//! });
//! # fn main() {}
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use pilot_model::{Event, Labels, Port, Protocol, Service, ServiceDiscovery, ServiceEvent, ServiceInstance};

use super::check::{equal, holds};
use super::{BoxFuture, BoxStream};
use crate::DesiredState;

/// A service as the suite writes it to a source: a hostname of the form
/// `<name>.<namespace>.svc.cluster.local`, its ports, and its instances.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceService {
    /// The hostname.
    pub hostname: String,
    /// Its ports. Names start with their protocol (`http`, `tcp-admin`), as
    /// registries that derive the protocol from the name read them.
    pub ports: Vec<Port>,
    /// Its instances.
    pub instances: Vec<SourceInstance>,
}

/// An instance: one address serving every port of its service, each on the
/// service port's own number. Addresses are unique across the suite's
/// services.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceInstance {
    /// Its IP.
    pub address: IpAddr,
    /// Its labels (`version`).
    pub labels: Labels,
}

impl SourceService {
    /// The service's name and namespace (the hostname's first two labels).
    pub fn name_and_namespace(&self) -> (&str, &str) {
        let mut parts = self.hostname.split('.');
        (parts.next().unwrap_or_default(), parts.next().unwrap_or_default())
    }

    /// The service as the registry should hold it.
    pub fn service(&self) -> Service {
        Service::new(self.hostname.clone(), self.ports.clone())
    }
}

/// What a registry should hold for `services`, for registries whose source
/// is a [`DesiredState`] itself (the in-memory registry).
pub fn desired_state(services: &[SourceService]) -> DesiredState {
    let mut desired = DesiredState::new();
    for source in services {
        let service = desired.insert(source.service());
        for instance in &source.instances {
            for port in &source.ports {
                service
                    .add_instance(instance.address, port.port, &port.name, instance.labels.clone())
                    .unwrap_or_else(|e| panic!("a port of the service: {e}"));
            }
        }
    }
    desired
}

/// A registry under test and a hold on its source. An async trait:
/// implement it with `#[pilot_store::testing::async_trait]` (re-exported,
/// so the crate under test needs no `async-trait` of its own).
#[async_trait::async_trait]
pub trait RegistrySource: Send {
    /// Makes the source describe exactly `services`: creates, changes and
    /// removes what differs from the last call (the first call starts from
    /// an empty source). Returns once the source holds it.
    async fn write(&mut self, services: &[SourceService]);

    /// The registry following the source; the first call starts it (the
    /// suite writes before or after that first call).
    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery>;

    /// Cuts the registry off its source (a partition, closed and refused
    /// watches, a stopped follower), so that the changes written next reach
    /// it only through the relist that follows [`reconnect`](Self::reconnect).
    /// False for a registry that cannot miss a change (the in-memory one):
    /// the suite then checks that the same changes arrive as a minimal diff.
    async fn disconnect(&mut self) -> bool;

    /// Ends the cut [`disconnect`](Self::disconnect) made.
    async fn reconnect(&mut self);
}

/// Makes a fresh registry and source for each test.
pub trait RegistryFactory: Send + Sync {
    /// A new source sharing nothing with earlier ones.
    fn make(&self) -> BoxFuture<'static, Box<dyn RegistrySource>>;
}

impl<F, Fut> RegistryFactory for F
where
    F: Fn() -> Fut + Send + Sync,
    Fut: Future<Output = Box<dyn RegistrySource>> + Send + 'static,
{
    fn make(&self) -> BoxFuture<'static, Box<dyn RegistrySource>> {
        Box::pin(self())
    }
}

/// How long the suite waits for a registry to reach its source's state
/// before failing (a bound against hanging, not a performance figure: a
/// Kubernetes watcher's backoff after a refused watch takes seconds).
pub const CONVERGE_TIMEOUT: Duration = Duration::from_secs(90);

const REVIEWS: &str = "reviews.default.svc.cluster.local";
const RATINGS: &str = "ratings.default.svc.cluster.local";

fn instance(address: &str, version: &str) -> SourceInstance {
    SourceInstance {
        address: address.parse().unwrap_or_else(|e| panic!("{address}: {e}")),
        labels: Labels::from_pairs([("app", "test"), ("version", version)]),
    }
}

/// The starting state: `reviews` (two ports, v1 and v2) and `ratings` (one
/// port, two v1 instances).
pub fn initial_services() -> Vec<SourceService> {
    vec![
        SourceService {
            hostname: REVIEWS.into(),
            ports: vec![
                Port::new("http", 9080, Protocol::Http),
                Port::new("tcp-admin", 9090, Protocol::Tcp),
            ],
            instances: vec![instance("10.0.0.1", "v1"), instance("10.0.0.2", "v2")],
        },
        SourceService {
            hostname: RATINGS.into(),
            ports: vec![Port::new("http", 9080, Protocol::Http)],
            instances: vec![instance("10.0.1.1", "v1"), instance("10.0.1.2", "v1")],
        },
    ]
}

/// From [`initial_services`]: reviews' v2 relabelled v3 and a new v1 at
/// 10.0.0.3; ratings' 10.0.1.2 gone. Everything else unchanged.
pub fn changed_services() -> Vec<SourceService> {
    let mut services = initial_services();
    services[0].instances[1] = instance("10.0.0.2", "v3");
    services[0].instances.push(instance("10.0.0.3", "v1"));
    services[1].instances.pop();
    services
}

/// A fresh, empty source's registry syncs; one started on a filled source
/// holds the source's state as soon as it says it synced.
pub async fn registry_sync<F: RegistryFactory + ?Sized>(factory: &F) {
    let mut empty = factory.make().await;
    let registry = empty.registry().await;
    synced(&*registry).await;
    holds(
        registry.has_synced(),
        "has_synced() must be true once wait_synced() resolved (a wrapper that does not forward \
         `wait_synced` gets the trait's default, ready at once: implement pilot_model::RegistryAdapter \
         instead of forwarding by hand); has_synced()",
        false,
    );
    let hosts = |services: Vec<Arc<Service>>| -> Vec<String> {
        services.iter().map(|s| s.hostname.clone()).collect()
    };
    equal(
        hosts(registry.services()),
        Vec::new(),
        "services() of a registry on an empty source must be empty",
    );
    equal(
        hosts(registry.snapshot().services()),
        Vec::new(),
        "snapshot().services() of a registry on an empty source must be empty",
    );
    assert_reads_agree(&*registry).await;

    let mut source = factory.make().await;
    let services = initial_services();
    source.write(&services).await;
    let registry = source.registry().await;
    synced(&*registry).await;
    holds(
        registry.has_synced(),
        "has_synced() must be true once wait_synced() resolved (a wrapper that does not forward \
         `wait_synced` gets the trait's default, ready at once: implement pilot_model::RegistryAdapter \
         instead of forwarding by hand); has_synced()",
        false,
    );
    equal(
        view(&*registry),
        expected(&services),
        "a registry must hold its source's state when it says it synced (wait_synced resolved); the \
         snapshot's view",
    );
    assert_reads_agree(&*registry).await;
}

/// A change to some entries emits events for those entries only: a changed
/// instance is one `Updated` (never a delete and an add), unchanged ones get
/// nothing.
pub async fn registry_diff<F: RegistryFactory + ?Sized>(factory: &F) {
    let mut source = factory.make().await;
    let (registry, mut events) = started(&mut *source, &initial_services()).await;
    let before = registry.snapshot().version();
    let target = changed_services();
    source.write(&target).await;
    let seen = converge(&*registry, &mut events, &target).await;
    assert_minimal(&initial_services(), &target, &seen);
    let after = registry.snapshot().version();
    holds(
        after != before,
        "snapshot() must take a new version with each change; the registry changed but its snapshot \
         kept its version (a wrapper that does not forward `snapshot` gets the trait's default copy, \
         always version 0: implement pilot_model::RegistryAdapter instead of forwarding by hand)",
        (before, after),
    );
}

/// Changes made while the registry was cut off its source arrive after it
/// reconnects, as the same minimal diff.
pub async fn registry_resync<F: RegistryFactory + ?Sized>(factory: &F) {
    let mut source = factory.make().await;
    let (registry, mut events) = started(&mut *source, &initial_services()).await;
    source.disconnect().await;
    let target = changed_services();
    source.write(&target).await;
    source.reconnect().await;
    let seen = converge(&*registry, &mut events, &target).await;
    assert_minimal(&initial_services(), &target, &seen);
}

/// A service and an instance deleted while the registry was cut off are
/// deleted from it, with events, when it reconnects; nothing else moves.
pub async fn registry_delete_in_gap<F: RegistryFactory + ?Sized>(factory: &F) {
    let mut source = factory.make().await;
    let (registry, mut events) = started(&mut *source, &initial_services()).await;
    source.disconnect().await;
    let mut target = initial_services();
    target.pop();
    target[0].instances.remove(0);
    source.write(&target).await;
    source.reconnect().await;
    let seen = converge(&*registry, &mut events, &target).await;
    assert_minimal(&initial_services(), &target, &seen);
    let service_deleted = seen
        .iter()
        .any(|e| matches!(e, ServiceEvent::Service(Event::Deleted(s)) if s.hostname == RATINGS));
    holds(
        service_deleted,
        "a service removed while the registry was cut off must get a Deleted event when it reconnects; \
         the events",
        &seen,
    );
}

/// Expands to one `#[test]` per registry conformance property, each on a
/// fresh source from `$factory` (an async `Fn() -> Box<dyn RegistrySource>`).
#[macro_export]
macro_rules! registry_conformance_suite {
    ($factory:expr) => {
        $crate::registry_conformance_suite!(@each $factory;
            registry_sync, registry_diff, registry_resync, registry_delete_in_gap);
    };
    (@each $factory:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                $crate::testing::block_on($crate::testing::$name(&$factory));
            }
        )*
    };
}

/// What the suite compares: per hostname, the ports and the instances as
/// (address, port, port name, labels).
type View = BTreeMap<String, (Vec<Port>, BTreeSet<(IpAddr, u16, String, Labels)>)>;

fn view(registry: &dyn ServiceDiscovery) -> View {
    let snapshot = registry.snapshot();
    view_of(snapshot.services(), |host| snapshot.instances(host, &[], &[]))
}

/// The same view through the registry's reads (`services`, `instances`)
/// rather than its snapshot.
fn reads_view(registry: &dyn ServiceDiscovery) -> View {
    view_of(registry.services(), |host| registry.instances(host, &[], &[]))
}

/// Every service's ports and instances, read by `instances`.
fn view_of(services: Vec<Arc<Service>>, instances: impl Fn(&str) -> Vec<ServiceInstance>) -> View {
    services
        .into_iter()
        .map(|service| {
            let instances = instances(&service.hostname)
                .into_iter()
                .map(|i| {
                    (
                        i.endpoint.address,
                        i.endpoint.port,
                        i.endpoint.service_port.name.clone(),
                        i.labels.clone(),
                    )
                })
                .collect();
            (service.hostname.clone(), (service.ports.clone(), instances))
        })
        .collect()
}

/// A registry at rest: its snapshot and its reads show the same state, and
/// `get_service` and `host_instances` agree with them. (A registry still
/// applying a late change is read again: only a snapshot that stays apart
/// from the reads fails.)
async fn assert_reads_agree(registry: &dyn ServiceDiscovery) {
    let mut tries = 0;
    let snapshot = loop {
        let before = view(registry);
        let reads = reads_view(registry);
        let after = view(registry);
        tries += 1;
        if before != after && tries < 50 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        if reads != after {
            panic!(
                "snapshot() must agree with the reads (services, instances) at rest: expected the reads' \
                 view {reads:#?}, got the snapshot's {after:#?} (a wrapper that does not forward \
                 `snapshot` serves the trait's default copy of its own reads: implement \
                 pilot_model::RegistryAdapter instead of forwarding by hand)"
            );
        }
        break after;
    };
    for (hostname, (ports, instances)) in &snapshot {
        let service = registry.get_service(hostname);
        equal(
            service.map(|s| s.ports.clone()).as_ref(),
            Some(ports),
            &format!("get_service({hostname}) must agree with services() and the snapshot (ports)"),
        );
        for (address, port, port_name, _) in instances {
            let on_host = registry.host_instances(&[*address]);
            holds(
                on_host.iter().any(|i| {
                    i.service.hostname == *hostname
                        && i.endpoint.port == *port
                        && i.endpoint.service_port.name == *port_name
                }),
                &format!(
                    "host_instances({address}) must hold {hostname}'s instance on port {port} ({port_name}), \
                     as instances() does; host_instances answered"
                ),
                &on_host,
            );
        }
    }
}

fn expected(services: &[SourceService]) -> View {
    services
        .iter()
        .map(|s| {
            let instances = s
                .instances
                .iter()
                .flat_map(|i| {
                    s.ports
                        .iter()
                        .map(|p| (i.address, p.port, p.name.clone(), i.labels.clone()))
                })
                .collect();
            (s.hostname.clone(), (s.ports.clone(), instances))
        })
        .collect()
}

async fn synced(registry: &dyn ServiceDiscovery) {
    if tokio::time::timeout(CONVERGE_TIMEOUT, registry.wait_synced())
        .await
        .is_err()
    {
        panic!(
            "wait_synced() must resolve once the registry holds its source's state: not within \
             {CONVERGE_TIMEOUT:?}"
        );
    }
}

/// A registry started on `services`, synced, holding them, and a
/// subscription taken after that.
async fn started(
    source: &mut dyn RegistrySource,
    services: &[SourceService],
) -> (Arc<dyn ServiceDiscovery>, BoxStream<'static, ServiceEvent>) {
    let registry = source.registry().await;
    synced(&*registry).await;
    source.write(services).await;
    let mut events = registry.subscribe();
    converge(&*registry, &mut events, services).await;
    let events = registry.subscribe();
    (registry, events)
}

/// Collects events until the registry holds `services`, then whatever the
/// change that got it there queued with it.
async fn converge(
    registry: &dyn ServiceDiscovery,
    events: &mut BoxStream<'static, ServiceEvent>,
    services: &[SourceService],
) -> Vec<ServiceEvent> {
    let want = expected(services);
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + CONVERGE_TIMEOUT;
    while view(registry) != want {
        match tokio::time::timeout_at(deadline, events.next()).await {
            Ok(Some(event)) => seen.push(event),
            Ok(None) => panic!("subscribe()'s stream must stay open while the registry lives; it ended"),
            Err(_) => panic!(
                "a registry must reach its source's state: not within {CONVERGE_TIMEOUT:?}:\nexpected \
                 {want:#?}\ngot (the snapshot's view) {:#?}",
                view(registry)
            ),
        }
    }
    // A registry queues a change's events before its readers see it.
    while let Some(Some(event)) = events.next().now_or_never() {
        seen.push(event);
    }
    assert_reads_agree(registry).await;
    seen
}

/// The events `seen` on the way from `from` to `to` are a minimal diff: no
/// event for what did not change, only updates for what changed, an add
/// (then perhaps updates) for what appeared, one delete (perhaps after
/// updates) for what went; never a delete and an add of the same instance.
fn assert_minimal(from: &[SourceService], to: &[SourceService], seen: &[ServiceEvent]) {
    let key = |address: IpAddr, port: &str| (address, port.to_string());
    let (before, after) = (expected(from), expected(to));
    let instances = |view: &View| -> BTreeMap<(IpAddr, String), Labels> {
        view.values()
            .flat_map(|(_, set)| set.iter().map(|(a, _, p, l)| (key(*a, p), l.clone())))
            .collect()
    };
    let (old, new) = (instances(&before), instances(&after));
    let mut by_instance: BTreeMap<(IpAddr, String), Vec<&'static str>> = BTreeMap::new();
    for event in seen {
        match event {
            ServiceEvent::Instance(e) => {
                let i = e.object();
                let kind = match e {
                    Event::Added(_) => "added",
                    Event::Updated { .. } => "updated",
                    Event::Deleted(_) => "deleted",
                };
                by_instance
                    .entry(key(i.endpoint.address, &i.endpoint.service_port.name))
                    .or_default()
                    .push(kind);
            }
            ServiceEvent::Service(e) => {
                let host = &e.object().hostname;
                let ok = match e {
                    Event::Added(_) => !before.contains_key(host) && after.contains_key(host),
                    Event::Deleted(_) => before.contains_key(host) && !after.contains_key(host),
                    Event::Updated { .. } => before.get(host).map(|s| &s.0) != after.get(host).map(|s| &s.0),
                };
                assert!(
                    ok,
                    "a registry must emit a service event only for a service that appeared, went or \
                     changed its ports: got {event:?} for {host}\nall events: {seen:#?}"
                );
            }
            ServiceEvent::Resync => {
                panic!("a subscriber reading at once must not fall behind: got Resync\nall events: {seen:#?}")
            }
            // A workload listed by itself (a Pod between its Service's
            // endpoints) is the registry's own business: its tests check
            // those; this suite compares services and instances.
            ServiceEvent::Workload(_) => {}
            other => panic!("an event this suite does not know: {other:?}\nall events: {seen:#?}"),
        }
    }
    for instance in old.keys().chain(new.keys()).collect::<BTreeSet<_>>() {
        let kinds = by_instance.remove(instance).unwrap_or_default();
        let right = match (old.get(instance), new.get(instance)) {
            (Some(a), Some(b)) if a == b => kinds.is_empty(),
            (Some(_), Some(_)) => !kinds.is_empty() && kinds.iter().all(|k| *k == "updated"),
            (None, Some(_)) => kinds.first() == Some(&"added") && kinds[1..].iter().all(|k| *k == "updated"),
            // Sources that describe an instance in several objects (a Pod
            // and an EndpointSlice) may show it updated on its way out.
            (Some(_), None) => {
                kinds.last() == Some(&"deleted") && kinds[..kinds.len() - 1].iter().all(|k| *k == "updated")
            }
            (None, None) => unreachable!("a key of one of the maps"),
        };
        assert!(
            right,
            "a change must be a minimal diff: an unchanged instance gets no event, a changed one \
             updates only (never a delete and an add), a new one an add, a removed one a delete; \
             instance {instance:?} (labels {:?} -> {:?}) got {kinds:?}\nall events: {seen:#?}",
            old.get(instance),
            new.get(instance)
        );
    }
    assert!(
        by_instance.is_empty(),
        "a registry must emit events only for instances its source held: got events for {by_instance:?}"
    );
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::sync::Arc;

    use futures::stream::BoxStream;
    use pilot_model::{Labels, Service, ServiceDiscovery, ServiceEvent, ServiceInstance};

    use super::{RegistrySource, SourceService, desired_state, registry_diff, registry_sync};
    use crate::{FollowedRegistry, RegistryWriter, ServiceCache};

    /// A registry that forgot `snapshot`: its reads are a cache's, its
    /// snapshot the trait's default copy (always version 0).
    #[derive(Clone)]
    struct ForgotSnapshot(ServiceCache);

    impl ServiceDiscovery for ForgotSnapshot {
        fn services(&self) -> Vec<Arc<Service>> {
            self.0.services()
        }
        fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
            self.0.get_service(hostname)
        }
        fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
            self.0.instances(hostname, port_names, labels)
        }
        fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
            self.0.host_instances(addresses)
        }
        fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
            self.0.subscribe()
        }
    }

    #[async_trait::async_trait]
    impl RegistrySource for ForgotSnapshot {
        async fn write(&mut self, services: &[SourceService]) {
            self.0.apply(desired_state(services));
        }
        async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
            Arc::new(self.clone())
        }
        async fn disconnect(&mut self) -> bool {
            false
        }
        async fn reconnect(&mut self) {}
    }

    #[test]
    #[should_panic(expected = "a wrapper that does not forward `snapshot`")]
    fn the_suite_catches_a_registry_whose_snapshot_is_the_default() {
        crate::testing::block_on(registry_diff(&|| async {
            Box::new(ForgotSnapshot(ServiceCache::new())) as Box<dyn RegistrySource>
        }));
    }

    /// A registry that forwards `has_synced` but forgot `wait_synced`: the
    /// trait's default is ready at once, before the registry synced.
    #[derive(Clone)]
    struct ForgotWaitSynced(FollowedRegistry, RegistryWriter);

    impl ServiceDiscovery for ForgotWaitSynced {
        fn services(&self) -> Vec<Arc<Service>> {
            self.0.services()
        }
        fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
            self.0.get_service(hostname)
        }
        fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
            self.0.instances(hostname, port_names, labels)
        }
        fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
            self.0.host_instances(addresses)
        }
        fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
            self.0.subscribe()
        }
        fn has_synced(&self) -> bool {
            self.0.has_synced()
        }
        fn snapshot(&self) -> Arc<pilot_model::RegistrySnapshot> {
            self.0.snapshot()
        }
    }

    /// Its source: written only once the registry was asked for, so the
    /// registry has not synced when the suite first waits for it.
    #[async_trait::async_trait]
    impl RegistrySource for ForgotWaitSynced {
        async fn write(&mut self, services: &[SourceService]) {
            self.1.apply(desired_state(services));
        }
        async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
            Arc::new(self.clone())
        }
        async fn disconnect(&mut self) -> bool {
            false
        }
        async fn reconnect(&mut self) {}
    }

    #[test]
    #[should_panic(expected = "a wrapper that does not forward `wait_synced`")]
    fn the_suite_catches_a_registry_whose_wait_synced_is_the_default() {
        crate::testing::block_on(registry_sync(&|| async {
            let (registry, writer) = FollowedRegistry::new();
            Box::new(ForgotWaitSynced(registry, writer)) as Box<dyn RegistrySource>
        }));
    }
}
