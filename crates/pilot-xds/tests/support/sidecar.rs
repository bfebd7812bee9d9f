//! The registry and objects the Sidecar listener tests share: services
//! `a1` (HTTP on 80 and 8080), `a2` (HTTP on 80) and `b1` (TCP on 3306),
//! one endpoint each, and routing configuration from YAML.

use std::net::IpAddr;

use pilot_model::{Labels, Port, Protocol, RegistrySnapshot, Service, document};
use pilot_routing::RoutingConfigs;
use pilot_store_memory::MemoryServiceRegistry;

pub(crate) const A1: &str = "a1.a.svc.cluster.local";
pub(crate) const A2: &str = "a2.a.svc.cluster.local";
pub(crate) const B1: &str = "b1.b.svc.cluster.local";

/// A registry of `hosts` (of [`A1`], [`A2`], [`B1`]), the n-th with its
/// endpoint at `10.0.n.1`, and its snapshot.
pub(crate) fn registry(hosts: &[&str]) -> (RegistrySnapshot, MemoryServiceRegistry) {
    let registry = MemoryServiceRegistry::new();
    for (i, host) in hosts.iter().enumerate() {
        let ports = match *host {
            A1 => vec![
                Port::new("http", 80, Protocol::Http),
                Port::new("http-alt", 8080, Protocol::Http),
            ],
            A2 => vec![Port::new("http", 80, Protocol::Http)],
            B1 => vec![Port::new("tcp", 3306, Protocol::Tcp)],
            other => panic!("no service {other} in the Sidecar tests' registry"),
        };
        registry.add_service(Service::new(*host, ports));
        registry
            .add_endpoints(
                host,
                format!("10.0.{i}.1").parse::<IpAddr>().unwrap(),
                Labels::new(),
            )
            .unwrap();
    }
    (RegistrySnapshot::capture(&registry, 1), registry)
}

/// The routing configuration of the objects in the YAML `yaml`.
pub(crate) fn configs(yaml: &str) -> RoutingConfigs {
    let objects = document::parse("t.yaml", yaml, &pilot_api::default_registry()).unwrap();
    RoutingConfigs::from_configs(&objects).unwrap()
}
