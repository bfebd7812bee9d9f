//! KubeServiceDiscovery against the fake API server: Services,
//! EndpointSlices, Pods, Nodes and Namespaces in; services and instances
//! with the right labels, ports, protocols, zones and accounts, and Pods
//! as workloads, out; changes as events.

use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, PostParams};
use pilot_kube_fake::FakeApiServer;
use pilot_model::{Event, Labels, Protocol, ServiceDiscovery, ServiceEvent, Workload, WorkloadKind};
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
        // v3 is not ready (nor is its endpoint); v2 says its network.
        let ready = if version == "v3" { "False" } else { "True" };
        let mut labels = json!({"app": "reviews", "version": version});
        if version == "v2" {
            labels["topology.istio.io/network"] = json!("net-1");
        }
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
            "status": {"phase": "Running", "podIP": address, "podIPs": [{"ip": address}],
                "conditions": [{"type": "Ready", "status": ready}]},
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
        namespaces: false,
        cluster_id: None,
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

/// The workload the registry lists (a Pod that backs no ready endpoint)
/// with uid `uid`.
fn listed(registry: &KubeServiceDiscovery, uid: &str) -> Option<Arc<Workload>> {
    registry.workloads().into_iter().find(|w| w.uid == uid)
}

/// Reads events until `done` holds of the registry (each event in time).
async fn until(
    events: &mut BoxStream<'static, ServiceEvent>,
    registry: &KubeServiceDiscovery,
    what: &str,
    done: impl Fn(&KubeServiceDiscovery) -> bool,
) {
    while !done(registry) {
        tokio::time::timeout(EVENT_TIMEOUT, events.next())
            .await
            .unwrap_or_else(|_| panic!("no event in time while waiting until {what}"))
            .expect("the event stream is open");
    }
}

