//! The "no effect" findings, each shown present and absent.

use std::collections::{BTreeMap, BTreeSet};

use pilot_model::document;

use super::super::{Finding, Services, analyze};

const DOMAIN: &str = "svc.cluster.local";

fn run(text: &str, services: Option<&Services>) -> Vec<Finding> {
    let objects = document::parse("t.yaml", text, &pilot_api::default_registry()).unwrap();
    analyze(&objects, services, DOMAIN)
}

fn codes(findings: &[Finding], code: &str) -> Vec<(String, String)> {
    findings
        .iter()
        .filter(|f| f.code == code)
        .map(|f| (f.name.clone(), f.path.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(n, p)| (n.to_string(), p.to_string())).collect()
}

const GATEWAYS: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: missing, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  gateways: [bookinfo-gateway]
  http: [{route: [{destination: {host: productpage}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: present, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  gateways: [istio-system/public, mesh, public.istio-system.svc.cluster.local]
  http:
  - match: [{gateways: [istio-system/privat]}]
    route: [{destination: {host: productpage}}]
"#;

#[test]
fn a_gateway_that_does_not_exist_is_an_error_and_mesh_is_not_a_gateway() {
    let findings = run(GATEWAYS, None);
    assert_eq!(
        codes(&findings, "PLT0210"),
        pairs(&[
            ("missing", "spec.gateways[0]"),
            ("present", "spec.http[0].match[0].gateways[0]"),
        ]),
        "{findings:#?}"
    );
    let missing = findings.iter().find(|f| f.name == "missing").unwrap();
    assert_eq!(
        missing.message,
        "bound to the gateway default/bookinfo-gateway, which does not exist: this VirtualService applies nowhere"
    );
    assert_eq!(missing.severity, super::super::Severity::Error);
    // With the gateway, nothing.
    let fixed = GATEWAYS
        .replace("[bookinfo-gateway]", "[istio-system/public]")
        .replace("privat", "public");
    assert!(codes(&run(&fixed, None), "PLT0210").is_empty());
}

const ROUTES: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - name: everyone
    route: [{destination: {host: reviews}}]
  - name: jason
    match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - match: [{uri: {prefix: /api}}]
    route: [{destination: {host: ratings}}]
  - match: [{uri: {prefix: /api/v1}, method: {exact: GET}}, {uri: {exact: /health}}]
    route: [{destination: {host: ratings}}]
  - match: [{uri: {exact: /api}}, {headers: {x: {exact: "1"}}, uri: {prefix: /api/v2}}]
    route: [{destination: {host: ratings}}]
  - match: [{uri: {prefix: /}}]
    route: [{destination: {host: ratings}}]
  - route: [{destination: {host: ratings}}]
"#;

#[test]
fn a_route_after_a_catch_all_or_under_earlier_matches_never_matches() {
    let findings = run(ROUTES, None);
    assert_eq!(
        codes(&findings, "PLT0211"),
        pairs(&[
            ("ratings", "spec.http[1].match[0]"),
            ("ratings", "spec.http[2]"),
            ("ratings", "spec.http[4]"),
            ("reviews", "spec.http[1]"),
        ]),
        "{findings:#?}"
    );
    let jason = findings.iter().find(|f| f.name == "reviews").unwrap();
    assert!(
        jason.message.contains(
            "the earlier route spec.http[0] (\"everyone\") matches every request this route matches"
        ),
        "{}",
        jason.message
    );
    let last = findings
        .iter()
        .find(|f| f.name == "ratings" && f.path == "spec.http[4]")
        .unwrap();
    assert!(last.message.contains("spec.http[3]"), "{}", last.message);
    // The catch-all last: nothing is shadowed.
    let fixed = run(
        &ROUTES.replace(
            "  - name: everyone\n    route: [{destination: {host: reviews}}]\n  - name: jason\n    match: [{headers: {end-user: {exact: jason}}}]\n    route: [{destination: {host: reviews}}]\n",
            "  - name: jason\n    match: [{headers: {end-user: {exact: jason}}}]\n    route: [{destination: {host: reviews}}]\n  - name: everyone\n    route: [{destination: {host: reviews}}]\n",
        ),
        None,
    );
    assert!(
        !codes(&fixed, "PLT0211").iter().any(|(n, _)| n == "reviews"),
        "{fixed:#?}"
    );
}

const HOSTS: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: typo, namespace: default}
spec:
  hosts: [reveiws, "*.example.com", "*.nowhere.org"]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ingress, namespace: default}
spec:
  hosts: [www.bookinfo.com]
  gateways: [istio-system/public]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: public, namespace: istio-system}
spec:
  servers: [{port: {number: 80, name: http, protocol: HTTP}, hosts: ["*"]}]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: ratings, namespace: default}
spec:
  host: ratings
  workloadSelector: {matchLabels: {app: productpage}}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  exportTo: [prod]
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews-local, namespace: default}
spec:
  host: reviews
  workloadSelector: {matchLabels: {app: reviews}}
---
apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata: {name: api, namespace: default}
spec:
  hosts: [api.example.com]
  ports: [{number: 443, name: https, protocol: TLS}]
  resolution: DNS
  exportTo: ["."]
