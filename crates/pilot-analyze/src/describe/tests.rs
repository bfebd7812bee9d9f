//! Describing what the CLI tests do not reach: a VirtualService bound
//! only to gateways, a match for a port the service lacks, the mesh's
//! default Sidecar, a root-namespace authorization policy, a mesh-wide
//! PeerAuthentication, a proxy the registry does not list.

use std::collections::BTreeMap;

use pilot_api::security::MtlsMode;
use pilot_model::document;

use super::*;

fn objects(text: &str) -> Vec<DynConfig> {
    document::parse("test.yaml", text, &pilot_api::default_registry()).unwrap()
}

fn registry() -> Registry {
    let mut registry = Registry::default();
    registry.services.insert(
        "reviews.default.svc.cluster.local".into(),
        Service {
            ports: vec![(9080, "http".into(), "HTTP".into())],
            instances: vec![Instance {
                node: Some("node-1".into()),
                address: "10.0.0.1".into(),
                port: 9080,
                labels: BTreeMap::from([("app".into(), "reviews".into()), ("version".into(), "v1".into())]),
            }],
        },
    );
    registry
}

fn service(objects: &[DynConfig], registry: Option<&Registry>) -> Description {
    let input = Input {
        objects,
        registry,
        proxies: None,
        domain: "svc.cluster.local",
        extra_findings: &[],
    };
    let target = Target::Service {
        host: "reviews".into(),
        namespace: "default".into(),
    };
    describe(&input, &target).unwrap()
}

#[test]
fn routes_sidecars_never_use_match_nothing() {
    let objects = objects(
        r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: edge, namespace: default}
spec:
  hosts: [reviews]
  gateways: [ingress]
  http: [{route: [{destination: {host: reviews}}]}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ports, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{port: 7000}]
    route: [{destination: {host: reviews}}]
  - route: [{destination: {host: reviews}}]
"#,
    );
    let description = service(&objects, Some(&registry()));
    let http = &description.services[0].http;
    let states: Vec<(&str, &str, RouteState)> = http
        .iter()
        .map(|r| (r.object.name.as_str(), r.path.as_str(), r.state))
        .collect();
    assert_eq!(
        states,
        [
            ("ports", "spec.http[0]", RouteState::MatchesNothing),
            ("ports", "spec.http[1]", RouteState::Wins),
            ("edge", "spec.http[0]", RouteState::MatchesNothing),
        ],
        "{http:#?}"
    );
    assert!(http[0].reason.contains("port"), "{}", http[0].reason);
    assert!(
        http[2].reason.contains("bound only to gateways (ingress)"),
        "{}",
        http[2].reason
    );
    assert_eq!(http.iter().map(|r| r.order).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(description.services[0].virtual_services[0].object.name, "edge");
    assert!(!description.services[0].virtual_services[0].mesh);
}

#[test]
fn mesh_wide_policies_apply_from_the_root_namespace() {
    let objects = objects(
        r#"
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: default, namespace: istio-system}
spec:
  egress: [{hosts: ["./*"]}]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: istio-system}
spec:
  mtls: {mode: STRICT}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: allow-nothing, namespace: istio-system}
spec: {action: ALLOW}
"#,
    );
    let description = service(&objects, Some(&registry()));
    let workload = &description.workloads[0];
    assert_eq!(workload.name, "reviews-v1");
    assert_eq!(workload.sidecar.origin, "mesh default");
    // `./*` in the root namespace imports its own namespace's hosts only.
    assert_eq!(
        workload.sidecar.out_of_scope,
        ["reviews.default.svc.cluster.local"]
    );
    assert_eq!(
        (workload.mtls.mode, workload.mtls.source.as_str()),
        (MtlsMode::Strict, "mesh")
    );
    assert_eq!(workload.authorization[0].scope, "mesh (root namespace)");
    assert_eq!(workload.authorization[0].rules, 0);
}

#[test]
fn a_proxy_the_registry_does_not_list_is_described_from_its_node_id() {
    let proxies = [Proxy {
        node: "sidecar~10.0.0.9~ratings-v1-abc.prod~prod.svc.cluster.local".into(),
        replica: "r1".into(),
        connected: true,
        ..Default::default()
    }];
    let input = Input {
        objects: &[],
        registry: Some(&registry()),
        proxies: Some(&proxies),
        domain: "svc.cluster.local",
        extra_findings: &[],
    };
    let described = describe(
        &input,
        &Target::Proxy {
            id: "ratings-v1-abc.prod".into(),
        },
    )
    .unwrap();
    let workload = &described.workloads[0];
    assert_eq!(
        (workload.name.as_str(), workload.namespace.as_str()),
        ("ratings-v1-abc", "prod")
    );
    assert_eq!(workload.proxies.len(), 1);
    assert!(!described.problems);
    let missing = describe(
        &input,
        &Target::Proxy {
            id: "nope.prod".into(),
        },
    )
    .unwrap_err();
    assert_eq!(
        missing.to_string(),
        "proxy nope.prod not found; known: ratings-v1-abc.prod"
    );
    // By address, too.
    let by_address = describe(
        &input,
        &Target::Workload {
            name: "10.0.0.9".into(),
            namespace: "default".into(),
        },
    )
    .unwrap();
    assert_eq!(by_address.workloads[0].name, "ratings-v1-abc");
}