/// `sleep`: a Pod no Service selects; `pending`: one with no IP yet.
async fn serviceless_pods(fake: &FakeApiServer) {
    let pods: Api<Pod> = Api::namespaced(fake.client(), "default");
    for pod in [
        json!({"metadata": {"name": "sleep", "labels": {"app": "sleep"}},
            "spec": {"containers": [], "nodeName": "node-a"},
            "status": {"phase": "Running", "podIP": "10.1.0.9", "podIPs": [{"ip": "10.1.0.9"}, {"ip": "fd00::9"}],
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        json!({"metadata": {"name": "pending"}, "spec": {"containers": []}, "status": {"phase": "Pending"}}),
    ] {
        let pod: Pod = serde_json::from_value(pod).unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_workloads_shared_by_their_instances_or_listed() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    serviceless_pods(&fake).await;
    let registry = started(&fake).await;

    // Every instance of reviews-v2 is the same workload, one Arc.
    let on_v2 = registry.host_instances(&[ip("10.1.0.2")]);
    assert_eq!(on_v2.len(), 3, "{on_v2:?}");
    let v2 = on_v2[0]
        .workload
        .clone()
        .expect("an instance of a Pod has its workload");
    assert!(
        on_v2
            .iter()
            .all(|i| i.workload.as_ref().is_some_and(|w| Arc::ptr_eq(w, &v2))),
        "one Arc per Pod"
    );
    assert_eq!(v2.uid, "Kubernetes//Pod/default/reviews-v2");
    assert_eq!(
        (v2.name.as_str(), v2.namespace.as_str()),
        ("reviews-v2", "default")
    );
    assert_eq!(v2.kind, WorkloadKind::Pod);
    assert_eq!(v2.addresses, [ip("10.1.0.2")]);
    assert_eq!(v2.service_account, "bookinfo-reviews-v2");
    assert_eq!(v2.labels.get("version"), Some("v2"));
    assert_eq!(v2.node.as_deref(), Some("node-b"));
    assert_eq!(v2.network.as_deref(), Some("net-1"));
    assert_eq!(v2.locality.as_deref(), Some("region-1/zone-b"));
    assert_eq!(v2.cluster_id, "Kubernetes");
    assert!(v2.healthy);
    let v1 = registry.host_instances(&[ip("10.1.0.1")])[0]
        .workload
        .clone()
        .unwrap();
    assert_eq!(v1.service_account, "default");
    assert_eq!(v1.network, None);

    // The Pods that back no ready endpoint are listed: the service-less
    // one, the one without an IP yet, and v3 (not ready).
    let mut uids: Vec<String> = registry.workloads().iter().map(|w| w.uid.clone()).collect();
    uids.sort();
    assert_eq!(
        uids,
        [
            "Kubernetes//Pod/default/pending",
            "Kubernetes//Pod/default/reviews-v3",
            "Kubernetes//Pod/default/sleep"
        ]
    );
    let sleep = listed(&registry, "Kubernetes//Pod/default/sleep").unwrap();
    assert_eq!(sleep.addresses, [ip("10.1.0.9"), ip("fd00::9")]);
    assert_eq!(sleep.locality.as_deref(), Some("region-1/zone-a"));
    assert!(sleep.healthy);
    let pending = listed(&registry, "Kubernetes//Pod/default/pending").unwrap();
    assert!(pending.addresses.is_empty() && pending.node.is_none() && !pending.healthy);
    assert!(
        !listed(&registry, "Kubernetes//Pod/default/reviews-v3")
            .unwrap()
            .healthy
    );
    assert_eq!(
        registry.snapshot().listed_workloads().len(),
        3,
        "the snapshot lists them too"
    );

    // A registry with a cluster id names its Pods in it.
    let east = KubeServiceDiscovery::start(
        fake.client(),
        DiscoveryOptions {
            cluster_id: Some("east".into()),
            ..DiscoveryOptions::default()
        },
    );
    east.wait_synced().await;
    assert!(
        east.workloads()
            .iter()
            .any(|w| w.uid == "east//Pod/default/sleep")
    );
    let on_v2 = east.host_instances(&[ip("10.1.0.2")]);
    assert_eq!(
        on_v2[0].workload.as_ref().unwrap().uid,
        "east//Pod/default/reviews-v2"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_label_enrolls_its_pods_and_a_deleted_pod_is_gone() {
    let fake = FakeApiServer::new();
    bookinfo(&fake).await;
    serviceless_pods(&fake).await;
    let registry = started(&fake).await;
    let mut events = registry.subscribe();
    let none = Labels::new();
    let v1_in_ambient = |r: &KubeServiceDiscovery| {
        let on_v1 = r.host_instances(&[ip("10.1.0.1")]);
        !on_v1.is_empty()
            && on_v1
                .iter()
                .all(|i| i.workload.as_ref().is_some_and(|w| w.in_ambient(&Labels::new())))
    };
    let sleep_in_ambient = |r: &KubeServiceDiscovery| {
        listed(r, "Kubernetes//Pod/default/sleep").is_some_and(|w| w.in_ambient(&Labels::new()))
    };
    assert!(!v1_in_ambient(&registry) && !sleep_in_ambient(&registry));

    // The namespace is labelled ambient: its Pods are enrolled, those that
    // back a service (their instances change) and those that do not.
    let namespaces: Api<Namespace> = Api::all(fake.client());
    let label = |mode: &'static str| {
        let namespaces = namespaces.clone();
        async move {
            let mut ns = namespaces.get("default").await.unwrap();
            ns.metadata
                .labels
                .get_or_insert_default()
                .insert("istio.io/dataplane-mode".into(), mode.into());
            namespaces
                .replace("default", &PostParams::default(), &ns)
                .await
                .unwrap();
        }
    };
    let version = registry.snapshot().version();
    label("ambient").await;
    until(
        &mut events,
        &registry,
        "the namespace's Pods are in ambient",
        |r| v1_in_ambient(r) && sleep_in_ambient(r),
    )
    .await;
    assert!(registry.snapshot().version() > version, "the snapshot moved");
    let sleep = listed(&registry, "Kubernetes//Pod/default/sleep").unwrap();
    assert_eq!(
        sleep.namespace_labels.get("istio.io/dataplane-mode"),
        Some("ambient")
    );
    assert!(!sleep.labels.0.contains_key("istio.io/dataplane-mode"));
    assert!(sleep.in_ambient(&none));

    // ... and out again.
    label("none").await;
    until(
        &mut events,
        &registry,
        "the namespace's Pods are out of ambient",
        |r| !v1_in_ambient(r) && !sleep_in_ambient(r),
    )
    .await;

    // A Pod deleted: its workload goes, with an event.
    let pods: Api<Pod> = Api::namespaced(fake.client(), "default");
    pods.delete("sleep", &DeleteParams::default()).await.unwrap();
    loop {
        match next(&mut events).await {
            ServiceEvent::Workload(Event::Deleted(gone)) => {
                assert_eq!(gone.uid, "Kubernetes//Pod/default/sleep");
                break;
            }
            ServiceEvent::Resync => break,
            _ => {}
        }
    }
    assert!(listed(&registry, "Kubernetes//Pod/default/sleep").is_none());
    assert!(listed(&registry, "Kubernetes//Pod/default/pending").is_some());
}
