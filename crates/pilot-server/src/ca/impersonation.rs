//! Istio's shared mode: a node proxy (ztunnel) asks for the certificates
//! of the workloads of its node, naming each in the request's metadata
//! (`ImpersonatedIdentity: spiffe://<trust-domain>/ns/NS/sa/SA`).
//!
//! As istiod's node authorizer, the certificate service signs for that
//! identity only when the caller's credential is a node proxy's
//! ([`pilot_ads::NodeScope::Node`], `auth/node_proxy.rs`) and the
//! registries know a workload of that identity on the caller's node:
//! a workload they list by itself, or the workload of a service instance
//! ([`pilot_model::ServiceInstance::workload`]). Any other request naming
//! an identity is refused `PERMISSION_DENIED` with the reason (not a node
//! proxy; the identity runs on other nodes only; no workload has it),
//! `INVALID_ARGUMENT` when the value is not a SPIFFE identity, and
//! `UNAVAILABLE` while the registries have not synced (a refusal then
//! would be the server's ignorance, not the caller's fault).

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};

use pilot_ca::SpiffeId;
use pilot_model::{RegistrySnapshot, ServiceDiscovery, Workload};

use super::proto::Struct;

/// The metadata key naming the identity asked for.
pub(crate) const IMPERSONATED_IDENTITY: &str = "ImpersonatedIdentity";

/// The server's registries, set once they are assembled (after the
/// certificate service is built).
pub(crate) type Registries = Arc<OnceLock<Arc<dyn ServiceDiscovery>>>;

/// The identity a request's metadata asks for, if it names one.
pub(crate) fn requested(metadata: Option<&Struct>) -> Result<Option<&str>, tonic::Status> {
    let Some(value) = metadata.and_then(|m| m.fields.get(IMPERSONATED_IDENTITY)) else {
        return Ok(None);
    };
    match value.string_value.as_deref() {
        Some(identity) => Ok(Some(identity)),
        None => Err(tonic::Status::invalid_argument(format!(
            "metadata.{IMPERSONATED_IDENTITY} must be a string (spiffe://<trust-domain>/ns/NS/sa/SA)"
        ))),
    }
}

/// The identity `node`'s proxy may have signed for `asked`, or why not.
/// `denied` makes a refusal naming the caller.
pub(crate) fn authorize(
    registries: &Registries,
    trust_domain: &str,
    node: &str,
    asked: &str,
    denied: impl Fn(String) -> tonic::Status,
) -> Result<SpiffeId, tonic::Status> {
    let identity = SpiffeId::parse(asked).map_err(|e| {
        tonic::Status::invalid_argument(format!("metadata.{IMPERSONATED_IDENTITY} {asked:?}: {e}"))
    })?;
    if identity.trust_domain() != trust_domain {
        return Err(denied(format!(
            "{IMPERSONATED_IDENTITY} {identity} is of trust domain {:?}, not this mesh's ({trust_domain:?})",
            identity.trust_domain()
        )));
    }
    let Some(registry) = registries.get().filter(|r| r.has_synced()) else {
        return Err(tonic::Status::unavailable(format!(
            "the service registries have not synced yet: the workloads of node {node:?} are not known; try again"
        )));
    };
    let wanted = identity.uri();
    match placement(&registry.snapshot(), trust_domain, &wanted, node) {
        Placement::OnNode => Ok(identity),
        Placement::Elsewhere(nodes) => Err(denied(format!(
            "no workload of {wanted} runs on node {node:?} (the node proxy's); it runs on {}",
            describe_nodes(&nodes)
        ))),
        Placement::Unknown => Err(denied(format!(
            "no workload of identity {wanted} is known to the registries (asked by the node proxy of {node:?})"
        ))),
    }
}

/// Where the workloads of an identity run, as seen from one node.
#[derive(Debug, PartialEq, Eq)]
enum Placement {
    /// One runs on the node.
    OnNode,
    /// Some run, on these other nodes only (`None`: no node known).
    Elsewhere(BTreeSet<Option<String>>),
    /// None has the identity.
    Unknown,
}

