//! Rules of the Gateway API kinds the corpus does not exercise, on small
//! specs written here, read through the registry as a store reads them.

use super::*;
use pilot_model::{ConfigMeta, DynConfig};
use serde_json::json;

/// The errors of `spec` as a `kind`, each `path: message`.
fn errors(kind: &str, spec: serde_json::Value) -> Vec<String> {
    let config = DynConfig {
        meta: ConfigMeta::new(kind, "default", "example"),
        spec,
    };
    match registry().prepare(config) {
        Ok(_) => Vec::new(),
        Err(StoreError::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
        Err(other) => panic!("{other}"),
    }
}

/// Asserts that one error is at `path` exactly and mentions `fragment`.
#[track_caller]
fn refused_at(found: &[String], path: &str, fragment: &str) {
    assert!(
        found.iter().any(|e| e
            .strip_prefix(path)
            .is_some_and(|rest| rest.starts_with(": ") && rest.contains(fragment))),
        "no error at {path} mentioning {fragment:?}: {found:?}"
    );
}

fn route_with_rules(rules: serde_json::Value) -> serde_json::Value {
    json!({"parentRefs": [{"name": "edge"}], "rules": rules})
}

#[test]
fn hostnames_take_one_leading_wildcard_label_and_lower_case_labels() {
    for good in ["example.com", "*.example.com", "a", "a-1.b-2", "0.example"] {
        assert!(
            errors("HTTPRoute", json!({"hostnames": [good]})).is_empty(),
            "{good}"
        );
    }
    for bad in [
        "*",
        "Example.com",
        "foo.*.com",
        "-a.com",
        "a-.com",
        "a..b",
        ".a",
        "1.2.3.4:80",
        "*.",
        "a_b",
    ] {
        let found = errors("HTTPRoute", json!({"hostnames": ["ok.example", bad]}));
        refused_at(&found, "spec.hostnames[1]", "is not a hostname");
    }
    // A redirect's hostname is precise: no wildcard.
    let found = errors(
        "HTTPRoute",
        route_with_rules(
            json!([{"filters": [{"type": "RequestRedirect", "requestRedirect": {"hostname": "*.example.com"}}]}]),
        ),
    );
    refused_at(
        &found,
        "spec.rules[0].filters[0].requestRedirect.hostname",
        "precise hostname",
    );
    // An address of type IPAddress (the default) is an IP.
    let gateway = |address: serde_json::Value| json!({"gatewayClassName": "c", "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}], "addresses": [address]});
    assert!(errors("Gateway", gateway(json!({"value": "10.0.0.1"}))).is_empty());
    assert!(errors("Gateway", gateway(json!({"value": "fd00::1"}))).is_empty());
    assert!(
        errors(
            "Gateway",
            gateway(json!({"type": "NamedAddress", "value": "anything at all"}))
        )
        .is_empty()
    );
    assert!(
        errors(
            "Gateway",
            gateway(json!({"type": "example.com/custom", "value": "x"}))
        )
        .is_empty()
    );
    refused_at(
        &errors("Gateway", gateway(json!({"value": "gateway.example"}))),
        "spec.addresses[0].value",
        "not an IP",
    );
    refused_at(
        &errors("Gateway", gateway(json!({"type": "custom"}))),
        "spec.addresses[0].type",
        "not an address type",
    );
}

#[test]
fn a_route_has_at_most_128_matches_across_its_rules() {
    let rule = |n: usize| {
        let matches: Vec<_> = (0..n)
            .map(|i| json!({"path": {"value": format!("/m{i}")}}))
            .collect();
        json!({"matches": matches})
    };
    let ok = route_with_rules(json!([rule(64), rule(63), {}]));
    assert!(errors("HTTPRoute", ok).is_empty());
    // A rule without matches counts one (its default PathPrefix / match).
    let found = errors("HTTPRoute", route_with_rules(json!([rule(64), rule(64), {}])));
    refused_at(&found, "spec.rules", "129 matches");
    // 65 in one rule breaks the rule's own limit.
    refused_at(
        &errors("HTTPRoute", route_with_rules(json!([rule(65)]))),
        "spec.rules[0].matches",
        "at most 64",
    );
    // GRPCRoute counts only written matches.
    let grpc_rule = |n: usize| {
        let matches: Vec<_> = (0..n)
            .map(|i| json!({"method": {"service": format!("s{i}")}}))
            .collect();
        json!({"matches": matches})
    };
    assert!(errors("GRPCRoute", json!({"rules": [grpc_rule(64), grpc_rule(64), {}]})).is_empty());
    let found = errors(
        "GRPCRoute",
        json!({"rules": [grpc_rule(64), grpc_rule(64), grpc_rule(1)]}),
    );
    refused_at(&found, "spec.rules", "129 matches");
}

#[test]
fn a_backend_request_timeout_is_not_longer_than_the_request_timeout() {
    let timeouts = |t: serde_json::Value| route_with_rules(json!([{"timeouts": t}]));
    assert!(
        errors(
            "HTTPRoute",
            timeouts(json!({"request": "1m", "backendRequest": "60s"}))
        )
        .is_empty()
    );
    assert!(
        errors(
            "HTTPRoute",
            timeouts(json!({"request": "1h1m1s1ms", "backendRequest": "61m1001ms"}))
        )
        .is_empty()
    );
    // A request timeout of zero is none: any backend timeout fits.
    assert!(
        errors(
            "HTTPRoute",
            timeouts(json!({"request": "0s", "backendRequest": "10h"}))
        )
        .is_empty()
    );
    let found = errors(
        "HTTPRoute",
        timeouts(json!({"request": "1m", "backendRequest": "1m1ms"})),
    );
    refused_at(&found, "spec.rules[0].timeouts", "longer than request");
    for bad in ["1", "1d", "100000s", "1h1m1s1ms1h", "-1s", "1.5s", ""] {
        let found = errors("HTTPRoute", timeouts(json!({"request": bad})));
        refused_at(&found, "spec.rules[0].timeouts.request", "not a duration");
    }
}

#[test]
fn list_maps_and_sets_refuse_a_repeated_key_at_the_repeat() {
    let modifier = json!({"type": "RequestHeaderModifier", "requestHeaderModifier": {
        "set": [{"name": "a", "value": "1"}, {"name": "b", "value": "2"}, {"name": "a", "value": "3"}],
        "add": [{"name": "a", "value": "1"}],
    }});
    let found = errors("HTTPRoute", route_with_rules(json!([{"filters": [modifier]}])));
    refused_at(
        &found,
        "spec.rules[0].filters[0].requestHeaderModifier.set[2]",
        "duplicate header name \"a\"",
    );
    assert_eq!(found.len(), 1, "set and add are separate lists: {found:?}");
    // Names differing in case are different keys, as the API server
    // compares them.
    let headers =
        json!([{"matches": [{"headers": [{"name": "X-A", "value": "1"}, {"name": "x-a", "value": "1"}]}]}]);
    assert!(errors("HTTPRoute", route_with_rules(headers)).is_empty());
    let listeners = json!({"gatewayClassName": "c", "listeners": [
        {"name": "a", "port": 80, "protocol": "HTTP"},
        {"name": "a", "port": 81, "protocol": "HTTP"},
    ]});
    refused_at(
        &errors("Gateway", listeners),
        "spec.listeners[1]",
        "duplicate listener name",
    );
    let retry = json!([{"retry": {"codes": [500, 503, 500], "attempts": 2}}]);
    refused_at(
        &errors("HTTPRoute", route_with_rules(retry)),
        "spec.rules[0].retry.codes[2]",
        "duplicate value 500",
    );
    let per_port = json!({"gatewayClassName": "c", "listeners": [{"name": "a", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert"}]}}],
    "tls": {"frontend": {"default": {}, "perPort": [
        {"port": 443, "tls": {}}, {"port": 443, "tls": {}},
    ]}}});
    let found = errors("Gateway", per_port);
    refused_at(&found, "spec.tls.frontend.perPort[1]", "duplicate port");
    refused_at(&found, "spec.tls.frontend.perPort", "ports must be unique");
}

#[test]
fn parent_refs_to_one_parent_each_name_a_distinct_section_or_port() {
    let refs = |refs: serde_json::Value| json!({"parentRefs": refs});
    assert!(
        errors(
            "HTTPRoute",
            refs(json!([{"name": "gw", "sectionName": "a"}, {"name": "gw", "sectionName": "b"}]))
        )
        .is_empty()
    );
    assert!(
        errors(
            "HTTPRoute",
            refs(json!([{"name": "gw", "port": 80}, {"name": "gw", "port": 443}]))
        )
        .is_empty()
    );
    // Other namespaces, kinds or groups are other parents.
    assert!(
        errors(
            "HTTPRoute",
            refs(json!([{"name": "gw"}, {"name": "gw", "namespace": "other"}]))
        )
        .is_empty()
    );
    assert!(
        errors(
            "HTTPRoute",
            refs(json!([{"name": "gw"}, {"name": "gw", "kind": "ListenerSet"}]))
        )
        .is_empty()
    );
    // The written default group is the same parent as the default.
    let same = refs(json!([{"name": "gw", "group": "gateway.networking.k8s.io"}, {"name": "gw"}]));
    refused_at(
        &errors("TCPRoute", same),
        "spec.parentRefs",
        "same sectionName and port",
    );
    let mixed = refs(json!([{"name": "gw"}, {"name": "gw", "sectionName": "a"}]));
    refused_at(
        &errors("GRPCRoute", mixed),
        "spec.parentRefs",
        "all name a sectionName or none",
    );
}

#[test]
fn listeners_agree_with_their_protocol() {
    let gateway = |listener: serde_json::Value| json!({"gatewayClassName": "c", "listeners": [listener]});
    let tls = json!({"certificateRefs": [{"name": "cert"}]});
    assert!(
        errors(
            "Gateway",
            gateway(json!({"name": "a", "port": 443, "protocol": "HTTPS", "tls": tls}))
        )
        .is_empty()
    );
    assert!(
        errors(
            "Gateway",
            gateway(json!({"name": "a", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}}))
        )
        .is_empty()
    );
    assert!(
        errors(
            "Gateway",
            gateway(json!({"name": "a", "port": 9, "protocol": "example.com/Proto"}))
        )
        .is_empty()
    );
    // Terminate (the default mode) needs a certificate or options.
    let found = errors(
        "Gateway",
        gateway(json!({"name": "a", "port": 443, "protocol": "HTTPS", "tls": {}})),
    );
    refused_at(
        &found,
        "spec.listeners[0].tls",
        "needs certificateRefs or options",
    );
    for bad in ["HT TP", "-HTTP", "example.com/", "example.com/a-b", ""] {
        let found = errors(
            "Gateway",
            gateway(json!({"name": "a", "port": 80, "protocol": bad})),
        );
        assert!(
            found
                .iter()
                .any(|e| e.starts_with("spec.listeners[0].protocol: ")),
            "{bad:?}: {found:?}"
        );
    }
    // ListenerSets' `None` is not for a listener's routes.
    let found = errors(
        "Gateway",
        gateway(
            json!({"name": "a", "port": 80, "protocol": "HTTP", "allowedRoutes": {"namespaces": {"from": "None"}}}),
        ),
    );
    refused_at(
        &found,
        "spec.listeners[0].allowedRoutes.namespaces.from",
        "must be All, Selector or Same",
    );
}

#[test]
fn defaults_are_read_through_accessors_and_the_spec_stays_as_written() {
    let written = json!({
        "gatewayClassName": "c",
        "listeners": [{"name": "a", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert"}]}}],
    });
    let gateway: Gateway = serde_json::from_value(written.clone()).unwrap();
    let listener = &gateway.listeners[0];
    assert_eq!(
        listener.allowed_routes().namespaces().from(),
        FromNamespaces::Same
    );
    assert_eq!(listener.tls.as_ref().unwrap().mode(), TlsMode::Terminate);
    assert_eq!(
        listener.tls.as_ref().unwrap().certificate_refs.as_ref().unwrap()[0].kind(),
        "Secret"
    );
    assert_eq!(serde_json::to_value(&gateway).unwrap(), written);

    let written =
        json!({"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]});
    let route: HttpRoute = serde_json::from_value(written.clone()).unwrap();
    assert_eq!(route.parent_refs.as_ref().unwrap()[0].group(), GROUP);
    assert_eq!(route.parent_refs.as_ref().unwrap()[0].kind(), "Gateway");
    let rule = &route.rules()[0];
    let path = rule.matches()[0].path();
    assert_eq!(
        (path.match_type(), path.value()),
        (PathMatchType::PathPrefix, "/")
    );
    assert_eq!(rule.backend_refs.as_ref().unwrap()[0].weight(), 1);
    assert_eq!(serde_json::to_value(&route).unwrap(), written);
    // A route without rules has one matching every path.
    let bare: HttpRoute = serde_json::from_value(json!({})).unwrap();
    assert_eq!(bare.rules()[0].matches()[0].path().value(), "/");
    // Stored as written by the registry too.
    let stored = registry()
        .prepare(DynConfig {
            meta: ConfigMeta::new("HTTPRoute", "default", "r"),
            spec: written.clone(),
        })
        .unwrap();
    assert_eq!(stored.spec, written);
    assert_eq!(stored.meta.api_version(), "gateway.networking.k8s.io/v1");
}

#[test]
fn every_version_the_crds_serve_is_served_and_short_names_are_upstream_s() {
    let registry = registry();
    let versions = |kind: &str| registry.get(kind).unwrap().versions.clone();
    assert_eq!(versions("HTTPRoute"), ["v1", "v1beta1"]);
    assert_eq!(versions("ReferenceGrant"), ["v1beta1", "v1"]);
    assert_eq!(versions("TLSRoute"), ["v1", "v1alpha2", "v1alpha3"]);
    assert_eq!(versions("BackendTLSPolicy"), ["v1", "v1alpha3"]);
    let short = |kind: &str| registry.short_names(&registry.get(kind).unwrap());
    assert_eq!(short("Gateway"), ["gtw"]);
    assert_eq!(short("GatewayClass"), ["gc"]);
    assert_eq!(short("ReferenceGrant"), ["refgrant"]);
    assert_eq!(short("BackendTLSPolicy"), ["btlspolicy"]);
    // The CRDs give HTTPRoute and the other routes no short name, and none
    // is derived for a qualified kind.
    for kind in ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute"] {
        assert!(short(kind).is_empty(), "{kind}: {:?}", short(kind));
    }
    // Every kind is in the Gateway API's category, its id qualified.
    for kind in registry.kinds() {
        let schema = registry.get(&kind).unwrap();
        assert_eq!(schema.categories, ["gateway-api"], "{kind}");
        assert_eq!(kind, format!("{}.gateway.networking.k8s.io", schema.kind));
    }
}

#[test]
fn filter_fields_follow_the_filter_type() {
    let filter = |f: serde_json::Value| route_with_rules(json!([{"filters": [f]}]));
    let mirror = json!({"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 80}, "fraction": {"numerator": 150}}});
    refused_at(
        &errors("HTTPRoute", filter(mirror)),
        "spec.rules[0].filters[0].requestMirror.fraction",
        "numerator must not be greater",
    );
    let cors = json!({"type": "CORS", "cors": {"allowOrigins": ["https://*.example.com:8443", "http://a"], "allowMethods": ["GET", "*"], "allowHeaders": ["x-a"]}});
    let found = errors("HTTPRoute", filter(cors));
    refused_at(&found, "spec.rules[0].filters[0].cors.allowMethods", "only entry");
    assert_eq!(found.len(), 1, "{found:?}");
    let auth = json!({"type": "ExternalAuth", "externalAuth": {"protocol": "GRPC", "backendRef": {"name": "authz", "port": 9000}, "http": {}}});
    let found = errors("HTTPRoute", filter(auth));
    refused_at(
        &found,
        "spec.rules[0].filters[0].externalAuth",
        "protocol GRPC needs grpc",
    );
    refused_at(
        &found,
        "spec.rules[0].filters[0].externalAuth",
        "http is only for protocol HTTP",
    );
    let unknown = json!({"type": "Teleport"});
    refused_at(
        &errors("HTTPRoute", filter(unknown)),
        "spec.rules[0].filters[0].type",
        "unknown variant",
    );
    let session = route_with_rules(
        json!([{"sessionPersistence": {"type": "Header", "cookieConfig": {"lifetimeType": "Permanent"}}}]),
    );
    let found = errors("HTTPRoute", session);
    refused_at(
        &found,
        "spec.rules[0].sessionPersistence",
        "cookieConfig can only be set with type Cookie",
    );
    refused_at(
        &found,
        "spec.rules[0].sessionPersistence",
        "AbsoluteTimeout must be specified when cookie lifetimeType is Permanent",
    );
    // Every field is optional, as the CRD's schema says; the fields of
    // the experimental channel's schema are all read.
    for accepted in [
        json!({}),
        json!({"sessionName": "shop", "type": "Cookie", "absoluteTimeout": "1h",
               "cookieConfig": {"lifetimeType": "Permanent"}}),
        json!({"type": "Header", "sessionName": "x-session"}),
        json!({"cookieConfig": {"lifetimeType": "Session"}}),
    ] {
        let route = route_with_rules(json!([{"sessionPersistence": accepted.clone()}]));
        let found = errors("HTTPRoute", route);
        assert!(found.is_empty(), "{accepted}: {found:?}");
    }
    let long_name = route_with_rules(json!([{"sessionPersistence": {"sessionName": "s".repeat(129)}}]));
    refused_at(
        &errors("HTTPRoute", long_name),
        "spec.rules[0].sessionPersistence.sessionName",
        "",
    );
    // Removed from the CRDs in v1.6.0 (no data plane honoured it): an
    // unknown field, not one silently ignored.
    let idle = route_with_rules(json!([{"sessionPersistence": {"idleTimeout": "10m"}}]));
    refused_at(
        &errors("HTTPRoute", idle),
        "spec.rules[0].sessionPersistence.idleTimeout",
        "unknown field",
    );
    // Not fields of the CRD.
    let invented = route_with_rules(json!([{"sessionPersistence": {"cookie": {"name": "a"}}}]));
    refused_at(
        &errors("HTTPRoute", invented),
        "spec.rules[0].sessionPersistence.cookie",
        "unknown field",
    );
}

#[test]
fn values_upstream_s_cel_tests_accept_and_refuse() {
    let match_path =
        |value: &str| route_with_rules(json!([{"matches": [{"path": {"type": "Exact", "value": value}}]}]));
    assert!(errors("HTTPRoute", match_path("/abc/123'/a-b-c/d@gmail/%0A")).is_empty());
    refused_at(
        &errors("HTTPRoute", match_path("/^")),
        "spec.rules[0].matches[0].path",
        "must only contain",
    );
    let regex = route_with_rules(
        json!([{"matches": [{"path": {"type": "RegularExpression", "value": "/foo/[a-z]+/.*"}}]}]),
    );
    assert!(errors("HTTPRoute", regex).is_empty());

    let gateway = |labels: serde_json::Value| {
        json!({"gatewayClassName": "c", "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}],
               "infrastructure": {"labels": labels}})
    };
    let labels = json!({"app": "gateway", "example.com": "my.name", "example.com/path.html": "", "example": "MyValue"});
    assert!(errors("Gateway", gateway(labels)).is_empty());
    for bad_key in [
        "Example.com/key".to_string(),
        "key~@@@".to_string(),
        "a".repeat(64),
        format!("{}/key", "a".repeat(254)),
    ] {
        let found = errors("Gateway", gateway(json!({bad_key.clone(): "v"})));
        refused_at(&found, "spec.infrastructure.labels", "label key");
    }
    for bad_value in ["a".repeat(64), "v a l u e".to_string()] {
        let found = errors("Gateway", gateway(json!({"key": bad_value})));
        assert!(
            found
                .iter()
                .any(|e| e.starts_with("spec.infrastructure.labels.key: ")),
            "{found:?}"
        );
    }

    let policy = |validation: serde_json::Value| json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}], "validation": validation});
    for ok in ["System", "example.com/my-custom-ca-certificates"] {
        let spec = policy(json!({"hostname": "foo.example.com", "wellKnownCACertificates": ok}));
        assert!(errors("BackendTLSPolicy", spec).is_empty(), "{ok}");
    }
    for bad in ["MySystem", "my-system", "in..va..lid./my-custom-ca-certificates"] {
        let spec = policy(json!({"hostname": "foo.example.com", "wellKnownCACertificates": bad}));
        refused_at(
            &errors("BackendTLSPolicy", spec),
            "spec.validation.wellKnownCACertificates",
            "well-known",
        );
    }
    let san = |san: serde_json::Value| {
        policy(
            json!({"hostname": "foo.example.com", "wellKnownCACertificates": "System", "subjectAltNames": [san]}),
        )
    };
    assert!(
        errors(
            "BackendTLSPolicy",
            san(json!({"type": "URI", "uri": "spiffe://example.com/ns/a"}))
        )
        .is_empty()
    );
    refused_at(
        &errors(
            "BackendTLSPolicy",
            san(json!({"type": "URI", "uri": "foo.example.com"})),
        ),
        "spec.validation.subjectAltNames[0].uri",
        "not a URI",
    );
    let found = errors(
        "BackendTLSPolicy",
        san(json!({"type": "Hostname", "hostname": "a.example", "uri": "spiffe://a/b"})),
    );
    refused_at(
        &found,
        "spec.validation.subjectAltNames[0]",
        "only a subject alternative name of type URI may have a uri",
    );

    // Several listeners on one port and protocol differ by hostname, one
    // of them may have none; HTTPS needs no tls block of its own.
    let listeners = json!({"gatewayClassName": "c", "listeners": [
        {"name": "a", "port": 443, "protocol": "HTTPS"},
        {"name": "b", "port": 443, "protocol": "HTTPS", "hostname": "b.example"},
        {"name": "c", "port": 443, "protocol": "TLS", "hostname": "b.example", "tls": {"mode": "Passthrough"}},
    ]});
    assert!(errors("Gateway", listeners).is_empty());
    let unnamed_twice = json!({"gatewayClassName": "c", "listeners": [
        {"name": "a", "port": 80, "protocol": "HTTP"},
        {"name": "b", "port": 80, "protocol": "HTTP"},
    ]});
    refused_at(
        &errors("Gateway", unnamed_twice),
        "spec.listeners",
        "same port, protocol and hostname",
    );
}

#[cfg(feature = "schema")]
#[test]
fn each_kind_publishes_the_openapi_schema_of_its_spec() {
    use pilot_model::ConfigKind;
    let properties = |schema: Option<serde_json::Value>| {
        let schema = schema.expect("a schema");
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        properties(HttpRoute::openapi_schema()),
        ["hostnames", "parentRefs", "rules", "useDefaultGateways"]
    );
    assert!(properties(Gateway::openapi_schema()).contains(&"gatewayClassName".to_string()));
    assert!(properties(BackendTlsPolicy::openapi_schema()).contains(&"targetRefs".to_string()));
    let schema = serde_json::to_string(&HttpRoute::openapi_schema()).unwrap();
    assert!(!schema.contains("$ref"), "subschemas are inlined: {schema}");
    assert!(schema.contains("URLRewrite") && schema.contains("replacePrefixMatch"));
}

#[test]
fn tls_routes_name_sni_hostnames_not_addresses() {
    let route = |hosts: serde_json::Value| json!({"hostnames": hosts, "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]});
    assert!(errors("TLSRoute", route(json!(["*.example.com", "a.example.com"]))).is_empty());
    refused_at(
        &errors("TLSRoute", route(json!(["10.1.2.3"]))),
        "spec.hostnames",
        "must not be IP addresses",
    );
    refused_at(
        &errors("TLSRoute", route(json!(["a.*.example.com"]))),
        "spec.hostnames",
        "wildcard",
    );
    refused_at(
        &errors("TLSRoute", route(json!([]))),
        "spec.hostnames",
        "is required",
    );
    // One rule at v1, with at least one backend.
    let two_rules = json!({"hostnames": ["a.example"], "rules": [
        {"backendRefs": [{"name": "a", "port": 1}]}, {"backendRefs": [{"name": "b", "port": 1}]},
    ]});
    refused_at(&errors("TLSRoute", two_rules), "spec.rules", "at most 1 items");
    refused_at(
        &errors("TCPRoute", json!({"rules": [{}]})),
        "spec.rules[0].backendRefs",
        "at least one item",
    );
    // A backend of another kind needs no port.
    let other_kind =
        json!({"rules": [{"backendRefs": [{"group": "example.com", "kind": "Backend", "name": "b"}]}]});
    assert!(errors("TCPRoute", other_kind).is_empty());
}

#[test]
fn tls_and_tcp_routes_written_at_v1alpha2_keep_that_version_s_rules_and_are_stored_at_v1() {
    let at = |kind: &str, version: &str, spec: serde_json::Value| {
        let mut meta = ConfigMeta::new(kind, "default", "example");
        meta.version = version.to_string();
        registry().prepare(DynConfig { meta, spec })
    };
    let refused = |result: Result<DynConfig, StoreError>| -> Vec<String> {
        match result {
            Err(StoreError::Invalid { errors, .. }) => errors.iter().map(ToString::to_string).collect(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    let rule = |name: &str| json!({"name": name, "backendRefs": [{"name": name, "port": 443}]});
    let rules = |n: usize| json!((0..n).map(|i| rule(&format!("r{i}"))).collect::<Vec<_>>());
    // v1alpha2: no hostname, an address, up to 16 rules.
    let open = json!({"hostnames": ["10.1.2.3"], "rules": rules(16)});
    let stored = at("TLSRoute", "v1alpha2", open.clone()).unwrap();
    assert_eq!(stored.meta.api_version(), "gateway.networking.k8s.io/v1");
    // Stored at v1, the store's check on reading it back accepts it.
    let schema = registry().get("TLSRoute").unwrap();
    assert!(schema.validate_stored(&stored).is_ok());
    assert!(schema.validate(&stored).is_err(), "v1 itself refuses it");
    assert!(at("TLSRoute", "v1alpha2", json!({"rules": rules(1)})).is_ok());
    assert!(at("TCPRoute", "v1alpha2", json!({"rules": rules(16)})).is_ok());
    // v1 and v1alpha3 refuse them.
    for version in ["v1", "v1alpha3"] {
        let found = refused(at("TLSRoute", version, open.clone()));
        refused_at(&found, "spec.hostnames", "must not be IP addresses");
        refused_at(&found, "spec.rules", "at most 1 items");
        refused_at(
            &refused(at("TLSRoute", version, json!({"rules": rules(1)}))),
            "spec.hostnames",
            "is required",
        );
    }
    refused_at(
        &refused(at("TCPRoute", "v1", json!({"rules": rules(2)}))),
        "spec.rules",
        "at most 1 items",
    );
    // What v1alpha2 refuses too: a 17th rule, two rules of one name, a
    // hostname off the pattern.
    for kind in ["TLSRoute", "TCPRoute"] {
        refused_at(
            &refused(at(kind, "v1alpha2", json!({"rules": rules(17)}))),
            "spec.rules",
            "at most 16 items",
        );
        refused_at(
            &refused(at(kind, "v1alpha2", json!({"rules": [rule("a"), rule("a")]}))),
            "spec.rules",
            "same name",
        );
    }
    refused_at(
        &refused(at(
            "TLSRoute",
            "v1alpha2",
            json!({"hostnames": ["a.*.example.com"], "rules": rules(1)}),
        )),
        "spec.hostnames[0]",
        "",
    );
}

#[test]
fn references_and_policies_name_their_group_kind_and_sections() {
    let grant =
        json!({"from": [{"kind": "HTTPRoute", "namespace": "a"}], "to": [{"group": "", "kind": "Service"}]});
    refused_at(
        &errors("ReferenceGrant", grant),
        "spec.from[0].group",
        "is required",
    );
    let policy = |targets: serde_json::Value| json!({"targetRefs": targets, "validation": {"hostname": "svc.example", "wellKnownCACertificates": "System"}});
    let target = |section: Option<&str>| match section {
        Some(section) => json!({"group": "", "kind": "Service", "name": "svc", "sectionName": section}),
        None => json!({"group": "", "kind": "Service", "name": "svc"}),
    };
    assert!(
        errors(
            "BackendTLSPolicy",
            policy(json!([target(Some("a")), target(Some("b"))]))
        )
        .is_empty()
    );
    let found = errors(
        "BackendTLSPolicy",
        policy(json!([target(None), target(Some("b"))])),
    );
    refused_at(&found, "spec.targetRefs", "all name a sectionName or none");
    let found = errors(
        "BackendTLSPolicy",
        policy(json!([target(Some("a")), target(Some("a"))])),
    );
    refused_at(&found, "spec.targetRefs", "same sectionName");
    // Unknown fields are refused where they are.
    let found = errors(
        "GatewayClass",
        json!({"controllerName": "example.com/gc", "paramsRef": {}}),
    );
    refused_at(&found, "spec.paramsRef", "unknown field");
}

#[test]
fn grpc_matches_and_filters_follow_their_type() {
    let rule = |rule: serde_json::Value| json!({"rules": [rule]});
    let regex = rule(
        json!({"matches": [{"method": {"type": "RegularExpression", "service": "foo\\..*", "method": ".*"}}]}),
    );
    assert!(errors("GRPCRoute", regex).is_empty());
    let exact =
        rule(json!({"matches": [{"method": {"service": "helloworld.Greeter", "method": "SayHello"}}]}));
    assert!(errors("GRPCRoute", exact).is_empty());
    let mirror = rule(
        json!({"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 50051}, "percent": 101}}]}),
    );
    refused_at(
        &errors("GRPCRoute", mirror),
        "spec.rules[0].filters[0].requestMirror.percent",
        "between 0 and 100",
    );
    // GRPCRoute has no URLRewrite filter.
    let rewrite = rule(json!({"filters": [{"type": "URLRewrite"}]}));
    refused_at(
        &errors("GRPCRoute", rewrite),
        "spec.rules[0].filters[0].type",
        "unknown variant",
    );
    let backend_filter =
        rule(json!({"backendRefs": [{"name": "svc", "port": 1, "filters": [{"type": "ExtensionRef"}]}]}));
    refused_at(
        &errors("GRPCRoute", backend_filter),
        "spec.rules[0].backendRefs[0].filters[0]",
        "needs its extensionRef field",
    );
}

/// One small spec per CEL rule of the CRDs that the corpus and the tests
/// above leave out, refused at the rule's place.
#[test]
fn each_remaining_cel_rule_refuses_at_its_place() {
    let path_match = |value: &str| {
        route_with_rules(json!([{"matches": [{"path": {"type": "PathPrefix", "value": value}}]}]))
    };
    let filter = |f: serde_json::Value| route_with_rules(json!([{"filters": [f]}]));
    let filters = |f: serde_json::Value| route_with_rules(json!([{"filters": f}]));
    let modifier = json!({"set": [{"name": "a", "value": "b"}]});
    let mirror = json!({"backendRef": {"name": "m", "port": 80}});
    let auth = |a: serde_json::Value| filter(json!({"type": "ExternalAuth", "externalAuth": a}));
    let session = |s: serde_json::Value| route_with_rules(json!([{"sessionPersistence": s}]));
    let san = |s: serde_json::Value| {
        json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
               "validation": {"hostname": "svc.example", "wellKnownCACertificates": "System", "subjectAltNames": [s]}})
    };
    let on_path = "spec.rules[0].matches[0].path";
    let at_filter = "spec.rules[0].filters[0]";
    let at_filters = "spec.rules[0].filters";
    let cases: Vec<(&str, serde_json::Value, &str, &str)> = vec![
        ("HTTPRoute", path_match("/a//b"), on_path, "\"//\""),
        ("HTTPRoute", path_match("/a/../b"), on_path, "\"/../\""),
        ("HTTPRoute", path_match("/a%2fb"), on_path, "\"%2f\""),
        ("HTTPRoute", path_match("/a%2Fb"), on_path, "\"%2F\""),
        ("HTTPRoute", path_match("/a#b"), on_path, "\"#\""),
        ("HTTPRoute", path_match("/a/.."), on_path, "\"/..\""),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS"})),
            at_filter,
            "needs its cors field",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "URLRewrite", "cors": {}})),
            at_filter,
            "must not have cors",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "ResponseHeaderModifier"})),
            at_filter,
            "needs its responseHeaderModifier",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS", "cors": {}, "responseHeaderModifier": modifier})),
            at_filter,
            "must not have responseHeaderModifier",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "RequestMirror"})),
            at_filter,
            "needs its requestMirror",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS", "cors": {}, "requestMirror": mirror})),
            at_filter,
            "must not have requestMirror",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "RequestRedirect"})),
            at_filter,
            "needs its requestRedirect",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "URLRewrite"})),
            at_filter,
            "needs its urlRewrite",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS", "cors": {}, "urlRewrite": {}})),
            at_filter,
            "must not have urlRewrite",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "ExtensionRef"})),
            at_filter,
            "needs its extensionRef",
        ),
        (
            "HTTPRoute",
            filter(
                json!({"type": "CORS", "cors": {}, "extensionRef": {"group": "", "kind": "K", "name": "n"}}),
            ),
            at_filter,
            "must not have extensionRef",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS", "cors": {}, "externalAuth": {}})),
            at_filter,
            "must not have externalAuth",
        ),
        (
            "HTTPRoute",
            filters(json!([{"type": "CORS", "cors": {}}, {"type": "CORS", "cors": {}}])),
            at_filters,
            "CORS filter must not be repeated",
        ),
        (
            "HTTPRoute",
            filters(
                json!([{"type": "ResponseHeaderModifier", "responseHeaderModifier": {}}, {"type": "ResponseHeaderModifier", "responseHeaderModifier": {}}]),
            ),
            at_filters,
            "ResponseHeaderModifier filter must not be repeated",
        ),
        (
            "HTTPRoute",
            filters(
                json!([{"type": "RequestRedirect", "requestRedirect": {}}, {"type": "RequestRedirect", "requestRedirect": {}}]),
            ),
            at_filters,
            "RequestRedirect filter must not be repeated",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "CORS", "cors": {"allowHeaders": ["*", "x-a"]}})),
            "spec.rules[0].filters[0].cors.allowHeaders",
            "only entry",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplacePrefixMatch"}}})),
            "spec.rules[0].filters[0].urlRewrite.path",
            "needs replacePrefixMatch",
        ),
        (
            "HTTPRoute",
            filter(
                json!({"type": "URLRewrite", "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/a", "replacePrefixMatch": "/b"}}}),
            ),
            "spec.rules[0].filters[0].urlRewrite.path",
            "replacePrefixMatch is only for type ReplacePrefixMatch",
        ),
        (
            "HTTPRoute",
            filter(
                json!({"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplaceFullPath"}}}),
            ),
            "spec.rules[0].filters[0].requestRedirect.path",
            "needs replaceFullPath",
        ),
        (
            "HTTPRoute",
            route_with_rules(
                json!([{"matches": [{"path": {"type": "Exact", "value": "/a"}}], "backendRefs": [{"name": "s", "port": 1, "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}}}]}]}]),
            ),
            "spec.rules[0]",
            "a backend's RequestRedirect filter",
        ),
        (
            "HTTPRoute",
            filter(json!({"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m"}}})),
            "spec.rules[0].filters[0].requestMirror.backendRef",
            "must have a port",
        ),
        (
            "HTTPRoute",
            auth(json!({"protocol": "HTTP", "backendRef": {"name": "a", "port": 1}})),
            "spec.rules[0].filters[0].externalAuth",
            "protocol HTTP needs http",
        ),
        (
            "HTTPRoute",
            auth(json!({"protocol": "HTTP", "backendRef": {"name": "a"}, "http": {}, "grpc": {}})),
            "spec.rules[0].filters[0].externalAuth",
            "grpc is only for protocol GRPC",
        ),
        (
            "HTTPRoute",
            auth(json!({"protocol": "GRPC", "backendRef": {"name": "a"}, "grpc": {}})),
            "spec.rules[0].filters[0].externalAuth.backendRef",
            "must have a port",
        ),
        (
            "HTTPRoute",
            session(json!({"cookieConfig": {"lifetimeType": "Permanent"}})),
            "spec.rules[0].sessionPersistence",
            "AbsoluteTimeout must be specified when cookie lifetimeType is Permanent",
        ),
        (
            "GRPCRoute",
            json!({"rules": [{"sessionPersistence": {"type": "Header", "cookieConfig": {}}}]}),
            "spec.rules[0].sessionPersistence",
            "cookieConfig can only be set with type Cookie",
        ),
        (
            "GRPCRoute",
            json!({"rules": [{"filters": [{"type": "ResponseHeaderModifier", "responseHeaderModifier": {}}, {"type": "ResponseHeaderModifier", "responseHeaderModifier": {}}]}]}),
            at_filters,
            "ResponseHeaderModifier filter must not be repeated",
        ),
        (
            "GRPCRoute",
            json!({"rules": [{"filters": [{"type": "RequestMirror", "responseHeaderModifier": {}}]}]}),
            at_filter,
            "must not have responseHeaderModifier",
        ),
        (
            "GRPCRoute",
            json!({"rules": [{"name": "a"}, {"name": "a"}]}),
            "spec.rules",
            "names must be unique",
        ),
        (
            "BackendTLSPolicy",
            san(json!({"type": "URI", "hostname": "a.example", "uri": "spiffe://a/b"})),
            "spec.validation.subjectAltNames[0]",
            "only a subject alternative name of type Hostname may have a hostname",
        ),
        (
            "BackendTLSPolicy",
            san(json!({"type": "URI"})),
            "spec.validation.subjectAltNames[0]",
            "of type URI needs a uri",
        ),
        (
            "Gateway",
            json!({"gatewayClassName": "c", "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}], "infrastructure": {"annotations": {"a/b/c": "x"}}}),
            "spec.infrastructure.annotations",
            "annotation key",
        ),
        (
            "Gateway",
            json!({"gatewayClassName": "c", "listeners": [{"name": "l", "port": 80, "protocol": "HTTP"}], "addresses": [{"type": "Hostname", "value": "a.example"}, {"type": "Hostname", "value": "a.example"}]}),
            "spec.addresses",
            "Hostname values must be unique",
        ),
    ];
    for (kind, spec, path, fragment) in cases {
        let found = errors(kind, spec.clone());
        assert!(
            found.iter().any(|e| e
                .strip_prefix(path)
                .is_some_and(|rest| rest.starts_with(": ") && rest.contains(fragment))),
            "{kind} {spec}: no error at {path} mentioning {fragment:?}: {found:?}"
        );
    }
}

/// Specs with one value replaced by an arbitrary one (any string, number,
/// list or null) are read without panicking, valid or not.
mod arbitrary_values {
    use super::*;
    use proptest::prelude::*;

    fn templates() -> Vec<(&'static str, serde_json::Value)> {
        let filters = json!([
            {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}], "remove": ["c"]}},
            {"type": "URLRewrite", "urlRewrite": {"hostname": "a.example", "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/b"}}},
            {"type": "CORS", "cors": {"allowOrigins": ["https://a.example"], "allowMethods": ["GET"], "maxAge": 10}},
            {"type": "ExternalAuth", "externalAuth": {"protocol": "HTTP", "backendRef": {"name": "auth", "port": 80}, "http": {"path": "/auth"}}},
        ]);
        vec![
            (
                "HTTPRoute",
                json!({
                    "parentRefs": [{"name": "gw", "sectionName": "http", "port": 80}],
                    "hostnames": ["*.example.com"],
                    "rules": [{"name": "r", "matches": [{"path": {"type": "PathPrefix", "value": "/a"}, "headers": [{"name": "h", "value": "v"}], "method": "GET"}],
                               "filters": filters, "backendRefs": [{"name": "svc", "port": 80, "weight": 3}],
                               "timeouts": {"request": "10s", "backendRequest": "1s"}, "retry": {"codes": [503], "attempts": 2, "backoff": "100ms"},
                               "sessionPersistence": {"type": "Cookie", "sessionName": "s", "absoluteTimeout": "1h", "cookieConfig": {"lifetimeType": "Permanent"}}}],
                }),
            ),
            (
                "Gateway",
                json!({
                    "gatewayClassName": "c",
                    "addresses": [{"type": "IPAddress", "value": "10.0.0.1"}, {"type": "Hostname", "value": "a.example"}],
                    "listeners": [{"name": "https", "port": 443, "protocol": "HTTPS", "hostname": "a.example",
                                   "tls": {"mode": "Terminate", "certificateRefs": [{"name": "cert"}], "options": {"k": "v"}},
                                   "allowedRoutes": {"namespaces": {"from": "Selector", "selector": {"matchLabels": {"a": "b"}}}, "kinds": [{"kind": "HTTPRoute"}]}}],
                    "infrastructure": {"labels": {"a": "b"}, "annotations": {"example.com/a": "b"}},
                    "tls": {"frontend": {"default": {"validation": {"caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}]}}, "perPort": [{"port": 443, "tls": {}}]}},
                }),
            ),
            (
                "GRPCRoute",
                json!({"rules": [{"matches": [{"method": {"service": "a.B", "method": "C"}, "headers": [{"name": "h", "value": "v"}]}],
                                            "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "m", "port": 1}, "fraction": {"numerator": 1}}}],
                                            "backendRefs": [{"name": "svc", "port": 50051}]}]}),
            ),
            (
                "BackendTLSPolicy",
                json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc", "sectionName": "https"}],
                                        "validation": {"hostname": "svc.example", "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
                                                       "subjectAltNames": [{"type": "URI", "uri": "spiffe://a/b"}]}}),
            ),
            (
                "TLSRoute",
                json!({"hostnames": ["a.example"], "rules": [{"backendRefs": [{"name": "svc", "port": 443}]}]}),
            ),
            (
                "ReferenceGrant",
                json!({"from": [{"group": "", "kind": "K", "namespace": "n"}], "to": [{"group": "", "kind": "Secret", "name": "s"}]}),
            ),
            (
                "GatewayClass",
                json!({"controllerName": "example.com/gc", "parametersRef": {"group": "", "kind": "ConfigMap", "name": "p", "namespace": "n"}}),
            ),
        ]
    }

    /// The JSON pointers of every value in `value` but objects.
    fn leaves(value: &serde_json::Value, at: String, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (k, v) in map {
                    leaves(
                        v,
                        format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                        out,
                    );
                }
            }
            serde_json::Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    leaves(v, format!("{at}/{i}"), out);
                }
                out.push(at);
            }
            _ => out.push(at),
        }
    }

    fn value() -> impl Strategy<Value = serde_json::Value> {
        prop_oneof![
            any::<String>().prop_map(serde_json::Value::from),
            "[-a-zA-Z0-9./*:%é ]{0,12}".prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            Just(serde_json::Value::Null),
            Just(json!([])),
            Just(json!({})),
            Just(json!(["", ""])),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
        #[test]
        fn a_spec_with_any_value_anywhere_is_read_without_panic(which in 0usize..7, place in any::<prop::sample::Index>(), replacement in value()) {
            let (kind, mut spec) = templates().swap_remove(which);
            prop_assert!(errors(kind, spec.clone()).is_empty(), "the template of {} is valid", kind);
            let mut places = Vec::new();
            leaves(&spec, String::new(), &mut places);
            let pointer = place.get(&places).clone();
            *spec.pointer_mut(&pointer).unwrap() = replacement;
            let _ = errors(kind, spec);
        }
    }
}

