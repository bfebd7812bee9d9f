//! pilot-discovery on Kubernetes: `--store kubernetes --install-crds
//! --registry kubernetes` against the fake API server served on a loopback
//! port (no real API server can run here; `pilot-store-k8s`'s cluster tests
//! cover a real one). The server installs the CRDs, pilotctl's writes land
//! as custom resources, and a write made directly in the cluster (as
//! `kubectl` would) shows in `pilotctl get` through the server's watch.

mod common;

use common::{Discovery, eventually, pilotctl};
use pilot_model::{ConfigKey, ConfigStore, istio};
use pilot_store_k8s::KubeConfigStore;
use pilot_store_k8s::testing::FakeApiServer;

#[test]
fn the_server_keeps_configuration_in_kubernetes() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = FakeApiServer::new();
    let listening = runtime.block_on(fake.listen()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, listening.kubeconfig()).unwrap();

    let server = Discovery::start_with_env(
        &[
            "--store",
            "kubernetes",
            "--install-crds",
            "--registry",
            "kubernetes",
        ],
        &[("KUBECONFIG", kubeconfig.as_os_str())],
    );
    let applied = pilotctl(
        Some(&server.url),
        &["apply", "-f", "examples/bookinfo/"],
        &[],
        None,
    );
    assert_eq!(applied.code, 0, "{applied:?}");

    // The server installed the CRDs...
    let crds: kube::Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = runtime.block_on(async { kube::Api::all(fake.client()) });
    let crd_names: Vec<String> = runtime
        .block_on(crds.list(&Default::default()))
        .unwrap()
        .items
        .into_iter()
        .filter_map(|crd| crd.metadata.name)
        .collect();
    assert!(
        crd_names.contains(&"routerules.config.istio.io".to_string()),
        "{crd_names:?}"
    );
    // ...and the rules are custom resources in the cluster.
    let cluster = runtime.block_on(async { KubeConfigStore::new(fake.client(), istio::registry()) });
    let rules = runtime
        .block_on(cluster.list("RouteRule", Some("default")))
        .unwrap();
    let mut names: Vec<&str> = rules.iter().map(|r| r.meta.name.as_str()).collect();
    names.sort();
    assert!(names.contains(&"reviews-default"), "{names:?}");
    assert!(names.contains(&"reviews-test-v3"), "{names:?}");

    // A change made in the cluster directly reaches the server.
    let key = ConfigKey::new("RouteRule", "default", "reviews-default");
    runtime.block_on(cluster.delete(&key, None)).unwrap();
    eventually("the server to see the delete made in the cluster", || {
        let got = pilotctl(Some(&server.url), &["get", "rr", "reviews-default"], &[], None);
        got.code == 1 && got.stderr.contains("not found")
    });
    let listed = pilotctl(Some(&server.url), &["get", "rr"], &[], None);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("reviews-test-v3"), "{listed:?}");
    assert!(!listed.stdout.contains("reviews-default"), "{listed:?}");
    server.terminate();
    drop(listening);
}
