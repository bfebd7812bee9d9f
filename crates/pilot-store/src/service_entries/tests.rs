//! The conversion of ServiceEntries and WorkloadEntries into services and
//! instances, and the registry following a Controller.

use std::sync::Arc;

use pilot_api::default_registry;
use pilot_api::networking::{ServiceEntry, WorkloadEntry};
use pilot_model::{Config, ConfigStore, DynConfig, ServiceDiscovery, ServiceResolution, document};
use pilot_store_memory::MemoryConfigStore;

use super::*;

fn objects(text: &str) -> Vec<DynConfig> {
    document::parse("objects.yaml", text, &default_registry()).unwrap()
}

fn state(text: &str) -> DesiredState {
    let objects = objects(text);
    let entries: Vec<Config<ServiceEntry>> = objects
        .iter()
        .filter(|o| o.meta.kind == "ServiceEntry")
        .map(|o| Config::from_dyn(o).unwrap())
        .collect();
    let workloads: Vec<Config<WorkloadEntry>> = objects
        .iter()
        .filter(|o| o.meta.kind == "WorkloadEntry")
        .map(|o| Config::from_dyn(o).unwrap())
        .collect();
    desired_state(&entries, &workloads)
}

const STATIC: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.internal.example]
  addresses: [240.0.0.5/32]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp-pg, protocol: TCP}, {number: 80, name: http, protocol: HTTP, targetPort: 8080}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {version: v1}, weight: 3, serviceAccount: db, locality: us/east}
  - {address: 10.0.0.2, ports: {http: 9090}}
"#;

#[test]
fn static_endpoints_are_instances_on_every_port() {
    let desired = state(STATIC);
    let db = &desired.services["db.internal.example"];
    assert_eq!(db.service.address, Some("240.0.0.5".parse().unwrap()));
    assert!(!db.service.mesh_external);
    assert_eq!(db.service.resolution, ServiceResolution::Instances);
    let mut seen: Vec<(String, u16, String, Option<u32>)> = db
        .instances
        .iter()
        .map(|i| {
            (
                i.endpoint.address.to_string(),
                i.endpoint.port,
                i.endpoint.service_port.name.clone(),
                i.weight,
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("10.0.0.1".into(), 5432, "tcp-pg".into(), Some(3)),
            ("10.0.0.1".into(), 8080, "http".into(), Some(3)),
            ("10.0.0.2".into(), 5432, "tcp-pg".into(), None),
            ("10.0.0.2".into(), 9090, "http".into(), None),
        ]
    );
    let first = db.instances.iter().find(|i| i.weight == Some(3)).unwrap();
    assert_eq!(first.labels.get("version"), Some("v1"));
    assert_eq!(first.service_account.as_deref(), Some("db"));
    assert_eq!(first.availability_zone.as_deref(), Some("us/east"));
}

#[test]
fn resolutions_follow_istio() {
    let desired = state(
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: wild, namespace: default}
spec:
  hosts: ["*.example.com"]
  ports: [{number: 443, name: tls, protocol: TLS}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: dns, namespace: default}
spec:
  hosts: [api.example.org]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: a.example.org, ports: {http: 8080}}, {address: b.example.org, weight: 2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: rr, namespace: default}
spec:
  hosts: [rr.example.org]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS_ROUND_ROBIN
"#,
    );
    let wild = &desired.services["*.example.com"];
    assert_eq!(wild.service.resolution, ServiceResolution::Passthrough);
    assert!(wild.service.mesh_external);
    assert_eq!(wild.service.ports[0].protocol, pilot_model::Protocol::Https);
    let ServiceResolution::Dns(targets) = &desired.services["api.example.org"].service.resolution else {
        panic!("DNS")
    };
    let names: Vec<(&str, u16, Option<u32>)> = targets
        .iter()
        .map(|t| {
            (
                t.address.as_str(),
                t.port_for(&desired.services["api.example.org"].service.ports[0]),
                t.weight,
            )
        })
        .collect();
    assert_eq!(
        names,
        [("a.example.org", 8080, None), ("b.example.org", 80, Some(2))]
    );
    let ServiceResolution::DnsRoundRobin(targets) = &desired.services["rr.example.org"].service.resolution
    else {
        panic!("DNS_ROUND_ROBIN")
    };
    assert_eq!(targets[0].address, "rr.example.org");
    assert!(desired.services.values().all(|s| s.instances.is_empty()));
}