/// The schema each version of TLSRoute and TCPRoute publishes bounds its
/// lists and requires its fields as that version of the CRD does (the
/// upstream CRDs' values, written here), and validation at that version
/// agrees with it: the most rules the schema allows are accepted, one more
/// is refused, and an absent hostname is accepted where it is optional.
#[cfg(feature = "schema")]
#[test]
fn tls_and_tcp_routes_publish_each_version_s_bounds_and_validate_by_them() {
    // (kind, version, required, rules' maxItems, hostnames' minItems)
    let expected = [
        ("TLSRoute", "v1", &["hostnames", "rules"][..], 1, Some(1)),
        ("TLSRoute", "v1alpha3", &["hostnames", "rules"], 1, Some(1)),
        ("TLSRoute", "v1alpha2", &["rules"], 16, None),
        ("TCPRoute", "v1", &["rules"], 1, None),
        ("TCPRoute", "v1alpha2", &["rules"], 16, None),
    ];
    let registry = registry();
    for (kind, version, required, max_rules, min_hostnames) in expected {
        let schema = registry.get(kind).unwrap();
        let at = |spec: serde_json::Value| {
            let mut meta = ConfigMeta::new(kind, "default", "example");
            meta.version = version.to_string();
            registry.prepare(DynConfig { meta, spec })
        };
        let openapi = schema.openapi_schema_at(version).expect("a schema");
        let context = format!("{kind} {version}: {openapi}");
        assert_eq!(openapi["required"], json!(required), "{context}");
        let properties = &openapi["properties"];
        assert_eq!(properties["parentRefs"]["maxItems"], 32, "{context}");
        assert_eq!(properties["rules"]["minItems"], 1, "{context}");
        assert_eq!(properties["rules"]["maxItems"], max_rules, "{context}");
        let rule = &properties["rules"]["items"];
        assert_eq!(rule["required"], json!(["backendRefs"]), "{context}");
        assert_eq!(rule["properties"]["backendRefs"]["minItems"], 1, "{context}");
        assert_eq!(rule["properties"]["backendRefs"]["maxItems"], 16, "{context}");
        if kind == "TLSRoute" {
            assert_eq!(properties["hostnames"]["maxItems"], 1024, "{context}");
            assert_eq!(
                properties["hostnames"].get("minItems").and_then(|v| v.as_u64()),
                min_hostnames,
                "{context}"
            );
        } else {
            assert!(properties.get("hostnames").is_none(), "{context}");
        }
        // Validation at the version agrees with its schema.
        let rule = |i: u64| json!({"name": format!("r{i}"), "backendRefs": [{"name": "svc", "port": 443}]});
        let spec = |rules: u64, hostnames: bool| {
            let mut spec = json!({"rules": (0..rules).map(rule).collect::<Vec<_>>()});
            if hostnames {
                spec["hostnames"] = json!(["a.example.com"]);
            }
            spec
        };
        let with_hostnames = kind == "TLSRoute";
        assert!(at(spec(max_rules, with_hostnames)).is_ok(), "{context}");
        assert!(at(spec(max_rules + 1, with_hostnames)).is_err(), "{context}");
        assert!(at(json!({"rules": [{"backendRefs": []}]})).is_err(), "{context}");
        if kind == "TLSRoute" {
            assert_eq!(at(spec(1, false)).is_ok(), min_hostnames.is_none(), "{context}");
        }
    }
    // The storage version's schema is the kind's own.
    let tls = registry.get("TLSRoute").unwrap();
    assert_eq!(tls.openapi_schema(), tls.openapi_schema_at("v1"));
    assert_eq!(TlsRoute::openapi_schema().as_ref(), tls.openapi_schema());
}

