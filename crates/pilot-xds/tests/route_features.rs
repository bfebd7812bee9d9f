//! The HTTP route features of today's API as Envoy gets them, and a real
//! Envoy loads them: a DestinationRule's consistent hash (header, cookie,
//! source address, query parameter) as the routes' hash policy and a ring
//! or Maglev balancer on the clusters; `uriRegexRewrite`; a redirect's
//! scheme, port, derived port and code; several mirrors with their shares.

mod support;

use envoy_types::pb::envoy::config::cluster::v3::cluster;
use envoy_types::pb::envoy::config::route::v3::route_action::hash_policy::PolicySpecifier;
use envoy_types::pb::envoy::config::route::v3::{Route, RouteAction, redirect_action, route};
use pilot_api::default_registry;
use pilot_model::document;
use pilot_xds::{MeshConfig, Proxy, generate, testing};

const CONFIG: &str = r#"
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  trafficPolicy: {loadBalancer: {consistentHash: {httpHeaderName: x-user, minimumRingSize: 1024}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: default}
spec:
  host: ratings
  trafficPolicy: {loadBalancer: {consistentHash: {httpCookie: {name: session, ttl: 60s}, maglev: {tableSize: 65537}}}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: details, namespace: default}
spec:
  host: details
  trafficPolicy: {loadBalancer: {consistentHash: {useSourceIp: true}}}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - name: rewrite
    match: [{uri: {prefix: /v1/}}]
    rewrite: {uriRegexRewrite: {match: "^/v1/(.*)$", rewrite: "/api/\\1"}}
    route: [{destination: {host: reviews}}]
    mirrors:
    - destination: {host: ratings}
      percentage: {value: 25}
    - destination: {host: details}
  - name: to-https
    match: [{uri: {prefix: /secure}}]
    redirect: {scheme: https, derivePort: FROM_PROTOCOL_DEFAULT, redirectCode: 308}
  - name: to-port
    match: [{uri: {prefix: /port}}]
    redirect: {authority: reviews.example.com, port: 8443}
  - route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http: [{route: [{destination: {host: ratings}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: default}
spec:
  hosts: [details]
  http: [{route: [{destination: {host: details}}]}]
"#;

fn action(route: &Route) -> &RouteAction {
    match &route.action {
        Some(route::Action::Route(action)) => action,
        other => panic!("{}: {other:?}", route.name),
    }
}

#[test]
fn route_features_reach_envoy_and_envoy_loads_them() {
    let objects = document::parse("features.yaml", CONFIG, &default_registry()).unwrap();
    let mesh = MeshConfig::from_configs(&objects).unwrap();
    let registry = support::registry();
    let proxy =
        Proxy::from_node_id("sidecar~10.1.0.1~productpage-v1.default~default.svc.cluster.local").unwrap();
    let resources = generate(&proxy, &registry, &mesh);
    resources.check().unwrap();
    let config = resources.routes.iter().find(|r| r.name == "9080").unwrap();
    let routes = |host: &str| {
        &config
            .virtual_hosts
            .iter()
            .find(|v| v.name == format!("{host}.default.svc.cluster.local:9080"))
            .unwrap()
            .routes
    };
    let reviews = routes("reviews");

    // The hash policy of each destination's DestinationRule.
    let rewrite = action(&reviews[0]);
    assert!(matches!(
        &rewrite.hash_policy[0].policy_specifier,
        Some(PolicySpecifier::Header(h)) if h.header_name == "x-user"
    ));
    let cookie = &action(&routes("ratings")[0]).hash_policy[0];
    assert!(matches!(&cookie.policy_specifier, Some(PolicySpecifier::Cookie(c)) if c.name == "session"));
    let source = &action(&routes("details")[0]).hash_policy[0];
    assert!(matches!(
        &source.policy_specifier,
        Some(PolicySpecifier::ConnectionProperties(p)) if p.source_ip
    ));
    let lb = |host: &str| {
        let c = resources
            .clusters
            .iter()
            .find(|c| c.name == format!("outbound|9080||{host}.default.svc.cluster.local"))
            .unwrap();
        (c.lb_policy, c.lb_config.clone())
    };
    let (policy, config_of_reviews) = lb("reviews");
    assert_eq!(policy, cluster::LbPolicy::RingHash as i32);
    assert!(
        matches!(config_of_reviews, Some(cluster::LbConfig::RingHashLbConfig(r))
        if r.minimum_ring_size.map(|v| v.value) == Some(1024))
    );
    let (policy, maglev) = lb("ratings");
    assert_eq!(policy, cluster::LbPolicy::Maglev as i32);
    assert!(matches!(maglev, Some(cluster::LbConfig::MaglevLbConfig(m))
        if m.table_size.map(|v| v.value) == Some(65537)));

    // The regex rewrite, and both mirrors with their shares.
    let regex = rewrite.regex_rewrite.as_ref().unwrap();
    assert_eq!(regex.pattern.as_ref().unwrap().regex, "^/v1/(.*)$");
    assert_eq!(regex.substitution, "/api/\\1");
    let mirrors: Vec<(&str, Option<u32>)> = rewrite
        .request_mirror_policies
        .iter()
        .map(|m| {
            (
                m.cluster.as_str(),
                m.runtime_fraction
                    .as_ref()
                    .and_then(|f| f.default_value.as_ref())
                    .map(|p| p.numerator),
            )
        })
        .collect();
    assert_eq!(
        mirrors,
        [
            ("outbound|9080||ratings.default.svc.cluster.local", Some(250_000)),
            ("outbound|9080||details.default.svc.cluster.local", None)
        ]
    );

    // Redirects: scheme with its default port and code; authority and port.
    let redirect = |route: &Route| match &route.action {
        Some(route::Action::Redirect(r)) => r.clone(),
        other => panic!("{other:?}"),
    };
    let https = redirect(&reviews[1]);
    assert_eq!(
        https.scheme_rewrite_specifier,
        Some(redirect_action::SchemeRewriteSpecifier::SchemeRedirect(
            "https".into()
        ))
    );
    assert_eq!(https.port_redirect, 443);
    assert_eq!(
        https.response_code,
        redirect_action::RedirectResponseCode::PermanentRedirect as i32
    );
    let port = redirect(&reviews[2]);
    assert_eq!(
        (port.host_redirect.as_str(), port.port_redirect),
        ("reviews.example.com", 8443)
    );

    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
}