const SELECTED: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: default}
spec:
  hosts: [vm.default.example]
  location: MESH_INTERNAL
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: default}
spec: {address: 10.1.0.1, labels: {app: vm, version: v1}, serviceAccount: vm-sa, weight: 5}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: other, namespace: default}
spec: {address: 10.1.0.2, labels: {app: other}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-elsewhere, namespace: prod}
spec: {address: 10.1.0.3, labels: {app: vm}}
"#;

#[test]
fn a_workload_selector_takes_the_namespace_s_matching_workload_entries() {
    let desired = state(SELECTED);
    let vm = &desired.services["vm.default.example"];
    let addresses: Vec<String> = vm
        .instances
        .iter()
        .map(|i| i.endpoint.address.to_string())
        .collect();
    assert_eq!(addresses, ["10.1.0.1"]);
    assert_eq!(vm.instances[0].service_account.as_deref(), Some("vm-sa"));
    assert_eq!(vm.instances[0].weight, Some(5));
    assert_eq!(vm.instances[0].labels.get("version"), Some("v1"));
}

#[test]
fn workload_entries_are_workloads_on_their_instances_or_listed() {
    let desired = state(&format!(
        "{SELECTED}---\n{}",
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms-by-dns, namespace: default}
spec:
  hosts: [dns.vm.default.example]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-2, namespace: default, labels: {istio.io/dataplane-mode: ambient}}
spec: {address: 10.1.0.4, labels: {app: vm}, network: vm-net, locality: us/west/a}
"#
    ));
    let vm = &desired.services["vm.default.example"];
    let one = vm.instances[0]
        .workload
        .clone()
        .expect("an instance of a WorkloadEntry has its workload");
    assert_eq!(
        one.uid,
        "Kubernetes/networking.istio.io/WorkloadEntry/default/vm-1"
    );
    assert_eq!((one.name.as_str(), one.namespace.as_str()), ("vm-1", "default"));
    assert_eq!(one.kind, pilot_model::WorkloadKind::WorkloadEntry);
    assert_eq!(one.addresses, ["10.1.0.1".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(one.service_account, "vm-sa");
    assert_eq!(one.labels.get("version"), Some("v1"));
    let two = vm.instances[1].workload.clone().unwrap();
    assert_eq!(two.name, "vm-2");
    assert_eq!(
        two.service_account, "default",
        "an entry naming no account runs as `default`"
    );
    assert_eq!(
        vm.instances[1].service_account, None,
        "... which its instances do not claim"
    );
    assert_eq!(two.network.as_deref(), Some("vm-net"));
    assert_eq!(two.locality.as_deref(), Some("us/west/a"));
    assert!(
        two.in_ambient(&pilot_model::Labels::new()),
        "the object's labels count with the spec's"
    );
    // Those no STATIC entry selects are listed: `other` (selected by
    // none), `vm-elsewhere` (another namespace); not those on instances.
    let listed: Vec<&str> = desired.workloads.keys().map(String::as_str).collect();
    assert_eq!(
        listed,
        [
            "Kubernetes/networking.istio.io/WorkloadEntry/default/other",
            "Kubernetes/networking.istio.io/WorkloadEntry/prod/vm-elsewhere"
        ]
    );
}

#[test]
fn inline_endpoints_are_workloads_named_by_entry_and_address() {
    let desired = state(&format!(
        "{STATIC}---\n{}",
        r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: edge, labels: {istio.io/dataplane-mode: ambient}}
spec:
  hosts: [api.example.org]
  ports: [{number: 80, name: http, protocol: HTTP}]
  resolution: DNS
  endpoints: [{address: a.example.org}, {address: 192.0.2.7, serviceAccount: api}]
"#
    ));
    let db = &desired.services["db.internal.example"];
    let on_first: Vec<_> = db
        .instances
        .iter()
        .filter(|i| i.endpoint.address.to_string() == "10.0.0.1")
        .map(|i| {
            i.workload
                .clone()
                .expect("an inline endpoint's instance has its workload")
        })
        .collect();
    assert_eq!(on_first.len(), 2, "one per port");
    assert!(Arc::ptr_eq(&on_first[0], &on_first[1]), "one Arc per endpoint");
    let first = &on_first[0];
    assert_eq!(
        first.uid,
        "Kubernetes/networking.istio.io/ServiceEntry/default/db/10.0.0.1"
    );
    assert_eq!((first.name.as_str(), first.namespace.as_str()), ("db", "default"));
    assert_eq!(first.kind, pilot_model::WorkloadKind::ServiceEntry);
    assert_eq!(first.service_account, "db");
    assert_eq!(first.locality.as_deref(), Some("us/east"));
    // A DNS entry's endpoints back no instance: listed, a hostname one
    // without an address.
    let listed: Vec<&str> = desired.workloads.keys().map(String::as_str).collect();
    assert_eq!(
        listed,
        [
            "Kubernetes/networking.istio.io/ServiceEntry/edge/api/192.0.2.7",
            "Kubernetes/networking.istio.io/ServiceEntry/edge/api/a.example.org"
        ]
    );
    let by_name = &desired.workloads["Kubernetes/networking.istio.io/ServiceEntry/edge/api/a.example.org"];
    assert!(by_name.addresses.is_empty());
    assert!(
        by_name.in_ambient(&pilot_model::Labels::new()),
        "the entry's labels"
    );
    let by_ip = &desired.workloads["Kubernetes/networking.istio.io/ServiceEntry/edge/api/192.0.2.7"];
    assert_eq!(
        by_ip.addresses,
        ["192.0.2.7".parse::<std::net::IpAddr>().unwrap()]
    );
    assert_eq!(by_ip.service_account, "api");
}

