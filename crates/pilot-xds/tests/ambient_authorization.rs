//! AuthorizationPolicy and PeerAuthentication objects, written as YAML
//! and compiled through pilot-routing, as the Authorization resources
//! ztunnel is served and the names each workload lists: scopes, actions,
//! every L4 field and its `not` form, rules with HTTP parts (an ALLOW
//! rule left out, a DENY rule enforced without them or matching nothing),
//! STRICT and its exceptions; and the messages' wire form.

use pilot_model::{Labels, document};
use pilot_routing::{RoutingConfigs, RoutingModel};
use pilot_xds::ambient::authorization::{authorizations, needs_waypoint, workload_policies};
use pilot_xds::ambient::proto::security::{
    AUTHORIZATION_TYPE, Action, Address, Authorization, Clause, Match, Rule, Scope, ServiceAccountMatch,
    StringMatch,
};
use prost::Message;

const ROOT: &str = "istio-system";

fn model(yaml: &str) -> RoutingModel {
    let objects = document::parse("t.yaml", yaml, &pilot_api::default_registry()).unwrap();
    RoutingConfigs::from_configs(&objects).unwrap().compile()
}

fn served(model: &RoutingModel) -> Vec<(String, Authorization)> {
    authorizations(model.authorization(), model.peer_authentication(), ROOT)
}

fn names(model: &RoutingModel) -> Vec<String> {
    served(model).into_iter().map(|(name, _)| name).collect()
}

/// The served Authorization named `name`.
fn get(model: &RoutingModel, name: &str) -> Authorization {
    served(model)
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} is not served: {:?}", names(model)))
        .1
}

/// Why the compiled policy `name` needs a waypoint.
fn waypoint(model: &RoutingModel, name: &str) -> Option<String> {
    let policy = model
        .authorization()
        .policies()
        .iter()
        .find(|p| p.name == name)
        .unwrap();
    needs_waypoint(policy)
}

/// What a workload of `namespace` with `labels` lists.
fn listed(model: &RoutingModel, namespace: &str, labels: &[(&str, &str)]) -> Vec<String> {
    workload_policies(
        model.authorization(),
        model.peer_authentication(),
        ROOT,
        namespace,
        &Labels::from_pairs(labels.iter().copied()),
    )
}

fn clause(matches: Vec<Match>) -> Clause {
    Clause { matches }
}

fn rule(clauses: Vec<Clause>) -> Rule {
    Rule { clauses }
}

fn ip(address: &[u8], length: u32) -> Address {
    Address {
        address: address.to_vec(),
        length,
    }
}

fn sa(namespace: &str, name: &str) -> ServiceAccountMatch {
    ServiceAccountMatch {
        namespace: namespace.into(),
        service_account: name.into(),
    }
}

fn plaintext() -> Match {
    Match {
        not_principals: vec![StringMatch::presence()],
        ..Match::default()
    }
}