/// TLS `options` are accepted as the CRDs accept them, each with a
/// warning that pilot does not apply it (it defines none).
#[test]
fn tls_options_are_accepted_with_a_warning_that_they_are_not_applied() {
    let warnings = |kind: &str, spec: serde_json::Value| -> Vec<String> {
        let config = DynConfig {
            meta: ConfigMeta::new(kind, "default", "example"),
            spec,
        };
        let registry = registry();
        let schema = registry.get(kind).unwrap();
        let config = registry.prepare(config).expect("accepted");
        schema.warnings(&config).iter().map(ToString::to_string).collect()
    };
    let gateway = json!({"gatewayClassName": "pilot", "listeners": [{
        "name": "https", "protocol": "HTTPS", "port": 443,
        "tls": {"certificateRefs": [{"name": "cert"}], "options": {"example.com/min-version": "1.3"}}}]});
    assert_eq!(
        warnings("Gateway.gateway.networking.k8s.io", gateway),
        [
            "spec.listeners[0].tls.options[example.com/min-version]: pilot defines no TLS option: this one is not applied"
        ]
    );
    let policy = json!({"targetRefs": [{"group": "", "kind": "Service", "name": "svc"}],
        "validation": {"wellKnownCACertificates": "System", "hostname": "svc.example.com"},
        "options": {"example.com/ciphers": "x"}});
    let found = warnings("BackendTLSPolicy", policy);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("spec.options[example.com/ciphers]: "),
        "{found:?}"
    );
    // Without options, no warning.
    let plain =
        json!({"gatewayClassName": "pilot", "listeners": [{"name": "http", "protocol": "HTTP", "port": 80}]});
    assert!(warnings("Gateway.gateway.networking.k8s.io", plain).is_empty());
}