#[test]
fn a_workload_in_ambient_mode_shows_the_ztunnel_of_its_node() {
    let ztunnel = |name: &str, node: &str| Proxy {
        node: format!("ztunnel~10.0.9.1~{name}.istio-system~istio-system.svc.cluster.local"),
        node_name: Some(node.into()),
        replica: "r1".into(),
        connected: true,
        types: [("WDS", "SYNCED"), ("WADS", "SYNCED")]
            .iter()
            .map(|(t, s)| (t.to_string(), s.to_string()))
            .collect(),
        ..Default::default()
    };
    let proxies = [ztunnel("ztunnel-a", "node-1"), ztunnel("ztunnel-b", "node-2")];
    let input = Input {
        objects: &[],
        registry: Some(&registry()),
        proxies: Some(&proxies),
        domain: "svc.cluster.local",
        extra_findings: &[],
    };
    let described = describe(
        &input,
        &Target::Workload {
            name: "10.0.0.1".into(),
            namespace: "default".into(),
        },
    )
    .unwrap();
    let served: Vec<&str> = described.workloads[0]
        .proxies
        .iter()
        .map(|p| p.node.as_str())
        .collect();
    assert_eq!(
        served,
        ["ztunnel~10.0.9.1~ztunnel-a.istio-system~istio-system.svc.cluster.local"],
        "the ztunnel of node-1, where the workload runs, and not node-2's"
    );
}

#[test]
fn analyzes_unreachable_route_findings_shadow_the_route_or_one_match() {
    let objects = objects(
        r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: reviews}}]
  - match: [{headers: {end-user: {exact: jason}}}, {uri: {prefix: /api}}]
    route: [{destination: {host: reviews}}]
  - route: [{destination: {host: reviews}}]
  - match: [{uri: {prefix: /late}}]
    route: [{destination: {host: reviews}}]
"#,
    );
    let input = Input {
        objects: &objects,
        registry: None,
        proxies: None,
        domain: "svc.cluster.local",
        extra_findings: &[],
    };
    let target = Target::Service {
        host: "reviews".into(),
        namespace: "default".into(),
    };
    let description = describe(&input, &target).unwrap();
    let http = &description.services[0].http;
    let states: Vec<RouteState> = http.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            RouteState::Wins,
            RouteState::Wins,
            RouteState::Wins,
            RouteState::Shadowed
        ],
        "{http:#?}"
    );
    assert!(
        http[1]
            .reason
            .contains("spec.http[1].match[0]: this match never selects"),
        "{}",
        http[1].reason
    );
    assert_eq!(http[1].codes, ["PLT0211"]);
    assert!(
        http[3]
            .reason
            .starts_with("never matches: the earlier route spec.http[2]"),
        "{}",
        http[3].reason
    );
    assert_eq!(description.findings.len(), 2, "{:#?}", description.findings);
}

#[test]
fn a_host_routed_only_at_gateways_numbers_its_routes_and_says_what_analyze_says_of_the_gateway() {
    let objects = objects(
        r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: edge, namespace: default}
spec:
  hosts: [bookinfo.example.com]
  gateways: [missing]
  http: [{route: [{destination: {host: reviews}}]}]
"#,
    );
    let input = Input {
        objects: &objects,
        registry: None,
        proxies: None,
        domain: "svc.cluster.local",
        extra_findings: &[],
    };
    let target = Target::Service {
        host: "bookinfo.example.com".into(),
        namespace: "default".into(),
    };
    let description = describe(&input, &target).unwrap();
    let route = &description.services[0].http[0];
    assert_eq!((route.order, route.state), (1, RouteState::MatchesNothing));
    assert_eq!(route.codes, ["PLT0210"]);
    assert!(
        route.reason.ends_with(
            "default/missing, which does not exist: this VirtualService applies nowhere (PLT0210)"
        ),
        "{}",
        route.reason
    );
    assert!(description.problems, "an error-level finding");
}
