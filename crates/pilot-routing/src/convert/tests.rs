//! The converter against the routing model: v1alpha2 objects and their
//! conversion compile to the same model, apart from route and subset
//! names; what cannot be converted exactly is noted.

use super::*;
use crate::{HttpRoute, RoutingModel};
use pilot_api::default_registry;
use pilot_model::document;

const RULES: &str = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: reviews-default, namespace: default}
spec:
  destination: {name: reviews}
  precedence: 1
  route: [{labels: {version: v1}}]
  websocketUpgrade: true
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: reviews-jason, namespace: default}
spec:
  destination: {name: reviews}
  precedence: 2
  match: {request: {headers: {cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}, uri: {prefix: /api}}}}
  route: [{labels: {version: v2}, weight: 50}, {labels: {version: v3}, weight: 50}]
  httpReqTimeout: {simpleTimeout: {timeout: 5s}}
  httpReqRetries: {simpleRetry: {attempts: 3, perTryTimeout: 2s}}
  httpFault: {delay: {percent: 50, fixedDelay: 2s}, abort: {percent: 10, httpStatus: 503}}
  mirror: {name: ratings, labels: {version: v2}}
  corsPolicy: {allowOrigin: [https://example.com], allowMethods: [GET], maxAge: 1h}
  appendHeaders: {x-route: jason}
  rewrite: {uri: /v2}
  websocketUpgrade: true
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews, namespace: default}
spec:
  destination: {name: reviews}
  loadBalancing: {name: RANDOM}
  circuitBreaker: {simpleCb: {maxConnections: 100, httpMaxPendingRequests: 10, httpConsecutiveErrors: 5, sleepWindow: 30s}}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews-v2, namespace: default}
spec:
  destination: {name: reviews, labels: {version: v2}}
  loadBalancing: {name: LEAST_CONN}
  circuitBreaker: {simpleCb: {maxConnections: 10, httpConsecutiveErrors: 1}}
"#;

fn parse(text: &str) -> Vec<DynConfig> {
    document::parse("objects.yaml", text, &default_registry()).unwrap()
}

fn model(objects: &[DynConfig]) -> RoutingModel {
    RoutingConfigs::from_configs(objects).unwrap().compile()
}

fn unnamed(routes: &[HttpRoute]) -> Vec<HttpRoute> {
    routes
        .iter()
        .cloned()
        .map(|mut r| {
            r.name.clear();
            r
        })
        .collect()
}

#[test]
fn rules_and_policies_convert_to_one_virtual_service_and_destination_rule_per_host() {
    let objects = parse(RULES);
    let conversion = convert_objects(&objects).unwrap();
    assert!(conversion.notes.is_empty(), "{:?}", conversion.notes);
    let registry = default_registry();
    for object in &conversion.objects {
        registry.prepare(object.clone()).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\n{}",
                object.meta.name,
                document::to_yaml(&conversion.objects)
            )
        });
    }
    let names: Vec<(&str, &str, &str)> = conversion
        .objects
        .iter()
        .map(|o| {
            (
                o.meta.kind.as_str(),
                o.meta.namespace.as_str(),
                o.meta.name.as_str(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("VirtualService", "default", "reviews"),
            ("DestinationRule", "default", "ratings"),
            ("DestinationRule", "default", "reviews"),
        ]
    );
    let vs: Config<VirtualService> = Config::from_dyn(&conversion.objects[0]).unwrap();
    let order: Vec<&str> = vs.spec.http.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        order,
        ["reviews-jason", "reviews-default"],
        "higher precedence first"
    );
    let dr: Config<DestinationRule> = Config::from_dyn(&conversion.objects[2]).unwrap();
    let subsets: Vec<&str> = dr.spec.subsets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(subsets, ["v1", "v2", "v3"]);

    let (old, new) = (model(&objects), model(&conversion.objects));
    let host = "reviews.default.svc.cluster.local";
    assert_eq!(unnamed(old.http_routes(host)), unnamed(new.http_routes(host)));
    for host in [host, "ratings.default.svc.cluster.local"] {
        let (mut a, mut b) = (
            old.destination(host).unwrap().clone(),
            new.destination(host).unwrap().clone(),
        );
        for s in a.subsets.iter_mut().chain(b.subsets.iter_mut()) {
            s.name.clear();
        }
        assert_eq!(a, b, "{host}");
    }
}

#[test]
fn what_v1_cannot_say_is_noted_with_its_object_and_path() {
    let objects = parse(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: from-productpage, namespace: default}
spec:
  destination: {name: reviews}
  match: {source: {name: productpage, labels: {version: v1}}}
  route: [{labels: {version: v2}}]
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews, namespace: default}
spec:
  destination: {name: reviews}
  loadBalancing: {name: RANDOM}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: reviews-v2, namespace: default}
spec:
  destination: {name: reviews, labels: {version: v2}}
  circuitBreaker: {simpleCb: {maxConnections: 10}}
