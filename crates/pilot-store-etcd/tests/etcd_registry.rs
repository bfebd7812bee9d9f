//! The etcd service registry: two processes' views agree, versions are
//! selectable, a crashed instance disappears when its lease expires, and
//! instances that name their workload share it.

use std::net::IpAddr;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{Event, Labels, Port, Protocol, Service, ServiceDiscovery, ServiceEvent};
use pilot_store_etcd::{EtcdOptions, EtcdServiceRegistry, InstanceRegistration, WorkloadRegistration};
use pilot_test_support::EtcdServer;

const HOST: &str = "reviews.default.svc.cluster.local";
const TTL: Duration = Duration::from_secs(2);

fn instance(ip: &str, version: &str) -> InstanceRegistration {
    InstanceRegistration {
        hostname: HOST.into(),
        address: ip.parse().unwrap(),
        port: 9080,
        port_name: "http".into(),
        labels: Labels::from_pairs([("app", "reviews"), ("version", version)]),
        availability_zone: Some("zone-a".into()),
        service_account: None,
        workload: None,
    }
}

/// Waits for an instance event matching `wanted`, skipping others.
async fn instance_event(
    events: &mut BoxStream<'static, ServiceEvent>,
    wanted: fn(&Event<std::sync::Arc<pilot_model::ServiceInstance>>) -> bool,
) -> IpAddr {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("an event in time")
            .expect("the stream is open");
        if let ServiceEvent::Instance(event) = event
            && wanted(&event)
        {
            return event.object().endpoint.address;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_come_and_go_with_their_leases() {
    let server = EtcdServer::start().unwrap();
    let options = EtcdOptions::new([server.endpoint()]).with_prefix("/registry-test");
    let writer = EtcdServiceRegistry::connect(&options).await.unwrap();
    let reader = EtcdServiceRegistry::connect(&options).await.unwrap();
    reader.wait_synced().await;
    let mut events = reader.subscribe();

    writer
        .register_service(&Service::new(HOST, vec![Port::new("http", 9080, Protocol::Http)]))
        .await
        .unwrap();
    let v1 = writer
        .register_instance(instance("10.0.0.1", "v1"), TTL)
        .await
        .unwrap();
    let mut v2 = writer
        .register_instance(instance("10.0.0.2", "v2"), TTL)
        .await
        .unwrap();
    let mut added = vec![
        instance_event(&mut events, |e| matches!(e, Event::Added(_))).await,
        instance_event(&mut events, |e| matches!(e, Event::Added(_))).await,
    ];
    added.sort();
    assert_eq!(
        added,
        ["10.0.0.1".parse::<IpAddr>().unwrap(), "10.0.0.2".parse().unwrap()]
    );

    let only_v2 = reader.instances(HOST, &["http"], &[Labels::from_pairs([("version", "v2")])]);
    assert_eq!(only_v2.len(), 1);
    assert_eq!(only_v2[0].endpoint.address.to_string(), "10.0.0.2");
    assert_eq!(only_v2[0].availability_zone.as_deref(), Some("zone-a"));
    assert_eq!(reader.host_instances(&["10.0.0.1".parse().unwrap()]).len(), 1);

    // v2's process "crashes": its keeper stops, and the lease runs out.
    v2.stop_keepalive();
    let gone = instance_event(&mut events, |e| matches!(e, Event::Deleted(_))).await;
    assert_eq!(gone.to_string(), "10.0.0.2");
    assert_eq!(reader.instances(HOST, &[], &[]).len(), 1);

    // v1's keeper renews its lease well past the TTL.
    tokio::time::sleep(TTL * 3).await;
    assert_eq!(
        reader.instances(HOST, &[], &[]).len(),
        1,
        "a kept-alive instance stays"
    );

    // A graceful deregistration removes it at once.
    v1.deregister().await.unwrap();
    let gone = instance_event(&mut events, |e| matches!(e, Event::Deleted(_))).await;
    assert_eq!(gone.to_string(), "10.0.0.1");

    writer.deregister_service(HOST).await.unwrap();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .unwrap()
            .unwrap();
        if let ServiceEvent::Service(Event::Deleted(service)) = event {
            assert_eq!(service.hostname, HOST);
            break;
        }
    }
    assert!(reader.get_service(HOST).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_registered_before_their_service_appear_with_it() {
    let server = EtcdServer::start().unwrap();
    let options = EtcdOptions::new([server.endpoint()]).with_prefix("/registry-order");
    let registry = EtcdServiceRegistry::connect(&options).await.unwrap();
    let _early = registry
        .register_instance(instance("10.0.0.9", "v3"), Duration::from_secs(30))
        .await
        .unwrap();
    registry.wait_synced().await;
    let mut events = registry.subscribe();
    assert!(
        registry.instances(HOST, &[], &[]).is_empty(),
        "no service, no instances"
    );
    registry
        .register_service(&Service::new(HOST, vec![Port::new("http", 9080, Protocol::Http)]))
        .await
        .unwrap();
    let added = instance_event(&mut events, |e| matches!(e, Event::Added(_))).await;
    assert_eq!(added.to_string(), "10.0.0.9");
    assert_eq!(
        registry
            .instances(HOST, &[], &[Labels::from_pairs([("version", "v3")])])
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_that_name_a_workload_share_it_across_services() {
    let server = EtcdServer::start().unwrap();
    let options = EtcdOptions::new([server.endpoint()]).with_prefix("/registry-workloads");
    let registry = EtcdServiceRegistry::connect(&options).await.unwrap();
    const RATINGS: &str = "ratings.default.svc.cluster.local";
    for host in [HOST, RATINGS] {
        registry
            .register_service(&Service::new(host, vec![Port::new("http", 9080, Protocol::Http)]))
            .await
            .unwrap();
    }
    let named = |host: &str, node: &str| InstanceRegistration {
        hostname: host.into(),
        service_account: Some("vm-sa".into()),
        workload: Some(WorkloadRegistration {
            name: "vm-1".into(),
            namespace: "vms".into(),
            node: Some(node.into()),
        }),
        ..instance("10.0.0.7", "v1")
    };
    let ttl = Duration::from_secs(30);
    let _reviews = registry
        .register_instance(named(HOST, "node-a"), ttl)
        .await
        .unwrap();
    let _ratings = registry
        .register_instance(named(RATINGS, "node-a"), ttl)
        .await
        .unwrap();
    let _anonymous = registry
        .register_instance(instance("10.0.0.8", "v1"), ttl)
        .await
        .unwrap();
    registry.wait_synced().await;
    let mut events = registry.subscribe();
    let on_vm = |registry: &EtcdServiceRegistry| registry.host_instances(&["10.0.0.7".parse().unwrap()]);
    while on_vm(&registry).len() < 2 || registry.instances(HOST, &[], &[]).len() < 2 {
        instance_event(&mut events, |_| true).await;
    }
    let instances = on_vm(&registry);
    let workload = instances[0].workload.clone().expect("a named workload");
    assert!(
        instances.iter().all(|i| i
            .workload
            .as_ref()
            .is_some_and(|w| std::sync::Arc::ptr_eq(w, &workload))),
        "one workload shared by its instances of both services"
    );
    assert_eq!(workload.uid, "Kubernetes/pilot.io/Registered/vms/vm-1");
    assert_eq!(workload.kind, pilot_model::WorkloadKind::Registered);
    assert_eq!(workload.addresses, ["10.0.0.7".parse::<IpAddr>().unwrap()]);
    assert_eq!(workload.service_account, "vm-sa");
    assert_eq!(workload.node.as_deref(), Some("node-a"));
    assert_eq!(workload.locality.as_deref(), Some("zone-a"));
    assert_eq!(workload.labels.get("version"), Some("v1"));
    let anonymous = registry.host_instances(&["10.0.0.8".parse().unwrap()]);
    assert!(
        anonymous[0].workload.is_none(),
        "an instance naming no workload has none"
    );

    // The workload moves node through one service's registration (the
    // first by key, which tells the node): the instances of the other
    // service, whose registration did not change, carry the moved
    // workload too.
    let _moved = registry
        .register_instance(named(RATINGS, "node-b"), ttl)
        .await
        .unwrap();
    let moved = |registry: &EtcdServiceRegistry| {
        on_vm(registry)
            .iter()
            .all(|i| i.workload.as_ref().and_then(|w| w.node.as_deref()) == Some("node-b"))
    };
    while !moved(&registry) {
        instance_event(&mut events, |_| true).await;
    }
}
