//! The `--services` file registry passes the registry conformance suite:
//! the file is its source; a cut is its follower stopped, so the changes
//! written meanwhile arrive with the next follower's first read. Its
//! workloads: an instance naming one makes the workload of its address,
//! shared by every instance there; the `workloads:` list adds those that
//! back no service, followed as the file changes; contradictions are
//! refused naming the place and field.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pilot_model::ServiceDiscovery;
use pilot_server::services_file;
use pilot_store::RegistryWriter;
use pilot_store::testing::{RegistrySource, SourceService};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

struct ServicesFileSource {
    dir: tempfile::TempDir,
    registry: Option<(Arc<dyn ServiceDiscovery>, RegistryWriter)>,
    follower: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

impl ServicesFileSource {
    fn path(&self) -> PathBuf {
        self.dir.path().join("services.yaml")
    }

    fn start_follower(&mut self) {
        let (_, writer) = self.registry.as_ref().expect("started");
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(services_file::follow(
            self.path(),
            writer.clone(),
            Duration::from_millis(10),
            shutdown,
        ));
        self.follower = Some((stop, task));
    }
}

#[async_trait::async_trait]
impl RegistrySource for ServicesFileSource {
    async fn write(&mut self, services: &[SourceService]) {
        let services: Vec<_> = services
            .iter()
            .map(|s| {
                json!({
                    "hostname": s.hostname,
                    "ports": s.ports,
                    "instances": s.instances.iter().flat_map(|i| s.ports.iter().map(move |p| json!({
                        "address": i.address, "port": p.port, "portName": p.name, "labels": i.labels,
                    }))).collect::<Vec<_>>(),
                })
            })
            .collect();
        // Renamed into place: the follower never reads half a file.
        let staging = self.dir.path().join("services.yaml.new");
        std::fs::write(&staging, json!({ "services": services }).to_string()).unwrap();
        std::fs::rename(&staging, self.path()).unwrap();
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        if self.registry.is_none() {
            if !self.path().exists() {
                self.write(&[]).await;
            }
            let loaded = services_file::load(&self.path()).unwrap();
            let (registry, writer) = services_file::registry(&loaded);
            self.registry = Some((Arc::new(registry), writer));
            self.start_follower();
        }
        Arc::clone(&self.registry.as_ref().expect("started above").0)
    }

    async fn disconnect(&mut self) -> bool {
        let (stop, task) = self.follower.take().expect("a follower");
        stop.send_replace(true);
        task.await.unwrap();
        true
    }

