use super::*;
use pilot_api::istio;
use pilot_model::document;

fn compile(text: &str) -> RoutingModel {
    let objects = document::parse("rules.yaml", text, &istio::registry()).unwrap();
    RoutingConfigs::from_configs(&objects).unwrap().compile()
}

const HOST: &str = "reviews.default.svc.cluster.local";

#[test]
fn rules_are_ordered_by_precedence_then_namespace_and_name() {
    let model = compile(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: b, namespace: default}
spec: {destination: {name: reviews}, precedence: 1}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: a, namespace: default}
spec: {destination: {name: reviews}, precedence: 1}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: c, namespace: default}
spec: {destination: {name: reviews}, precedence: 2}
"#,
    );
    let names: Vec<&str> = model.http_routes(HOST).iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["default/c", "default/a", "default/b"]);
    assert!(model.http_routes("other.default.svc.cluster.local").is_empty());
}

#[test]
fn labelled_targets_and_policies_become_subsets_with_their_policy() {
    let model = compile(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: split, namespace: default}
spec:
  destination: {name: reviews}
  match: {source: {name: productpage, labels: {version: v1}}, request: {headers: {uri: {prefix: /a}, method: {exact: GET}, cookie: {regex: "^u=.*"}}}}
  route: [{labels: {version: v2}, weight: 0}, {labels: {version: v1}, weight: 100}]
  mirror: {name: reviews, labels: {version: v3}}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: v1, namespace: default}
spec:
  destination: {name: reviews, labels: {version: v1}}
  loadBalancing: {name: RANDOM}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: all, namespace: default}
spec:
  destination: {name: reviews}
  circuitBreaker: {simpleCb: {maxConnections: 7}}
"#,
    );
    let route = &model.http_routes(HOST)[0];
    let m = &route.matches[0];
    assert_eq!(m.uri, Some(StringMatch::Prefix("/a".into())));
    assert_eq!(m.method, Some(StringMatch::Exact("GET".into())));
    assert_eq!(m.headers["cookie"], StringMatch::Regex("^u=.*".into()));
    assert_eq!(
        m.source_service.as_deref(),
        Some("productpage.default.svc.cluster.local")
    );
    assert!(
        model
            .source_services()
            .contains("productpage.default.svc.cluster.local")
    );
    // The weightless target is no destination, but still a subset.
    let HttpAction::Route(targets) = &route.action else {
        panic!("{:?}", route.action)
    };
    assert_eq!(targets.len(), 1);
    assert_eq!(targets[0].weight, 100);
    let destination = model.destination(HOST).unwrap();
    let names: Vec<&str> = destination.subsets.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["version=v1", "version=v2", "version=v3"]);
    let v1 = Labels::from_pairs([("version", "v1")]);
    let v2 = Labels::from_pairs([("version", "v2")]);
    assert_eq!(
        model.policy_for(HOST, &v1).unwrap().load_balancer,
        Some(LoadBalancer::Simple(SimpleLb::Random))
    );
    // Without a policy of its own, a subset has the host's.
    let host_policy = model.policy_for(HOST, &v2).unwrap();
    assert_eq!(
        host_policy.connection_pool.as_ref().unwrap().max_connections,
        Some(7)
    );
    assert_eq!(model.policy_for(HOST, &Labels::new()), Some(host_policy));
}

#[test]
fn egress_and_ingress_rules_become_external_services_and_ingress_servers() {
    let model = compile(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: google, namespace: default}
spec: {destination: {service: "*.google.com"}, ports: [{port: 443, protocol: https}]}
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: httpbin, namespace: default}
spec: {destination: {service: httpbin.org}, ports: [{port: 80, protocol: http2}]}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: a, namespace: default}
spec: {port: 80, destination: {name: reviews}, destinationPortName: http, tlsSecret: s, precedence: 1}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: b, namespace: default}
spec: {port: 80, destination: {name: ratings}, destinationPort: 9080, match: {request: {headers: {uri: {prefix: /r}}}}}
"#,
    );
    let external = model.external_services();
    assert_eq!(external.len(), 2);
    assert_eq!(external[0].resolution, Resolution::Passthrough);
    assert_eq!(external[1].resolution, Resolution::Dns);
    assert_eq!(external[1].ports[0].protocol, pilot_model::Protocol::Http2);
    let servers = model.ingress_servers();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0].tls, Some(crate::ServerTls::credential("s")));
    assert_eq!(servers[0].routes[0].port, PortSelector::Name("http".into()));
    assert_eq!(servers[0].routes[1].port, PortSelector::Number(9080));
    assert_eq!(
        servers[0].routes[1].request.uri,
        Some(StringMatch::Prefix("/r".into()))
    );
}

#[test]
fn a_model_scoped_to_hosts_equals_the_model_scoped_by_test() {
    let model = compile(
        r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: reviews, namespace: default}
spec:
  destination: {name: reviews}
  route: [{labels: {version: v2}, weight: 50}, {labels: {version: v1}, weight: 50}]
  mirror: {name: ratings}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: ratings, namespace: default}
spec:
  destination: {name: ratings}
  route: [{labels: {version: v1}}]
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: details, namespace: default}
spec:
  destination: {name: details, labels: {version: v1}}
  loadBalancing: {name: RANDOM}
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: httpbin, namespace: default}
spec: {destination: {service: httpbin.org}, ports: [{port: 80, protocol: http}]}
"#,
    );
    let host = |name: &str| format!("{name}.default.svc.cluster.local");
    let sets: [Vec<String>; 5] = [
        vec![],
        vec![host("reviews")],
        vec![host("ratings"), host("details"), "httpbin.org".into()],
        vec![
            host("reviews"),
            host("ratings"),
            host("details"),
            host("absent"),
            "httpbin.org".into(),
        ],
        vec!["httpbin.org".into(), host("absent")],
    ];
    for hosts in sets {
        let by_test = model.scoped(|h| hosts.iter().any(|x| x == h));
        assert_eq!(
            model.scoped_to(hosts.iter().map(String::as_str)),
            by_test,
            "{hosts:?}"
        );
    }
    assert_ne!(
        model.scoped_to([host("reviews").as_str()]),
        model.scoped_to([host("ratings").as_str()]),
        "scoping keeps only the hosts asked for"
    );
}

#[test]
fn a_virtual_service_destinations_headers_are_its_own() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - route:
    - destination: {host: reviews}
      weight: 90
      headers: {request: {set: {x-to: all}}, response: {remove: [x-internal]}}
    - destination: {host: ratings}
      weight: 10
"#;
    let objects = document::parse("vs.yaml", text, &pilot_api::default_registry()).unwrap();
    let model = RoutingConfigs::from_configs(&objects).unwrap().compile();
    let HttpAction::Route(targets) = &model.http_routes(HOST)[0].action else {
        panic!()
    };
    assert_eq!(
        targets[0].headers.request.set,
        [("x-to".to_string(), "all".to_string())]
    );
    assert_eq!(targets[0].headers.response.remove, ["x-internal"]);
    assert!(targets[1].headers.is_empty());
}
