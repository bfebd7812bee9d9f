//! Workloads: what runs, independently of the services it backs. A
//! Kubernetes Pod, a WorkloadEntry, a ServiceEntry's endpoint, an entry of
//! the services file: each has an identity (its uid, namespace and service
//! account), addresses, and the node it runs on. Istio's ambient mode
//! serves these to ztunnel as `istio.workload.Workload`; a sidecar sees
//! only the service instances they back.
//!
//! A registry that knows its workloads attaches each to the instances it
//! backs ([`ServiceInstance::workload`](crate::ServiceInstance::workload))
//! and lists the ones that back no service in its snapshot
//! ([`RegistrySnapshot::workloads`](crate::RegistrySnapshot::workloads)).
//! Instances without one stand for a workload named by their address.
//!
//! ```
//! use pilot_model::{Labels, Workload, WorkloadKind};
//! let pod = Workload::new(WorkloadKind::Pod, "default", "reviews-v2-7f9d")
//!     .with_addresses(["10.1.1.3".parse().unwrap()])
//!     .with_node("node-1")
//!     .with_labels(Labels::from_pairs([("istio.io/dataplane-mode", "ambient")]));
//! assert_eq!(pod.uid, "Kubernetes//Pod/default/reviews-v2-7f9d");
//! assert_eq!(pod.service_account, "default");
//! assert!(pod.in_ambient(&Labels::new()));
//! ```

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::Labels;

/// The label (on a workload or its namespace) that enrolls it in ambient
/// mode with the value [`AMBIENT`]; `none` on the workload opts it out of
/// its namespace's.
pub const DATAPLANE_MODE_LABEL: &str = "istio.io/dataplane-mode";
/// [`DATAPLANE_MODE_LABEL`]'s value for ambient.
pub const AMBIENT: &str = "ambient";
/// The cluster id workloads carry when their registry names none.
pub const DEFAULT_CLUSTER_ID: &str = "Kubernetes";

/// What kind of thing a workload is: it names its uid's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[non_exhaustive]
pub enum WorkloadKind {
    /// A Kubernetes Pod.
    Pod,
    /// An Istio WorkloadEntry.
    WorkloadEntry,
    /// An endpoint written inline in a ServiceEntry.
    ServiceEntry,
    /// An entry of a registry of pilot's own (the services file, etcd's
    /// leases, an embedder's registry).
    Registered,
}

impl WorkloadKind {
    /// The kind's part of a uid, as Istio writes it
    /// (`<cluster>//Pod/<ns>/<name>`,
    /// `<cluster>/networking.istio.io/WorkloadEntry/<ns>/<name>`).
    pub fn uid_part(self) -> &'static str {
        match self {
            WorkloadKind::Pod => "/Pod",
            WorkloadKind::WorkloadEntry => "networking.istio.io/WorkloadEntry",
            WorkloadKind::ServiceEntry => "networking.istio.io/ServiceEntry",
            WorkloadKind::Registered => "pilot.io/Registered",
        }
    }
}

/// One running workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Workload {
    /// Unique across the mesh: `<cluster>/<group>/<Kind>/<ns>/<name>`
    /// ([`Workload::new`] builds it; a registry may set another).
    pub uid: String,
    /// Its name (the Pod's, the WorkloadEntry's).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// What it is.
    pub kind: WorkloadKind,
    /// Its addresses (a Pod's IPs); empty for one reached by hostname only.
    pub addresses: Vec<IpAddr>,
    /// The service account it runs as (`default` unless told).
    pub service_account: String,
    /// Its labels.
    pub labels: Labels,
    /// The node it runs on, when known: the ztunnel of that node serves it.
    pub node: Option<String>,
    /// Its network, when the mesh has several.
    pub network: Option<String>,
    /// The cluster it runs in.
    pub cluster_id: String,
    /// Its locality (`region/zone/subzone`, any prefix of it), when known.
    pub locality: Option<String>,
    /// False when it is not ready (a Pod whose readiness fails).
    pub healthy: bool,
    /// The labels of its namespace, when the registry knows them: a
    /// namespace's [`DATAPLANE_MODE_LABEL`] enrolls its workloads.
    pub namespace_labels: Labels,
}

impl Workload {
    /// A healthy workload `name` of `namespace`, with the uid Istio gives
    /// it in the default cluster, the `default` service account and nothing
    /// else known.
    pub fn new(kind: WorkloadKind, namespace: impl Into<String>, name: impl Into<String>) -> Self {
        let (namespace, name) = (namespace.into(), name.into());
        Workload {
            uid: uid(DEFAULT_CLUSTER_ID, kind, &namespace, &name),
            name,
            namespace,
            kind,
            addresses: Vec::new(),
            service_account: "default".into(),
            labels: Labels::new(),
            node: None,
            network: None,
            cluster_id: DEFAULT_CLUSTER_ID.into(),
            locality: None,
            healthy: true,
            namespace_labels: Labels::new(),
        }
    }

