//! The translation of each rule construct, pinned as a compact rendering
//! of the Envoy policy (`and(..)`, `or(..)`, `not(..)`, matchers).

use std::sync::Arc;

use pilot_api::security::{AuthorizationPolicy, Rule as ApiRule};
use pilot_model::Config;
use pilot_routing::{ExtensionProviders, RoutingConfigs};

use super::*;

fn render_string(m: &StringMatcher) -> String {
    let case = if m.ignore_case { "~i" } else { "" };
    match &m.match_pattern {
        Some(string_matcher::MatchPattern::Exact(v)) => format!("={v}{case}"),
        Some(string_matcher::MatchPattern::Prefix(v)) => format!("^{v}{case}"),
        Some(string_matcher::MatchPattern::Suffix(v)) => format!("${v}{case}"),
        Some(string_matcher::MatchPattern::SafeRegex(r)) => format!("~{}", r.regex),
        other => format!("{other:?}"),
    }
}

fn render_header(h: &HeaderMatcher) -> String {
    match &h.header_match_specifier {
        Some(header_matcher::HeaderMatchSpecifier::StringMatch(m)) => {
            format!("{}{}", h.name, render_string(m))
        }
        Some(header_matcher::HeaderMatchSpecifier::PresentMatch(true)) => format!("{}?", h.name),
        other => format!("{other:?}"),
    }
}

fn render_cidr(c: &CidrRange) -> String {
    format!(
        "{}/{}",
        c.address_prefix,
        c.prefix_len.as_ref().map_or(0, |l| l.value)
    )
}

fn join<T>(items: &[T], f: fn(&T) -> String) -> String {
    items.iter().map(f).collect::<Vec<_>>().join(", ")
}

fn rule(p: &Permission) -> String {
    match p.rule.as_ref().expect("a rule") {
        permission::Rule::Any(true) => "any".into(),
        permission::Rule::AndRules(set) => format!("and({})", join(&set.rules, rule)),
        permission::Rule::OrRules(set) => format!("or({})", join(&set.rules, rule)),
        permission::Rule::NotRule(inner) => format!("not({})", rule(inner)),
        permission::Rule::Header(h) => format!("header({})", render_header(h)),
        permission::Rule::UrlPath(PathMatcher {
            rule: Some(path_matcher::Rule::Path(m)),
        }) => format!("path({})", render_string(m)),
        permission::Rule::DestinationPort(port) => format!("port({port})"),
        permission::Rule::DestinationIp(c) => format!("dip({})", render_cidr(c)),
        permission::Rule::RequestedServerName(m) => format!("sni({})", render_string(m)),
        other => format!("{other:?}"),
    }
}

fn id(p: &Principal) -> String {
    match p.identifier.as_ref().expect("an identifier") {
        principal::Identifier::Any(true) => "any".into(),
        principal::Identifier::AndIds(set) => format!("and({})", join(&set.ids, id)),
        principal::Identifier::OrIds(set) => format!("or({})", join(&set.ids, id)),
        principal::Identifier::NotId(inner) => format!("not({})", id(inner)),
        principal::Identifier::Authenticated(a) => {
            format!(
                "peer({})",
                render_string(a.principal_name.as_ref().expect("a name"))
            )
        }
        principal::Identifier::DirectRemoteIp(c) => format!("ip({})", render_cidr(c)),
        principal::Identifier::RemoteIp(c) => format!("remote({})", render_cidr(c)),
        principal::Identifier::Header(h) => format!("header({})", render_header(h)),
        other => format!("{other:?}"),
    }
}

/// `permission | principal` of the rule's one policy.
fn render(rule_json: serde_json::Value, tcp: bool) -> String {
    let parsed: ApiRule = serde_json::from_value(rule_json).unwrap();
    let policy = policy(&Rule::of(&parsed), tcp);
    assert_eq!((policy.permissions.len(), policy.principals.len()), (1, 1));
    format!("{} | {}", rule(&policy.permissions[0]), id(&policy.principals[0]))
}

/// The policy `spec`, compiled.
fn config(namespace: &str, name: &str, spec: serde_json::Value) -> AuthzPolicy {
    let object: Config<AuthorizationPolicy> =
        Config::new(namespace, name, serde_json::from_value(spec).unwrap());
    let mut configs = RoutingConfigs::default();
    configs.authorization_policies = vec![Arc::new(object)];
    configs.compile().authorization().policies()[0].clone()
}

