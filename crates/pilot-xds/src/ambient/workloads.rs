//! Every workload and service of a registry's state as ztunnel's
//! [`Address`] resources, by resource name: a workload is named by its uid,
//! a service by `<namespace>/<hostname>`.
//!
//! The workloads are those the registry lists by themselves
//! ([`RegistrySnapshot::listed_workloads`]), every distinct workload of an
//! instance ([`ServiceInstance::workload`]), and, for an instance whose
//! registry knows no workload, one named by its address
//! (`<cluster>/pilot.io/Registered/<namespace>/<address>`, in its service's
//! namespace). Each carries the services it backs with their ports, its
//! identity (trust domain and service account), node, network, cluster,
//! locality and health, `HBONE` when it is enrolled in ambient mode
//! (`istio.io/dataplane-mode: ambient` on it or its namespace) and `NONE`
//! otherwise, and the workload-scoped authorization policies that select
//! it (ztunnel finds namespace- and mesh-wide ones by their scope).
//!
//! Services carry their virtual addresses, ports and the identities their
//! workloads run as. Services with no address and no instance (an external
//! name) are served too: ztunnel resolves by hostname only what it is told.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use pilot_model::{Labels, RegistrySnapshot, Service, ServiceInstance, Workload, WorkloadKind};
use pilot_routing::RoutingModel;

use super::proto::workload::{
    self as pb, Address, Locality, NetworkAddress, Port, PortList, TunnelProtocol, WorkloadStatus,
    WorkloadType,
};

/// What the mesh tells every workload: its trust domain, cluster and
/// network, for those whose registry names none.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AmbientOptions {
    /// The trust domain of workload identities.
    pub trust_domain: String,
    /// The network of workloads that name none (empty: the default one).
    pub network: String,
}

impl Default for AmbientOptions {
    fn default() -> Self {
        AmbientOptions {
            trust_domain: crate::security::DEFAULT_TRUST_DOMAIN.into(),
            network: String::new(),
        }
    }
}

impl AmbientOptions {
    /// Identities in `trust_domain`.
    pub fn with_trust_domain(mut self, trust_domain: impl Into<String>) -> Self {
        self.trust_domain = trust_domain.into();
        self
    }
}

/// The label naming a workload's canonical service.
const CANONICAL_NAME: &str = "service.istio.io/canonical-name";
/// The label naming a workload's canonical revision.
const CANONICAL_REVISION: &str = "service.istio.io/canonical-revision";
/// The label a Deployment's ReplicaSet puts on its pods.
const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// A service's resource name: `<namespace>/<hostname>`.
pub fn service_name(service: &Service) -> String {
    format!("{}/{}", service.namespace().unwrap_or_default(), service.hostname)
}

