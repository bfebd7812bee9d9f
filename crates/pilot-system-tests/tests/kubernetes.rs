//! pilot-discovery on Kubernetes: `--store kubernetes --install-crds
//! --registry kubernetes` against the fake API server served on a loopback
//! port (no real API server can run here; `pilot-store-k8s`'s cluster tests
//! cover a real one). The server installs the CRDs, pilotctl's writes land
//! as custom resources, and a write made directly in the cluster (as
//! `kubectl` would) shows in `pilotctl get` through the server's watch.

use pilot_api::istio;
use pilot_model::{ConfigKey, ConfigStore};
use pilot_store_k8s::KubeConfigStore;
use pilot_system_tests::{Store, discovery};
use pilot_test_support::{FakeCluster, eventually, pilotctl};

#[test]
fn the_server_keeps_configuration_in_kubernetes() {
    let cluster = FakeCluster::start();
    let server = discovery(&Store::Kubernetes(&cluster), &["--registry", "kubernetes"]);
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
    > = kube::Api::all(cluster.client());
    let crd_names: Vec<String> = cluster
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
    let store = cluster.block_on(async { KubeConfigStore::new(cluster.client(), istio::registry()) });
    let rules = cluster
        .block_on(store.list("RouteRule", Some("default")))
        .unwrap();
    let mut names: Vec<&str> = rules.iter().map(|r| r.meta.name.as_str()).collect();
    names.sort();
    assert!(names.contains(&"reviews-default"), "{names:?}");
    assert!(names.contains(&"reviews-test-v3"), "{names:?}");

    // A change made in the cluster directly reaches the server.
    let key = ConfigKey::new("RouteRule", "default", "reviews-default");
    cluster.block_on(store.delete(&key, None)).unwrap();
    eventually("the server to see the delete made in the cluster", || {
        let got = pilotctl(Some(&server.url), &["get", "rr", "reviews-default"], &[], None);
        got.code == 1 && got.stderr.contains("not found")
    });
    let listed = pilotctl(Some(&server.url), &["get", "rr"], &[], None);
    assert_eq!(listed.code, 0, "{listed:?}");
    assert!(listed.stdout.contains("reviews-test-v3"), "{listed:?}");
    assert!(!listed.stdout.contains("reviews-default"), "{listed:?}");
    server.terminate();
    drop(cluster);
}
