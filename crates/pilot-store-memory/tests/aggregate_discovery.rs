//! Several registries seen as one through `AggregateDiscovery`.

use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{
    AggregateDiscovery, Event, Labels, Port, Protocol, Service, ServiceDiscovery, ServiceEvent,
};
use pilot_store_memory::MemoryServiceRegistry;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[tokio::test]
async fn services_instances_and_events_come_from_every_registry() {
    let kube = MemoryServiceRegistry::new();
    let vms = MemoryServiceRegistry::new();
    let reviews = "reviews.default.svc.cluster.local";
    let http = vec![Port::new("http", 9080, Protocol::Http)];
    kube.add_service(Service::new(reviews, http.clone()));
    let mut vm_reviews = Service::new(reviews, http.clone());
    vm_reviews.address = Some(ip("10.9.9.9"));
    vms.add_service(vm_reviews);
    vms.add_service(Service::new(
        "db.vm.local",
        vec![Port::new("tcp", 5432, Protocol::Tcp)],
    ));
    kube.add_endpoints(reviews, ip("10.0.0.1"), Labels::from_pairs([("version", "v1")]))
        .unwrap();
    vms.add_endpoints(reviews, ip("10.1.0.1"), Labels::from_pairs([("version", "v2")]))
        .unwrap();

    let aggregate = AggregateDiscovery::new(vec![Arc::new(kube.clone()), Arc::new(vms.clone())]);
    let hostnames: Vec<String> = aggregate.services().iter().map(|s| s.hostname.clone()).collect();
    assert_eq!(hostnames, ["db.vm.local", reviews]);
    assert_eq!(
        aggregate.get_service(reviews).unwrap().address,
        None,
        "the first registry wins for a shared hostname"
    );
    assert_eq!(aggregate.instances(reviews, &[], &[]).len(), 2);
    let v2 = aggregate.instances(reviews, &["http"], &[Labels::from_pairs([("version", "v2")])]);
    assert_eq!(v2.len(), 1);
    assert_eq!(v2[0].endpoint.address, ip("10.1.0.1"));
    assert_eq!(
        aggregate.host_instances(&[ip("10.0.0.1"), ip("10.1.0.1")]).len(),
        2
    );

    let mut events = aggregate.subscribe();
    vms.remove_instances(reviews, ip("10.1.0.1"), None);
    let Some(ServiceEvent::Instance(Event::Deleted(gone))) = events.next().await else {
        panic!("expected the VM instance's delete");
    };
    assert_eq!(gone.endpoint.address, ip("10.1.0.1"));
    kube.add_service(Service::new("ratings.default.svc.cluster.local", http));
    let Some(ServiceEvent::Service(Event::Added(added))) = events.next().await else {
        panic!("expected the new service");
    };
    assert_eq!(added.hostname, "ratings.default.svc.cluster.local");
}
