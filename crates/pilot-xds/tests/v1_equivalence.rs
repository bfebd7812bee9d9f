//! The `networking.istio.io` VirtualService and DestinationRule compile
//! into the routing model as their v1alpha2 equivalents do, so Envoy gets
//! the same resources; Istio's own v1 bookinfo samples generate
//! configuration a real Envoy accepts.

mod support;

use pilot_api::default_registry;
use pilot_model::{DynConfig, Labels, document};
use pilot_routing::{Destination, HttpRoute, RoutingConfigs};
use pilot_xds::{MeshConfig, generate, testing};

const V1ALPHA2: &str = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: reviews-split, namespace: default}
spec:
  destination: {name: reviews}
  match: {request: {headers: {uri: {prefix: /api}, cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}}}}
  route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]
  httpReqTimeout: {simpleTimeout: {timeout: 5s}}
  httpReqRetries: {simpleRetry: {attempts: 3, perTryTimeout: 2s}}
  websocketUpgrade: true
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews, namespace: default}
spec:
  destination: {name: reviews}
  loadBalancing: {name: RANDOM}
  circuitBreaker: {simpleCb: {maxConnections: 100, httpMaxPendingRequests: 10}}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews-v2, namespace: default}
spec:
  destination: {name: reviews, labels: {version: v2}}
  loadBalancing: {name: LEAST_CONN}
  circuitBreaker: {simpleCb: {maxConnections: 100, httpMaxPendingRequests: 10}}
"#;

/// The same, in today's API: websocket upgrades are allowed by default
/// there (hence `websocketUpgrade` above), and a subset's policy is merged
/// over its host's (a v1alpha2 subset policy replaces the host's).
const V1: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-split, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{uri: {prefix: /api}, headers: {cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}}}]
    route:
    - destination: {host: reviews, subset: v1}
      weight: 80
    - destination: {host: reviews, subset: v2}
      weight: 20
    timeout: 5s
    retries: {attempts: 3, perTryTimeout: 2s}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews.default.svc.cluster.local
  trafficPolicy:
    loadBalancer: {simple: RANDOM}
    connectionPool: {tcp: {maxConnections: 100}, http: {http1MaxPendingRequests: 10}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - name: v2
    labels: {version: v2}
    trafficPolicy: {loadBalancer: {simple: LEAST_REQUEST}}
"#;

fn mesh(text: &str) -> MeshConfig {
    let objects = document::parse("objects.yaml", text, &default_registry()).unwrap();
    MeshConfig::from_configs(&objects).unwrap()
}

/// A destination with its subsets' names left out (a DestinationRule
/// names them; v1alpha2 names them after their labels).
fn unnamed(destination: &Destination) -> Destination {
    let mut destination = destination.clone();
    for subset in &mut destination.subsets {
        subset.name.clear();
    }
    destination
}

#[test]
fn a_virtual_service_and_destination_rule_compile_as_their_v1alpha2_equivalents() {
    let (old, new) = (mesh(V1ALPHA2), mesh(V1));
    let (old, new) = (old.model(), new.model());
    let routes =
        |m: &pilot_routing::RoutingModel| -> Vec<HttpRoute> { m.http_routes(support::REVIEWS).to_vec() };
    assert_eq!(routes(old).len(), 1);
    assert_eq!(routes(old), routes(new));
    let (old_reviews, new_reviews) = (
        old.destination(support::REVIEWS).unwrap(),
        new.destination(support::REVIEWS).unwrap(),
    );
    assert_eq!(unnamed(old_reviews), unnamed(new_reviews));
    let names: Vec<&str> = new_reviews.subsets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["v1", "v2"]);
    assert!(
        new.policy_for(support::REVIEWS, &Labels::from_pairs([("version", "v2")]))
            .unwrap()
            .connection_pool
            .is_some(),
        "the subset's policy is merged over the host's"
    );
}

#[test]
fn a_virtual_service_and_destination_rule_generate_what_their_v1alpha2_equivalents_do() {
    let (old, new) = (mesh(V1ALPHA2), mesh(V1));
    let registry = support::registry();
    for (name, proxy) in support::proxies() {
        let expected = generate(&proxy, &registry, &old);
        let generated = generate(&proxy, &registry, &new);
        assert_eq!(generated, expected, "{name}");
        generated.check().unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    let (_, sidecar) = support::proxies().remove(0);
    let resources = generate(&sidecar, &registry, &new);
    assert!(
        resources
            .clusters
            .iter()
            .any(|c| c.name == "outbound|9080|version=v2|reviews.default.svc.cluster.local")
    );
    testing::validate(
        &pilot_test_support::envoy_binary(),
        &sidecar.node_id(),
        &resources,
    )
    .unwrap();
}

/// Istio's v1 bookinfo samples (`samples/bookinfo/networking`: the corpus
/// `istio-samples/networking` at `../shared/corpora/`): every service to v1,
/// then reviews 80/20, over the subsets of `destination-rule-all`.
#[test]
fn istios_bookinfo_samples_route_as_written_and_envoy_accepts_them() {
    let Some(dir) = pilot_test_support::corpus("istio-samples/networking/valid") else {
        return;
    };
    let read = |files: &[&str]| -> Vec<DynConfig> {
        files
            .iter()
            .flat_map(|file| {
                let text = std::fs::read_to_string(dir.join(file)).unwrap();
                document::parse(file, &text, &default_registry()).unwrap()
            })
            .collect()
    };
    let registry = support::registry();
    let (_, sidecar) = support::proxies().remove(0);
    let all_v1 = read(&[
        "bookinfo-destination-rule-all.yaml",
        "bookinfo-virtual-service-all-v1.yaml",
    ]);
    let mesh = MeshConfig::new(RoutingConfigs::from_configs(&all_v1).unwrap().compile());
    let resources = generate(&sidecar, &registry, &mesh);
    let route = |resources: &pilot_xds::Resources, host: &str| {
        let config = resources.routes.iter().find(|r| r.name == "9080").unwrap();
        let host = config
            .virtual_hosts
            .iter()
            .find(|v| v.name == format!("{host}:9080"))
            .unwrap();
        format!("{:?}", host.routes[0].action)
    };
    for host in ["productpage", "reviews", "ratings", "details"] {
        let action = route(&resources, &format!("{host}.default.svc.cluster.local"));
        assert!(
            action.contains(&format!(
                "outbound|9080|version=v1|{host}.default.svc.cluster.local"
            )),
            "{host}: {action}"
        );
    }
    resources.check().unwrap();
    testing::validate(
        &pilot_test_support::envoy_binary(),
        &sidecar.node_id(),
        &resources,
    )
    .unwrap();

    // reviews 80/20 replaces the all-v1 reviews service (same name).
    let mut objects: Vec<DynConfig> = all_v1
        .into_iter()
        .filter(|o| !(o.meta.kind == "VirtualService" && o.meta.name == "reviews"))
        .collect();
    objects.extend(read(&["bookinfo-virtual-service-reviews-80-20.yaml"]));
    let resources = generate(&sidecar, &registry, &MeshConfig::from_configs(&objects).unwrap());
    let action = route(&resources, support::REVIEWS);
    assert!(action.contains("WeightedClusters"), "{action}");
    assert!(
        action.contains("version=v1") && action.contains("version=v2"),
        "{action}"
    );
    testing::validate(
        &pilot_test_support::envoy_binary(),
        &sidecar.node_id(),
        &resources,
    )
    .unwrap();
}