"#,
    );
    let conversion = convert_objects(&objects).unwrap();
    let notes: Vec<String> = conversion.notes.iter().map(ToString::to_string).collect();
    assert_eq!(notes.len(), 3, "{notes:#?}");
    assert!(
        notes[0].starts_with("RouteRule default/from-productpage: spec.match.source: "),
        "{notes:?}"
    );
    assert!(
        notes[0].contains("productpage.default.svc.cluster.local"),
        "{notes:?}"
    );
    assert!(
        notes[1].starts_with("RouteRule default/from-productpage: spec.websocketUpgrade: "),
        "{notes:?}"
    );
    assert!(
        notes[2].starts_with("DestinationPolicy default/reviews-v2: spec: "),
        "{notes:?}"
    );
    assert!(notes[2].contains("loadBalancing"), "{notes:?}");
    let vs: Config<VirtualService> = Config::from_dyn(&conversion.objects[0]).unwrap();
    assert_eq!(vs.spec.http[0].matches[0].source_labels["version"], "v1");
}

#[test]
fn egress_rules_become_external_service_entries_and_ingress_rules_a_gateway() {
    let objects = parse(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: google, namespace: default}
spec:
  destination: {service: "*.google.com"}
  ports: [{port: 443, protocol: https}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: httpbin, namespace: default}
spec:
  destination: {service: httpbin.org}
  ports: [{port: 80, protocol: http}]
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: bookinfo, namespace: default}
spec:
  port: 80
  destination: {name: productpage}
  destinationPort: 9080
  match: {request: {headers: {uri: {prefix: /productpage}}}}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: bookinfo-tls, namespace: default}
spec:
  port: 443
  tlsSecret: ingress-certs
  precedence: 1
  destination: {name: productpage}
  destinationPort: 9080
"#,
    );
    let conversion = convert_objects(&objects).unwrap();
    // What generates differently: the HTTPS port's listener, and websocket
    // upgrades on the ingress routes.
    let notes: Vec<(&str, &str, &str)> = conversion
        .notes
        .iter()
        .map(|n| (n.kind.as_str(), n.name.as_str(), n.path.as_str()))
        .collect();
    assert_eq!(
        notes,
        [
            ("EgressRule", "google", "spec.ports[0]"),
            ("IngressRule", "bookinfo-tls", "spec"),
            ("IngressRule", "bookinfo", "spec"),
        ],
        "{:?}",
        conversion.notes
    );
    let registry = default_registry();
    for object in &conversion.objects {
        registry.prepare(object.clone()).unwrap_or_else(|e| panic!("{e}"));
    }
    let yaml = document::to_yaml(&conversion.objects);
    let entries: Vec<Config<ServiceEntry>> = conversion
        .objects
        .iter()
        .filter(|o| o.meta.kind == "ServiceEntry")
        .map(|o| Config::from_dyn(o).unwrap())
        .collect();
    assert_eq!(entries.len(), 2, "{yaml}");
    assert_eq!(
        entries[0].spec.resolution,
        Some(pilot_api::networking::Resolution::None)
    );
    assert_eq!(
        entries[1].spec.resolution,
        Some(pilot_api::networking::Resolution::Dns)
    );
    assert_eq!(entries[1].spec.ports[0].protocol, "HTTP");
    let gateway: Config<Gateway> = conversion
        .objects
        .iter()
        .find(|o| o.meta.kind == "Gateway")
        .map(|o| Config::from_dyn(o).unwrap())
        .unwrap();
    assert_eq!(gateway.spec.servers.len(), 2, "{yaml}");
    let vs: Config<VirtualService> = conversion
        .objects
        .iter()
        .find(|o| o.meta.kind == "VirtualService")
        .map(|o| Config::from_dyn(o).unwrap())
        .unwrap();
    assert_eq!(vs.spec.gateways, std::slice::from_ref(&gateway.meta.name));
    let order: Vec<&str> = vs.spec.http.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(order, ["bookinfo-tls", "bookinfo"]);
    assert_eq!(vs.spec.http[1].matches[0].port, Some(80));
}

#[test]
fn a_first_istioctl_document_converts_through_its_v1alpha2_kind() {
    let values = document::parse_values(
        "old.yaml",
        r#"
type: route-rule
name: reviews-jason
spec:
  destination: reviews.default.svc.cluster.local
  precedence: 2
  match:
    source: productpage.default.svc.cluster.local
    source_tags: {version: v1}
    httpHeaders: {cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}}
  route:
  - tags: {version: v2}
"#,
    )
    .unwrap();
    let document = document::first_cli_document(&values[0]).unwrap();
    let object = from_first_cli(&document, "default").unwrap();
    default_registry().prepare(object.clone()).unwrap();
    let conversion = convert_objects(&[object]).unwrap();
    let vs: Config<VirtualService> = Config::from_dyn(&conversion.objects[0]).unwrap();
    let route = &vs.spec.http[0];
    assert_eq!(route.route[0].destination.subset, "v2");
    assert!(route.matches[0].headers.contains_key("cookie"));
    assert_eq!(route.matches[0].source_labels["version"], "v1");
}