#[test]
fn each_construct_translates_as_istio_does() {
    use serde_json::json;
    let cases = [
        (json!({}), "any | any"),
        (
            json!({"from": [{"source": {"principals": ["cluster.local/ns/default/sa/productpage"]}}]}),
            "any | peer(=spiffe://cluster.local/ns/default/sa/productpage)",
        ),
        (
            json!({"from": [{"source": {"principals": ["*", "cluster.local/ns/a/*", "*/sa/b"]}}]}),
            "any | or(peer(~.+), peer(^spiffe://cluster.local/ns/a/), peer($/sa/b))",
        ),
        (
            json!({"from": [{"source": {"notPrincipals": ["td/ns/x/sa/y"]}}]}),
            "any | not(peer(=spiffe://td/ns/x/sa/y))",
        ),
        (
            json!({"from": [{"source": {"namespaces": ["foo", "test-*", "*"]}}]}),
            "any | or(peer(~.*/ns/foo/.*), peer(~.*/ns/test-.*/.*), peer(~.*/ns/.*/.*))",
        ),
        (
            json!({"from": [{"source": {"notNamespaces": ["a.b"]}}]}),
            "any | not(peer(~.*/ns/a\\.b/.*))",
        ),
        (
            json!({"from": [{"source": {"ipBlocks": ["10.0.0.0/8", "1.2.3.4"], "notIpBlocks": ["10.1.0.0/16"]}}]}),
            "any | and(or(ip(10.0.0.0/8), ip(1.2.3.4/32)), not(ip(10.1.0.0/16)))",
        ),
        (
            json!({"from": [{"source": {"remoteIpBlocks": ["::1"], "notRemoteIpBlocks": ["fe80::/10"]}}]}),
            "any | and(remote(::1/128), not(remote(fe80::/10)))",
        ),
        (
            json!({"from": [{"source": {"namespaces": ["a"]}}, {"source": {"ipBlocks": ["1.1.1.1"]}}]}),
            "any | or(peer(~.*/ns/a/.*), ip(1.1.1.1/32))",
        ),
        (
            json!({"to": [{"operation": {"methods": ["GET", "HEAD"], "paths": ["/reviews/*", "*.css", "/exact", "*"]}}]}),
            "and(or(header(:method=GET), header(:method=HEAD)), or(path(^/reviews/), path($.css), path(=/exact), path(~.+))) | any",
        ),
        (
            json!({"to": [{"operation": {"hosts": ["Reviews.Example.com", "*.example.com"], "notHosts": ["admin.*"]}}]}),
            "and(or(header(:authority=Reviews.Example.com~i), header(:authority$.example.com~i)), not(header(:authority^admin.~i))) | any",
        ),
        (
            json!({"to": [{"operation": {"ports": ["9080"], "notMethods": ["DELETE"], "notPaths": ["/admin*"], "notPorts": ["15000"]}}]}),
            "and(not(header(:method=DELETE)), not(path(^/admin)), port(9080), not(port(15000))) | any",
        ),
        (
            json!({"to": [{"operation": {"methods": ["GET"]}}, {"operation": {"ports": ["80"]}}]}),
            "or(header(:method=GET), port(80)) | any",
        ),
        (
            json!({"when": [
                {"key": "request.headers[X-User]", "values": ["alice", "bob*"], "notValues": ["bobby"]},
                {"key": "request.headers[x-token]", "values": ["*"]},
            ]}),
            "any | and(and(or(header(x-user=alice), header(x-user^bob)), not(header(x-user=bobby))), header(x-token?))",
        ),
        (
            json!({"when": [
                {"key": "source.principal", "values": ["td/ns/a/sa/b"]},
                {"key": "source.namespace", "notValues": ["kube-system"]},
                {"key": "source.ip", "values": ["10.0.0.0/8"]},
                {"key": "remote.ip", "values": ["2.2.2.2"]},
            ]}),
            "any | and(peer(=spiffe://td/ns/a/sa/b), not(peer(~.*/ns/kube-system/.*)), ip(10.0.0.0/8), remote(2.2.2.2/32))",
        ),
        (
            json!({"when": [
                {"key": "destination.port", "values": ["9080", "9443"]},
                {"key": "destination.ip", "values": ["10.1.1.1"]},
                {"key": "connection.sni", "values": ["*.local"]},
            ]}),
            "and(or(port(9080), port(9443)), dip(10.1.1.1/32), sni($.local)) | any",
        ),
        (
            json!({
                "from": [{"source": {"principals": ["cluster.local/ns/default/sa/productpage"]}}],
                "to": [{"operation": {"methods": ["GET"], "paths": ["/reviews/*"]}}],
                "when": [{"key": "request.headers[x-user]", "values": ["alice"]}],
            }),
            "and(header(:method=GET), path(^/reviews/)) | and(peer(=spiffe://cluster.local/ns/default/sa/productpage), header(x-user=alice))",
        ),
    ];
    for (json, expected) in cases {
        assert_eq!(render(json.clone(), false), expected, "{json}");
    }
}