    async fn reconnect(&mut self) {
        self.start_follower();
    }
}

pilot_store::registry_conformance_suite!(|| async {
    Box::new(ServicesFileSource {
        dir: tempfile::tempdir().unwrap(),
        registry: None,
        follower: None,
    }) as Box<dyn RegistrySource>
});

const WORKLOADS: &str = "\
services:
- hostname: reviews.default.svc.cluster.local
  ports: [{name: http, port: 9080, protocol: HTTP}, {name: admin, port: 9090, protocol: HTTP}]
  instances:
  - {address: 10.0.0.3, port: 9080, portName: http, name: reviews-v1-1, namespace: default,
     serviceAccount: reviews, node: node-1, labels: {version: v1}}
  - {address: 10.0.0.3, port: 9090, portName: admin, labels: {istio.io/dataplane-mode: ambient}}
  - {address: 10.0.0.4, port: 9080, portName: http}
- hostname: metrics.default.svc.cluster.local
  ports: [{name: http, port: 8080, protocol: HTTP}]
  instances:
  - {address: 10.0.0.3, port: 8080}
workloads:
- {name: batch-1, namespace: jobs, serviceAccount: batch, node: node-2, addresses: [10.0.0.9],
   labels: {istio.io/dataplane-mode: ambient}}
";

fn write(dir: &std::path::Path, text: &str) -> PathBuf {
    let path = dir.join("services.yaml");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn the_instances_of_an_address_share_its_workload_and_the_listed_ones_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = services_file::load(&write(dir.path(), WORKLOADS)).unwrap();
    let (registry, _writer) = services_file::registry(&loaded);
    let snapshot = registry.snapshot();
    let at = |address: &str| -> Vec<pilot_model::ServiceInstance> {
        snapshot
            .all_instances()
            .values()
            .flat_map(|list| list.iter())
            .filter(|i| i.endpoint.address.to_string() == address)
            .cloned()
            .collect()
    };
    let shared = at("10.0.0.3");
    assert_eq!(shared.len(), 3, "three instances at 10.0.0.3: {shared:?}");
    let workload = shared[0].workload.clone().expect("10.0.0.3 is a workload");
    for instance in &shared {
        let theirs = instance.workload.as_ref().expect("every instance of the address");
        assert!(Arc::ptr_eq(theirs, &workload), "one Arc for the address");
        assert_eq!(instance.service_account.as_deref(), Some("reviews"));
    }
    assert_eq!(
        workload.uid,
        "Kubernetes/pilot.io/Registered/default/reviews-v1-1"
    );
    assert_eq!(
        (workload.namespace.as_str(), workload.name.as_str()),
        ("default", "reviews-v1-1")
    );
    assert_eq!(workload.service_account, "reviews");
    assert_eq!(workload.node.as_deref(), Some("node-1"));
    assert_eq!(
        workload.addresses,
        ["10.0.0.3".parse::<std::net::IpAddr>().unwrap()]
    );
    // Its labels are its instances' together: the admin port's enrolls it.
    assert_eq!(workload.labels.0.get("version").map(String::as_str), Some("v1"));
    assert!(workload.in_ambient(&pilot_model::Labels::new()));
    assert_eq!(
        workload.identity("cluster.local"),
        "spiffe://cluster.local/ns/default/sa/reviews"
    );
    // An instance naming no workload, at an address none names: none.
    assert!(at("10.0.0.4").iter().all(|i| i.workload.is_none()));
    // The service's accounts include its workloads'.
    let reviews = registry.get_service("reviews.default.svc.cluster.local").unwrap();
    assert_eq!(reviews.service_accounts, ["reviews"]);

    let listed = registry.workloads();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].uid, "Kubernetes/pilot.io/Registered/jobs/batch-1");
    assert_eq!(listed[0].node.as_deref(), Some("node-2"));
    assert_eq!(listed[0].service_account, "batch");
    assert_eq!(snapshot.listed_workloads().len(), 1);
}

#[tokio::test]
async fn listed_workloads_follow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), WORKLOADS);
    let (registry, writer) = services_file::registry(&services_file::load(&path).unwrap());
    let mut events = registry.subscribe();
    let (stop, shutdown) = watch::channel(false);
    let task = tokio::spawn(services_file::follow(
        path.clone(),
        writer,
        Duration::from_millis(10),
        shutdown,
    ));
    // batch-1 moves to node-3: one update; then it goes: one delete.
    std::fs::write(&path, WORKLOADS.replace("node: node-2", "node: node-3")).unwrap();
    let patience = Duration::from_secs(60);
    match next_event(&mut events, patience).await {
        pilot_model::ServiceEvent::Workload(pilot_model::Event::Updated { old, new }) => {
            assert_eq!(old.node.as_deref(), Some("node-2"));
            assert_eq!(new.node.as_deref(), Some("node-3"));
        }
        other => panic!("expected batch-1 updated, got {other:?}"),
    }
    let without = WORKLOADS[..WORKLOADS.find("workloads:").unwrap()].to_string();
    std::fs::write(&path, &without).unwrap();
    match next_event(&mut events, patience).await {
        pilot_model::ServiceEvent::Workload(pilot_model::Event::Deleted(gone)) => {
            assert_eq!(gone.name, "batch-1")
        }
        other => panic!("expected batch-1 deleted, got {other:?}"),
    }
    assert!(registry.workloads().is_empty());
    stop.send_replace(true);
    task.await.unwrap();
}

