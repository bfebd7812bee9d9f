//! Services and instances from Kubernetes objects: a pure function of the
//! Services, EndpointSlices, Pods, Nodes and Namespaces a registry has
//! seen. Instances carry their Pod's workload (`workloads.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service as KubeService, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use pilot_model::{Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, Workload};
use pilot_store::{DesiredService, DesiredState};

use crate::convert::creation_time;

/// The label that ties an EndpointSlice to its Service.
pub(crate) const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The node labels that tell its locality.
pub(crate) const REGION_LABEL: &str = "topology.kubernetes.io/region";
/// See [`REGION_LABEL`].
pub(crate) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// (namespace, name).
pub(crate) type ObjectKey = (String, String);

/// The Kubernetes objects a registry follows.
#[derive(Default)]
pub(crate) struct Objects {
    pub services: BTreeMap<ObjectKey, KubeService>,
    pub slices: BTreeMap<ObjectKey, EndpointSlice>,
    pub pods: BTreeMap<ObjectKey, Pod>,
    /// Nodes by name (cluster-scoped: empty namespace).
    pub nodes: BTreeMap<ObjectKey, Node>,
    /// Namespaces by name (cluster-scoped: empty namespace), for their
    /// labels.
    pub namespaces: BTreeMap<ObjectKey, Namespace>,
}

/// The hostname of a Service: `<name>.<namespace>.svc.<domain>`.
///
/// ```
/// assert_eq!(pilot_store_k8s::hostname("reviews", "prod", "corp.internal"), "reviews.prod.svc.corp.internal");
/// ```
pub fn hostname(name: &str, namespace: &str, domain: &str) -> String {
    format!("{name}.{namespace}.svc.{domain}")
}

/// The protocol of a Service port: UDP if the port is UDP; else its
/// `appProtocol` when pilot knows it; else its name's prefix (`http-`,
/// `http2-`, `grpc-`, `https-`, `tcp-`, `mongo-`, `redis-`, as Istio reads
/// it); TCP otherwise. Of Kubernetes' standard application protocols,
/// `kubernetes.io/h2c` is HTTP/2 without TLS, `kubernetes.io/ws` HTTP (a
/// websocket starts as an HTTP/1.1 upgrade, which pilot's HTTP routes
/// allow) and `kubernetes.io/wss` HTTPS.
///
/// ```
/// use pilot_model::Protocol;
/// use pilot_store_k8s::port_protocol;
/// assert_eq!(port_protocol(Some("TCP"), Some("kubernetes.io/h2c"), "web"), Protocol::Http2);
/// assert_eq!(port_protocol(Some("TCP"), Some("kubernetes.io/ws"), "web"), Protocol::Http);
/// assert_eq!(port_protocol(None, None, "grpc-api"), Protocol::Grpc);
/// assert_eq!(port_protocol(None, None, "metrics"), Protocol::Tcp);
/// ```
pub fn port_protocol(protocol: Option<&str>, app_protocol: Option<&str>, name: &str) -> Protocol {
    if protocol.is_some_and(|p| p.eq_ignore_ascii_case("UDP")) {
        return Protocol::Udp;
    }
    let from_app = app_protocol.and_then(|app| match app.to_ascii_lowercase().as_str() {
        "http" | "kubernetes.io/ws" => Some(Protocol::Http),
        "http2" | "kubernetes.io/h2c" => Some(Protocol::Http2),
        "grpc" => Some(Protocol::Grpc),
        "https" | "kubernetes.io/wss" => Some(Protocol::Https),
        "tcp" => Some(Protocol::Tcp),
        "mongo" => Some(Protocol::Mongo),
        "redis" => Some(Protocol::Redis),
        _ => None,
    });
    from_app.unwrap_or_else(|| Protocol::from_port_name(name))
}

