//! Validation of the security kinds, as Istio validates them.

use super::*;
use pilot_model::ConfigKind;

fn errors<K: ConfigKind + serde::de::DeserializeOwned>(json: serde_json::Value) -> Vec<String> {
    let spec: K = serde_json::from_value(json).unwrap();
    let mut errors = FieldErrors::new();
    spec.validate(&mut errors);
    errors.iter().map(|e| e.to_string()).collect()
}

#[test]
fn peer_authentication_modes_selectors_and_ports() {
    let ok = serde_json::json!({
        "selector": {"matchLabels": {"app": "reviews"}},
        "mtls": {"mode": "STRICT"},
        "portLevelMtls": {"9080": {"mode": "PERMISSIVE"}},
    });
    assert!(errors::<PeerAuthentication>(ok.clone()).is_empty());
    let parsed: PeerAuthentication = serde_json::from_value(ok).unwrap();
    assert_eq!(parsed.port_level_mtls[&9080].mode, MtlsMode::Permissive);
    assert!(errors::<PeerAuthentication>(serde_json::json!({"mtls": {"mode": "DISABLE"}})).is_empty());

    let found = errors::<PeerAuthentication>(serde_json::json!({"portLevelMtls": {"0": {"mode": "STRICT"}}}));
    assert!(
        found
            .iter()
            .any(|e| e.contains("spec.portLevelMtls") && e.contains("needs a selector")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|e| e.contains("port 0 is not in 1..65535")),
        "{found:?}"
    );
    // An empty selector is no selector (Istio: valid, the namespace's
    // policy), so it cannot carry port-level settings.
    assert!(
        errors::<PeerAuthentication>(serde_json::json!({"selector": {}, "mtls": {"mode": "STRICT"}}))
            .is_empty()
    );
    let found = errors::<PeerAuthentication>(
        serde_json::json!({"selector": {"matchLabels": {}}, "portLevelMtls": {"80": {"mode": "STRICT"}}}),
    );
    assert!(
        found
            .iter()
            .any(|e| e.contains("spec.portLevelMtls") && e.contains("needs a selector")),
        "{found:?}"
    );
    let found = errors::<PeerAuthentication>(serde_json::json!({"selector": {"matchLabels": {"app": "*"}}}));
    assert!(
        found
            .iter()
            .any(|e| e.contains("spec.selector.matchLabels.app") && e.contains("wildcard is not supported")),
        "{found:?}"
    );
    assert!(
        serde_json::from_value::<PeerAuthentication>(serde_json::json!({"mtls": {"mode": "SOMETIMES"}}))
            .is_err()
    );
}

#[test]
fn authorization_policy_rules_as_istio_validates_them() {
    let ok = serde_json::json!({
        "selector": {"matchLabels": {"app": "reviews"}},
        "action": "ALLOW",
        "rules": [{
            "from": [{"source": {"principals": ["cluster.local/ns/default/sa/productpage"]}}],
            "to": [{"operation": {"methods": ["GET"], "paths": ["/reviews/*"], "ports": ["9080"]}}],
            "when": [{"key": "request.headers[x-user]", "values": ["alice"]}],
        }],
    });
    assert!(errors::<AuthorizationPolicy>(ok).is_empty());
    assert!(errors::<AuthorizationPolicy>(serde_json::json!({"action": "DENY", "rules": [{}]})).is_empty());

    let found = errors::<AuthorizationPolicy>(serde_json::json!({
        "action": "AUDIT",
        "rules": [{
            "from": [],
            "to": [{"operation": {"ports": ["0", "http"], "paths": ["reviews"]}}, {}],
            "when": [{"key": "source.color", "values": [""]}, {"key": "source.ip", "values": ["10.0.0.0/33"]}],
        }, {
            "from": [{"source": {}}, {"source": {"requestPrincipals": ["*"], "ipBlocks": ["300.1.1.1"]}}],
            "when": [{"key": "request.auth.claims[]", "notValues": ["x"]}, {"key": "remote.ip"}],
        }],
    }));
    for expected in [
        "spec.rules[0].from: `from` must not be empty",
        "spec.rules[0].to[0].operation.ports[0]: port \"0\" is not a number in 1..65535",
        "spec.rules[0].to[0].operation.ports[1]: port \"http\"",
        "spec.rules[0].to[0].operation.paths[0]: path \"reviews\" must start with `/`",
        "spec.rules[0].to[1].operation: `to.operation` must be given",
        "spec.rules[0].when[0].key: unknown attribute \"source.color\"",
        "spec.rules[0].when[0].values[0]: an empty value is not allowed",
        "spec.rules[0].when[1].values[0]:",
        "spec.rules[1].from[0].source: `from.source` must not be empty",
        "spec.rules[1].from[1].source.ipBlocks[0]:",
        "spec.rules[1].when[0].key: \"request.auth.claims[]\": a claim is named in brackets",
        "spec.rules[1].when[1]: at least one of `values` or `notValues` must be set for key \"remote.ip\"",
    ] {
        assert!(
            found.iter().any(|e| e.starts_with(expected)),
            "{expected}\nnot in {found:#?}"
        );
    }
    let found = errors::<AuthorizationPolicy>(serde_json::json!({"provider": {"name": "ext"}}));
    assert!(
        found.iter().any(|e| e.contains("only for the CUSTOM action")),
        "{found:?}"
    );
}

