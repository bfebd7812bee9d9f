//! WorkloadEntries and ServiceEntry endpoints as workloads
//! ([`pilot_model::Workload`]), named as istiod names them for ztunnel:
//!
//! - a WorkloadEntry is one of kind `WorkloadEntry`, uid
//!   `Kubernetes/networking.istio.io/WorkloadEntry/<ns>/<name>`, with its
//!   address (when an IP), service account (`default` when it names none),
//!   labels (`spec.labels` with the object's own labels over them, as
//!   istiod merges them), network and locality;
//! - an endpoint written inline in a ServiceEntry is one of kind
//!   `ServiceEntry`, named after the entry, uid
//!   `Kubernetes/networking.istio.io/ServiceEntry/<ns>/<entry>/<address>`,
//!   with the entry's labels (istiod enrolls and selects it by them), the
//!   endpoint's service account, network and locality.
//!
//! An address that is a hostname gives a workload with no address (one
//! reached by hostname); a `unix://` endpoint is no workload. Both are
//! healthy: nothing reports their health.

use std::net::IpAddr;
use std::sync::Arc;

use pilot_api::networking::{ServiceEntry, WorkloadEntry};
use pilot_model::{Config, DEFAULT_CLUSTER_ID, Labels, Workload, WorkloadKind};

/// The workload a WorkloadEntry is.
pub(crate) fn workload_entry(entry: &Config<WorkloadEntry>) -> Arc<Workload> {
    let mut labels = entry.spec.labels.clone();
    labels.extend(entry.meta.labels.clone());
    let workload = Workload::new(
        WorkloadKind::WorkloadEntry,
        entry.meta.namespace.clone(),
        entry.meta.name.clone(),
    );
    Arc::new(with_endpoint(workload, &entry.spec).with_labels(Labels(labels)))
}

/// The workload an endpoint written inline in `entry` is; `None` for a
/// `unix://` one.
pub(crate) fn inline_endpoint(
    entry: &Config<ServiceEntry>,
    endpoint: &WorkloadEntry,
) -> Option<Arc<Workload>> {
    if endpoint.address.starts_with("unix://") {
        return None;
    }
    let (namespace, name) = (&entry.meta.namespace, &entry.meta.name);
    let workload = Workload::new(WorkloadKind::ServiceEntry, namespace.clone(), name.clone())
        .with_uid(format!(
            "{DEFAULT_CLUSTER_ID}/{}/{namespace}/{name}/{}",
            WorkloadKind::ServiceEntry.uid_part(),
            endpoint.address
        ))
        .with_labels(Labels(entry.meta.labels.clone()));
    Some(Arc::new(with_endpoint(workload, endpoint)))
}

/// `workload` with what an endpoint tells: its address, service account,
/// network and locality.
fn with_endpoint(workload: Workload, endpoint: &WorkloadEntry) -> Workload {
    let non_empty = |text: &str| (!text.is_empty()).then(|| text.to_string());
    let mut workload = workload
        .with_addresses(endpoint.address.parse::<IpAddr>().ok())
        .with_network(non_empty(&endpoint.network))
        .with_locality(non_empty(&endpoint.locality));
    if let Some(account) = non_empty(&endpoint.service_account) {
        workload = workload.with_service_account(account);
    }
    workload
}