#[test]
fn on_tcp_http_only_fields_are_left_out_of_a_rule() {
    let rule = serde_json::json!({
        "from": [{"source": {"namespaces": ["a"]}}],
        "to": [{"operation": {"methods": ["GET"], "ports": ["9080"]}}],
        "when": [{"key": "request.headers[x]", "values": ["y"]}, {"key": "source.ip", "values": ["1.1.1.1"]}],
    });
    assert_eq!(
        render(rule, true),
        "port(9080) | and(peer(~.*/ns/a/.*), ip(1.1.1.1/32))"
    );
    // An operation of HTTP-only fields alone matches any connection: a
    // DENY rule then denies every connection, as Istio does.
    assert_eq!(
        render(
            serde_json::json!({"to": [{"operation": {"paths": ["/x"]}}]}),
            true
        ),
        "any | any"
    );
}

fn actions(policies: &[AuthzPolicy], tcp: bool) -> Vec<(rbac::Action, Vec<String>)> {
    let applying: Vec<&AuthzPolicy> = policies.iter().collect();
    rules(&applying, tcp)
        .into_iter()
        .map(|(action, policies)| (action, policies.into_keys().collect()))
        .collect()
}

#[test]
fn deny_comes_first_and_empty_rules_follow_istio() {
    use serde_json::json;
    let allow_none = config("default", "allow-none", json!({"action": "ALLOW"}));
    let allow_all = config("default", "allow-all", json!({"rules": [{}]}));
    let deny_none = config("default", "deny-none", json!({"action": "DENY"}));
    let deny_get = config(
        "istio-system",
        "deny-get",
        json!({"action": "DENY", "rules": [{"to": [{"operation": {"methods": ["GET"]}}]}]}),
    );
    // No policy: no filter, everything allowed.
    assert!(actions(&[], false).is_empty());
    // An ALLOW policy without rules: an ALLOW filter without policies, denying all.
    assert_eq!(
        actions(std::slice::from_ref(&allow_none), false),
        [(rbac::Action::Allow, vec![])]
    );
    // `rules: [{}]`: one policy matching anything.
    assert_eq!(
        actions(std::slice::from_ref(&allow_all), false),
        [(
            rbac::Action::Allow,
            vec!["ns[default]-policy[allow-all]-rule[0]".to_string()]
        )]
    );
    // A DENY policy without rules denies nothing: no filter.
    assert!(actions(std::slice::from_ref(&deny_none), false).is_empty());
    // DENY before ALLOW, whatever the order of the objects.
    let both = actions(&[allow_all.clone(), deny_get.clone(), deny_none], false);
    assert_eq!(
        both,
        [
            (
                rbac::Action::Deny,
                vec!["ns[istio-system]-policy[deny-get]-rule[0]".to_string()]
            ),
            (
                rbac::Action::Allow,
                vec!["ns[default]-policy[allow-all]-rule[0]".to_string()]
            ),
        ]
    );
    // On TCP, the ALLOW rule with an HTTP-only field is skipped (the ALLOW
    // filter stays, denying all); the DENY rule is kept without the field.
    let allow_get = config(
        "default",
        "allow-get",
        json!({"rules": [{"to": [{"operation": {"methods": ["GET"]}}]}]}),
    );
    assert_eq!(
        actions(&[allow_get, deny_get], true),
        [
            (
                rbac::Action::Deny,
                vec!["ns[istio-system]-policy[deny-get]-rule[0]".to_string()]
            ),
            (rbac::Action::Allow, vec![]),
        ]
    );
}

