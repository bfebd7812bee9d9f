//! Protobuf's two spellings of a field: every field of the routing kinds
//! read by its proto name (`simple_retry`) as by its JSON name
//! (`simpleRetry`), stored by its JSON name, and errors placed at the
//! field as written.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::{DestinationPolicy, EgressRule, IngressRule, RouteRule, registry};
use pilot_model::document;

/// Keys whose values are user data (label and header names, free-form
/// policies): never renamed.
const USER_MAPS: [&str; 6] = [
    "labels",
    "headers",
    "appendHeaders",
    "custom",
    "l4Fault",
    "append_headers",
];

/// `value` with every field name in its proto spelling; counts the renamed
/// fields into `renamed`.
fn proto_names(value: &Value, renamed: &mut Vec<String>) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (key, value) in map {
                let proto = snake_case(key);
                if proto != *key {
                    renamed.push(key.clone());
                }
                let value = if USER_MAPS.contains(&key.as_str()) {
                    value.clone()
                } else {
                    proto_names(value, renamed)
                };
                out.insert(proto, value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| proto_names(v, renamed)).collect()),
        other => other.clone(),
    }
}

/// Decodes `spec` both ways and checks they agree and that every
/// multi-word field in `fields` was renamed.
fn both_spellings<T: DeserializeOwned + serde::Serialize>(spec: Value, fields: &[&str]) {
    let mut renamed = Vec::new();
    let proto = proto_names(&spec, &mut renamed);
    let camel: T = serde_json::from_value(spec.clone()).unwrap();
    let snake: T = serde_json::from_value(proto.clone()).unwrap_or_else(|e| panic!("{e}: {proto}"));
    assert_eq!(
        serde_json::to_value(&camel).unwrap(),
        spec,
        "the example is not canonical"
    );
    assert_eq!(serde_json::to_value(&snake).unwrap(), spec, "{proto}");
    renamed.sort();
    renamed.dedup();
    let mut expected: Vec<String> = fields.iter().map(|f| f.to_string()).collect();
    expected.sort();
    assert_eq!(renamed, expected);
}

#[test]
fn every_route_rule_field_reads_by_both_names() {
    let spec = json!({
        "destination": {"name": "reviews", "labels": {"app_version": "v1"}},
        "precedence": 2,
        "match": {
            "source": {"service": "productpage.default.svc.cluster.local"},
            "tcp": {"sourceSubnet": ["10.0.0.0/8"], "destinationSubnet": ["10.1.0.0/16"]},
            "udp": {"sourceSubnet": ["10.0.0.0/8"]},
            "request": {"headers": {"x_user": {"exact": "a"}, "cookie": {"regex": "^(.*?;)?(user=jason)(;.*)?$"}}},
        },
        "route": [{"destination": {"name": "reviews"}, "labels": {"version": "v1"}, "weight": 100}],
        "redirect": {"uri": "/a", "authority": "b"},
        "rewrite": {"uri": "/c", "authority": "d"},
        "websocketUpgrade": true,
        "httpReqTimeout": {"simpleTimeout": {"timeout": "1s", "overrideHeaderName": "x-t"}, "custom": {"a_b": 1}},
        "httpReqRetries": {"simpleRetry": {"attempts": 3, "perTryTimeout": "2s", "overrideHeaderName": "x-r"}, "custom": {}},
        "httpFault": {
            "delay": {"percent": 10.0, "fixedDelay": "5s", "exponentialDelay": "1s", "overrideHeaderName": "x-d"},
            "abort": {"percent": 10.0, "httpStatus": 400, "grpcStatus": "x", "http2Error": "y", "overrideHeaderName": "x-a"},
        },
        "l4Fault": {"terminate": {"terminate_after_period": "1s"}},
        "mirror": {"name": "shadow"},
        "corsPolicy": {
            "allowOrigin": ["*"], "allowMethods": ["GET"], "allowHeaders": ["x"], "exposeHeaders": ["y"],
            "maxAge": "60s", "allowCredentials": true,
        },
        "appendHeaders": {"x_request_source": "mesh"},
    });
    both_spellings::<RouteRule>(
        spec,
        &[
            "sourceSubnet",
            "destinationSubnet",
            "websocketUpgrade",
            "httpReqTimeout",
            "simpleTimeout",
            "overrideHeaderName",
            "httpReqRetries",
            "simpleRetry",
            "perTryTimeout",
            "httpFault",
            "fixedDelay",
            "exponentialDelay",
            "httpStatus",
            "grpcStatus",
            "http2Error",
            "l4Fault",
            "corsPolicy",
            "allowOrigin",
            "allowMethods",
            "allowHeaders",
            "exposeHeaders",
            "maxAge",
            "allowCredentials",
            "appendHeaders",
        ],
    );
}

