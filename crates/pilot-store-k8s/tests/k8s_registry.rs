//! KubeServiceDiscovery against the fake API server: Services,
//! EndpointSlices, Pods and Nodes in; services and instances with the right
//! labels, ports, protocols, zones and accounts out; changes as events.

use std::net::IpAddr;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::{Event, Labels, Protocol, ServiceDiscovery, ServiceEvent};
use pilot_store::testing::EVENT_TIMEOUT;
use pilot_store_k8s::{DiscoveryOptions, KubeServiceDiscovery};
use serde_json::json;

const REVIEWS: &str = "reviews.default.svc.cluster.local";

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// A cluster with `reviews` (three ports, two versions on two nodes in two
/// zones, one endpoint not ready) and an ExternalName service.
async fn bookinfo(fake: &FakeApiServer) {
    let client = fake.client();
    let nodes: Api<Node> = Api::all(client.clone());
    for (node, zone) in [("node-a", "zone-a"), ("node-b", "zone-b")] {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": node, "labels": {
            "topology.kubernetes.io/region": "region-1", "topology.kubernetes.io/zone": zone}}}))
        .unwrap();
        nodes.create(&PostParams::default(), &node).await.unwrap();
    }
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let reviews: Service = serde_json::from_value(json!({
        "metadata": {"name": "reviews"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [
            {"name": "http-web", "port": 9080, "targetPort": 8080},
            {"name": "api", "port": 9090, "appProtocol": "grpc"},
            {"name": "metrics", "port": 15014},
        ]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &reviews).await.unwrap();
    let external: Service = serde_json::from_value(json!({
        "metadata": {"name": "db"},
        "spec": {"type": "ExternalName", "externalName": "db.example.com", "ports": [{"name": "tcp-db", "port": 5432}]},
    }))
    .unwrap();
    services.create(&PostParams::default(), &external).await.unwrap();

    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (name, version, node, address) in [
        ("reviews-v1", "v1", "node-a", "10.1.0.1"),
        ("reviews-v2", "v2", "node-b", "10.1.0.2"),
        ("reviews-v3", "v3", "node-b", "10.1.0.3"),
    ] {
        // v1 names no account: it runs as `default`.
        let mut spec = json!({"containers": [], "nodeName": node});
        if version != "v1" {
            spec["serviceAccountName"] = json!(format!("bookinfo-reviews-{version}"));
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "reviews", "version": version}},
            "spec": spec,
            "status": {"podIP": address},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let slices: Api<EndpointSlice> = Api::namespaced(client, "default");
    slices
        .create(
            &PostParams::default(),
            &reviews_slice(&["reviews-v1", "reviews-v2"]),
        )
        .await
        .unwrap();
}

/// The EndpointSlice of `reviews` with `ready` pods (and v3, not ready).
fn reviews_slice(ready: &[&str]) -> EndpointSlice {
    let endpoint = |pod: &str, ready: bool| {
        let address = format!("10.1.0.{}", &pod[pod.len() - 1..]);
        json!({"addresses": [address], "conditions": {"ready": ready}, "zone": "slice-zone",
            "targetRef": {"kind": "Pod", "namespace": "default", "name": pod}})
    };
    let mut endpoints: Vec<_> = ready.iter().map(|p| endpoint(p, true)).collect();
    endpoints.push(endpoint("reviews-v3", false));
    serde_json::from_value(json!({
        "metadata": {"name": "reviews-abc", "labels": {"kubernetes.io/service-name": "reviews"}},
        "addressType": "IPv4",
        "ports": [{"name": "http-web", "port": 8080}, {"name": "api", "port": 9090}, {"name": "metrics", "port": 15014}],
        "endpoints": endpoints,
    }))
    .unwrap()
}

async fn started(fake: &FakeApiServer) -> KubeServiceDiscovery {
    let registry = KubeServiceDiscovery::start(fake.client(), DiscoveryOptions::default());
    registry.wait_synced().await;
    registry
}

async fn next(events: &mut BoxStream<'static, ServiceEvent>) -> ServiceEvent {
    tokio::time::timeout(EVENT_TIMEOUT, events.next())
        .await
        .expect("a registry event in time")
        .expect("the event stream is open")
}

/// Instance changes as `+ip:port`, `-ip:port`, `~ip:port`, skipping
/// service events, until `count` are seen.
async fn instance_changes(events: &mut BoxStream<'static, ServiceEvent>, count: usize) -> Vec<String> {
    let mut seen = Vec::new();
    while seen.len() < count {
        if let ServiceEvent::Instance(event) = next(events).await {
            let (sign, instance) = match event {
                Event::Added(i) => ('+', i),
                Event::Deleted(i) => ('-', i),
                Event::Updated { new, .. } => ('~', new),
            };
            seen.push(format!(
                "{sign}{}:{}",
                instance.endpoint.address, instance.endpoint.port
            ));
        }
    }
    seen.sort();
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_and_instances_with_labels_ports_protocols_and_zones() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    let registry = started(&fake).await;

    let hosts: Vec<_> = registry.services().iter().map(|s| s.hostname.clone()).collect();
    assert_eq!(hosts, ["db.default.svc.cluster.local", REVIEWS]);
    let reviews = registry.get_service(REVIEWS).unwrap();
    assert_eq!(reviews.address, Some(ip("10.96.0.10")));
    assert!(
        reviews.created.is_some_and(|t| t <= std::time::SystemTime::now()),
        "the Service's creationTimestamp: {:?}",
        reviews.created
    );
    let ports: Vec<_> = reviews
        .ports
        .iter()
        .map(|p| (p.name.as_str(), p.port, p.protocol))
        .collect();
    assert_eq!(
        ports,
        [
            ("http-web", 9080, Protocol::Http),
            ("api", 9090, Protocol::Grpc),
            ("metrics", 15014, Protocol::Tcp)
        ]
    );
    assert_eq!(
        reviews.service_accounts,
        ["bookinfo-reviews-v2", "default"],
        "the ready Pods' accounts, `default` for a Pod naming none (auto mTLS checks these SANs)"
    );

    let v2 = Labels::from_pairs([("version", "v2")]);
    let web_v2 = registry.instances(REVIEWS, &["http-web"], &[v2]);
    assert_eq!(web_v2.len(), 1, "{web_v2:?}");
    let instance = &web_v2[0];
    assert_eq!(instance.endpoint.address, ip("10.1.0.2"));
    assert_eq!(
        instance.endpoint.port, 8080,
        "the EndpointSlice's port of the same name"
    );
    assert_eq!(instance.endpoint.service_port.port, 9080);
    assert_eq!(instance.labels.get("app"), Some("reviews"));
    assert_eq!(instance.availability_zone.as_deref(), Some("region-1/zone-b"));
    assert_eq!(instance.service_account.as_deref(), Some("bookinfo-reviews-v2"));
    let web_v1 = registry.instances(REVIEWS, &["http-web"], &[Labels::from_pairs([("version", "v1")])]);
    assert_eq!(web_v1[0].service_account.as_deref(), Some("default"));
    assert_eq!(
        registry.instances(REVIEWS, &[], &[]).len(),
        6,
        "2 ready pods x 3 ports; v3 is not ready"
    );
    assert!(
        registry
            .instances(REVIEWS, &[], &[Labels::from_pairs([("version", "v3")])])
            .is_empty()
    );

    let on_v1 = registry.host_instances(&[ip("10.1.0.1")]);
    let mut v1_ports: Vec<_> = on_v1
        .iter()
        .map(|i| i.endpoint.service_port.name.as_str())
        .collect();
    v1_ports.sort();
    assert_eq!(v1_ports, ["api", "http-web", "metrics"]);

    let db = registry.get_service("db.default.svc.cluster.local").unwrap();
    assert_eq!(db.external_name.as_deref(), Some("db.example.com"));
    assert_eq!(db.ports[0].protocol, Protocol::Tcp);
    assert!(registry.instances(&db.hostname, &[], &[]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_and_deletions_flow_as_events() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    let registry = started(&fake).await;
    let mut events = registry.subscribe();
    let client = fake.client();

    // v3 becomes ready: three instances appear.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), "default");
    let mut slice = slices.get("reviews-abc").await.unwrap();
    slice.endpoints[2].conditions.as_mut().unwrap().ready = Some(true);
    slices
        .replace("reviews-abc", &PostParams::default(), &slice)
        .await
        .unwrap();
    assert_eq!(
        instance_changes(&mut events, 3).await,
        ["+10.1.0.3:15014", "+10.1.0.3:8080", "+10.1.0.3:9090"]
    );
    let v3 = Labels::from_pairs([("version", "v3")]);
    assert_eq!(
        registry.instances(REVIEWS, &[], std::slice::from_ref(&v3)).len(),
        3
    );

    // The v1 pod is relabelled: its instances change labels.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut pod = pods.get("reviews-v1").await.unwrap();
    pod.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("version".into(), "v1-canary".into());
    pods.replace("reviews-v1", &PostParams::default(), &pod)
        .await
        .unwrap();
    assert_eq!(
        instance_changes(&mut events, 3).await,
        ["~10.1.0.1:15014", "~10.1.0.1:8080", "~10.1.0.1:9090"]
    );
    let canary = Labels::from_pairs([("version", "v1-canary")]);
    assert_eq!(registry.instances(REVIEWS, &["api"], &[canary]).len(), 1);

    // The Service goes: its instances, then the service, are deleted.
    let services: Api<Service> = Api::namespaced(client, "default");
    services
        .delete("reviews", &DeleteParams::default())
        .await
        .unwrap();
    let mut deleted = Vec::new();
    while deleted.len() < 10 {
        match next(&mut events).await {
            ServiceEvent::Instance(Event::Deleted(i)) => deleted.push(format!("-{}", i.endpoint.address)),
            ServiceEvent::Service(Event::Deleted(s)) => {
                deleted.push(format!("-{}", s.hostname));
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(deleted.len(), 10, "nine instances, then the service: {deleted:?}");
    assert_eq!(deleted[9], format!("-{REVIEWS}"));
    assert!(registry.get_service(REVIEWS).is_none());
    assert!(registry.host_instances(&[ip("10.1.0.1")]).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_410_relists_and_removes_what_the_gap_deleted() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    let registry = started(&fake).await;
    let mut events = registry.subscribe();

    fake.refuse_watches(true);
    fake.close_watches();
    let slices: Api<EndpointSlice> = Api::namespaced(fake.client(), "default");
    slices
        .replace("reviews-abc", &PostParams::default(), &{
            let mut slice = reviews_slice(&["reviews-v1"]);
            slice.metadata.resource_version =
                slices.get("reviews-abc").await.unwrap().metadata.resource_version;
            slice
        })
        .await
        .unwrap();
    fake.expire_history();
    fake.refuse_watches(false);

    assert_eq!(
        instance_changes(&mut events, 3).await,
        ["-10.1.0.2:15014", "-10.1.0.2:8080", "-10.1.0.2:9090"]
    );
    assert!(fake.expired_answers() >= 1, "a watch was answered 410");
    assert!(registry.host_instances(&[ip("10.1.0.2")]).is_empty());
    assert_eq!(registry.instances(REVIEWS, &[], &[]).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_domain_and_namespace_are_the_callers_choice() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    let options = DiscoveryOptions {
        domain: "corp.internal".into(),
        namespace: Some("kube-system".into()),
        nodes: false,
    };
    let elsewhere = KubeServiceDiscovery::start(fake.client(), options.clone());
    elsewhere.wait_synced().await;
    assert!(elsewhere.services().is_empty(), "nothing runs in kube-system");
    let registry = KubeServiceDiscovery::start(
        fake.client(),
        DiscoveryOptions {
            namespace: Some("default".into()),
            ..options
        },
    );
    registry.wait_synced().await;
    let reviews = registry
        .get_service("reviews.default.svc.corp.internal")
        .expect("named in the domain");
    assert_eq!(reviews.ports.len(), 3);
    let v1 = registry.instances(
        &reviews.hostname,
        &["http-web"],
        &[Labels::from_pairs([("version", "v1")])],
    );
    assert_eq!(
        v1[0].availability_zone.as_deref(),
        Some("slice-zone"),
        "without Nodes, the endpoint's zone"
    );
}