#[test]
fn the_encoding_decodes_to_the_policies_and_never_changes() {
    use serde_json::json;
    let policies: BTreeMap<String, Policy> = (0..8)
        .map(|i| {
            let rule: ApiRule =
                serde_json::from_value(json!({"to": [{"operation": {"ports": [format!("{}", 9000 + i)]}}]}))
                    .unwrap();
            (format!("rule-{i}"), policy(&Rule::of(&rule), false))
        })
        .collect();
    let first = http_rbac(rbac::Action::Allow, &policies);
    for _ in 0..10 {
        assert_eq!(http_rbac(rbac::Action::Allow, &policies), first);
    }
    let decoded = HttpRbac::decode(first.value.as_slice()).unwrap();
    let rules = decoded.rules.expect("rules");
    assert_eq!(rules.action, rbac::Action::Allow as i32);
    assert_eq!(
        rules.policies,
        policies.clone().into_iter().collect::<HashMap<_, _>>()
    );

    let network = network_rbac(rbac::Action::Deny, &policies);
    let decoded = NetworkRbac::decode(network.value.as_slice()).unwrap();
    assert_eq!(decoded.stat_prefix, "rbac_deny.");
    let rules = decoded.rules.expect("rules");
    assert_eq!(rules.action, rbac::Action::Deny as i32);
    assert_eq!(rules.policies.len(), 8);
}

/// CUSTOM rules as Istio names them: shadow policies
/// `istio-ext-authz-PROVIDER-ns[..]-policy[..]-rule[I]` before the
/// provider's ext_authz filter; a provider that is missing, or of a kind
/// that is no authorizer (Istio's tracing kinds), makes them an enforced
/// DENY named `...-deny-due-to-bad-CUSTOM-action`.
#[test]
fn custom_rules_are_shadow_rules_of_their_provider_or_denied() {
    use serde_json::json;
    let providers = ExtensionProviders::parse(
        "mesh.yaml",
        "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz.foo.svc.cluster.local, port: 9000}\n\
         - name: tracing\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n",
    )
    .unwrap();
    let custom = |provider: &str| {
        config(
            "default",
            &format!("by-{provider}"),
            json!({"action": "CUSTOM", "provider": {"name": provider}, "rules": [{"to": [{"operation": {"paths": ["/a"]}}]}]}),
        )
    };
    let decoded = |filter: &HttpFilter| {
        let Some(http_filter::ConfigType::TypedConfig(any)) = &filter.config_type else {
            panic!("{filter:?}")
        };
        let rbac = HttpRbac::decode(any.value.as_slice()).unwrap();
        let names = |r: &Option<Rbac>| -> Option<(i32, Vec<String>)> {
            r.as_ref().map(|r| {
                let mut names: Vec<String> = r.policies.keys().cloned().collect();
                names.sort();
                (r.action, names)
            })
        };
        (names(&rbac.rules), names(&rbac.shadow_rules))
    };
    let policies = [custom("authz"), custom("tracing"), custom("nowhere")];
    let applying: Vec<&AuthzPolicy> = policies.iter().collect();
    let filters = custom::http_filters(&applying, &providers);
    let names: Vec<&str> = filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            HTTP_RBAC_FILTER,
            crate::build::ext_authz::HTTP_EXT_AUTHZ_FILTER,
            HTTP_RBAC_FILTER,
            HTTP_RBAC_FILTER
        ]
    );
    let deny = rbac::Action::Deny as i32;
    assert_eq!(
        decoded(&filters[0]),
        (
            None,
            Some((
                deny,
                vec!["istio-ext-authz-authz-ns[default]-policy[by-authz]-rule[0]".to_string()]
            ))
        )
    );
    // BTreeMap order: nowhere, then tracing.
    assert_eq!(
        decoded(&filters[2]),
        (
            Some((
                deny,
                vec!["istio-ext-authz-nowhere-ns[default]-policy[by-nowhere]-rule[0]-deny-due-to-bad-CUSTOM-action".to_string()]
            )),
            None
        )
    );
    assert_eq!(
        decoded(&filters[3]),
        (
            Some((
                deny,
                vec!["istio-ext-authz-tracing-ns[default]-policy[by-tracing]-rule[0]-deny-due-to-bad-CUSTOM-action".to_string()]
            )),
            None
        )
    );
}
