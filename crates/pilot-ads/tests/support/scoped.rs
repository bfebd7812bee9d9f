//! The small mesh the scoping tests over real ADS streams share: `a1` and
//! `a2` in namespace `a`, `b1` in `b` (HTTP on 80, an endpoint each), a
//! Controller over a memory store, and what a proxy was sent.

use std::net::IpAddr;
use std::sync::Arc;

use pilot_ads::{ProxyStatus, XdsServer};
use pilot_model::{ConfigStore, Labels, Port, Protocol, Service, document};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};

/// The mesh's services: `a1.a`, `a2.a`, `b1.b`.
pub(crate) const HOSTS: [&str; 3] = [
    "a1.a.svc.cluster.local",
    "a2.a.svc.cluster.local",
    "b1.b.svc.cluster.local",
];

/// An IP address from its text.
pub(crate) fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Creates the objects of the YAML `yaml` through `controller`.
pub(crate) async fn apply(controller: &Controller, yaml: &str) {
    for object in document::parse("t.yaml", yaml, &pilot_api::default_registry()).unwrap() {
        controller.create(object).await.unwrap();
    }
}

/// A registry of [`HOSTS`], the n-th with an endpoint at `10.0.n.1`
/// carrying `labels`.
pub(crate) fn registry(labels: &Labels) -> Arc<MemoryServiceRegistry> {
    let registry = Arc::new(MemoryServiceRegistry::new());
    for (i, host) in HOSTS.iter().enumerate() {
        registry.add_service(Service::new(*host, vec![Port::new("http", 80, Protocol::Http)]));
        registry
            .add_endpoints(host, ip(&format!("10.0.{i}.1")), labels.clone())
            .unwrap();
    }
    registry
}

/// A server over `registry` and a store holding the objects of `yaml`
/// (created before it serves), on a free loopback port.
pub(crate) async fn serve(
    registry: &Arc<MemoryServiceRegistry>,
    yaml: &str,
) -> (XdsServer, u16, Arc<Controller>) {
    let store = MemoryConfigStore::new(pilot_api::default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store)));
    controller.run();
    apply(&controller, yaml).await;
    let (server, port) = super::server::serve(Arc::clone(&controller), Arc::clone(registry) as _);
    (server, port, controller)
}

/// The version last sent of each type, by type.
pub(crate) fn sent(status: &ProxyStatus) -> Vec<(&'static str, Option<String>)> {
    status.types.iter().map(|(t, s)| (*t, s.sent.clone())).collect()
}
