//! The registry's services indexed for scoping ([`ServiceIndex`]).

use std::collections::HashMap;
use std::sync::Arc;

use pilot_model::{Service, ServiceDiscovery};
use pilot_routing::{EgressHost, NamespaceSelector};

use crate::names::host_namespace;

/// Where a hostname's namespace label is in it (byte offsets).
type NamespaceAt = (usize, usize);

/// The registry's services as scoping looks them up: by hostname and by
/// the namespace of their hostname ([`host_namespace`]). Built once for a
/// set of services and shared by every scope computed over them
/// ([`scope_in`](super::scope_in)), so that a Sidecar importing a few hosts looks those up
/// instead of testing every service of the mesh against each of its
/// entries.
#[derive(Debug, Default)]
pub struct ServiceIndex {
    /// In the registry's order, with where the namespace is in the
    /// hostname.
    services: Vec<(Arc<Service>, Option<NamespaceAt>)>,
    pub(super) by_name: HashMap<String, Vec<usize>>,
    by_namespace: HashMap<String, Vec<usize>>,
}

impl ServiceIndex {
    /// The index of `registry`'s services.
    pub fn new(registry: &dyn ServiceDiscovery) -> Self {
        let mut index = ServiceIndex::default();
        for (i, service) in registry.services().into_iter().enumerate() {
            let owner = host_namespace(&service.hostname).map(|ns| {
                let start = ns.as_ptr() as usize - service.hostname.as_ptr() as usize;
                (start, start + ns.len())
            });
            index.by_name.entry(service.hostname.clone()).or_default().push(i);
            if let Some((start, end)) = owner {
                index
                    .by_namespace
                    .entry(service.hostname[start..end].to_string())
                    .or_default()
                    .push(i);
            }
            index.services.push((service, owner));
        }
        index
    }

    /// How many services it holds.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// True when it holds no service.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    pub(super) fn service(&self, i: usize) -> (&Service, Option<&str>) {
        let (service, owner) = &self.services[i];
        (service, owner.map(|(start, end)| &service.hostname[start..end]))
    }

    /// Adds to `out` the services `entry` of a Sidecar of
    /// `sidecar_namespace` may import; false when that takes a look at
    /// every service (a host pattern in any namespace).
    pub(super) fn candidates(
        &self,
        entry: &EgressHost,
        sidecar_namespace: &str,
        out: &mut Vec<usize>,
    ) -> bool {
        if entry.exclude {
            // Takes away; never adds a candidate.
            return true;
        }
        let namespace = match &entry.namespace {
            NamespaceSelector::Own => Some(sidecar_namespace),
            NamespaceSelector::Named(ns) => Some(ns.as_str()),
            NamespaceSelector::Any => None,
        };
        if !entry.host.starts_with('*') {
            out.extend(self.by_name.get(&entry.host).into_iter().flatten());
            return true;
        }
        match namespace {
            Some(ns) => {
                out.extend(self.by_namespace.get(ns).into_iter().flatten());
                true
            }
            None => false,
        }
    }
}
