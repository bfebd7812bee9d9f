//! Validation of RequestAuthentication and of the JWT fields of
//! AuthorizationPolicy, with the cases of Istio's own validation test data
//! (`pkg/config/validation/testdata/crds/reqauth-{valid,invalid}.yaml` and
//! `ValidateRequestAuthentication`).

use super::*;
use pilot_model::ConfigKind;

/// The errors of a spec, or the decode error (prefixed `decode: `).
fn errors<K: ConfigKind + serde::de::DeserializeOwned>(json: serde_json::Value) -> Vec<String> {
    let spec: K = match serde_json::from_value(json) {
        Ok(spec) => spec,
        Err(e) => return vec![format!("decode: {e}")],
    };
    let mut errors = FieldErrors::new();
    spec.validate(&mut errors);
    errors.iter().map(|e| e.to_string()).collect()
}

const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

#[test]
fn istios_valid_request_authentications_are_valid() {
    // reqauth-valid.yaml "full".
    let full = serde_json::json!({
        "targetRefs": [{"group": "", "kind": "Service", "name": "foo"}],
        "jwtRules": [{
            "issuer": "example.com",
            "jwksUri": "https://example.com/.well-known/jwks.json",
            "forwardOriginalToken": true,
            "fromCookies": ["foo"],
            "fromHeaders": [{"name": "foo", "prefix": "baz"}],
            "outputClaimToHeaders": [{"claim": "abc", "header": "def"}],
            "timeout": "5s",
            "outputPayloadToHeader": "header",
            "spaceDelimitedClaims": ["custom_scope", "provider.login.scope"],
        }],
    });
    assert_eq!(errors::<RequestAuthentication>(full), Vec::<String>::new());
    let inline = serde_json::json!({
        "selector": {"matchLabels": {"app": "httpbin"}},
        "jwtRules": [
            {"issuer": "issuer-foo", "jwks": JWKS, "audiences": ["a", "b"], "fromParams": ["token"]},
            {"jwksUri": "http://10.0.0.1:8080/keys"},
            {"issuer": "gw", "jwksUri": "https://[::1]:8443/keys"},
        ],
    });
    assert_eq!(errors::<RequestAuthentication>(inline), Vec::<String>::new());
    let gateway = serde_json::json!({
        "targetRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
    });
    assert_eq!(errors::<RequestAuthentication>(gateway), Vec::<String>::new());
    assert_eq!(
        errors::<RequestAuthentication>(serde_json::json!({})),
        Vec::<String>::new()
    );
}