impl Objects {
    /// The services and instances these objects describe, each instance
    /// of a Pod with its workload (of cluster `cluster_id`), and the Pods
    /// that back no instance as listed workloads.
    pub(crate) fn desired(&self, domain: &str, cluster_id: &str) -> DesiredState {
        let mut desired = DesiredState::new();
        let mut workloads = self.pod_workloads(cluster_id);
        let mut attached = BTreeSet::new();
        // Each Service's EndpointSlices, found once for all Services.
        let mut slices: BTreeMap<(&str, &str), Vec<&EndpointSlice>> = BTreeMap::new();
        for ((namespace, _), slice) in &self.slices {
            if let Some(service) = slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
            {
                slices.entry((namespace, service)).or_default().push(slice);
            }
        }
        for ((namespace, name), service) in &self.services {
            let host = hostname(name, namespace, domain);
            let spec = service.spec.clone().unwrap_or_default();
            let ports: Vec<Port> = spec.ports.iter().flatten().map(port).collect();
            let mut model = Service::new(host.clone(), ports);
            // Of two services that would take one listener, the older has it.
            model.created = creation_time(&service.metadata);
            if spec.type_.as_deref() == Some("ExternalName") {
                model.external_name = spec.external_name.clone();
            } else {
                model.address = spec.cluster_ip.as_deref().and_then(|ip| ip.parse().ok());
            }
            // Istio's `networking.istio.io/exportTo`: namespaces, comma
            // separated.
            if let Some(export_to) = service
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("networking.istio.io/exportTo"))
            {
                model.export_to = export_to
                    .split(',')
                    .map(str::trim)
                    .filter(|e| !e.is_empty())
                    .map(str::to_string)
                    .collect();
            }
            let own = slices.get(&(namespace.as_str(), name.as_str()));
            let endpoints = self.endpoints(namespace, own.map(Vec::as_slice).unwrap_or_default(), &workloads);
            model.service_accounts = endpoints
                .iter()
                .filter_map(|e| e.service_account.clone())
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            let model = Arc::new(model);
            let mut instances = Vec::new();
            if !model.is_external() {
                for endpoint in &endpoints {
                    for service_port in &model.ports {
                        let Some(target) = endpoint.ports.get(&service_port.name) else {
                            continue;
                        };
                        let mut instance = ServiceInstance::new(
                            Arc::clone(&model),
                            NetworkEndpoint::new(endpoint.address, *target, service_port.clone()),
                            endpoint.labels.clone(),
                        )
                        .with_availability_zone(endpoint.zone.clone())
                        .with_service_account(endpoint.service_account.clone());
                        if let Some((key, workload)) = &endpoint.workload {
                            attached.insert(key.clone());
                            instance = instance.with_workload(Arc::clone(workload));
                        }
                        instances.push(instance);
                    }
                }
            }
            // The registry orders them and keeps one per endpoint.
            desired.services.insert(
                host,
                DesiredService {
                    service: model,
                    instances,
                },
            );
        }
        workloads.retain(|key, _| !attached.contains(key));
        desired.workloads = workloads.into_values().map(|w| (w.uid.clone(), w)).collect();
        desired
    }

    /// The ready endpoints of a Service, from its EndpointSlices, with what
    /// their Pods and Nodes tell.
    fn endpoints(
        &self,
        namespace: &str,
        slices: &[&EndpointSlice],
        workloads: &BTreeMap<ObjectKey, Arc<Workload>>,
    ) -> Vec<Endpoint> {
        let mut endpoints = Vec::new();
        for slice in slices {
            if slice.address_type == "FQDN" {
                continue;
            }
            let ports: BTreeMap<String, u16> = slice
                .ports
                .iter()
                .flatten()
                .filter_map(|p| Some((p.name.clone().unwrap_or_default(), u16::try_from(p.port?).ok()?)))
                .collect();
            for endpoint in &slice.endpoints {
                if endpoint.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                    continue;
                }
                let pod_key: Option<ObjectKey> = endpoint
                    .target_ref
                    .as_ref()
                    .filter(|r| r.kind.as_deref() == Some("Pod"))
                    .and_then(|r| {
                        let ns = r.namespace.clone().unwrap_or_else(|| namespace.to_string());
                        Some((ns, r.name.clone()?))
                    });
                let pod = pod_key.as_ref().and_then(|key| self.pods.get(key));
                let workload = pod_key.and_then(|key| {
                    let workload = Arc::clone(workloads.get(&key)?);
                    Some((key, workload))
                });
                let node_name = endpoint
                    .node_name
                    .clone()
                    .or_else(|| pod.and_then(|p| p.spec.as_ref()?.node_name.clone()));
                let zone = node_name
                    .and_then(|n| self.nodes.get(&(String::new(), n)))
                    .and_then(node_zone)
                    .or_else(|| endpoint.zone.clone());
                let labels = pod
                    .and_then(|p| p.metadata.labels.clone())
                    .map(Labels)
                    .unwrap_or_default();
                let service_account = pod.map(pod_service_account);
                for address in &endpoint.addresses {
                    let Ok(address) = address.parse::<IpAddr>() else {
                        continue;
                    };
                    endpoints.push(Endpoint {
                        address,
                        ports: ports.clone(),
                        labels: labels.clone(),
                        zone: zone.clone(),
                        service_account: service_account.clone(),
                        workload: workload.clone(),
                    });
                }
            }
        }
        endpoints
    }
}

