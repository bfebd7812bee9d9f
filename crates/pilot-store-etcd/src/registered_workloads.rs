//! The workloads of the etcd registry: instances whose registration names
//! a workload ([`WorkloadRegistration`]: name, namespace, node) are that
//! workload's, one [`Workload`] of kind `Registered` (uid
//! `Kubernetes/pilot.io/Registered/<ns>/<name>`) shared by them all, with
//! their addresses, service account (`default` when none names one),
//! labels and zone. Instances that name none stay without a workload
//! (ambient mode names them by their address).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use pilot_model::{Workload, WorkloadKind};
use serde::{Deserialize, Serialize};

use crate::InstanceRegistration;

/// The workload an instance is part of, as its registrar names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadRegistration {
    /// The workload's name, unique in its namespace.
    pub name: String,
    /// Its namespace (its identity's: `spiffe://<td>/ns/<ns>/sa/<sa>`).
    pub namespace: String,
    /// The node it runs on, whose ztunnel serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// (namespace, name).
pub(crate) type WorkloadKey = (String, String);

/// The workloads of some registrations, kept as they change.
#[derive(Default)]
pub(crate) struct Workloads {
    by_key: BTreeMap<WorkloadKey, Arc<Workload>>,
    /// Workloads whose registrations changed since the last refresh.
    dirty: BTreeSet<WorkloadKey>,
}

impl Workloads {
    /// Notes that a registration of `registration`'s workload changed.
    pub(crate) fn touch(&mut self, registration: &InstanceRegistration) {
        if let Some(workload) = &registration.workload {
            self.dirty
                .insert((workload.namespace.clone(), workload.name.clone()));
        }
    }

    /// Rebuilds the workloads touched since the last refresh from
    /// `instances` (by etcd key); returns the hostnames whose instances
    /// carry one of them.
    pub(crate) fn refresh(&mut self, instances: &BTreeMap<String, InstanceRegistration>) -> BTreeSet<String> {
        if self.dirty.is_empty() {
            return BTreeSet::new();
        }
        let dirty = std::mem::take(&mut self.dirty);
        let mut registrations: BTreeMap<&WorkloadKey, Vec<&InstanceRegistration>> = BTreeMap::new();
        let mut hosts = BTreeSet::new();
        for instance in instances.values() {
            let Some(workload) = &instance.workload else {
                continue;
            };
            let key = (workload.namespace.clone(), workload.name.clone());
            if let Some(key) = dirty.get(&key) {
                registrations.entry(key).or_default().push(instance);
                hosts.insert(instance.hostname.clone());
            }
        }
        for key in &dirty {
            match registrations.get(key) {
                Some(of) => {
                    let built = build(key, of);
                    if self.by_key.get(key).is_none_or(|held| **held != built) {
                        self.by_key.insert(key.clone(), Arc::new(built));
                    }
                }
                None => {
                    self.by_key.remove(key);
                }
            }
        }
        hosts
    }

    /// The workload of `registration`, when it names one.
    pub(crate) fn of(&self, registration: &InstanceRegistration) -> Option<Arc<Workload>> {
        let workload = registration.workload.as_ref()?;
        self.by_key
            .get(&(workload.namespace.clone(), workload.name.clone()))
            .cloned()
    }
}

/// The workload `key` from its registrations (in etcd key order: the
/// first that tells the account, labels, node or zone gives it).
fn build((namespace, name): &WorkloadKey, registrations: &[&InstanceRegistration]) -> Workload {
    let addresses: BTreeSet<IpAddr> = registrations.iter().map(|r| r.address).collect();
    let first =
        |field: fn(&InstanceRegistration) -> Option<String>| registrations.iter().find_map(|r| field(r));
    let mut workload = Workload::new(WorkloadKind::Registered, namespace.clone(), name.clone())
        .with_addresses(addresses)
        .with_locality(first(|r| r.availability_zone.clone()))
        .with_labels(
            registrations
                .iter()
                .map(|r| r.labels.clone())
                .find(|l| !l.0.is_empty())
                .unwrap_or_default(),
        );
    if let Some(account) = first(|r| r.service_account.clone()) {
        workload = workload.with_service_account(account);
    }
    if let Some(node) = first(|r| r.workload.as_ref()?.node.clone()) {
        workload = workload.with_node(node);
    }
    workload
}
