//! A Sidecar's listeners through a real Envoy with real traffic: its
//! ingress listener receives on port P (bound at 127.0.0.1,
//! `captureMode: NONE`) and forwards to the backend at its default
//! endpoint 127.0.0.1:Q; its egress listener with a port, bound at
//! 127.0.0.1 with `captureMode: NONE`, lets a client reach the host it
//! imports through that address and port (the host's service port of
//! that number), and on no other port of that host; the port-less
//! listener carries the other hosts on their own ports. Moving the egress
//! listener to the host's other port moves the host there.

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use pilot_api::default_registry;
use pilot_model::{
    ConfigKey, ConfigStore, NetworkEndpoint, Port, Protocol, Service, ServiceInstance, document,
};
use pilot_store::Controller;
use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
use pilot_test_support::Envoy;
use support::envoy::{eventually, free_port, request_to, upstream};

const A1: &str = "a1.a.svc.cluster.local";
const A2: &str = "a2.a.svc.cluster.local";

/// The Sidecar of namespace `a`: ingress on `ingress` to 127.0.0.1:`backend`,
/// a1 on `egress` at 127.0.0.1, a2 on its own ports.
fn sidecar(ingress: u16, backend: u16, egress: u16) -> pilot_model::DynConfig {
    let text = format!(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {{name: default, namespace: a}}
spec:
  ingress:
  - port: {{number: {ingress}, protocol: HTTP, name: http}}
    bind: 127.0.0.1
    captureMode: NONE
    defaultEndpoint: 127.0.0.1:{backend}
  egress:
  - port: {{number: {egress}, protocol: HTTP, name: http-local}}
    bind: 127.0.0.1
    captureMode: NONE
    hosts: [./a1.a.svc.cluster.local]
  - hosts: [./a2.a.svc.cluster.local]
  outboundTrafficPolicy: {{mode: REGISTRY_ONLY}}
"#
    );
    document::parse("sidecar.yaml", &text, &default_registry())
        .unwrap()
        .remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sidecar_ingress_and_egress_listeners_carry_real_traffic() {
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    // a1 serves on two ports, a2 on one; each port answers with its name.
    let (a1_port, a1_other, a2_port) = (free_port(), free_port(), free_port());
    let registry = MemoryServiceRegistry::new();
    for (host, ports) in [
        (A1, vec![(a1_port, "a1"), (a1_other, "a1-other")]),
        (A2, vec![(a2_port, "a2")]),
    ] {
        let service = registry.add_service(Service::new(
            host,
            ports
                .iter()
                .enumerate()
                .map(|(i, (port, _))| Port::new(format!("http-{i}"), *port, Protocol::Http))
                .collect(),
        ));
        for (i, (_, body)) in ports.into_iter().enumerate() {
            let at = upstream(body, Arc::new(AtomicU64::new(0)));
            let endpoint = NetworkEndpoint::new(
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                at,
                service.ports[i].clone(),
            );
            registry
                .add_instance(ServiceInstance::new(
                    Arc::clone(&service),
                    endpoint,
                    pilot_model::Labels::new(),
                ))
                .unwrap();
        }
    }
    let backend = upstream("backend", Arc::new(AtomicU64::new(0)));
    let (ingress, egress) = (free_port(), a1_port);
    store.create(sidecar(ingress, backend, egress)).await.unwrap();
    let (_server, xds_port) = support::server::serve(controller, Arc::new(registry));
    let envoy = Envoy::ads(
        "sidecar~10.99.0.1~client.a~a.svc.cluster.local",
        &[("INTERCEPTION_MODE", "NONE")],
        xds_port,
        false,
    )
    .expect("envoy starts (scripts/install-deps installs it)");

    let envoy = tokio::task::spawn_blocking(move || {
        // Ingress: port `ingress` reaches the backend, not any service's
        // own port.
        eventually("the ingress listener reaches the backend", || {
            request_to(ingress, "anything", &[]) == (200, "backend".into())
        });
        // Egress with a port: a1 through 127.0.0.1:`egress`.
        eventually("a1 answers on the egress listener's port", || {
            request_to(egress, A1, &[]) == (200, "a1".into())
        });
        // The port-less listener: a2 on its own port.
        eventually("a2 answers on its own port", || {
            request_to(a2_port, A2, &[]) == (200, "a2".into())
        });
        // a1 is not on its other port (no listener there), nor on its
        // first port outside the egress listener's; a2 not on a1's
        // listener (REGISTRY_ONLY answers 502).
        assert_eq!(
            request_to(a1_other, A1, &[]).0,
            0,
            "no listener on a1's other port"
        );
        assert_eq!(request_to(a2_port, A1, &[]).0, 502, "a1 is not on a2's listener");
        assert_eq!(
            request_to(ingress, A1, &[]),
            (200, "backend".into()),
            "inbound, not outbound"
        );
        assert_eq!(request_to(egress, A2, &[]).0, 502, "a2 is not on a1's listener");
        let listeners = envoy.admin("/listeners");
        assert!(
            listeners.contains(&format!("127.0.0.1:{egress}"))
                && !listeners.contains(&format!(":{a1_other}")),
            "{listeners}"
        );
        envoy
    })
    .await
    .unwrap();

    // The egress listener moves to a1's other port: a1 follows it.
    let moved = a1_other;
    let key = ConfigKey::new("Sidecar", "a", "default");
    let current = store.get(&key).await.unwrap().unwrap();
    let mut updated = sidecar(ingress, backend, moved);
    updated.meta.resource_version = current.meta.resource_version.clone();
    store.update(updated).await.unwrap();
    tokio::task::spawn_blocking(move || {
        eventually("a1 answers on the new port", || {
            request_to(moved, A1, &[]) == (200, "a1-other".into())
        });
        eventually("nothing listens on the old port", || {
            request_to(egress, A1, &[]).0 == 0
        });
        drop(envoy);
    })
    .await
    .unwrap();
}