/// One ready address of a Service with what its Pod and Node tell.
struct Endpoint {
    address: IpAddr,
    /// Target port numbers by port name.
    ports: BTreeMap<String, u16>,
    labels: Labels,
    zone: Option<String>,
    service_account: Option<String>,
    /// Its Pod's workload (with the Pod's key), when the Pod is known.
    workload: Option<(ObjectKey, Arc<Workload>)>,
}

fn port(port: &ServicePort) -> Port {
    let name = port.name.clone().unwrap_or_default();
    let protocol = port_protocol(port.protocol.as_deref(), port.app_protocol.as_deref(), &name);
    Port::new(name, u16::try_from(port.port).unwrap_or_default(), protocol)
}

/// The service account a Pod runs as: `spec.serviceAccountName` (or the
/// deprecated `spec.serviceAccount`), else `default`, the one the API
/// server's admission gives a Pod that names none. Auto mutual TLS checks
/// the server's identity, `spiffe://<trust-domain>/ns/<ns>/sa/<account>`,
/// against the accounts of a service's Pods.
pub(crate) fn pod_service_account(pod: &Pod) -> String {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.service_account_name.clone())
        .or_else(|| spec.and_then(|s| s.service_account.clone()))
        .filter(|account| !account.is_empty())
        .unwrap_or_else(|| DEFAULT_SERVICE_ACCOUNT.to_string())
}

/// The account of a Pod that names none.
const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// `region/zone` from the node's topology labels (or just the zone).
pub(crate) fn node_zone(node: &Node) -> Option<String> {
    let labels = node.metadata.labels.as_ref()?;
    let zone = labels.get(ZONE_LABEL)?;
    Some(match labels.get(REGION_LABEL) {
        Some(region) => format!("{region}/{zone}"),
        None => zone.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Service's age is its `creationTimestamp`, so the older of two
    /// services that would share a listener has it (as for ServiceEntries).
    #[test]
    fn services_carry_their_creation_time() {
        let service = |name: &str, created: Option<&str>| {
            let mut metadata = serde_json::json!({"name": name, "namespace": "default"});
            if let Some(created) = created {
                metadata["creationTimestamp"] = created.into();
            }
            let object = serde_json::json!({
                "metadata": metadata,
                "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "tcp", "port": 5432}]},
            });
            let service: KubeService = serde_json::from_value(object).unwrap();
            (("default".to_string(), name.to_string()), service)
        };
        let objects = Objects {
            services: [
                service("old", Some("2020-01-02T03:04:05Z")),
                service("new", Some("2024-06-07T08:09:10Z")),
                service("unknown", None),
            ]
            .into_iter()
            .collect(),
            ..Objects::default()
        };
        let desired = objects.desired("cluster.local", pilot_model::DEFAULT_CLUSTER_ID);
        let created = |name: &str| {
            desired.services[&hostname(name, "default", "cluster.local")]
                .service
                .created
        };
        let seconds = |s: u64| Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(created("old"), seconds(1_577_934_245));
        assert_eq!(created("new"), seconds(1_717_747_750));
        assert_eq!(created("unknown"), None);
    }

    #[test]
    fn protocols_from_app_protocol_then_the_name_as_istio_reads_them() {
        for (name, protocol) in [
            ("http", Protocol::Http),
            ("http-web", Protocol::Http),
            ("http2-api", Protocol::Http2),
            ("grpc-api", Protocol::Grpc),
            ("tcp-db", Protocol::Tcp),
            ("https-admin", Protocol::Https),
            ("mongo-main", Protocol::Mongo),
            ("redis-cache", Protocol::Redis),
            ("httpfoo", Protocol::Tcp),
            ("web", Protocol::Tcp),
            ("", Protocol::Tcp),
        ] {
            assert_eq!(port_protocol(Some("TCP"), None, name), protocol, "{name:?}");
        }
        assert_eq!(
            port_protocol(None, Some("HTTP"), "tcp-x"),
            Protocol::Http,
            "appProtocol wins"
        );
        assert_eq!(
            port_protocol(None, Some("example.com/custom"), "grpc"),
            Protocol::Grpc,
            "unknown appProtocol"
        );
        assert_eq!(port_protocol(Some("UDP"), None, "http-dns"), Protocol::Udp);
    }
}
