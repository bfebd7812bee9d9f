//! Service entries (Istio's own samples and each resolution) as registry
//! services, with TCP and TLS routes: the generated configuration passes
//! `Resources::check` and a real Envoy 1.40 loads it (`--mode validate`);
//! the clusters, filter chains and listener filters are the ones asked for.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_api::default_registry;
use pilot_api::networking::{ServiceEntry, WorkloadEntry};

use pilot_model::{Config, DynConfig, document};
use pilot_store::FollowedRegistry;
use pilot_store::service_entries::desired_state;
use pilot_test_support::{corpus, envoy_binary};
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};

const ENTRIES: &str = r#"
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: db, namespace: default}
spec:
  hosts: [db.internal.example]
  addresses: [240.0.0.5]
  location: MESH_INTERNAL
  ports: [{number: 5432, name: tcp-pg, protocol: TCP}]
  resolution: STATIC
  endpoints:
  - {address: 10.0.0.1, labels: {version: v1}, weight: 3}
  - {address: 10.0.0.2, labels: {version: v2}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: db, namespace: default}
spec:
  host: db.internal.example
  subsets: [{name: v1, labels: {version: v1}}, {name: v2, labels: {version: v2}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: db, namespace: default}
spec:
  hosts: [db.internal.example]
  tcp:
  - match: [{port: 5432, destinationSubnets: [240.0.0.5/32]}]
    route:
    - {destination: {host: db.internal.example, subset: v1}, weight: 80}
    - {destination: {host: db.internal.example, subset: v2}, weight: 20}
  - route: [{destination: {host: db.internal.example, subset: v2}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tls-apis, namespace: default}
spec:
  hosts: [api.example.org]
  addresses: [240.0.0.6]
  ports: [{number: 8443, name: tls, protocol: TLS}]
  resolution: DNS
  endpoints: [{address: a.example.org}, {address: b.example.org, weight: 2}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: tls-other, namespace: default}
spec:
  hosts: [other.example.org]
  ports: [{number: 8443, name: tls, protocol: TLS}]
  resolution: DNS_ROUND_ROBIN
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: tls-apis, namespace: default}
spec:
  hosts: [api.example.org]
  tls:
  - match: [{sniHosts: [api.example.org], port: 8443}]
    route: [{destination: {host: other.example.org, port: {number: 8443}}}]
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: vms, namespace: default}
spec:
  hosts: [vm.default.example]
  location: MESH_INTERNAL
  ports: [{number: 9080, name: http, protocol: HTTP}]
  resolution: STATIC
  workloadSelector: {labels: {app: vm}}
---
apiVersion: networking.istio.io/v1
kind: WorkloadEntry
metadata: {name: vm-1, namespace: default}
spec: {address: 10.1.0.1, ports: {http: 8080}, labels: {app: vm}, weight: 4}
"#;

/// Istio's samples with service entries and TCP routes (the corpus
/// `istio-samples/networking` at `../shared/corpora/`, sources in its
/// `SOURCE`).
const SAMPLES: [&str; 5] = [
    "external-aptget.yaml",
    "external-github.yaml",
    "external-pypi.yaml",
    "bookinfo-egress-rule-google-apis.yaml",
    "tcp-echo-tcp-echo-all-v1.yaml",
];

/// The entries above and the samples, or `None` when the corpus is
/// missing (outside CI: the test skips, saying so).
fn objects() -> Option<Vec<DynConfig>> {
    let kinds = default_registry();
    let mut all = document::parse("entries.yaml", ENTRIES, &kinds).unwrap();
    let dir = corpus("istio-samples/networking/valid")?;
    for sample in SAMPLES {
        let text = std::fs::read_to_string(dir.join(sample)).unwrap();
        let mut parsed = document::parse(sample, &text, &kinds).unwrap();
        for object in &mut parsed {
            if object.meta.namespace.is_empty() {
                object.meta.namespace = "default".into();
            }
        }
        all.extend(parsed);
    }
    Some(all)
}

fn registry(objects: &[DynConfig]) -> FollowedRegistry {
    let entries: Vec<Config<ServiceEntry>> = typed(objects, "ServiceEntry");
    let workloads: Vec<Config<WorkloadEntry>> = typed(objects, "WorkloadEntry");
    let (registry, writer) = FollowedRegistry::new();
    writer.apply(desired_state(&entries, &workloads));
    registry
}

fn typed<K: pilot_model::ConfigKind>(objects: &[DynConfig], kind: &str) -> Vec<Config<K>> {
    objects
        .iter()
        .filter(|o| o.meta.kind == kind)
        .map(|o| Config::from_dyn(o).unwrap())
        .collect()
}

fn proxies() -> Vec<Proxy> {
    let no_capture = [("INTERCEPTION_MODE".to_string(), "NONE".to_string())].into();
    vec![
        Proxy::from_node_id("sidecar~10.1.1.2~client.default~default.svc.cluster.local").unwrap(),
        Proxy::from_node_id("sidecar~10.1.1.3~client.default~default.svc.cluster.local")
            .unwrap()
            .with_metadata(&no_capture)
            .unwrap(),
    ]
}