/// The schemas pilot publishes carry the CRDs' constraints (values of the
/// upstream CRDs, written here), and validation refuses what each one
/// refuses, at the path the schema names.
#[cfg(feature = "schema")]
#[test]
fn published_schemas_carry_the_crds_constraints_and_validation_agrees() {
    let registry = registry();
    // The subschema at `path` (`a.b[].c`) of `kind`'s published schema.
    let at = |kind: &str, path: &str| -> serde_json::Value {
        let schema = registry.get(kind).unwrap();
        let mut node = schema.openapi_schema().unwrap().clone();
        for part in path.split('.') {
            let (name, items) = match part.strip_suffix("[]") {
                Some(name) => (name, true),
                None => (part, false),
            };
            node = node["properties"][name].clone();
            if items {
                node = node["items"].clone();
            }
            // An optional object is `anyOf` it and null.
            if let Some(inner) = node["anyOf"]
                .as_array()
                .and_then(|a| a.iter().find(|b| b["type"] != "null"))
            {
                node = inner.clone();
            }
            assert!(!node.is_null(), "no {path} in {kind}'s schema");
        }
        node
    };
    let route = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut spec = json!({"parentRefs": [{"name": "edge"}],
            "rules": [{"backendRefs": [{"name": "svc", "port": 80}]}]});
        edit(&mut spec);
        spec
    };
    // (kind, schema path, constraint, value, a spec breaking it, the
    // error's path)
    let cases: Vec<(&str, &str, &str, serde_json::Value, serde_json::Value, &str)> = vec![
        (
            "HTTPRoute",
            "parentRefs[].name",
            "maxLength",
            json!(253),
            route(&|s| s["parentRefs"][0]["name"] = json!("a".repeat(254))),
            "spec.parentRefs[0].name",
        ),
        (
            "HTTPRoute",
            "parentRefs[].namespace",
            "pattern",
            json!(shapes::NAMESPACE),
            route(&|s| s["parentRefs"][0]["namespace"] = json!("Web")),
            "spec.parentRefs[0].namespace",
        ),
        (
            "HTTPRoute",
            "parentRefs",
            "maxItems",
            json!(32),
            route(&|s| {
                s["parentRefs"] = json!(
                    (0..33)
                        .map(|i| json!({"name": format!("g{i}")}))
                        .collect::<Vec<_>>()
                )
            }),
            "spec.parentRefs",
        ),
        (
            "HTTPRoute",
            "hostnames[]",
            "pattern",
            json!(shapes::HOSTNAME),
            route(&|s| s["hostnames"] = json!(["a.*.example.com"])),
            "spec.hostnames[0]",
        ),
        (
            "HTTPRoute",
            "rules[].backendRefs[].port",
            "maximum",
            json!(65535),
            route(&|s| s["rules"][0]["backendRefs"][0]["port"] = json!(65536)),
            "spec.rules[0].backendRefs[0].port",
        ),
        (
            "HTTPRoute",
            "rules[].backendRefs[].weight",
            "maximum",
            json!(1_000_000),
            route(&|s| s["rules"][0]["backendRefs"][0]["weight"] = json!(1_000_001)),
            "spec.rules[0].backendRefs[0].weight",
        ),
        (
            "HTTPRoute",
            "rules[].matches[].headers[].name",
            "pattern",
            json!(shapes::HEADER_NAME),
            route(&|s| s["rules"][0]["matches"] = json!([{"headers": [{"name": "a b", "value": "x"}]}])),
            "spec.rules[0].matches[0].headers[0].name",
        ),
        (
            "HTTPRoute",
            "rules[].timeouts.request",
            "pattern",
            json!(shapes::DURATION),
            route(&|s| s["rules"][0]["timeouts"] = json!({"request": "1d"})),
            "spec.rules[0].timeouts.request",
        ),
        (
            "HTTPRoute",
            "rules",
            "maxItems",
            json!(16),
            route(&|s| s["rules"] = json!(vec![json!({}); 17])),
            "spec.rules",
        ),
        (
            "GRPCRoute",
            "rules[].matches[].method.service",
            "maxLength",
            json!(1024),
            route(&|s| s["rules"][0]["matches"] = json!([{"method": {"service": "s".repeat(1025)}}])),
            "spec.rules[0].matches[0].method.service",
        ),
    ];
    for (kind, path, constraint, value, spec, error_path) in cases {
        let node = at(kind, path);
        assert_eq!(node[constraint], value, "{kind} {path}: {node}");
        refused_at(&errors(kind, spec), error_path, "");
    }
    // Lists of maps name their keys; required fields are listed.
    let listeners = at("Gateway.gateway.networking.k8s.io", "listeners");
    assert_eq!(listeners["x-kubernetes-list-type"], "map");
    assert_eq!(listeners["x-kubernetes-list-map-keys"], json!(["name"]));
    assert_eq!(listeners["maxItems"], 64);
    let gateway = registry.get("Gateway.gateway.networking.k8s.io").unwrap();
    assert_eq!(
        gateway.openapi_schema().unwrap()["required"],
        json!(["gatewayClassName", "listeners"])
    );
    let grant = registry.get("ReferenceGrant").unwrap();
    assert_eq!(grant.openapi_schema().unwrap()["required"], json!(["from", "to"]));
    assert_eq!(at("HTTPRoute", "parentRefs[]")["required"], json!(["name"]));
    let class = at("GatewayClass", "controllerName");
    assert_eq!(
        (class["minLength"].clone(), class["maxLength"].clone()),
        (json!(1), json!(253))
    );
}