#[test]
fn a_selector_matches_workloads_carrying_all_its_labels() {
    let selector = WorkloadSelector {
        match_labels: [("app".to_string(), "reviews".to_string())].into(),
    };
    let labels = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert!(selector.matches(&labels(&[("app", "reviews"), ("version", "v1")])));
    assert!(!selector.matches(&labels(&[("app", "ratings")])));
}

#[test]
fn lists_are_refused_where_objects_belong() {
    let registry = KindRegistry::new();
    register(&registry).unwrap();
    let prepare = |kind: &str, spec: serde_json::Value| {
        let mut config = pilot_model::DynConfig {
            meta: pilot_model::ConfigMeta::new(kind, "default", "p"),
            spec,
        };
        config.meta.group = GROUP.into();
        config.meta.version = VERSION.into();
        match registry.prepare(config) {
            Err(StoreError::Invalid { errors, .. }) => errors
                .iter()
                .map(|e| format!("{}: {}", e.path, e.message))
                .collect::<Vec<_>>(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    };
    for kind in ["PeerAuthentication", "AuthorizationPolicy"] {
        let found = prepare(kind, serde_json::json!([{"mode": "STRICT"}]));
        assert_eq!(
            found,
            ["spec: must be an object (a mapping of field names to values), not a list"]
        );
    }
    let found = prepare("PeerAuthentication", serde_json::json!({"mtls": ["STRICT"]}));
    assert_eq!(
        found,
        ["spec.mtls: must be an object (a mapping of field names to values), not a list"]
    );
    let found = prepare(
        "PeerAuthentication",
        serde_json::json!({"selector": {"matchLabels": {"app": "r"}}, "portLevelMtls": {"80": ["DISABLE"]}}),
    );
    assert_eq!(
        found,
        ["spec.portLevelMtls.80: must be an object (a mapping of field names to values), not a list"]
    );
}

#[test]
fn destination_port_conditions_are_ports() {
    let found = errors::<AuthorizationPolicy>(serde_json::json!({
        "rules": [{"when": [{"key": "destination.port", "values": ["9080", "http"], "notValues": ["0"]}]}],
    }));
    assert_eq!(
        found,
        [
            "spec.rules[0].when[0].values[1]: port \"http\" is not a number in 1..65535",
            "spec.rules[0].when[0].notValues[0]: port \"0\" is not a number in 1..65535",
        ]
    );
}

/// Istio's CUSTOM and AUDIT cases (`validation_test.go`,
/// TestValidateAuthorizationPolicy): valid ones pass, invalid ones are
/// refused naming the field.
#[test]
fn custom_and_audit_as_istio_validates_them() {
    for ok in [
        serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{}]}),
        serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
            "from": [{"source": {"ipBlocks": ["1.2.3.4"]}}],
            "to": [{"operation": {"paths": ["/admin/*"]}}],
            "when": [{"key": "request.headers[x-a]", "values": ["b"]}],
        }]}),
        serde_json::json!({"action": "AUDIT", "rules": [{"to": [{"operation": {"methods": ["GET"]}}]}]}),
        serde_json::json!({"action": "AUDIT"}),
    ] {
        assert_eq!(
            errors::<AuthorizationPolicy>(ok.clone()),
            Vec::<String>::new(),
            "{ok}"
        );
    }
    let cases = [
        (
            serde_json::json!({"action": "CUSTOM", "rules": [{}]}),
            "spec.provider.name: `provider.name` must not be empty",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": ""}, "rules": [{}]}),
            "spec.provider.name: `provider.name` must not be empty",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}}),
            "spec.rules: CUSTOM action without `rules` is meaningless",
        ),
        (
            serde_json::json!({"action": "ALLOW", "provider": {"name": "ext"}, "rules": [{}]}),
            "spec.provider: a provider is only for the CUSTOM action, found ALLOW",
        ),
        (
            serde_json::json!({"action": "AUDIT", "provider": {"name": "ext"}}),
            "spec.provider: a provider is only for the CUSTOM action, found AUDIT",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
                "from": [{"source": {"principals": ["a"]}}]}]}),
            "spec.rules[0].from[0].source.principals: `principals` is currently not supported with CUSTOM action",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
                "from": [{"source": {"notNamespaces": ["a"]}}]}]}),
            "spec.rules[0].from[0].source.notNamespaces: `notNamespaces` is currently not supported",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
                "from": [{"source": {"serviceAccounts": ["a"]}}]}]}),
            "spec.rules[0].from[0].source.serviceAccounts: `serviceAccounts` is currently not supported",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
                "when": [{"key": "source.principal", "values": ["a"]}]}]}),
            "spec.rules[0].when[0].key: source.principal is currently not supported with CUSTOM action",
        ),
        (
            serde_json::json!({"action": "CUSTOM", "provider": {"name": "ext"}, "rules": [{
                "when": [{"key": "source.namespace", "values": ["a"]}]}]}),
            "spec.rules[0].when[0].key: source.namespace is currently not supported",
        ),
    ];
    for (spec, expected) in cases {
        let found = errors::<AuthorizationPolicy>(spec.clone());
        assert!(
            found.iter().any(|e| e.contains(expected)),
            "{spec}: {expected}\nnot in {found:#?}"
        );
    }
}