/// Where the workloads of `identity` run, relative to `node`.
fn placement(snapshot: &RegistrySnapshot, trust_domain: &str, identity: &str, node: &str) -> Placement {
    let listed = snapshot.listed_workloads().values().map(Arc::as_ref);
    let backing = snapshot
        .all_instances()
        .values()
        .flat_map(|list| list.iter())
        .filter_map(|instance| instance.workload.as_deref());
    let mut elsewhere = BTreeSet::new();
    for workload in listed.chain(backing) {
        if !has_identity(workload, trust_domain, identity) {
            continue;
        }
        if workload.node.as_deref() == Some(node) {
            return Placement::OnNode;
        }
        elsewhere.insert(workload.node.clone());
    }
    if elsewhere.is_empty() {
        Placement::Unknown
    } else {
        Placement::Elsewhere(elsewhere)
    }
}

fn has_identity(workload: &Workload, trust_domain: &str, identity: &str) -> bool {
    workload.identity(trust_domain) == identity
}

/// `node "a", node "b"` (at most a few), or `no known node`.
fn describe_nodes(nodes: &BTreeSet<Option<String>>) -> String {
    const SHOWN: usize = 3;
    let mut names: Vec<String> = nodes
        .iter()
        .take(SHOWN)
        .map(|n| match n {
            Some(node) => format!("node {node:?}"),
            None => "no known node".to_string(),
        })
        .collect();
    if nodes.len() > SHOWN {
        names.push(format!("{} more", nodes.len() - SHOWN));
    }
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pilot_model::{Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, WorkloadKind};

    use super::*;

    fn snapshot() -> RegistrySnapshot {
        let port = Port::new("http", 9080, Protocol::Http);
        let service = Arc::new(Service::new(
            "reviews.default.svc.cluster.local",
            vec![port.clone()],
        ));
        let pod = Arc::new(
            Workload::new(WorkloadKind::Pod, "default", "reviews-1")
                .with_service_account("reviews")
                .with_node("node-1"),
        );
        let instance = ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new("10.0.0.1".parse().unwrap(), 9080, port),
            Labels::new(),
        )
        .with_workload(pod);
        let services = BTreeMap::from([(service.hostname.clone(), Arc::clone(&service))]);
        let instances = BTreeMap::from([(service.hostname.clone(), Arc::new(vec![instance]))]);
        let lonely = Workload::new(WorkloadKind::Pod, "batch", "job-1")
            .with_service_account("jobs")
            .with_node("node-2");
        RegistrySnapshot::from_parts(1, services, instances)
            .with_workloads(Arc::new(BTreeMap::from([(lonely.uid.clone(), Arc::new(lonely))])))
    }

    #[test]
    fn an_identity_is_placed_by_instances_and_listed_workloads() {
        let snapshot = snapshot();
        let reviews = "spiffe://cluster.local/ns/default/sa/reviews";
        let jobs = "spiffe://cluster.local/ns/batch/sa/jobs";
        assert_eq!(
            placement(&snapshot, "cluster.local", reviews, "node-1"),
            Placement::OnNode
        );
        assert_eq!(
            placement(&snapshot, "cluster.local", jobs, "node-2"),
            Placement::OnNode
        );
        assert_eq!(
            placement(&snapshot, "cluster.local", jobs, "node-1"),
            Placement::Elsewhere(BTreeSet::from([Some("node-2".to_string())]))
        );
        assert_eq!(
            placement(
                &snapshot,
                "cluster.local",
                "spiffe://cluster.local/ns/default/sa/x",
                "node-1"
            ),
            Placement::Unknown
        );
    }

    #[test]
    fn the_metadata_names_a_string_or_is_refused() {
        let metadata = |value: super::super::proto::Value| Struct {
            fields: BTreeMap::from([(IMPERSONATED_IDENTITY.to_string(), value)]),
        };
        let named = metadata(super::super::proto::Value {
            string_value: Some("spiffe://cluster.local/ns/a/sa/b".into()),
        });
        assert_eq!(
            requested(Some(&named)).unwrap(),
            Some("spiffe://cluster.local/ns/a/sa/b")
        );
        assert_eq!(requested(None).unwrap(), None);
        let number = metadata(super::super::proto::Value { string_value: None });
        assert_eq!(
            requested(Some(&number)).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
}