#[test]
fn istios_invalid_request_authentications_are_refused_at_their_field() {
    let target = |extra: serde_json::Value| {
        let mut target = serde_json::json!({"group": "", "kind": "Service", "name": "foo"});
        target
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        target
    };
    let rule = |extra: serde_json::Value| {
        let mut rule = serde_json::json!({"issuer": "example"});
        rule.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::json!({"jwtRules": [rule]})
    };
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "multi-refs",
            serde_json::json!({"targetRefs": [target(serde_json::json!({}))], "targetRef": target(serde_json::json!({}))}),
            "spec: only one of selector, targetRef or targetRefs can be set",
        ),
        (
            "ref-and-selector",
            serde_json::json!({"selector": {"matchLabels": {"a": "b"}}, "targetRef": target(serde_json::json!({}))}),
            "spec: only one of selector, targetRef or targetRefs can be set",
        ),
        (
            "bad-target-name",
            serde_json::json!({"targetRef": {"group": "", "kind": "Service"}}),
            "spec.targetRef.name: targetRef name must be set",
        ),
        (
            "bad-target-namespace",
            serde_json::json!({"targetRef": target(serde_json::json!({"namespace": "bar"}))}),
            "spec.targetRef.namespace: targetRef namespace must not be set",
        ),
        (
            "bad-target-group",
            serde_json::json!({"targetRefs": [target(serde_json::json!({"group": "__"}))]}),
            "spec.targetRefs[0].kind: targetRef must be to",
        ),
        (
            "bad-target-kind",
            serde_json::json!({"targetRef": target(serde_json::json!({"kind": "Serv_ice"}))}),
            "spec.targetRef.kind: targetRef must be to",
        ),
        (
            "no-issuer",
            serde_json::json!({"jwtRules": [{}]}),
            "spec.jwtRules[0].issuer: issuer or jwksUri must be non-empty string",
        ),
        (
            "empty-aud",
            rule(serde_json::json!({"audiences": [""]})),
            "spec.jwtRules[0].audiences[0]: audience must be non-empty string",
        ),
        (
            "invalid-jwks",
            rule(serde_json::json!({"jwksUri": "hTPp\\\\blah"})),
            "spec.jwtRules[0].jwksUri: jwksUri \"hTPp\\\\\\\\blah\" is not a valid http or https URL",
        ),
        (
            "jwks-uri-without-host",
            rule(serde_json::json!({"jwksUri": "https:///keys"})),
            "spec.jwtRules[0].jwksUri: jwksUri \"https:///keys\" is not a valid http or https URL: the host is missing",
        ),
        (
            "inline-jwks-not-json",
            rule(serde_json::json!({"jwks": "{keys"})),
            "spec.jwtRules[0].jwks: jwks parse error: not JSON",
        ),
        (
            "inline-jwks-rsa-without-modulus",
            rule(serde_json::json!({"jwks": r#"{"keys":[{"kty":"RSA","e":"AQAB"}]}"#})),
            "spec.jwtRules[0].jwks: jwks parse error: keys[0]: `n` is missing",
        ),
        (
            "invalid-from-headers-empty-name",
            rule(serde_json::json!({"fromHeaders": [{"name": "", "prefix": "baz"}]})),
            "spec.jwtRules[0].fromHeaders[0].name: location header name must be non-empty string",
        ),
        (
            "invalid-from-headers-no-name",
            rule(serde_json::json!({"fromHeaders": [{"prefix": "baz"}]})),
            "spec.jwtRules[0].fromHeaders[0].name: location header name must be non-empty string",
        ),
        (
            "from-headers-bad-name",
            rule(serde_json::json!({"fromHeaders": [{"name": "x token"}]})),
            "spec.jwtRules[0].fromHeaders[0].name: header name \"x token\" has characters",
        ),
        (
            "invalid-from-params",
            rule(serde_json::json!({"fromParams": [""]})),
            "spec.jwtRules[0].fromParams[0]: location query must be non-empty string",
        ),
        (
            "invalid-from-cookies",
            rule(serde_json::json!({"fromCookies": [""]})),
            "spec.jwtRules[0].fromCookies[0]: cookie name must be non-empty string",
        ),
        (
            "invalid-claim-to-header-claim-empty",
            rule(serde_json::json!({"outputClaimToHeaders": [{"claim": "", "header": "h"}]})),
            "spec.jwtRules[0].outputClaimToHeaders[0]: outputClaimToHeaders header and claim value must be non-empty string",
        ),
        (
            "invalid-claim-to-header-header-empty",
            rule(serde_json::json!({"outputClaimToHeaders": [{"claim": "x", "header": ""}]})),
            "spec.jwtRules[0].outputClaimToHeaders[0]: outputClaimToHeaders header and claim value must be non-empty string",
        ),
        (
            "invalid-claim-to-header-bad-header",
            rule(serde_json::json!({"outputClaimToHeaders": [{"claim": "x", "header": ":authority"}]})),
            "spec.jwtRules[0].outputClaimToHeaders[0].header: header name \":authority\" is a pseudo-header",
        ),
        (
            "payload-header-bad",
            rule(serde_json::json!({"outputPayloadToHeader": "a:b"})),
            "spec.jwtRules[0].outputPayloadToHeader: header name \"a:b\" has characters",
        ),
        (
            "invalid-space-delimited-claims",
            rule(serde_json::json!({"spaceDelimitedClaims": [""]})),
            "spec.jwtRules[0].spaceDelimitedClaims[0]: a claim name must be non-empty string",
        ),
        (
            "zero-timeout",
            rule(serde_json::json!({"timeout": "0s"})),
            "spec.jwtRules[0].timeout: duration 0s is shorter than the minimum of 1ms",
        ),
        (
            "selector-bad-label",
            serde_json::json!({"selector": {"matchLabels": {"a b": "c"}}}),
            "spec.selector.matchLabels",
        ),
    ];
    for (name, spec, expected) in cases {
        let found = errors::<RequestAuthentication>(spec);
        assert!(
            found.iter().any(|e| e.starts_with(expected)),
            "{name}: {expected}\nnot in {found:#?}"
        );
    }
    // Decoding refuses what is not a rule, an unknown field, a duration
    // that does not parse.
    for (name, spec) in [
        ("null-rule", serde_json::json!({"jwtRules": [null]})),
        (
            "null-claim-to-header",
            rule(serde_json::json!({"outputClaimToHeaders": [null]})),
        ),
        ("bad-timeout", rule(serde_json::json!({"timeout": "apple"}))),
        ("unknown-field", rule(serde_json::json!({"issuers": ["x"]}))),
    ] {
        let found = errors::<RequestAuthentication>(spec);
        assert!(
            found.len() == 1 && found[0].starts_with("decode: "),
            "{name}: {found:?}"
        );
    }
}

#[test]
fn a_target_ref_to_a_gateway_selects_its_pods() {
    let spec: RequestAuthentication = serde_json::from_value(serde_json::json!({
        "targetRefs": [
            {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "edge"},
            {"group": "", "kind": "Service", "name": "reviews"},
        ],
    }))
    .unwrap();
    let selected = spec.selected_labels();
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0][GATEWAY_NAME_LABEL], "edge");
    assert_eq!(
        RequestAuthentication::default().selected_labels(),
        [std::collections::BTreeMap::new()]
    );
}