const SCOPES: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-deny, namespace: istio-system}
spec:
  action: DENY
  rules: [{from: [{source: {namespaces: [untrusted]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ns-allow, namespace: default}
spec:
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  rules: [{to: [{operation: {ports: ["9080"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-reviews, namespace: istio-system}
spec:
  selector: {matchLabels: {app: reviews}}
  action: DENY
  rules: [{to: [{operation: {ports: ["22"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: audit, namespace: default}
spec:
  action: AUDIT
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: custom, namespace: default}
spec:
  action: CUSTOM
  provider: {name: opa}
  rules: [{}]
"#;

#[test]
fn mesh_namespace_and_workload_scopes_and_only_allow_and_deny_are_served() {
    let model = model(SCOPES);
    assert_eq!(
        names(&model),
        [
            "default/ns-allow",
            "default/reviews",
            "istio-system/mesh-deny",
            "istio-system/mesh-reviews",
        ]
    );
    assert_eq!(
        get(&model, "istio-system/mesh-deny"),
        Authorization {
            name: "mesh-deny".into(),
            namespace: "istio-system".into(),
            scope: Scope::Global as i32,
            action: Action::Deny as i32,
            rules: vec![rule(vec![clause(vec![Match {
                namespaces: vec![StringMatch::exact("untrusted")],
                ..Match::default()
            }])])],
            dry_run: false,
        }
    );
    // An empty rule: one rule of no clause, which matches every connection.
    assert_eq!(
        get(&model, "default/ns-allow"),
        Authorization {
            name: "ns-allow".into(),
            namespace: "default".into(),
            scope: Scope::Namespace as i32,
            action: Action::Allow as i32,
            rules: vec![rule(vec![])],
            dry_run: false,
        }
    );
    let reviews = get(&model, "default/reviews");
    assert_eq!(reviews.scope, Scope::WorkloadSelector as i32);
    assert_eq!(reviews.action, Action::Allow as i32);
    assert_eq!(
        reviews.rules,
        [rule(vec![clause(vec![Match {
            destination_ports: vec![9080],
            ..Match::default()
        }])])]
    );
    assert_eq!(
        get(&model, "istio-system/mesh-reviews").scope,
        Scope::WorkloadSelector as i32
    );
    // Selector policies are listed by the workloads they select, its
    // namespace's and the root namespace's; scope does the rest.
    assert_eq!(
        listed(&model, "default", &[("app", "reviews"), ("version", "v1")]),
        ["default/reviews", "istio-system/mesh-reviews"]
    );
    assert_eq!(
        listed(&model, "other", &[("app", "reviews")]),
        ["istio-system/mesh-reviews"]
    );
    assert_eq!(
        listed(&model, "default", &[("app", "ratings")]),
        Vec::<String>::new()
    );
}

const FIELDS: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-fields, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  rules:
  - from:
    - source:
        principals: [cluster.local/ns/default/sa/productpage, "*/sa/ratings", "spiffe-td/*", "*"]
        notPrincipals: [cluster.local/ns/default/sa/evil]
        namespaces: [default]
        notNamespaces: [kube-system]
        ipBlocks: [10.1.0.0/16, 192.168.0.7, "2001:db8::/32"]
        notIpBlocks: [10.1.2.3]
    - source:
        serviceAccounts: [productpage, other/client]
        notServiceAccounts: [default/robot]
    to:
    - operation: {ports: ["9080", "9090"], notPorts: ["15000"]}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-when, namespace: default}
spec:
  action: DENY
  rules:
  - when:
    - {key: source.ip, values: [10.9.0.0/16], notValues: [10.9.0.1]}
    - {key: source.namespace, values: [legacy], notValues: ["prod-*"]}
    - {key: source.principal, notValues: [cluster.local/ns/default/sa/admin]}
    - {key: destination.ip, values: [10.0.0.5]}
    - {key: destination.port, values: ["3306"], notValues: ["3307"]}
"#;

#[test]
fn every_l4_field_and_its_not_form_is_translated() {
    let model = model(FIELDS);
    let allow = get(&model, "default/allow-fields");
    assert_eq!(
        allow.rules,
        [rule(vec![
            // `to` first, then `from`, as istiod orders the clauses.
            clause(vec![Match {
                destination_ports: vec![9080, 9090],
                not_destination_ports: vec![15000],
                ..Match::default()
            }]),
            clause(vec![
                Match {
                    principals: vec![
                        StringMatch::exact("cluster.local/ns/default/sa/productpage"),
                        StringMatch::suffix("/sa/ratings"),
                        StringMatch::prefix("spiffe-td/"),
                        StringMatch::presence(),
                    ],
                    not_principals: vec![StringMatch::exact("cluster.local/ns/default/sa/evil")],
                    namespaces: vec![StringMatch::exact("default")],
                    not_namespaces: vec![StringMatch::exact("kube-system")],
                    source_ips: vec![
                        ip(&[10, 1, 0, 0], 16),
                        ip(&[192, 168, 0, 7], 32),
                        ip(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], 32),
                    ],
                    not_source_ips: vec![ip(&[10, 1, 2, 3], 32)],
                    ..Match::default()
                },
                Match {
                    // A bare name is the policy's namespace's.
                    service_accounts: vec![sa("default", "productpage"), sa("other", "client")],
                    not_service_accounts: vec![sa("default", "robot")],
                    ..Match::default()
                },
            ]),
        ])]
    );
    let deny = get(&model, "default/deny-when");
    assert_eq!(deny.action, Action::Deny as i32);
    assert_eq!(deny.scope, Scope::Namespace as i32);
    // One clause per condition, all of which must hold.
    assert_eq!(
        deny.rules,
        [rule(vec![
            clause(vec![Match {
                source_ips: vec![ip(&[10, 9, 0, 0], 16)],
                not_source_ips: vec![ip(&[10, 9, 0, 1], 32)],
                ..Match::default()
            }]),
            clause(vec![Match {
                namespaces: vec![StringMatch::exact("legacy")],
                not_namespaces: vec![StringMatch::prefix("prod-")],
                ..Match::default()
            }]),
            clause(vec![Match {
                not_principals: vec![StringMatch::exact("cluster.local/ns/default/sa/admin")],
                ..Match::default()
            }]),
            clause(vec![Match {
                destination_ips: vec![ip(&[10, 0, 0, 5], 32)],
                ..Match::default()
            }]),
            clause(vec![Match {
                destination_ports: vec![3306],
                not_destination_ports: vec![3307],
                ..Match::default()
            }]),
        ])]
    );
    assert_eq!(waypoint(&model, "allow-fields"), None);
    assert_eq!(waypoint(&model, "deny-when"), None);
}

const L7: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-get, namespace: default}
spec:
  rules:
  - to: [{operation: {methods: [GET], ports: ["9080"]}}]
  - from: [{source: {namespaces: [default]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-jwt, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  rules:
  - from: [{source: {requestPrincipals: ["*"]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-post, namespace: default}
spec:
  action: DENY
  rules:
  - from: [{source: {notNamespaces: [default]}}]
    to: [{operation: {methods: [POST], ports: ["8080"]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: deny-admin, namespace: default}
spec:
  action: DENY
  rules:
  - to: [{operation: {paths: [/admin]}}]
  - from: [{source: {namespaces: [sandbox]}}]
    when: [{key: "request.headers[x-debug]", values: ["1"]}]
"#;

#[test]
fn an_allow_rule_with_http_parts_is_left_out() {
    let model = model(L7);
    // Its HTTP rule is gone; the other stays.
    assert_eq!(
        get(&model, "default/allow-get").rules,
        [rule(vec![clause(vec![Match {
            namespaces: vec![StringMatch::exact("default")],
            ..Match::default()
        }])])]
    );
    // Every rule gone: an ALLOW policy that allows nothing.
    let jwt = get(&model, "default/allow-jwt");
    assert_eq!(jwt.action, Action::Allow as i32);
    assert_eq!(jwt.rules, []);
    assert_eq!(
        waypoint(&model, "allow-get").unwrap(),
        "spec.rules[0].to[0].operation.methods (ztunnel leaves out the ALLOW rules holding them, so it allows \
         less than asked)"
    );
    assert!(
        waypoint(&model, "allow-jwt")
            .unwrap()
            .starts_with("spec.rules[0].from[0].source.requestPrincipals ")
    );
}

#[test]
fn a_deny_rule_with_http_parts_is_enforced_without_them() {
    let model = model(L7);
    // Without its method: every connection to 8080 from outside `default`.
    assert_eq!(
        get(&model, "default/deny-post").rules,
        [rule(vec![
            clause(vec![Match {
                destination_ports: vec![8080],
                ..Match::default()
            }]),
            clause(vec![Match {
                not_namespaces: vec![StringMatch::exact("default")],
                ..Match::default()
            }]),
        ])]
    );
    // Only HTTP parts in a `to` or a `when`: an empty match, which ztunnel
    // skips, so those rules deny nothing (istiod sends the same).
    assert_eq!(
        get(&model, "default/deny-admin").rules,
        [
            rule(vec![clause(vec![Match::default()])]),
            rule(vec![
                clause(vec![Match {
                    namespaces: vec![StringMatch::exact("sandbox")],
                    ..Match::default()
                }]),
                clause(vec![Match::default()]),
            ]),
        ]
    );
    assert_eq!(
        waypoint(&model, "deny-post").unwrap(),
        "spec.rules[0].to[0].operation.methods (ztunnel enforces the DENY rules without them, so it denies \
         more than asked)"
    );
    let admin = waypoint(&model, "deny-admin").unwrap();
    assert!(
        admin.starts_with("spec.rules[0].to[0].operation.paths, spec.rules[1].when[0] ("),
        "{admin}"
    );
    assert!(
        admin.contains("spec.rules[0], spec.rules[1] match nothing there"),
        "{admin}"
    );
}

const STRICT_MESH: &str = r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: mesh, namespace: istio-system}
spec: {mtls: {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: legacy, namespace: legacy}
spec: {mtls: {mode: PERMISSIVE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: db, namespace: default}
spec:
  selector: {matchLabels: {app: db}}
  mtls: {mode: DISABLE}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: metrics, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  portLevelMtls: {"9090": {mode: PERMISSIVE}, "9091": {mode: STRICT}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: admin-port, namespace: legacy}
spec:
  selector: {matchLabels: {app: old}}
  portLevelMtls: {"8443": {mode: STRICT}}
"#;

#[test]
fn strict_denies_plaintext_and_permissive_or_disable_make_exceptions() {
    let model = model(STRICT_MESH);
    assert_eq!(
        names(&model),
        [
            "default/converted_peer_authentication_metrics",
            "istio-system/istio_converted_static_strict",
            "legacy/converted_peer_authentication_admin-port",
        ]
    );
    assert_eq!(
        get(&model, "istio-system/istio_converted_static_strict"),
        Authorization {
            name: "istio_converted_static_strict".into(),
            namespace: ROOT.into(),
            scope: Scope::WorkloadSelector as i32,
            action: Action::Deny as i32,
            rules: vec![rule(vec![clause(vec![plaintext()])])],
            dry_run: false,
        }
    );
    // STRICT from the mesh.
    assert_eq!(
        listed(&model, "default", &[("app", "ratings")]),
        ["istio-system/istio_converted_static_strict"]
    );
    // PERMISSIVE namespace, DISABLE workload: nothing denied.
    assert_eq!(listed(&model, "legacy", &[("app", "x")]), Vec::<String>::new());
    assert_eq!(listed(&model, "default", &[("app", "db")]), Vec::<String>::new());
    // STRICT (inherited) but on 9090: plaintext denied on every other
    // port, merged into the converted policy (any matching DENY denies, so
    // the static one is not listed too).
    assert_eq!(
        listed(&model, "default", &[("app", "reviews")]),
        ["default/converted_peer_authentication_metrics"]
    );
    let metrics = get(&model, "default/converted_peer_authentication_metrics");
    assert_eq!(metrics.scope, Scope::WorkloadSelector as i32);
    assert_eq!(metrics.action, Action::Deny as i32);
    assert_eq!(
        metrics.rules,
        [rule(vec![
            clause(vec![Match {
                not_destination_ports: vec![9090],
                ..Match::default()
            }]),
            clause(vec![plaintext()]),
        ])]
    );
    // PERMISSIVE (from its namespace) but STRICT on 8443.
    assert_eq!(
        listed(&model, "legacy", &[("app", "old")]),
        ["legacy/converted_peer_authentication_admin-port"]
    );
    assert_eq!(
        get(&model, "legacy/converted_peer_authentication_admin-port").rules,
        [rule(vec![clause(vec![Match {
            destination_ports: vec![8443],
            ..plaintext()
        }])])]
    );
}

#[test]
fn a_permissive_mesh_serves_the_static_policy_that_no_workload_lists() {
    let model = model(
        r#"
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: mesh, namespace: istio-system}
spec: {mtls: {mode: PERMISSIVE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: strict, namespace: payments}
spec: {mtls: {mode: STRICT}}
"#,
    );
    assert_eq!(names(&model), ["istio-system/istio_converted_static_strict"]);
    assert_eq!(listed(&model, "default", &[("app", "x")]), Vec::<String>::new());
    assert_eq!(
        listed(&model, "payments", &[("app", "x")]),
        ["istio-system/istio_converted_static_strict"]
    );
    // Without any PeerAuthentication, no static policy at all.
    assert_eq!(names(&self::model(SCOPES)).len(), 4);
}

#[test]
fn messages_round_trip_through_prost_with_upstream_field_numbers() {
    let model = model(&format!("{FIELDS}\n---\n{STRICT_MESH}"));
    let served = served(&model);
    assert_eq!(served.len(), 5);
    for (name, authorization) in &served {
        let bytes = authorization.encode_to_vec();
        assert_eq!(
            &Authorization::decode(bytes.as_slice()).unwrap(),
            authorization,
            "{name}"
        );
    }
    // The wire form, byte by byte, of the static policy: name (1),
    // namespace (2), scope (3), action (4), rules (5) > clauses (1) >
    // matches (2) > not_principals (4) > presence (4, empty).
    let strict = get(&model, "istio-system/istio_converted_static_strict").encode_to_vec();
    let mut expected = vec![0x0a, 29];
    expected.extend_from_slice(b"istio_converted_static_strict");
    expected.extend_from_slice(&[0x12, 12]);
    expected.extend_from_slice(b"istio-system");
    expected.extend_from_slice(&[0x18, 2, 0x20, 1, 0x2a, 8, 0x0a, 6, 0x12, 4, 0x22, 2, 0x22, 0]);
    assert_eq!(strict, expected);
    // Service accounts are field 11 (namespace 1, serviceAccount 2), ports
    // 9 and 10 packed, addresses (bytes 1, length 2) 5.
    let one = Match {
        service_accounts: vec![sa("a", "b")],
        destination_ports: vec![80],
        not_destination_ports: vec![81],
        source_ips: vec![ip(&[10, 0, 0, 1], 32)],
        ..Match::default()
    };
    assert_eq!(
        one.encode_to_vec(),
        [
            0x2a, 8, 0x0a, 4, 10, 0, 0, 1, 0x10, 32, // source_ips
            0x4a, 1, 80, // destination_ports
            0x52, 1, 81, // not_destination_ports
            0x5a, 6, 0x0a, 1, b'a', 0x12, 1, b'b', // service_accounts
        ]
    );
    assert_eq!(
        AUTHORIZATION_TYPE,
        "type.googleapis.com/istio.security.Authorization"
    );
}

/// Whether ztunnel, evaluating `policy` as it does, matches a connection
/// to `port` from a peer of identity `identity` (empty: plaintext): any
/// rule whose every clause has a non-empty matching match (a clause
/// without matches matches).
fn ztunnel_matches(policy: &Authorization, identity: &str, port: u32) -> bool {
    let string = |m: &StringMatch, value: &str| match &m.match_type {
        Some(pilot_xds::ambient::proto::security::string_match::MatchType::Exact(e)) => e == value,
        Some(pilot_xds::ambient::proto::security::string_match::MatchType::Prefix(p)) => {
            value.starts_with(p.as_str())
        }
        Some(pilot_xds::ambient::proto::security::string_match::MatchType::Suffix(s)) => {
            value.ends_with(s.as_str())
        }
        Some(pilot_xds::ambient::proto::security::string_match::MatchType::Presence(())) => !value.is_empty(),
        None => false,
    };
    let one = |m: &Match| {
        assert!(
            m.namespaces.is_empty() && m.source_ips.is_empty() && m.destination_ips.is_empty(),
            "this evaluator reads principals and ports only: {m:?}"
        );
        (m.principals.is_empty() || m.principals.iter().any(|p| string(p, identity)))
            && !m.not_principals.iter().any(|p| string(p, identity))
            && (m.destination_ports.is_empty() || m.destination_ports.contains(&port))
            && !m.not_destination_ports.contains(&port)
    };
    policy.rules.iter().any(|rule| {
        rule.clauses.iter().all(|clause| {
            clause.matches.is_empty() || clause.matches.iter().any(|m| *m != Match::default() && one(m))
        })
    })
}

#[test]
fn ztunnel_denies_plaintext_exactly_where_a_sidecar_requires_mutual_tls() {
    // Every combination of a mesh, a namespace and a workload mode (absent
    // or unset included) and a port-level mode on 8080: a workload's
    // listed DENY policies match plaintext on a port exactly when the
    // sidecar model's mode there is STRICT, and never match a peer with an
    // identity.
    let modes = [
        None,
        Some("{}"),
        Some("{mode: STRICT}"),
        Some("{mode: PERMISSIVE}"),
        Some("{mode: DISABLE}"),
    ];
    let labels = Labels::from_pairs([("app", "reviews")]);
    let mut checked = 0;
    for mesh in modes {
        for namespace in modes {
            for workload in modes {
                for port in modes {
                    let mut docs = Vec::new();
                    let mut policy = |ns: &str, name: &str, spec: String| {
                        docs.push(format!(
                            "apiVersion: security.istio.io/v1\nkind: PeerAuthentication\n\
                             metadata: {{name: {name}, namespace: {ns}}}\nspec: {spec}\n"
                        ))
                    };
                    if let Some(mesh) = mesh {
                        policy(ROOT, "mesh", format!("{{mtls: {mesh}}}"));
                    }
                    if let Some(namespace) = namespace {
                        policy("default", "ns", format!("{{mtls: {namespace}}}"));
                    }
                    let ports = port
                        .map(|p| format!(", portLevelMtls: {{\"8080\": {p}}}"))
                        .unwrap_or_default();
                    match (workload, port) {
                        (None, Some(_)) => continue,
                        (None, None) => {}
                        (Some(w), _) => policy(
                            "default",
                            "reviews",
                            format!("{{selector: {{matchLabels: {{app: reviews}}}}, mtls: {w}{ports}}}"),
                        ),
                    }
                    let model = model(&docs.join("---\n"));
                    let served = served(&model);
                    let listed = listed(&model, "default", &[("app", "reviews")]);
                    let policies: Vec<&Authorization> = listed
                        .iter()
                        .map(|name| &served.iter().find(|(n, _)| n == name).expect(name).1)
                        .collect();
                    for p in [8080u16, 9090] {
                        let strict = model.peer_authentication().mtls_mode("default", &labels, p)
                            == pilot_routing::MtlsMode::Strict;
                        let denied = policies.iter().any(|a| ztunnel_matches(a, "", u32::from(p)));
                        assert_eq!(
                            denied,
                            strict,
                            "port {p}, {listed:?}, of:\n{}",
                            docs.join("---\n")
                        );
                        let identity = "cluster.local/ns/default/sa/productpage";
                        assert!(
                            !policies
                                .iter()
                                .any(|a| ztunnel_matches(a, identity, u32::from(p)))
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 5 * 5 * (4 * 5 + 1));
}