/// Every Address of `registry`'s state, by resource name, with the
/// workload-scoped policies of `model` (authorization, and the STRICT
/// mutual TLS of its PeerAuthentications) listed on the workloads they
/// select ([`super::authorization::workload_policies`]).
pub fn addresses(
    registry: &RegistrySnapshot,
    model: &RoutingModel,
    options: &AmbientOptions,
) -> BTreeMap<String, Address> {
    let mut workloads: BTreeMap<String, Gathered> = registry
        .listed_workloads()
        .iter()
        .map(|(uid, w)| (uid.clone(), Gathered::of(Arc::clone(w))))
        .collect();
    let mut out = BTreeMap::new();
    for (host, instances) in registry.all_instances() {
        let Some(service) = pilot_model::ServiceDiscovery::get_service(registry, host) else {
            continue;
        };
        let name = service_name(&service);
        for instance in instances.iter() {
            let workload = match &instance.workload {
                Some(workload) => Arc::clone(workload),
                None => Arc::new(unnamed(instance, &service)),
            };
            let gathered = workloads
                .entry(workload.uid.clone())
                .or_insert_with(|| Gathered::of(workload));
            let ports = &mut gathered.services.entry(name.clone()).or_default().ports;
            let port = Port {
                service_port: u32::from(instance.endpoint.service_port.port),
                target_port: u32::from(instance.endpoint.port),
                app_protocol: 0,
            };
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
    }
    for service in pilot_model::ServiceDiscovery::services(registry) {
        let message = service_message(&service, options);
        out.insert(
            service_name(&service),
            Address {
                r#type: Some(pb::address::Type::Service(Box::new(message))),
            },
        );
    }
    for (uid, gathered) in workloads {
        let message = workload_message(&gathered, model, options);
        out.insert(
            uid,
            Address {
                r#type: Some(pb::address::Type::Workload(Box::new(message))),
            },
        );
    }
    out
}

/// A workload with the services it backs.
struct Gathered {
    workload: Arc<Workload>,
    services: HashMap<String, PortList>,
}

impl Gathered {
    fn of(workload: Arc<Workload>) -> Self {
        Gathered {
            workload,
            services: HashMap::new(),
        }
    }
}

/// The workload an instance with none stands for: named by its address, in
/// its service's namespace, with its labels and service account.
fn unnamed(instance: &ServiceInstance, service: &Service) -> Workload {
    let namespace = service.namespace().unwrap_or("default");
    let address = instance.endpoint.address.to_string();
    let mut workload = Workload::new(WorkloadKind::Registered, namespace, address)
        .with_addresses([instance.endpoint.address])
        .with_labels(instance.labels.clone())
        .with_locality(instance.availability_zone.clone());
    if let Some(account) = &instance.service_account {
        workload = workload.with_service_account(account.clone());
    }
    workload
}

fn bytes(address: &IpAddr) -> Vec<u8> {
    match address {
        IpAddr::V4(v4) => v4.octets().to_vec(),
        IpAddr::V6(v6) => v6.octets().to_vec(),
    }
}

fn service_message(service: &Service, options: &AmbientOptions) -> pb::Service {
    let name = service.hostname.split('.').next().unwrap_or_default().to_string();
    pb::Service {
        name,
        namespace: service.namespace().unwrap_or_default().to_string(),
        hostname: service.hostname.clone(),
        addresses: service
            .address
            .iter()
            .map(|a| NetworkAddress {
                network: options.network.clone(),
                address: bytes(a),
                length: None,
            })
            .collect(),
        ports: service
            .ports
            .iter()
            .map(|p| Port {
                service_port: u32::from(p.port),
                target_port: 0,
                app_protocol: 0,
            })
            .collect(),
        subject_alt_names: service
            .service_accounts
            .iter()
            .map(|account| identity_san(account, service, options))
            .collect(),
        ..Default::default()
    }
}

/// A service's identity as a SAN: a SPIFFE id as given, or a service
/// account of its namespace.
fn identity_san(account: &str, service: &Service, options: &AmbientOptions) -> String {
    if account.starts_with("spiffe://") {
        account.to_string()
    } else {
        format!(
            "spiffe://{}/ns/{}/sa/{account}",
            options.trust_domain,
            service.namespace().unwrap_or("default")
        )
    }
}

fn workload_message(gathered: &Gathered, model: &RoutingModel, options: &AmbientOptions) -> pb::Workload {
    let w = &*gathered.workload;
    let label = |keys: &[&str]| keys.iter().find_map(|k| w.labels.get(k)).map(str::to_string);
    let canonical_name =
        label(&[CANONICAL_NAME, "app.kubernetes.io/name", "app"]).unwrap_or_else(|| w.name.clone());
    let canonical_revision = label(&[CANONICAL_REVISION, "app.kubernetes.io/version", "version"])
        .unwrap_or_else(|| "latest".into());
    let (workload_type, workload_name) = controller(w);
    pb::Workload {
        uid: w.uid.clone(),
        name: w.name.clone(),
        namespace: w.namespace.clone(),
        addresses: w.addresses.iter().map(bytes).collect(),
        network: w.network.clone().unwrap_or_else(|| options.network.clone()),
        tunnel_protocol: if w.in_ambient(&Labels::new()) {
            TunnelProtocol::Hbone
        } else {
            TunnelProtocol::None
        } as i32,
        trust_domain: options.trust_domain.clone(),
        service_account: w.service_account.clone(),
        node: w.node.clone().unwrap_or_default(),
        canonical_name,
        canonical_revision,
        workload_type: workload_type as i32,
        workload_name,
        authorization_policies: super::authorization::workload_policies(
            model.authorization(),
            model.peer_authentication(),
            model.root_namespace(),
            &w.namespace,
            &w.labels,
        ),
        status: if w.healthy {
            WorkloadStatus::Healthy
        } else {
            WorkloadStatus::Unhealthy
        } as i32,
        cluster_id: w.cluster_id.clone(),
        services: gathered.services.clone(),
        locality: w.locality.as_deref().map(locality),
        ..Default::default()
    }
}

/// What made a workload, and its name: a Deployment's pod (one with a
/// `pod-template-hash` label, named `<deployment>-<hash>-<suffix>`) is the
/// Deployment's; any other, its own.
fn controller(w: &Workload) -> (WorkloadType, String) {
    if w.kind != WorkloadKind::Pod {
        return (WorkloadType::Pod, w.name.clone());
    }
    if let Some(hash) = w.labels.get(POD_TEMPLATE_HASH)
        && let Some((replica_set, _suffix)) = w.name.rsplit_once('-')
        && let Some(deployment) = replica_set.strip_suffix(hash).and_then(|d| d.strip_suffix('-'))
    {
        return (WorkloadType::Deployment, deployment.to_string());
    }
    (WorkloadType::Pod, w.name.clone())
}

/// `region/zone/subzone` (or a prefix of it).
fn locality(text: &str) -> Locality {
    let mut parts = text.splitn(3, '/');
    let mut next = || parts.next().unwrap_or_default().to_string();
    Locality {
        region: next(),
        zone: next(),
        subzone: next(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pilot_model::{NetworkEndpoint, Port as ServicePort, Protocol, RegistrySnapshot};

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn snapshot() -> RegistrySnapshot {
        let http = ServicePort::new("http", 9080, Protocol::Http);
        let mut service = Service::new("reviews.default.svc.cluster.local", vec![http.clone()]);
        service.address = Some(ip("10.96.0.10"));
        service.service_accounts = vec!["bookinfo-reviews".into()];
        let service = Arc::new(service);
        let pod = Arc::new(
            Workload::new(WorkloadKind::Pod, "default", "reviews-v2-5d8f7c9b-x7k2p")
                .with_addresses([ip("10.1.1.3")])
                .with_node("node-1")
                .with_service_account("bookinfo-reviews")
                .with_labels(Labels::from_pairs([
                    ("app", "reviews"),
                    ("version", "v2"),
                    ("pod-template-hash", "5d8f7c9b"),
                ]))
                .with_namespace_labels(Labels::from_pairs([("istio.io/dataplane-mode", "ambient")]))
                .with_locality("us-east1/us-east1-b".to_string()),
        );
        let on_pod = ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new(ip("10.1.1.3"), 8080, http.clone()),
            Labels::from_pairs([("app", "reviews")]),
        )
        .with_workload(Arc::clone(&pod));
        let bare = ServiceInstance::new(
            Arc::clone(&service),
            NetworkEndpoint::new(ip("10.1.1.4"), 9080, http),
            Labels::from_pairs([("version", "v3")]),
        );
        let lone = Arc::new(
            Workload::new(WorkloadKind::Pod, "tools", "curl")
                .with_addresses([ip("10.1.2.9")])
                .with_node("node-2"),
        );
        let services = BTreeMap::from([(service.hostname.clone(), Arc::clone(&service))]);
        let instances = BTreeMap::from([(service.hostname.clone(), Arc::new(vec![on_pod, bare]))]);
        RegistrySnapshot::from_parts(1, services, instances)
            .with_workloads(Arc::new(BTreeMap::from([(lone.uid.clone(), lone)])))
    }

    fn workload(addresses: &BTreeMap<String, Address>, name: &str) -> pb::Workload {
        match addresses.get(name).and_then(|a| a.r#type.clone()) {
            Some(pb::address::Type::Workload(w)) => *w,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn pods_instances_and_services_become_addresses_named_as_istio_names_them() {
        let all = addresses(&snapshot(), &RoutingModel::default(), &AmbientOptions::default());
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "Kubernetes//Pod/default/reviews-v2-5d8f7c9b-x7k2p",
                "Kubernetes//Pod/tools/curl",
                "Kubernetes/pilot.io/Registered/default/10.1.1.4",
                "default/reviews.default.svc.cluster.local",
            ]
        );
        let pod = workload(&all, "Kubernetes//Pod/default/reviews-v2-5d8f7c9b-x7k2p");
        assert_eq!(pod.addresses, vec![vec![10, 1, 1, 3]]);
        assert_eq!(
            pod.tunnel_protocol,
            TunnelProtocol::Hbone as i32,
            "its namespace is ambient"
        );
        assert_eq!(pod.node, "node-1");
        assert_eq!(pod.service_account, "bookinfo-reviews");
        assert_eq!(pod.trust_domain, "cluster.local");
        assert_eq!(
            (pod.canonical_name.as_str(), pod.canonical_revision.as_str()),
            ("reviews", "v2")
        );
        assert_eq!(pod.workload_type, WorkloadType::Deployment as i32);
        assert_eq!(pod.workload_name, "reviews-v2");
        assert_eq!(pod.locality.as_ref().map(|l| l.zone.as_str()), Some("us-east1-b"));
        let ports = &pod.services["default/reviews.default.svc.cluster.local"].ports;
        assert_eq!(
            ports,
            &[Port {
                service_port: 9080,
                target_port: 8080,
                app_protocol: 0
            }]
        );
        let bare = workload(&all, "Kubernetes/pilot.io/Registered/default/10.1.1.4");
        assert_eq!(bare.tunnel_protocol, TunnelProtocol::None as i32);
        assert_eq!(bare.canonical_revision, "v3");
        let lone = workload(&all, "Kubernetes//Pod/tools/curl");
        assert!(
            lone.services.is_empty(),
            "a pod no service selects is still a workload"
        );
        match all["default/reviews.default.svc.cluster.local"].r#type.clone() {
            Some(pb::address::Type::Service(s)) => {
                assert_eq!(s.name, "reviews");
                assert_eq!(s.addresses[0].address, vec![10, 96, 0, 10]);
                assert_eq!(s.ports[0].service_port, 9080);
                assert_eq!(
                    s.subject_alt_names,
                    ["spiffe://cluster.local/ns/default/sa/bookinfo-reviews"]
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_address_survives_the_wire() {
        use prost::Message;
        for (name, address) in addresses(&snapshot(), &RoutingModel::default(), &AmbientOptions::default()) {
            let back = Address::decode(address.encode_to_vec().as_slice()).unwrap();
            assert_eq!(back, address, "{name}");
        }
    }
}