#[test]
fn authorization_policies_accept_jwt_principals_and_attributes() {
    let ok = serde_json::json!({
        "rules": [{
            "from": [{"source": {"requestPrincipals": ["*"], "notRequestPrincipals": ["https://evil/*"]}}],
            "when": [
                {"key": "request.auth.principal", "values": ["issuer/sub"]},
                {"key": "request.auth.audiences", "values": ["bookstore"]},
                {"key": "request.auth.presenter", "notValues": ["app"]},
                {"key": "request.auth.claims[groups]", "values": ["admin"]},
                {"key": "request.auth.claims[realm][roles]", "values": ["x"]},
            ],
        }],
    });
    assert_eq!(errors::<AuthorizationPolicy>(ok), Vec::<String>::new());
    let found = errors::<AuthorizationPolicy>(serde_json::json!({
        "rules": [{
            "from": [{"source": {"requestPrincipals": [""]}}],
            "when": [
                {"key": "request.auth.claims.groups", "values": ["admin"]},
                {"key": "request.auth.issuer", "values": ["x"]},
                {"key": "request.auth.claims[a][]", "values": ["x"]},
            ],
        }],
    }));
    for expected in [
        "spec.rules[0].from[0].source.requestPrincipals[0]: an empty value is not allowed",
        "spec.rules[0].when[0].key: \"request.auth.claims.groups\": a claim is named in brackets",
        "spec.rules[0].when[1].key: unknown attribute \"request.auth.issuer\"",
        "spec.rules[0].when[2].key: \"request.auth.claims[a][]\": a claim is named in brackets",
    ] {
        assert!(
            found.iter().any(|e| e.starts_with(expected)),
            "{expected}\nnot in {found:#?}"
        );
    }
}