"#;

fn registry() -> Services {
    let mut services = Services::default();
    services.hosts.insert(
        "reviews.default.svc.cluster.local".into(),
        vec![BTreeMap::from([("app".to_string(), "reviews".to_string())])],
    );
    services
}

#[test]
fn unknown_hosts_and_selectors_of_nothing_need_the_registry() {
    assert!(
        run(HOSTS, None)
            .iter()
            .all(|f| !["PLT0212", "PLT0213", "PLT0214"].contains(&f.code))
    );
    let services = registry();
    let findings = run(HOSTS, Some(&services));
    assert_eq!(
        codes(&findings, "PLT0212"),
        pairs(&[
            ("ratings", "spec.host"),
            ("typo", "spec.hosts[0]"),
            ("typo", "spec.hosts[2]")
        ]),
        "{findings:#?}"
    );
    let typo = findings.iter().find(|f| f.name == "typo").unwrap();
    assert!(
        typo.message.contains("reveiws.default.svc.cluster.local"),
        "{}",
        typo.message
    );
    assert_eq!(
        codes(&findings, "PLT0213"),
        pairs(&[("ratings", "spec.workloadSelector.matchLabels")]),
        "{findings:#?}"
    );
    // Proxies unknown: no PLT0214.
    assert!(codes(&findings, "PLT0214").is_empty());
}

#[test]
fn an_object_exported_only_where_no_proxy_is_has_no_effect() {
    let mut services = registry();
    services.proxy_namespaces = Some(BTreeSet::from(["default".to_string()]));
    let findings = run(HOSTS, Some(&services));
    assert_eq!(
        codes(&findings, "PLT0214"),
        pairs(&[("reviews", "spec.exportTo")]),
        "{findings:#?}"
    );
    let reviews = findings.iter().find(|f| f.code == "PLT0214").unwrap();
    assert!(
        reviews.message.contains("exported to prod") && reviews.message.contains("proxies are in default"),
        "{}",
        reviews.message
    );
    // A proxy in prod: it gets it. No proxy at all: exportTo is not why.
    services.proxy_namespaces = Some(BTreeSet::from(["default".to_string(), "prod".to_string()]));
    assert!(codes(&run(HOSTS, Some(&services)), "PLT0214").is_empty());
    services.proxy_namespaces = Some(BTreeSet::new());
    assert!(codes(&run(HOSTS, Some(&services)), "PLT0214").is_empty());
}

const WAYPOINT: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: ns-get-only, namespace: default}
spec:
  rules: [{to: [{operation: {methods: [GET]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-l4, namespace: istio-system}
spec:
  action: DENY
  rules: [{from: [{source: {namespaces: [sandbox]}}], to: [{operation: {ports: ["22"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews-post, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  action: DENY
  rules: [{to: [{operation: {methods: [POST], ports: ["9080"]}}]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews-audit, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  action: AUDIT
  rules: [{to: [{operation: {methods: [POST]}}]}]
"#;

/// A registry whose reviews instance is enrolled in ambient mode, or not.
fn reviews(ambient: bool) -> Services {
    let mut labels = BTreeMap::from([("app".to_string(), "reviews".to_string())]);
    if ambient {
        labels.insert("istio.io/dataplane-mode".into(), "ambient".into());
    }
    let mut services = Services::default();
    services
        .hosts
        .insert("reviews.default.svc.cluster.local".into(), vec![labels]);
    services
}

#[test]
fn http_rules_for_ambient_workloads_need_a_waypoint() {
    // The selected reviews instance in ambient mode: its policy, and the
    // namespace-wide one applying to it; never an L4 policy, never AUDIT
    // (not ztunnel's).
    let findings = run(WAYPOINT, Some(&reviews(true)));
    assert_eq!(
        codes(&findings, "PLT0215"),
        pairs(&[("ns-get-only", "spec.rules"), ("reviews-post", "spec.rules")]),
        "{findings:#?}"
    );
    let get_only = findings.iter().find(|f| f.name == "ns-get-only").unwrap();
    assert_eq!(get_only.severity, super::super::Severity::Warning);
    assert_eq!(
        get_only.message,
        "AuthorizationPolicy default/ns-get-only has HTTP rules ztunnel cannot enforce: only a waypoint can \
         (not served yet); for its namespace's workloads in ambient mode: spec.rules[0].to[0].operation.methods \
         (ztunnel leaves out the ALLOW rules holding them, so it allows less than asked)"
    );
    let post = findings.iter().find(|f| f.name == "reviews-post").unwrap();
    assert!(
        post.message.ends_with(
            "for the workloads it selects in ambient mode: spec.rules[0].to[0].operation.methods (ztunnel \
             enforces the DENY rules without them, so it denies more than asked)"
        ),
        "{}",
        post.message
    );
    // Sidecars enforce HTTP rules themselves; offline, which workloads are
    // in ambient mode is not known.
    assert!(codes(&run(WAYPOINT, Some(&reviews(false))), "PLT0215").is_empty());
    assert!(codes(&run(WAYPOINT, None), "PLT0215").is_empty());
}
