//! Table-driven tests: every validation rule with a valid and an invalid
//! case, each invalid case naming the field path and what the message says.

use serde_json::{Value, json};

use super::registry;
use pilot_model::{ConfigMeta, DynConfig, StoreError};

/// The errors (`path: message`) for a spec of `kind`, or empty when valid.
fn errors(kind: &str, spec: Value) -> Vec<String> {
    let config = DynConfig {
        meta: ConfigMeta::new(kind, "default", "rule"),
        spec,
    };
    match registry().prepare(config) {
        Ok(_) => Vec::new(),
        Err(StoreError::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("unexpected {other}"),
    }
}

/// One table row: (name, kind, spec, expected), where expected is `None`
/// for valid or `Some((path, message fragment))` for the one error.
type Case<'a> = (&'a str, &'a str, Value, Option<(&'a str, &'a str)>);

/// Runs a table of cases.
fn table(cases: &[Case<'_>]) {
    for (name, kind, spec, expected) in cases {
        let got = errors(kind, spec.clone());
        match expected {
            None => assert!(got.is_empty(), "{name}: expected valid, got {got:?}"),
            Some((path, fragment)) => {
                assert_eq!(got.len(), 1, "{name}: expected one error at {path}, got {got:?}");
                let (got_path, got_message) = got[0].split_once(": ").unwrap_or(("", &got[0]));
                assert_eq!(got_path, *path, "{name}: {got:?}");
                assert!(
                    got_message.contains(fragment),
                    "{name}: {got_message:?} lacks {fragment:?}"
                );
            }
        }
    }
}

fn rule(extra: Value) -> Value {
    let mut spec = json!({"destination": {"name": "reviews"}});
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

const RR: &str = "RouteRule";

#[test]
fn istio_service_references() {
    table(&[
        ("name only", RR, json!({"destination": {"name": "reviews"}}), None),
        (
            "name, namespace, domain",
            RR,
            json!({"destination": {"name": "reviews", "namespace": "prod", "domain": "svc.cluster.local"}}),
            None,
        ),
        (
            "service only",
            RR,
            json!({"destination": {"service": "reviews.prod.svc.cluster.local"}}),
            None,
        ),
        (
            "name and service",
            RR,
            json!({"destination": {"name": "reviews", "service": "reviews.prod"}}),
            Some(("spec.destination", "either name or service")),
        ),
        (
            "namespace with service",
            RR,
            json!({"destination": {"namespace": "prod", "service": "reviews.prod"}}),
            Some(("spec.destination", "namespace and domain cannot")),
        ),
        (
            "neither",
            RR,
            json!({"destination": {}}),
            Some(("spec.destination", "needs a name or a service")),
        ),
        (
            "bad name",
            RR,
            json!({"destination": {"name": "Reviews"}}),
            Some(("spec.destination.name", "DNS-1123 label")),
        ),
        (
            "bad namespace",
            RR,
            json!({"destination": {"name": "reviews", "namespace": "a_b"}}),
            Some(("spec.destination.namespace", "DNS-1123 label")),
        ),
        (
            "bad domain",
            RR,
            json!({"destination": {"name": "reviews", "domain": "a..b"}}),
            Some(("spec.destination.domain", "DNS-1123 subdomain")),
        ),
    ]);
}

#[test]
fn route_rule_destination_and_routes() {
    table(&[
        (
            "destination required",
            RR,
            json!({}),
            Some(("spec.destination", "needs a destination")),
        ),
        (
            "destination without labels",
            RR,
            json!({"destination": {"name": "reviews", "labels": {"version": "v1"}}}),
            Some(("spec.destination.labels", "cannot have labels")),
        ),
        (
            "single route may omit weight",
            RR,
            rule(json!({"route": [{"labels": {"version": "v1"}}]})),
            None,
        ),
        (
            "weights sum to 100",
            RR,
            rule(
                json!({"route": [{"labels": {"version": "v1"}, "weight": 80}, {"labels": {"version": "v2"}, "weight": 20}]}),
            ),
            None,
        ),
        (
            "weights not summing to 100",
            RR,
            rule(
                json!({"route": [{"labels": {"version": "v1"}, "weight": 80}, {"labels": {"version": "v2"}, "weight": 10}]}),
            ),
            Some(("spec.route[1].weight", "weights must sum to 100, got 90")),
        ),
        (
            "bad route label",
            RR,
            rule(json!({"route": [{"labels": {"version": "v2-"}}]})),
            Some(("spec.route[0].labels.version", "label value")),
        ),
        (
            "bad route label key",
            RR,
            rule(json!({"route": [{"labels": {"bad key": "v2"}}]})),
            Some(("spec.route[0].labels[bad key]", "label key")),
        ),
        (
            "route to another service",
            RR,
            rule(json!({"route": [{"destination": {"name": "reviews-canary"}}]})),
            None,
        ),
    ]);
    // Out-of-range weights: the weight itself and the sum are both reported.
    let got = errors(RR, rule(json!({"route": [{"weight": 150}]})));
    assert_eq!(
        got,
        [
            "spec.route[0].weight: weight must be between 0 and 100, got 150",
            "spec.route[0].weight: weights must sum to 100, got 150"
        ]
    );
    let got = errors(RR, rule(json!({"route": [{"weight": -10}, {"weight": 110}]})));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].starts_with("spec.route[0].weight: weight must be between 0 and 100, got -10"));
    assert!(got[1].starts_with("spec.route[1].weight: weight must be between 0 and 100, got 110"));
}

#[test]
fn route_rule_exclusions_redirects_and_rewrites() {
    let redirect = json!({"uri": "/new"});
    table(&[
        ("redirect alone", RR, rule(json!({"redirect": redirect})), None),
        (
            "route and redirect",
            RR,
            rule(json!({"redirect": redirect, "route": [{"labels": {"version": "v1"}}]})),
            Some(("spec.redirect", "both route and redirect")),
        ),
        (
            "fault and redirect",
            RR,
            rule(json!({"redirect": redirect, "httpFault": {"abort": {"percent": 10, "httpStatus": 500}}})),
            Some(("spec.redirect", "both httpFault and redirect")),
        ),
        (
            "rewrite and redirect",
            RR,
            rule(json!({"redirect": redirect, "rewrite": {"uri": "/x"}})),
            Some(("spec.redirect", "both rewrite and redirect")),
        ),
        (
            "websocket on a redirect",
            RR,
            rule(json!({"redirect": redirect, "websocketUpgrade": true})),
            Some(("spec.websocketUpgrade", "cannot upgrade")),
        ),
        (
            "websocket on a route",
            RR,
            rule(json!({"websocketUpgrade": true})),
            None,
        ),
        (
            "empty redirect",
            RR,
            rule(json!({"redirect": {}})),
            Some(("spec.redirect", "needs a uri or an authority")),
        ),
        (
            "redirect by authority",
            RR,
            rule(json!({"redirect": {"authority": "new.example.com"}})),
            None,
        ),
        ("rewrite", RR, rule(json!({"rewrite": {"uri": "/v2"}})), None),
        (
            "empty rewrite",
            RR,
            rule(json!({"rewrite": {}})),
            Some(("spec.rewrite", "needs a uri or an authority")),
        ),
        (
            "mirror",
            RR,
            rule(json!({"mirror": {"name": "reviews", "labels": {"version": "v3"}}})),
            None,
        ),
        (
            "bad mirror",
            RR,
            rule(json!({"mirror": {}})),
            Some(("spec.mirror", "needs a name or a service")),
        ),
    ]);
}

#[test]
fn route_rule_matches() {
    table(&[
        (
            "header exact",
            RR,
            rule(json!({"match": {"request": {"headers": {"end-user": {"exact": "jason"}}}}})),
            None,
        ),
        (
            "uri prefix",
            RR,
            rule(json!({"match": {"request": {"headers": {"uri": {"prefix": "/api"}}}}})),
            None,
        ),
        (
            "uppercase header",
            RR,
            rule(json!({"match": {"request": {"headers": {"End-User": {"exact": "jason"}}}}})),
            Some(("spec.match.request.headers[End-User]", "lowercase")),
        ),
        (
            "empty uri match",
            RR,
            rule(json!({"match": {"request": {"headers": {"uri": {"exact": ""}}}}})),
            Some(("spec.match.request.headers.uri.exact", "must not be empty")),
        ),
        (
            "two string matches",
            RR,
            rule(json!({"match": {"request": {"headers": {"cookie": {"exact": "a", "regex": "b"}}}}})),
            Some(("spec.match.request.headers.cookie", "only one of")),
        ),
        (
            "source with labels",
            RR,
            rule(json!({"match": {"source": {"name": "productpage", "labels": {"version": "v1"}}}})),
            None,
        ),
        (
            "bad source",
            RR,
            rule(json!({"match": {"source": {"name": "Product_Page"}}})),
            Some(("spec.match.source.name", "DNS-1123")),
        ),
        (
            "tcp subnets",
            RR,
            rule(
                json!({"match": {"tcp": {"sourceSubnet": ["10.0.0.0/8"], "destinationSubnet": ["192.168.1.1"]}}}),
            ),
            None,
        ),
        (
            "bad subnet",
            RR,
            rule(json!({"match": {"tcp": {"destinationSubnet": ["10.0.0.0/40"]}}})),
            Some(("spec.match.tcp.destinationSubnet[0]", "prefix length")),
        ),
        (
            "udp not supported",
            RR,
            rule(json!({"match": {"udp": {"sourceSubnet": ["10.0.0.0/8"]}}})),
            Some(("spec.match.udp", "not supported")),
        ),
    ]);
}

#[test]
fn route_rule_timeouts_retries_and_faults() {
    table(&[
        (
            "timeout",
            RR,
            rule(json!({"httpReqTimeout": {"simpleTimeout": {"timeout": "1.5s"}}})),
            None,
        ),
        (
            "timeout below 1ms",
            RR,
            rule(json!({"httpReqTimeout": {"simpleTimeout": {"timeout": "500us"}}})),
            Some(("spec.httpReqTimeout.simpleTimeout.timeout", "minimum of 1ms")),
        ),
        (
            "timeout finer than ms",
            RR,
            rule(json!({"httpReqTimeout": {"simpleTimeout": {"timeout": "1.0005s"}}})),
            Some((
                "spec.httpReqTimeout.simpleTimeout.timeout",
                "millisecond precision",
            )),
        ),
        (
            "timeout not a duration",
            RR,
            rule(json!({"httpReqTimeout": {"simpleTimeout": {"timeout": "soon"}}})),
            Some(("spec.httpReqTimeout.simpleTimeout.timeout", "is not a duration")),
        ),
        (
            "timeout override header",
            RR,
            rule(
                json!({"httpReqTimeout": {"simpleTimeout": {"timeout": "1s", "overrideHeaderName": "x-timeout"}}}),
            ),
            Some((
                "spec.httpReqTimeout.simpleTimeout.overrideHeaderName",
                "not supported",
            )),
        ),
        (
            "retries",
            RR,
            rule(json!({"httpReqRetries": {"simpleRetry": {"attempts": 3, "perTryTimeout": "2s"}}})),
            None,
        ),
        (
            "negative retries",
            RR,
            rule(json!({"httpReqRetries": {"simpleRetry": {"attempts": -1}}})),
            Some(("spec.httpReqRetries.simpleRetry.attempts", "0 or more")),
        ),
        (
            "bad per-try timeout",
            RR,
            rule(json!({"httpReqRetries": {"simpleRetry": {"attempts": 1, "perTryTimeout": "0s"}}})),
            Some(("spec.httpReqRetries.simpleRetry.perTryTimeout", "minimum of 1ms")),
        ),
        (
            "delay",
            RR,
            rule(json!({"httpFault": {"delay": {"percent": 10, "fixedDelay": "5s"}}})),
            None,
        ),
        (
            "delay percent",
            RR,
            rule(json!({"httpFault": {"delay": {"percent": 101, "fixedDelay": "5s"}}})),
            Some(("spec.httpFault.delay.percent", "between 0 and 100")),
        ),
        (
            "delay without duration",
            RR,
            rule(json!({"httpFault": {"delay": {"percent": 10}}})),
            Some(("spec.httpFault.delay.fixedDelay", "needs a fixedDelay")),
        ),
        (
            "exponential delay",
            RR,
            rule(json!({"httpFault": {"delay": {"percent": 10, "exponentialDelay": "1s"}}})),
            Some(("spec.httpFault.delay.exponentialDelay", "not supported")),
        ),
        (
            "abort",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": 50, "httpStatus": 503}}})),
            None,
        ),
        (
            "abort percent",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": -1, "httpStatus": 503}}})),
            Some(("spec.httpFault.abort.percent", "between 0 and 100")),
        ),
        (
            "abort status",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": 50, "httpStatus": 700}}})),
            Some(("spec.httpFault.abort.httpStatus", "not an HTTP status")),
        ),
        (
            "abort without status",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": 50}}})),
            Some(("spec.httpFault.abort.httpStatus", "needs an httpStatus")),
        ),
        (
            "grpc abort",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": 50, "grpcStatus": "UNAVAILABLE"}}})),
            Some(("spec.httpFault.abort.grpcStatus", "not supported")),
        ),
        (
            "http2 abort",
            RR,
            rule(json!({"httpFault": {"abort": {"percent": 50, "http2Error": "REFUSED"}}})),
            Some(("spec.httpFault.abort.http2Error", "not supported")),
        ),
        (
            "empty fault",
            RR,
            rule(json!({"httpFault": {}})),
            Some(("spec.httpFault", "a delay or an abort")),
        ),
        (
            "l4 fault",
            RR,
            rule(json!({"l4Fault": {"terminate": {"percent": 10}}})),
            Some(("spec.l4Fault", "not supported")),
        ),
    ]);
}

#[test]
fn route_rule_cors_and_headers() {
    table(&[
        (
            "cors",
            RR,
            rule(
                json!({"corsPolicy": {"allowOrigin": ["https://a.example"], "allowMethods": ["GET", "POST"], "allowHeaders": ["X-Custom"], "maxAge": "24h", "allowCredentials": true}}),
            ),
            None,
        ),
        (
            "cors max age fraction",
            RR,
            rule(json!({"corsPolicy": {"maxAge": "1.5s"}})),
            Some(("spec.corsPolicy.maxAge", "whole seconds")),
        ),
        (
            "cors method",
            RR,
            rule(json!({"corsPolicy": {"allowMethods": ["GET", "FETCH"]}})),
            Some(("spec.corsPolicy.allowMethods[1]", "not an HTTP method")),
        ),
        (
            "cors header",
            RR,
            rule(json!({"corsPolicy": {"exposeHeaders": ["bad header"]}})),
            Some(("spec.corsPolicy.exposeHeaders[0]", "not allowed")),
        ),
        (
            "append headers",
            RR,
            rule(json!({"appendHeaders": {"x-trace": "on"}})),
            None,
        ),
        (
            "append header without value",
            RR,
            rule(json!({"appendHeaders": {"x-trace": ""}})),
            Some(("spec.appendHeaders[x-trace]", "needs a value")),
        ),
        (
            "append header bad name",
            RR,
            rule(json!({"appendHeaders": {"X Trace": "on"}})),
            Some(("spec.appendHeaders[X Trace]", "lowercase")),
        ),
        (
            "unknown field",
            RR,
            rule(json!({"rout": []})),
            Some(("spec.rout", "did you mean `route`?")),
        ),
        (
            "wrong type",
            RR,
            rule(json!({"precedence": "high"})),
            Some(("spec.precedence", "invalid type")),
        ),
    ]);
}

const DP: &str = "DestinationPolicy";

#[test]
fn destination_policies() {
    let cb = |fields: Value| json!({"destination": {"name": "reviews", "labels": {"version": "v1"}}, "circuitBreaker": {"simpleCb": fields}});
    table(&[
        (
            "full policy",
            DP,
            json!({
                "destination": {"name": "reviews", "labels": {"version": "v1"}},
                "source": {"name": "productpage"},
                "loadBalancing": {"name": "LEAST_CONN"},
                "circuitBreaker": {"simpleCb": {
                    "maxConnections": 100, "httpMaxPendingRequests": 10, "httpMaxRequests": 100,
                    "sleepWindow": "15m", "httpConsecutiveErrors": 7, "httpDetectionInterval": "5m",
                    "httpMaxRequestsPerConnection": 1, "httpMaxEjectionPercent": 50, "httpMaxRetries": 3
                }}
            }),
            None,
        ),
        (
            "destination required",
            DP,
            json!({"loadBalancing": {"name": "RANDOM"}}),
            Some(("spec.destination", "needs a destination")),
        ),
        (
            "bad source",
            DP,
            json!({"destination": {"name": "reviews"}, "source": {"name": "A"}}),
            Some(("spec.source.name", "DNS-1123")),
        ),
        (
            "unknown balancer",
            DP,
            json!({"destination": {"name": "reviews"}, "loadBalancing": {"name": "FASTEST"}}),
            Some(("spec.loadBalancing.name", "unknown variant `FASTEST`")),
        ),
        (
            "custom balancer",
            DP,
            json!({"destination": {"name": "reviews"}, "loadBalancing": {"custom": {}}}),
            Some(("spec.loadBalancing.custom", "not supported")),
        ),
        (
            "negative max connections",
            DP,
            cb(json!({"maxConnections": -1})),
            Some(("spec.circuitBreaker.simpleCb.maxConnections", "0 or more")),
        ),
        (
            "negative pending",
            DP,
            cb(json!({"httpMaxPendingRequests": -1})),
            Some(("spec.circuitBreaker.simpleCb.httpMaxPendingRequests", "0 or more")),
        ),
        (
            "negative requests",
            DP,
            cb(json!({"httpMaxRequests": -1})),
            Some(("spec.circuitBreaker.simpleCb.httpMaxRequests", "0 or more")),
        ),
        (
            "negative errors",
            DP,
            cb(json!({"httpConsecutiveErrors": -1})),
            Some(("spec.circuitBreaker.simpleCb.httpConsecutiveErrors", "0 or more")),
        ),
        (
            "negative per connection",
            DP,
            cb(json!({"httpMaxRequestsPerConnection": -1})),
            Some((
                "spec.circuitBreaker.simpleCb.httpMaxRequestsPerConnection",
                "0 or more",
            )),
        ),
        (
            "negative retries",
            DP,
            cb(json!({"httpMaxRetries": -1})),
            Some(("spec.circuitBreaker.simpleCb.httpMaxRetries", "0 or more")),
        ),
        (
            "ejection percent",
            DP,
            cb(json!({"httpMaxEjectionPercent": 101})),
            Some((
                "spec.circuitBreaker.simpleCb.httpMaxEjectionPercent",
                "at most 100",
            )),
        ),
        (
            "sleep window",
            DP,
            cb(json!({"sleepWindow": "0s"})),
            Some(("spec.circuitBreaker.simpleCb.sleepWindow", "minimum of 1ms")),
        ),
        (
            "detection interval",
            DP,
            cb(json!({"httpDetectionInterval": "1us"})),
            Some((
                "spec.circuitBreaker.simpleCb.httpDetectionInterval",
                "minimum of 1ms",
            )),
        ),
    ]);
}

const ER: &str = "EgressRule";

#[test]
fn egress_rules() {
    let egress = |service: &str, ports: Value| json!({"destination": {"service": service}, "ports": ports});
    table(&[
        (
            "wildcard domain",
            ER,
            egress(
                "*.cnn.com",
                json!([{"port": 80, "protocol": "http"}, {"port": 443, "protocol": "https"}]),
            ),
            None,
        ),
        (
            "plain domain",
            ER,
            egress("api.example.com", json!([{"port": 443, "protocol": "HTTPS"}])),
            None,
        ),
        (
            "cidr with tcp",
            ER,
            egress("10.0.0.0/16", json!([{"port": 5432, "protocol": "TCP"}])),
            None,
        ),
        (
            "cidr with http",
            ER,
            egress("10.0.0.0/16", json!([{"port": 80, "protocol": "HTTP"}])),
            Some((
                "spec.ports[0].protocol",
                "CIDR destination allows only TCP or MONGO",
            )),
        ),
        (
            "bad cidr",
            ER,
            egress("10.0.0.0/99", json!([{"port": 80, "protocol": "TCP"}])),
            Some(("spec.destination.service", "prefix length")),
        ),
        (
            "bad domain",
            ER,
            egress("*.cnn..com", json!([{"port": 80, "protocol": "HTTP"}])),
            Some(("spec.destination.service", "not a domain")),
        ),
        (
            "no service",
            ER,
            json!({"destination": {}, "ports": [{"port": 80, "protocol": "HTTP"}]}),
            Some(("spec.destination.service", "give a domain")),
        ),
        (
            "no ports",
            ER,
            egress("*.cnn.com", json!([])),
            Some(("spec.ports", "at least one port")),
        ),
        (
            "duplicate port",
            ER,
            egress(
                "*.cnn.com",
                json!([{"port": 80, "protocol": "HTTP"}, {"port": 80, "protocol": "HTTP"}]),
            ),
            Some(("spec.ports[1].port", "listed twice")),
        ),
        (
            "port range",
            ER,
            egress("*.cnn.com", json!([{"port": 0, "protocol": "HTTP"}])),
            Some(("spec.ports[0].port", "1 to 65535")),
        ),
        (
            "bad protocol",
            ER,
            egress("*.cnn.com", json!([{"port": 80, "protocol": "SMTP"}])),
            Some(("spec.ports[0].protocol", "not one of")),
        ),
        (
            "egress proxy",
            ER,
            json!({"destination": {"service": "*.cnn.com"}, "ports": [{"port": 80, "protocol": "HTTP"}], "useEgressProxy": true}),
            Some(("spec.useEgressProxy", "not supported")),
        ),
    ]);
    // A destination by name is wrong for egress, and so is name beside service.
    let got = errors(
        ER,
        json!({"destination": {"name": "cnn", "service": "*.cnn.com"}, "ports": [{"port": 80, "protocol": "HTTP"}]}),
    );
    assert!(
        got.iter()
            .any(|e| e.starts_with("spec.destination: an egress destination is given by service")),
        "{got:?}"
    );
}

const IR: &str = "IngressRule";

#[test]
fn ingress_rules() {
    let ingress = |extra: Value| {
        let mut spec = json!({"port": 80, "destination": {"name": "productpage"}, "destinationPort": 9080});
        for (k, v) in extra.as_object().unwrap() {
            spec[k] = v.clone();
        }
        spec
    };
    table(&[
        ("by port", IR, ingress(json!({})), None),
        (
            "by port name with tls",
            IR,
            json!({"port": 443, "tlsSecret": "ingress-cert", "destination": {"name": "productpage"}, "destinationPortName": "http", "match": {"request": {"headers": {"uri": {"prefix": "/productpage"}}}}}),
            None,
        ),
        (
            "destination required",
            IR,
            json!({"port": 80, "destinationPort": 9080}),
            Some(("spec.destination", "needs a destination")),
        ),
        (
            "destination without labels",
            IR,
            ingress(json!({"destination": {"name": "productpage", "labels": {"version": "v1"}}})),
            Some(("spec.destination.labels", "cannot have labels")),
        ),
        ("no port: Istio's default", IR, ingress(json!({"port": 0})), None),
        (
            "port in range",
            IR,
            ingress(json!({"port": 70000})),
            Some(("spec.port", "1 to 65535")),
        ),
        (
            "both ports",
            IR,
            ingress(json!({"destinationPortName": "http"})),
            Some(("spec.destinationPort", "not both")),
        ),
        (
            "no destination port",
            IR,
            json!({"port": 80, "destination": {"name": "productpage"}}),
            Some((
                "spec.destinationPort",
                "give destinationPort or destinationPortName",
            )),
        ),
        (
            "bad match",
            IR,
            ingress(json!({"match": {"request": {"headers": {"uri": {"prefix": ""}}}}})),
            Some(("spec.match.request.headers.uri.prefix", "must not be empty")),
        ),
    ]);
}

#[test]
fn typed_round_trip_keeps_every_field() {
    use super::RouteRule;
    use pilot_model::Config;
    let spec = rule(json!({
        "precedence": 2,
        "match": {"request": {"headers": {"end-user": {"exact": "jason"}}}},
        "route": [{"labels": {"version": "v3"}, "weight": 100}],
        "httpReqTimeout": {"simpleTimeout": {"timeout": "1.5s"}},
        "httpReqRetries": {"simpleRetry": {"attempts": 3, "perTryTimeout": "500ms"}},
        "httpFault": {"delay": {"percent": 10, "fixedDelay": "2s"}},
        "corsPolicy": {"allowMethods": ["GET"], "maxAge": "1m"},
        "appendHeaders": {"x-a": "b"},
        "websocketUpgrade": true
    }));
    let config = DynConfig {
        meta: ConfigMeta::new("RouteRule", "default", "r"),
        spec,
    };
    let typed = Config::<RouteRule>::from_dyn(&config).unwrap();
    let back = typed.to_dyn().unwrap();
    assert_eq!(
        back.spec["httpReqTimeout"]["simpleTimeout"]["timeout"], "1.500s",
        "durations come back canonical"
    );
    assert_eq!(
        back.spec["httpReqRetries"]["simpleRetry"]["perTryTimeout"],
        "0.500s"
    );
    assert_eq!(back.spec["corsPolicy"]["maxAge"], "60s");
    let again = Config::<RouteRule>::from_dyn(&back).unwrap();
    assert_eq!(again.spec, typed.spec);
}

#[cfg(feature = "schema")]
mod schema {
    use crate::istio::registry;

    #[test]
    fn route_rule_schema_lists_its_spec_fields_without_refs() {
        let registry = registry();
        let schema = registry.schema("RouteRule").unwrap();
        let openapi = schema.openapi_schema().expect("the Istio kinds have schemas");
        let fields: Vec<&str> = openapi["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        for field in [
            "destination",
            "precedence",
            "match",
            "route",
            "httpReqTimeout",
            "httpFault",
            "corsPolicy",
        ] {
            assert!(fields.contains(&field), "{field} missing from {fields:?}");
        }
        let text = openapi.to_string();
        assert!(!text.contains("$ref"), "subschemas are inlined: {text}");
        assert_eq!(openapi["properties"]["route"]["type"], "array");
    }
}

#[test]
fn wildcard_hosts_as_istio_accepted_them() {
    let egress = |service: &str| json!({"destination": {"service": service}, "ports": [{"port": 80, "protocol": "http"}]});
    table(&[
        ("egress *.foo.com", "EgressRule", egress("*.foo.com"), None),
        (
            "egress *-bar.foo.com",
            "EgressRule",
            egress("*-bar.foo.com"),
            None,
        ),
        ("egress *", "EgressRule", egress("*"), None),
        (
            "egress wildcard inside",
            "EgressRule",
            egress("foo.*.com"),
            Some(("spec.destination.service", "not a domain")),
        ),
        (
            "route rule to a wildcard host",
            "RouteRule",
            json!({"destination": {"service": "*.foo.com"}, "httpReqTimeout": {"simpleTimeout": {"timeout": "3s"}}}),
            None,
        ),
        (
            "policy for a wildcard egress host",
            "DestinationPolicy",
            json!({"destination": {"service": "*.google.com"}, "circuitBreaker": {"simpleCb": {"maxConnections": 10}}}),
            None,
        ),
        (
            "a wildcard host has no instances to select",
            "DestinationPolicy",
            json!({"destination": {"service": "*.google.com", "labels": {"version": "v1"}}}),
            Some(("spec.destination.labels", "no instances")),
        ),
        (
            "a wildcard host's balancing is the original destination",
            "DestinationPolicy",
            json!({"destination": {"service": "*.google.com"}, "loadBalancing": {"name": "RANDOM"}}),
            None,
        ),
        (
            "a route cannot send to a wildcard",
            "RouteRule",
            json!({"destination": {"name": "reviews"}, "route": [{"destination": {"service": "*.foo.com"}}]}),
            Some(("spec.route[0].destination.service", "names no single destination")),
        ),
        (
            "an ingress cannot send to a wildcard",
            "IngressRule",
            json!({"destination": {"service": "*.foo.com"}, "destinationPort": 80}),
            Some(("spec.destination.service", "names no single destination")),
        ),
    ]);
    // A wildcard host's balancing is accepted, with a warning that says
    // it is not applied.
    let policy = DynConfig {
        meta: ConfigMeta::new("DestinationPolicy", "default", "rule"),
        spec: json!({"destination": {"service": "*.google.com"}, "loadBalancing": {"name": "RANDOM"}}),
    };
    let warnings = registry().warnings(&policy);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].path, "spec.loadBalancing");
    assert!(warnings[0].message.contains("ORIGINAL_DST"), "{warnings:?}");
}
