//! What validation accepts, Envoy accepts: route rules and destination
//! policies at the edges of every checked range (durations, percentages,
//! statuses, weights, header names and values, paths, regular expressions
//! at RE2's program-size limit) pass `istio::registry()` validation, are
//! generated, and the real Envoy 1.40 loads them. The same fields one
//! step past the edge are refused by validation.

mod support;

use pilot_api::istio;
use pilot_model::{Config, DynConfig, document};
use pilot_xds::{generate, testing};

/// Route rules on `ratings` and policies at the edges of what validation
/// accepts.
const ACCEPTED: &str = r#"
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: edge-regex, namespace: default}
spec:
  destination: {name: ratings}
  precedence: 9
  match:
    request:
      headers:
        uri: {regex: "/v[0-9]+/[a-z]{16}/x/[a-z]{4}"}
        x-hash: {regex: "[0-9a-f]{48}"}
        cookie: {regex: "^(.*?;)?(user=jason)(;.*)?$"}
        x-long: {regex: "^/prefix/that/is/long/and/literal/only/anchored/at/the/start/so/re2/keeps/it/apart/from/the/program/abcdefghijklmnopqrstuvwxyz$"}
  route: [{labels: {version: v1}}]
  rewrite: {uri: "/new/prefix", authority: "ratings.internal:8080"}
  httpReqTimeout: {simpleTimeout: {timeout: 9223372035s}}
  httpReqRetries: {simpleRetry: {attempts: 2147483647, perTryTimeout: 1ms}}
  httpFault:
    delay: {percent: 100, fixedDelay: 1ms}
    abort: {percent: 0.0001, httpStatus: 599}
  appendHeaders: {x-edge: "tab\there, 100% and ~!@#$^&*() %VAR% %%", x-empty-looking: " "}
  corsPolicy: {allowOrigin: ["https://a.example"], allowMethods: [GET, PATCH], allowHeaders: [X-Custom], maxAge: 9223372035s}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: edge-exact, namespace: default}
spec:
  destination: {name: ratings}
  precedence: 8
  match: {request: {headers: {uri: {exact: "/exact"}, x-empty: {exact: ""}, x-p: {prefix: "a"}}}}
  route: [{labels: {version: v1}, weight: 0}, {labels: {version: v2}, weight: 100}]
  httpFault: {abort: {percent: 100, httpStatus: 200}}
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: edge-redirect, namespace: default}
spec:
  destination: {name: ratings}
  precedence: 7
  match: {request: {headers: {uri: {prefix: "/old"}}}}
  redirect: {uri: "/new?x=1#y", authority: "[::1]:8080"}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: edge-policy, namespace: default}
spec:
  destination: {name: ratings}
  loadBalancing: {name: LEAST_CONN}
  circuitBreaker:
    simpleCb:
      maxConnections: 2147483647
      httpMaxPendingRequests: 0
      httpMaxRequests: 2147483647
      sleepWindow: 9223372035s
      httpConsecutiveErrors: 0
      httpDetectionInterval: 1ms
      httpMaxRequestsPerConnection: 2147483647
      httpMaxEjectionPercent: 100
      httpMaxRetries: 0
"#;

/// One step past the edges: each document must be refused by validation,
/// at the field given.
const REFUSED: &[(&str, &str)] = &[
    (
        "match: {request: {headers: {x-hash: {regex: \"[0-9a-f]{49}\"}}}}",
        "spec.match.request.headers[x-hash].regex",
    ),
    (
        "match: {request: {headers: {cookie: {regex: \"(\"}}}}",
        "spec.match.request.headers.cookie.regex",
    ),
    (
        "match: {request: {headers: {cookie: {regex: \"(?=x)a\"}}}}",
        "spec.match.request.headers.cookie.regex",
    ),
    (
        "match: {request: {headers: {cookie: {regex: \"a{1001}\"}}}}",
        "spec.match.request.headers.cookie.regex",
    ),
    (
        "match: {request: {headers: {x-p: {prefix: \"\"}}}}",
        "spec.match.request.headers[x-p].prefix",
    ),
    (
        "match: {request: {headers: {uri: {exact: \"/a\\nb\"}}}}",
        "spec.match.request.headers.uri.exact",
    ),
    ("rewrite: {uri: \"/a\\nb\"}", "spec.rewrite.uri"),
    ("rewrite: {authority: \"a b\"}", "spec.rewrite.authority"),
    ("redirect: {uri: \"/a\\rb\"}", "spec.redirect.uri"),
    ("appendHeaders: {host: x}", "spec.appendHeaders.host"),
    ("appendHeaders: {x-a: \"a\\nb\"}", "spec.appendHeaders[x-a]"),
    (
        "httpReqTimeout: {simpleTimeout: {timeout: 9223372036s}}",
        "spec.httpReqTimeout.simpleTimeout.timeout",
    ),
    (
        "httpFault: {abort: {percent: 100.001, httpStatus: 503}}",
        "spec.httpFault.abort.percent",
    ),
    (
        "httpFault: {abort: {percent: 1, httpStatus: 600}}",
        "spec.httpFault.abort.httpStatus",
    ),
];

fn rule(name: &str, body: &str) -> String {
    format!(
        "apiVersion: config.istio.io/v1alpha2\nkind: RouteRule\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  destination: {{name: ratings}}\n  {body}\n"
    )
}

#[test]
fn envoy_loads_what_validation_accepts_at_the_edges() {
    let objects: Vec<DynConfig> = document::parse("edges.yaml", ACCEPTED, &istio::registry())
        .unwrap_or_else(|e| panic!("validation refused an edge case: {e}"));
    let mut configs = support::configs();
    for object in &objects {
        match object.meta.kind.as_str() {
            "RouteRule" => configs
                .route_rules
                .push(std::sync::Arc::new(Config::from_dyn(object).unwrap())),
            _ => configs
                .destination_policies
                .push(std::sync::Arc::new(Config::from_dyn(object).unwrap())),
        }
    }
    let mesh = pilot_xds::MeshConfig::new(configs.compile());
    let registry = support::registry();
    for (name, proxy) in support::proxies() {
        let resources = generate(&proxy, &registry, &mesh);
        resources.check().unwrap_or_else(|e| panic!("{name}: {e}"));
        testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn validation_refuses_one_step_past_the_edges() {
    for (i, (body, field)) in REFUSED.iter().enumerate() {
        let text = rule(&format!("past-{i}"), body);
        let err = document::parse("past.yaml", &text, &istio::registry())
            .expect_err(body)
            .to_string();
        assert!(err.contains(field), "{body}: {err}");
    }
}
