//! The benches' mesh (the `ads` bench's, also used by pilot-server's
//! `status` and `replicas` benches): `svc-{s}.default.svc.cluster.local`
//! for each service, one HTTP port 9080, four instances (two `version=v1`,
//! two `version=v2`), and a 50/50 RouteRule `svc-{s}-split` each.

use std::net::{IpAddr, Ipv4Addr};

use pilot_model::{ConfigStore, DynConfig, Labels, Port, Protocol, Service};
use pilot_store_memory::MemoryServiceRegistry;

/// The split RouteRule of service `svc-{service}` sending `v1` percent
/// to v1, untyped as the stores take it.
pub(crate) fn service_split(service: usize, v1: i32) -> DynConfig {
    let name = format!("svc-{service}");
    crate::common::split_rule(&name, &format!("{name}-split"), v1)
        .to_dyn()
        .expect("serializes")
}

/// Adds `services` services with their instances to `registry` and
/// creates their split rules (50/50) in `store`.
pub(crate) async fn populate(services: usize, registry: &MemoryServiceRegistry, store: &dyn ConfigStore) {
    for s in 0..services {
        let host = format!("svc-{s}.default.svc.cluster.local");
        registry.add_service(Service::new(&host, vec![Port::new("http", 9080, Protocol::Http)]));
        for i in 0..4u32 {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + (s as u32) * 4 + i));
            let labels = Labels::from_pairs([("version", if i < 2 { "v1" } else { "v2" })]);
            registry.add_endpoints(&host, ip, labels).expect("service exists");
        }
        store.create(service_split(s, 50)).await.expect("create");
    }
}