fn generated() -> Option<Vec<(Proxy, Resources)>> {
    let objects = objects()?;
    let registry = registry(&objects);
    let mesh = MeshConfig::from_configs(&objects).unwrap();
    Some(
        proxies()
            .into_iter()
            .map(|proxy| {
                let resources = generate(&proxy, &registry, &mesh);
                (proxy, resources)
            })
            .collect::<Vec<_>>(),
    )
}

fn cluster<'a>(resources: &'a Resources, name: &str) -> &'a Cluster {
    resources
        .clusters
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no cluster {name}"))
}

fn kind(cluster: &Cluster) -> cluster::DiscoveryType {
    match cluster.cluster_discovery_type {
        Some(cluster::ClusterDiscoveryType::Type(t)) => cluster::DiscoveryType::try_from(t).unwrap(),
        _ => panic!("no discovery type"),
    }
}

fn tcp_proxies(listener: &Listener) -> Vec<TcpProxy> {
    listener
        .filter_chains
        .iter()
        .flat_map(|c| &c.filters)
        .filter_map(|f| match &f.config_type {
            Some(envoy_types::pb::envoy::config::listener::v3::filter::ConfigType::TypedConfig(any)) => {
                <TcpProxy as prost::Message>::decode(any.value.as_slice()).ok()
            }
            _ => None,
        })
        .collect()
}

#[test]
fn envoy_accepts_service_entries_and_l4_routes() {
    let Some(generated) = generated() else {
        return;
    };
    for (proxy, resources) in generated {
        resources
            .check()
            .unwrap_or_else(|e| panic!("{}: {e}", proxy.node_id()));
        testing::validate(&envoy_binary(), &proxy.node_id(), &resources)
            .unwrap_or_else(|e| panic!("{}: {e}", proxy.node_id()));
    }
}

#[test]
fn each_resolution_has_its_cluster() {
    let Some(mut generated) = generated() else {
        return;
    };
    let (_, resources) = generated.remove(0);
    use cluster::DiscoveryType::*;
    assert_eq!(
        kind(cluster(&resources, "outbound|5432||db.internal.example")),
        Eds
    );
    assert_eq!(
        kind(cluster(
            &resources,
            "outbound|5432|version=v1|db.internal.example"
        )),
        Eds
    );
    assert_eq!(
        kind(cluster(&resources, "outbound|8443||api.example.org")),
        StrictDns
    );
    assert_eq!(
        kind(cluster(&resources, "outbound|8443||other.example.org")),
        LogicalDns
    );
    // github.com, NONE: the original destination.
    assert_eq!(kind(cluster(&resources, "outbound|443||github.com")), OriginalDst);
    let dns = cluster(&resources, "outbound|8443||api.example.org");
    let endpoints = &dns.load_assignment.as_ref().unwrap().endpoints[0].lb_endpoints;
    let weights: Vec<Option<u32>> = endpoints
        .iter()
        .map(|e| e.load_balancing_weight.as_ref().map(|w| w.value))
        .collect();
    assert_eq!(weights, [None, Some(2)]);
    // STATIC endpoints and the selected WorkloadEntry over EDS, weighted.
    let vm = resources
        .endpoints
        .iter()
        .find(|a| a.cluster_name == "outbound|9080||vm.default.example")
        .unwrap();
    let lb = &vm.endpoints[0].lb_endpoints[0];
    assert_eq!(lb.load_balancing_weight.as_ref().map(|w| w.value), Some(4));
}

#[test]
fn tcp_and_tls_routes_become_filter_chains() {
    let Some(mut generated) = generated() else {
        return;
    };
    let (_, resources) = generated.remove(0);
    let db = resources
        .listeners
        .iter()
        .find(|l| l.name == "240.0.0.5_5432")
        .expect("the VIP's listener");
    let proxies = tcp_proxies(db);
    assert_eq!(proxies.len(), 2, "{db:?}");
    let Some(tcp_proxy::ClusterSpecifier::WeightedClusters(split)) = &proxies[0].cluster_specifier else {
        panic!("a weighted split: {:?}", proxies[0])
    };
    let split: Vec<(&str, u32)> = split
        .clusters
        .iter()
        .map(|c| (c.name.as_str(), c.weight))
        .collect();
    assert_eq!(
        split,
        [
            ("outbound|5432|version=v1|db.internal.example", 80),
            ("outbound|5432|version=v2|db.internal.example", 20)
        ]
    );
    let subnets = &db.filter_chains[0]
        .filter_chain_match
        .as_ref()
        .unwrap()
        .prefix_ranges;
    assert_eq!(subnets[0].address_prefix, "240.0.0.5");
    assert!(db.filter_chains[1].filter_chain_match.is_none());

    let tls = resources
        .listeners
        .iter()
        .find(|l| l.name == "240.0.0.6_8443")
        .expect("the TLS VIP's listener");
    assert_eq!(
        tls.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
    let names = &tls.filter_chains[0]
        .filter_chain_match
        .as_ref()
        .unwrap()
        .server_names;
    assert_eq!(names, &["api.example.org"]);
    let proxies = tcp_proxies(tls);
    assert_eq!(
        proxies[0].cluster_specifier,
        Some(tcp_proxy::ClusterSpecifier::Cluster(
            "outbound|8443||other.example.org".into()
        ))
    );
    assert_eq!(
        proxies[1].cluster_specifier,
        Some(tcp_proxy::ClusterSpecifier::Cluster(
            "outbound|8443||api.example.org".into()
        ))
    );
}