#[test]
fn the_first_entry_by_namespace_and_name_has_a_shared_host() {
    let text = |name: &str, port: u16| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  hosts: [shared.example]\n  ports: [{{number: {port}, name: http, protocol: HTTP}}]\n  resolution: DNS\n"
        )
    };
    let desired = state(&format!("{}---\n{}", text("b", 81), text("a", 80)));
    assert_eq!(desired.services["shared.example"].service.ports[0].port, 80);
}

#[test]
fn a_service_carries_its_entry_s_creation_time() {
    let desired = state(
        "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: db, namespace: default, creationTimestamp: '2024-05-01T00:00:00Z'}\nspec:\n  hosts: [db.example]\n  ports: [{number: 3306, name: tcp, protocol: TCP}]\n  resolution: DNS\n",
    );
    let created = desired.services["db.example"].service.created.unwrap();
    let seconds = created.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    assert_eq!(seconds, 1_714_521_600);
    assert_eq!(
        state(STATIC).services["db.internal.example"].service.created,
        None
    );
}

#[tokio::test]
async fn the_registry_follows_writes_to_either_kind() {
    let store = MemoryConfigStore::new(default_registry());
    let controller = Arc::new(Controller::new(Arc::new(store.clone())));
    controller.run();
    let registry = service_entry_registry(&controller);
    tokio::time::timeout(std::time::Duration::from_secs(10), registry.wait_synced())
        .await
        .expect("synced");
    assert!(registry.services().is_empty());
    let mut written = Vec::new();
    for object in objects(SELECTED) {
        written.push(store.create(object).await.unwrap());
    }
    let host = "vm.default.example";
    let eventually = |want: usize| {
        let registry = registry.clone();
        async move {
            for _ in 0..200 {
                if registry.get_service(host).is_some() && registry.instances(host, &[], &[]).len() == want {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            panic!(
                "{host} never had {want} instances: {:?}",
                registry.instances(host, &[], &[])
            );
        }
    };
    eventually(1).await;
    let listed = |registry: &FollowedRegistry| -> Vec<String> {
        registry.workloads().iter().map(|w| w.uid.clone()).collect()
    };
    // The WorkloadEntries no entry selects are listed (once the registry
    // has seen every write).
    let unselected = [
        "Kubernetes/networking.istio.io/WorkloadEntry/default/other",
        "Kubernetes/networking.istio.io/WorkloadEntry/prod/vm-elsewhere",
    ];
    for _ in 0..200 {
        if listed(&registry) == unselected {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(listed(&registry), unselected);
    assert_eq!(
        registry.instances(host, &[], &[])[0]
            .workload
            .as_ref()
            .map(|w| w.name.as_str()),
        Some("vm-1")
    );
    // The selected WorkloadEntry goes: its instance goes with it.
    store
        .delete(
            &pilot_model::ConfigKey::new("WorkloadEntry", "default", "vm-1"),
            None,
        )
        .await
        .unwrap();
    eventually(0).await;
    assert!(
        !listed(&registry).iter().any(|uid| uid.ends_with("/vm-1")),
        "a deleted WorkloadEntry is no workload"
    );
    store
        .delete(
            &pilot_model::ConfigKey::new("ServiceEntry", "default", "vms"),
            None,
        )
        .await
        .unwrap();
    for _ in 0..200 {
        if registry.get_service(host).is_none() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the deleted entry's service stayed");
}