#[test]
fn contradicting_workloads_are_refused_naming_the_place() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |text: String, says: &str| {
        let error = services_file::load(&write(dir.path(), &text)).unwrap_err();
        assert!(error.contains(says), "{says:?} in {error}");
    };
    let instance = |extra: &str| {
        format!(
            "services:\n- hostname: r.default.svc.cluster.local\n  ports: [{{name: http, port: 80, protocol: HTTP}}]\n  \
             instances:\n  - {{address: 10.0.0.3, port: 80, name: r-1, namespace: default, serviceAccount: r}}\n  \
             - {{address: 10.0.0.3, port: 81, {extra}}}\n"
        )
    };
    refused(
        instance("name: r-2, namespace: default"),
        "services[0].instances[1]: address 10.0.0.3 is workload default/r-1 already (services[0].instances[0])",
    );
    refused(
        instance("serviceAccount: other"),
        "services[0].instances[1].serviceAccount: \"other\", but the workload at 10.0.0.3 (default/r-1, services[0].instances[0]) runs as \"r\"",
    );
    refused(
        instance("node: node-1"),
        "services[0].instances[1]: a workload needs both `name` and `namespace`",
    );
    refused(
        instance("name: r-1, namespace: default, labels: {version: v1}")
            .replace("serviceAccount: r}", "serviceAccount: r, labels: {version: v2}}"),
        "services[0].instances[1].labels.version: \"v1\", but services[0].instances[0] gives the workload at 10.0.0.3 \"v2\"",
    );
    refused(
        "workloads:\n- {name: a, namespace: x, addresses: [10.0.0.1]}\n- {name: b, namespace: x, addresses: [10.0.0.1]}\n"
            .into(),
        "workloads[1].addresses: 10.0.0.1 is already a's (workloads[0])",
    );
    refused(
        "workloads:\n- {name: a, namespace: x, addresses: [10.0.0.1]}\n- {name: a, namespace: x, addresses: [10.0.0.2]}\n"
            .into(),
        "workloads[1]: uid \"Kubernetes/pilot.io/Registered/x/a\" is workloads[0]'s workload already",
    );
    refused(
        "workloads:\n- {name: a, namespace: \"x/y\"}\n".into(),
        "workloads[0].namespace:",
    );
    refused("workloads:\n- {name: a}\n".into(), "missing field `namespace`");
    // The same workload named twice the same way is one workload.
    services_file::load(&write(dir.path(), &instance("name: r-1, namespace: default"))).unwrap();
}

async fn next_event(
    events: &mut futures::stream::BoxStream<'static, pilot_model::ServiceEvent>,
    patience: Duration,
) -> pilot_model::ServiceEvent {
    tokio::time::timeout(patience, futures::StreamExt::next(events))
        .await
        .expect("no event")
        .expect("open")
}

/// The example of docs/guide/server.md loads, and means what it says.
#[test]
fn the_guide_s_example_loads() {
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide/server.md")).unwrap();
    let section = &guide[guide.find("## The services file").expect("the section")..];
    let start = section.find("```yaml\n").expect("its example") + "```yaml\n".len();
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let file = services_file::load(&write(dir.path(), example)).unwrap();
    let workloads = &file.workloads;
    assert_eq!(workloads.len(), 1);
    assert_eq!(workloads[0].node.as_deref(), Some("node-2"));
    let (registry, _writer) = services_file::registry(&file);
    let instances = registry.instances("reviews.default.svc.cluster.local", &[], &[]);
    let workload = instances[0].workload.as_ref().expect("the instance's workload");
    assert_eq!(workload.node.as_deref(), Some("node-1"));
    assert_eq!(workload.service_account, "reviews");
}
