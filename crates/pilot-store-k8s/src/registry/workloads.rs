//! Pods as workloads ([`pilot_model::Workload`]): what each Pod runs as,
//! where and with which addresses, for ambient mode's ztunnel. A pure
//! function of the Pods, Nodes and Namespaces a registry has seen; the
//! registry attaches each to the instances of its endpoints and lists
//! the ones that back none.
//!
//! - A Pod in phase `Succeeded` or `Failed` has stopped: it is no
//!   workload (as istiod skips terminal pods). A Pending Pod without an IP
//!   yet is one, with no address.
//! - Its addresses are `status.podIPs` (`status.podIP` when the list is
//!   absent). A host-network Pod's addresses are its node's, shared with
//!   the node and the node's other host-network Pods: it is listed like
//!   any Pod, but traffic to that address is not the Pod's alone, and a
//!   node proxy cannot capture it.
//! - It is healthy when its `Ready` condition is `True` and it is not
//!   being deleted.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use pilot_model::{Labels, Workload, WorkloadKind};

use super::model::{ObjectKey, Objects, node_zone, pod_service_account};

/// The Pod label that names its network (Istio's).
pub(crate) const NETWORK_LABEL: &str = "topology.istio.io/network";

impl Objects {
    /// Every Pod that has not stopped, as a workload of cluster
    /// `cluster_id`, by (namespace, name): one `Arc` per Pod, for all its
    /// instances to share.
    pub(crate) fn pod_workloads(&self, cluster_id: &str) -> BTreeMap<ObjectKey, Arc<Workload>> {
        self.pods
            .iter()
            .filter_map(|(key, pod)| Some((key.clone(), Arc::new(self.pod_workload(key, pod, cluster_id)?))))
            .collect()
    }

    fn pod_workload(&self, (namespace, name): &ObjectKey, pod: &Pod, cluster_id: &str) -> Option<Workload> {
        let status = pod.status.as_ref();
        if status
            .and_then(|s| s.phase.as_deref())
            .is_some_and(|phase| phase == "Succeeded" || phase == "Failed")
        {
            return None;
        }
        let labels = Labels(pod.metadata.labels.clone().unwrap_or_default());
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty());
        let locality = node
            .as_ref()
            .and_then(|n| self.nodes.get(&(String::new(), n.clone())))
            .and_then(node_zone);
        let ready = status
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let namespace_labels = self
            .namespaces
            .get(&(String::new(), namespace.clone()))
            .and_then(|ns| ns.metadata.labels.clone())
            .map(Labels)
            .unwrap_or_default();
        let mut workload = Workload::new(WorkloadKind::Pod, namespace.clone(), name.clone())
            .with_cluster_id(cluster_id)
            .with_addresses(pod_addresses(pod))
            .with_service_account(pod_service_account(pod))
            .with_network(labels.get(NETWORK_LABEL).map(str::to_string))
            .with_locality(locality)
            .with_healthy(ready && pod.metadata.deletion_timestamp.is_none())
            .with_namespace_labels(namespace_labels)
            .with_labels(labels);
        if let Some(node) = node {
            workload = workload.with_node(node);
        }
        Some(workload)
    }
}

/// A Pod's IPs: `status.podIPs`, else `status.podIP`; none before it has
/// one. An address that does not parse is left out.
fn pod_addresses(pod: &Pod) -> Vec<IpAddr> {
    let Some(status) = pod.status.as_ref() else {
        return Vec::new();
    };
    let listed: Vec<&str> = status.pod_ips.iter().flatten().map(|ip| ip.ip.as_str()).collect();
    let texts = if listed.is_empty() {
        status.pod_ip.as_deref().into_iter().collect()
    } else {
        listed
    };
    texts.into_iter().filter_map(|ip| ip.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects(pods: serde_json::Value) -> Objects {
        let mut objects = Objects::default();
        for pod in pods.as_array().unwrap() {
            let pod: Pod = serde_json::from_value(pod.clone()).unwrap();
            let key = (
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            );
            objects.pods.insert(key, pod);
        }
        objects
    }

    #[test]
    fn stopped_pods_are_no_workloads_pending_ones_are_without_address() {
        let objects = objects(serde_json::json!([
            {"metadata": {"name": "done", "namespace": "a"}, "status": {"phase": "Succeeded", "podIP": "10.0.0.1"}},
            {"metadata": {"name": "crashed", "namespace": "a"}, "status": {"phase": "Failed"}},
            {"metadata": {"name": "pending", "namespace": "a"}, "status": {"phase": "Pending"}},
            {"metadata": {"name": "dual", "namespace": "a"}, "status": {"phase": "Running",
                "podIP": "10.0.0.2", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}],
                "conditions": [{"type": "Ready", "status": "True"}]}},
            {"metadata": {"name": "old", "namespace": "a"}, "status": {"podIP": "10.0.0.3",
                "conditions": [{"type": "Ready", "status": "False"}]}},
        ]));
        let workloads = objects.pod_workloads("east");
        let names: Vec<&str> = workloads.keys().map(|(_, n)| n.as_str()).collect();
        assert_eq!(names, ["dual", "old", "pending"]);
        let get = |name: &str| &workloads[&("a".to_string(), name.to_string())];
        assert!(get("pending").addresses.is_empty());
        assert!(!get("pending").healthy);
        assert_eq!(get("dual").uid, "east//Pod/a/dual");
        assert_eq!(
            get("dual").addresses,
            ["10.0.0.2".parse::<IpAddr>().unwrap(), "fd00::2".parse().unwrap()]
        );
        assert!(get("dual").healthy);
        assert_eq!(get("old").addresses, ["10.0.0.3".parse::<IpAddr>().unwrap()]);
        assert!(!get("old").healthy, "Ready is False");
    }
}