#[test]
fn every_destination_policy_field_reads_by_both_names() {
    let spec = json!({
        "destination": {"name": "reviews", "labels": {"version": "v1"}},
        "source": {"name": "productpage"},
        "loadBalancing": {"name": "RANDOM", "custom": {}},
        "circuitBreaker": {
            "simpleCb": {
                "maxConnections": 1, "httpMaxPendingRequests": 2, "httpMaxRequests": 3, "sleepWindow": "900s",
                "httpConsecutiveErrors": 4, "httpDetectionInterval": "300s", "httpMaxRequestsPerConnection": 5,
                "httpMaxEjectionPercent": 6, "httpMaxRetries": 7,
            },
            "custom": {},
        },
        "custom": {"x_y": 1},
    });
    both_spellings::<DestinationPolicy>(
        spec,
        &[
            "loadBalancing",
            "circuitBreaker",
            "simpleCb",
            "maxConnections",
            "httpMaxPendingRequests",
            "httpMaxRequests",
            "sleepWindow",
            "httpConsecutiveErrors",
            "httpDetectionInterval",
            "httpMaxRequestsPerConnection",
            "httpMaxEjectionPercent",
            "httpMaxRetries",
        ],
    );
}

#[test]
fn every_egress_and_ingress_field_reads_by_both_names() {
    both_spellings::<EgressRule>(
        json!({"destination": {"service": "*.foo.com"}, "ports": [{"port": 80, "protocol": "http"}], "useEgressProxy": true}),
        &["useEgressProxy"],
    );
    both_spellings::<IngressRule>(
        json!({
            "port": 443, "tlsSecret": "ingress-secret", "precedence": 1,
            "match": {"request": {"headers": {"uri": {"prefix": "/a"}}}},
            "destination": {"name": "reviews"}, "destinationPort": 9080, "destinationPortName": "http",
        }),
        &["tlsSecret", "destinationPort", "destinationPortName"],
    );
}

const PROTO_NAMED: &str = "\
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata:
  name: ratings-test-delay
spec:
  destination:
    name: ratings
  match:
    request:
      headers:
        x_user_id:
          exact: jason
  route:
  - labels:
      app_version: v1
  http_fault:
    delay:
      percent: 100
      fixed_delay: 7s
  http_req_retries:
    simple_retry:
      attempts: 3
      per_try_timeout: 2s
  append_headers:
    x_source: mesh
";

#[test]
fn proto_names_are_stored_by_their_json_names_and_map_keys_are_kept() {
    let configs = document::parse("r.yaml", PROTO_NAMED, &registry()).unwrap();
    assert_eq!(
        configs[0].spec,
        json!({
            "destination": {"name": "ratings"},
            "match": {"request": {"headers": {"x_user_id": {"exact": "jason"}}}},
            "route": [{"labels": {"app_version": "v1"}}],
            "httpFault": {"delay": {"percent": 100, "fixedDelay": "7s"}},
            "httpReqRetries": {"simpleRetry": {"attempts": 3, "perTryTimeout": "2s"}},
            "appendHeaders": {"x_source": "mesh"},
        })
    );
}

#[test]
fn errors_name_and_place_the_field_as_written() {
    let text = PROTO_NAMED
        .replace("attempts: 3", "attempts: -1")
        .replace("fixed_delay: 7s", "fixed_delay: 7");
    let errors = document::parse("r.yaml", &text, &registry()).unwrap_err();
    let got: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("r.yaml:19:7 spec.http_fault.delay.fixed_delay: "),
        "{got:?}"
    );
    let text = PROTO_NAMED.replace("attempts: 3", "attempts: -1");
    let errors = document::parse("r.yaml", &text, &registry()).unwrap_err();
    assert_eq!(
        errors.to_string(),
        "r.yaml:22:7 spec.http_req_retries.simple_retry.attempts: attempts must be 0 or more, got -1"
    );
}

#[test]
fn both_spellings_of_one_field_are_an_error_naming_both() {
    let text = PROTO_NAMED.replace(
        "      attempts: 3\n",
        "      attempts: 3\n      perTryTimeout: 1s\n",
    );
    let errors = document::parse("r.yaml", &text, &registry()).unwrap_err();
    let got = errors.to_string();
    assert!(
        got.contains("`perTryTimeout` and `per_try_timeout` are two spellings of one field"),
        "{got}"
    );
    assert!(
        got.starts_with("r.yaml:24:7 spec.http_req_retries.simple_retry.per_try_timeout: "),
        "{got}"
    );
}

#[cfg(feature = "schema")]
#[test]
fn published_schemas_keep_the_json_names_only() {
    use pilot_model::ConfigKind;
    let schema = RouteRule::openapi_schema().unwrap();
    let properties = schema["properties"].as_object().unwrap();
    assert!(properties.contains_key("httpReqRetries"));
    assert!(!properties.keys().any(|k| k.contains('_')), "{properties:?}");
    let text = schema.to_string();
    assert!(!text.contains("simple_retry") && text.contains("simpleRetry"));
}

/// The proto (snake_case) name of a lowerCamel JSON name, written here
/// apart from the decoder's own so the test does not check it against
/// itself: `simpleRetry` is `simple_retry`.
fn snake_case(camel: &str) -> String {
    camel.chars().fold(String::new(), |mut out, c| {
        if c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
        out
    })
}
