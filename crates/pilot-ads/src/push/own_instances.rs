//! Which proxies' own instances a batch of endpoint changes moved: the
//! addresses at which some touched host's instances were added, removed
//! or changed (labels, ports).
//!
//! A proxy's own instances (those at its address) are the part of its
//! class that comes from the registry's instances: its workload labels
//! (which Sidecar selects it, and with it its scope), the source-matched
//! services it runs, and its inbound listeners. Everything else of a
//! class that comes from the registry comes from its services (scopes,
//! visibility, short names), so while the services are the same
//! (`scopes::same_services`) a proxy whose address is not moved keeps its
//! class, and the streams of a class the push keeps stay parked; those
//! at a moved address are woken and work their class out again.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use pilot_model::{RegistrySnapshot, ServiceInstance};

/// The addresses whose own instances differ between `before` and `after`,
/// looking at the hosts `touched` (every host whose instance list
/// differs is one, `scopes::touched_hosts`). An address moves when the
/// instances of some host at it, in list order, are not the same: the
/// instances at an address are its hosts' in host order, each host's in
/// list order, so an address no host moved has the same own instances.
pub(crate) fn moved_addresses(
    before: &RegistrySnapshot,
    after: &RegistrySnapshot,
    touched: &BTreeSet<String>,
) -> BTreeSet<IpAddr> {
    let mut moved = BTreeSet::new();
    if std::ptr::eq(before, after) {
        return moved;
    }
    for host in touched {
        let (a, b) = (before.instance_list(host), after.instance_list(host));
        if let (Some(a), Some(b)) = (a, b)
            && (Arc::ptr_eq(a, b) || a == b)
        {
            continue;
        }
        let mut by_address: BTreeMap<IpAddr, (Vec<&ServiceInstance>, Vec<&ServiceInstance>)> =
            BTreeMap::new();
        for instance in a.into_iter().flat_map(|l| l.iter()) {
            by_address
                .entry(instance.endpoint.address)
                .or_default()
                .0
                .push(instance);
        }
        for instance in b.into_iter().flat_map(|l| l.iter()) {
            by_address
                .entry(instance.endpoint.address)
                .or_default()
                .1
                .push(instance);
        }
        moved.extend(
            by_address
                .into_iter()
                .filter(|(_, (a, b))| a != b)
                .map(|(address, _)| address),
        );
    }
    moved
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery};
    use pilot_store_memory::MemoryServiceRegistry;

    #[test]
    fn only_the_addresses_whose_instances_changed_move() {
        let registry = MemoryServiceRegistry::new();
        let host = "s.a.svc.cluster.local";
        registry.add_service(Service::new(host, vec![Port::new("http", 80, Protocol::Http)]));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for address in ["10.0.0.1", "10.0.0.2", "10.0.0.3"] {
            registry.add_endpoints(host, ip(address), Labels::new()).unwrap();
        }
        let before = registry.snapshot();
        let touched = BTreeSet::from([host.to_string()]);
        assert!(moved_addresses(&before, &before, &touched).is_empty());
        // Added, removed, relabelled; the third is as it was.
        registry
            .add_endpoints(host, ip("10.0.0.4"), Labels::new())
            .unwrap();
        registry.remove_instances(host, ip("10.0.0.2"), None);
        let labels = Labels::from_pairs([("version", "v2")]);
        registry.add_endpoints(host, ip("10.0.0.1"), labels).unwrap();
        let after = registry.snapshot();
        assert_eq!(
            moved_addresses(&before, &after, &touched),
            BTreeSet::from([ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.4")])
        );
        // A host not touched is not looked at.
        assert!(moved_addresses(&before, &after, &BTreeSet::new()).is_empty());
    }
}