    /// The same workload with these addresses.
    pub fn with_addresses(mut self, addresses: impl IntoIterator<Item = IpAddr>) -> Self {
        self.addresses = addresses.into_iter().collect();
        self
    }

    /// The same workload running as `account`.
    pub fn with_service_account(mut self, account: impl Into<String>) -> Self {
        self.service_account = account.into();
        self
    }

    /// The same workload with `labels`.
    pub fn with_labels(mut self, labels: Labels) -> Self {
        self.labels = labels;
        self
    }

    /// The same workload on node `node`.
    pub fn with_node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// The same workload in network `network`.
    pub fn with_network(mut self, network: impl Into<Option<String>>) -> Self {
        self.network = network.into();
        self
    }

    /// The same workload in cluster `cluster` (its uid follows).
    pub fn with_cluster_id(mut self, cluster: impl Into<String>) -> Self {
        self.cluster_id = cluster.into();
        self.uid = uid(&self.cluster_id, self.kind, &self.namespace, &self.name);
        self
    }

    /// The same workload with uid `uid` (a registry's own naming).
    pub fn with_uid(mut self, uid: impl Into<String>) -> Self {
        self.uid = uid.into();
        self
    }

    /// The same workload in locality `locality`.
    pub fn with_locality(mut self, locality: impl Into<Option<String>>) -> Self {
        self.locality = locality.into();
        self
    }

    /// The same workload, healthy or not.
    pub fn with_healthy(mut self, healthy: bool) -> Self {
        self.healthy = healthy;
        self
    }

    /// The same workload in a namespace labelled `labels`.
    pub fn with_namespace_labels(mut self, labels: Labels) -> Self {
        self.namespace_labels = labels;
        self
    }

    /// True when it is enrolled in ambient mode: its own
    /// [`DATAPLANE_MODE_LABEL`] says `ambient`, or its namespace's does
    /// (`extra` or the labels it carries) and its own does not say
    /// otherwise. `extra`: namespace labels known elsewhere (empty for
    /// none).
    pub fn in_ambient(&self, extra: &Labels) -> bool {
        match self.labels.0.get(DATAPLANE_MODE_LABEL) {
            Some(mode) => mode == AMBIENT,
            None => [&self.namespace_labels, extra]
                .iter()
                .any(|labels| labels.0.get(DATAPLANE_MODE_LABEL).is_some_and(|m| m == AMBIENT)),
        }
    }

    /// Its SPIFFE identity in `trust_domain`:
    /// `spiffe://<trust_domain>/ns/<ns>/sa/<sa>`.
    pub fn identity(&self, trust_domain: &str) -> String {
        format!(
            "spiffe://{trust_domain}/ns/{}/sa/{}",
            self.namespace, self.service_account
        )
    }
}

/// Istio's uid of a workload: `<cluster>/<group>/<Kind>/<ns>/<name>` (a
/// Pod's group is empty: `Kubernetes//Pod/default/reviews-v2`).
pub fn uid(cluster: &str, kind: WorkloadKind, namespace: &str, name: &str) -> String {
    format!("{cluster}/{}/{namespace}/{name}", kind.uid_part())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_name_cluster_kind_namespace_and_name() {
        let entry = Workload::new(WorkloadKind::WorkloadEntry, "vm", "db-1");
        assert_eq!(entry.uid, "Kubernetes/networking.istio.io/WorkloadEntry/vm/db-1");
        let pod = Workload::new(WorkloadKind::Pod, "a", "p").with_cluster_id("east");
        assert_eq!(pod.uid, "east//Pod/a/p");
        assert_eq!(
            pod.identity("cluster.local"),
            "spiffe://cluster.local/ns/a/sa/default"
        );
    }

    #[test]
    fn ambient_is_the_workload_label_or_else_its_namespace() {
        let ambient = Labels::from_pairs([(DATAPLANE_MODE_LABEL, AMBIENT)]);
        let none = Labels::from_pairs([(DATAPLANE_MODE_LABEL, "none")]);
        let pod = Workload::new(WorkloadKind::Pod, "a", "p");
        assert!(!pod.in_ambient(&Labels::new()));
        assert!(pod.in_ambient(&ambient));
        assert!(
            pod.clone()
                .with_namespace_labels(ambient.clone())
                .in_ambient(&Labels::new())
        );
        // The workload's own label wins over its namespace's.
        assert!(!pod.clone().with_labels(none).in_ambient(&ambient));
        assert!(pod.with_labels(ambient).in_ambient(&Labels::new()));
    }
}
