//! `pilotctl describe` offline, on the bookinfo mesh of
//! `examples/bookinfo/networking/` and `examples/server/services.yaml`
//! with objects written here: a route shadowed by an earlier
//! VirtualService's catch-all, a RouteRule shadowed as analyze says
//! (PLT0104), a missing subset, hosts out of a Sidecar's scope, a
//! namespace's STRICT mTLS overridden by a workload's policy, the
//! AuthorizationPolicies that apply; the exit codes scripts read. The
//! withheld objects after a real Envoy NACK are in pilot-system-tests
//! (`tests/describe_withheld.rs`).

mod common;

use common::pilotctl;
use serde_json::Value;

/// The objects the tests add to bookinfo.
const EXTRA: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-canary, namespace: default}
spec:
  hosts: [reviews]
  http:
  - match: [{headers: {x-canary: {exact: "1"}}}]
    route: [{destination: {host: reviews, subset: v3}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: [ratings]
  http:
  - match: [{headers: {end-user: {exact: jason}}}]
    route: [{destination: {host: ratings, subset: v3}}]
  - route: [{destination: {host: ratings, subset: v1}}]
---
apiVersion: networking.istio.io/v1
kind: Sidecar
metadata: {name: productpage, namespace: default}
spec:
  workloadSelector: {labels: {app: productpage}}
  egress:
  - hosts: ["./reviews.default.svc.cluster.local", "istio-system/*"]
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: default}
spec:
  mtls: {mode: STRICT}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: reviews-v2, namespace: default}
spec:
  selector: {matchLabels: {app: reviews, version: v2}}
  mtls: {mode: PERMISSIVE}
  portLevelMtls:
    9082: {mode: DISABLE}
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews-deny-delete, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  action: DENY
  rules: [{to: [{operation: {methods: [DELETE]}}]}]
"#;

/// `pilotctl describe WHAT NAME` on bookinfo and [`EXTRA`], `-o json`
/// parsed; the exit code.
fn describe(what: &str, name: &str) -> (i32, Value) {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.yaml");
    std::fs::write(&extra, EXTRA).unwrap();
    let run = pilotctl(
        None,
        &[
            "describe",
            what,
            name,
            "-f",
            "examples/bookinfo/networking/",
            "-f",
            extra.to_str().unwrap(),
            "--services",
            "examples/server/services.yaml",
            "-o",
            "json",
        ],
        &[],
        None,
    );
    let value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (run.code, value)
}

fn routes<'a>(description: &'a Value, host: &str) -> &'a Vec<Value> {
    description["services"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["host"] == host)
        .unwrap_or_else(|| panic!("no service {host}: {description:#}"))["http"]
        .as_array()
        .unwrap()
}

#[test]
fn a_route_after_an_earlier_virtual_services_catch_all_is_shadowed_by_it() {
    let (code, description) = describe("service", "reviews");
    let routes = routes(&description, "reviews.default.svc.cluster.local");
    let summary: Vec<(String, String, String)> = routes
        .iter()
        .map(|r| {
            (
                r["object"]["name"].as_str().unwrap().to_string(),
                r["path"].as_str().unwrap().to_string(),
                r["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // default/reviews before default/reviews-canary, as pilot merges them.
    assert_eq!(
        summary,
        [
            (
                "reviews".to_string(),
                "spec.http[0]".to_string(),
                "wins".to_string()
            ),
            ("reviews".into(), "spec.http[1]".into(), "wins".into()),
            ("reviews-canary".into(), "spec.http[0]".into(), "shadowed".into()),
        ],
        "{description:#}"
    );
    let shadowed = &routes[2];
    assert!(
        shadowed["reason"]
            .as_str()
            .unwrap()
            .contains("spec.http[1] of VirtualService default/reviews comes first"),
        "{shadowed:#}"
    );
    assert_eq!(shadowed["matches"][0], "header x-canary=1", "{shadowed:#}");
    assert!(
        routes[0]["reason"]
            .as_str()
            .unwrap()
            .contains("header end-user=jason"),
        "{:#}",
        routes[0]
    );
    // Two VirtualServices on one host: analyze's PLT0204, an error.
    assert!(
        description["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "PLT0204" && f["name"] == "reviews-canary"),
        "{description:#}"
    );
    assert_eq!(code, 4, "an error-level finding exits 4");
}

#[test]
fn a_rule_analyze_finds_shadowed_is_shown_shadowed_with_its_finding() {
    let run = pilotctl(
        None,
        &[
            "describe",
            "service",
            "reviews",
            "-f",
            "examples/bookinfo/",
            "-o",
            "json",
        ],
        &[],
        None,
    );
    assert_eq!(run.code, 0, "warnings only: {run:?}");
    let description: Value = serde_json::from_str(&run.stdout).unwrap();
    let routes = routes(&description, "reviews.default.svc.cluster.local");
    let timeout = routes
        .iter()
        .find(|r| r["object"]["name"] == "reviews-timeout")
        .unwrap_or_else(|| panic!("{description:#}"));
    assert_eq!(timeout["state"], "shadowed", "{timeout:#}");
    assert_eq!(timeout["codes"][0], "PLT0104", "{timeout:#}");
    assert!(
        timeout["reason"]
            .as_str()
            .unwrap()
            .contains("RouteRule default/reviews-default"),
        "{timeout:#}"
    );
    // The 80/20 split that wins, with both subsets and weights.
    let split = routes
        .iter()
        .find(|r| r["object"]["name"] == "reviews-default")
        .unwrap();
    assert_eq!(split["state"], "wins");
    let weights: Vec<(String, u64)> = split["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["subset"].as_str().unwrap().to_string(),
                d["weight"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        weights,
        [("version=v1".to_string(), 80), ("version=v2".to_string(), 20)]
    );
}

#[test]
fn a_missing_subset_is_a_problem_with_the_rule_that_lacks_it() {
    let (code, description) = describe("service", "ratings");
    let routes = routes(&description, "ratings.default.svc.cluster.local");
    let jason = &routes[0]["destinations"][0];
    assert_eq!(jason["subset"], "v3", "{description:#}");
    assert_eq!(jason["destinationRule"]["name"], "ratings", "{jason:#}");
    assert!(
        jason["problem"]
            .as_str()
            .unwrap()
            .starts_with("subset v3 is missing: DestinationRule default/ratings defines v1, v2"),
        "{jason:#}"
    );
    let fine = &routes[1]["destinations"][0];
    assert_eq!(fine["subset"], "v1");
    assert_eq!(fine["subsetLabels"]["version"], "v1", "{fine:#}");
    assert!(fine.get("problem").is_none(), "{fine:#}");
    assert!(
        description["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "PLT0202" && f["path"] == "spec.http[0].route[0].destination.subset"),
        "{description:#}"
    );
    assert_eq!(code, 4, "{description:#}");
}

#[test]
fn hosts_the_sidecar_does_not_import_are_out_of_scope() {
    let (code, description) = describe("workload", "productpage-v1");
    assert_eq!(code, 0, "{description:#}");
    let workload = &description["workloads"][0];
    assert_eq!(workload["name"], "productpage-v1");
    let sidecar = &workload["sidecar"];
    assert_eq!(sidecar["object"]["name"], "productpage", "{sidecar:#}");
    assert_eq!(sidecar["origin"], "workload selector", "{sidecar:#}");
    let out: Vec<&str> = sidecar["outOfScope"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h.as_str().unwrap())
        .collect();
    assert!(out.contains(&"ratings.default.svc.cluster.local"), "{out:?}");
    assert!(out.contains(&"details.default.svc.cluster.local"), "{out:?}");
    assert!(
        !out.contains(&"reviews.default.svc.cluster.local"),
        "imported: {out:?}"
    );
    // A workload no Sidecar selects has none.
    let (_, reviews) = describe("workload", "reviews-v1");
    assert_eq!(reviews["workloads"][0]["sidecar"]["origin"], "none");
}

#[test]
fn a_workload_policy_overrides_the_namespaces_strict_mtls() {
    let (_, v2) = describe("workload", "reviews-v2");
    let mtls = &v2["workloads"][0]["mtls"];
    assert_eq!(mtls["mode"], "PERMISSIVE", "{mtls:#}");
    assert_eq!(mtls["source"], "workload", "{mtls:#}");
    assert_eq!(mtls["policy"]["name"], "reviews-v2", "{mtls:#}");
    assert_eq!(
        mtls["overrides"][0], "namespace PeerAuthentication default/default: STRICT",
        "{mtls:#}"
    );
    assert_eq!(mtls["ports"][0]["port"], 9082);
    assert_eq!(mtls["ports"][0]["mode"], "DISABLE");
    let (_, v1) = describe("workload", "reviews-v1");
    let mtls = &v1["workloads"][0]["mtls"];
    assert_eq!(mtls["mode"], "STRICT", "{mtls:#}");
    assert_eq!(mtls["source"], "namespace", "{mtls:#}");
    assert_eq!(mtls["policy"]["name"], "default", "{mtls:#}");
    // The DENY policy selecting app=reviews applies to both.
    for description in [&v1, &v2] {
        let policies = &description["workloads"][0]["authorization"];
        assert_eq!(policies[0]["name"], "reviews-deny-delete", "{policies:#}");
        assert_eq!(policies[0]["action"], "DENY");
        assert_eq!(policies[0]["scope"], "workload selector");
    }
}

#[test]
fn text_shows_the_same_for_people() {
    let dir = tempfile::tempdir().unwrap();
    let extra = dir.path().join("extra.yaml");
    std::fs::write(&extra, EXTRA).unwrap();
    let files = [
        "-f",
        "examples/bookinfo/networking/",
        "-f",
        extra.to_str().unwrap(),
        "--services",
        "examples/server/services.yaml",
    ];
    let run = |args: &[&str]| pilotctl(None, &[&["describe"], args, &files[..]].concat(), &[], None);
    let reviews = run(&["workload", "reviews-v2"]);
    for expected in [
        "    3. VirtualService default/reviews-canary spec.http[0] [SHADOWED]",
        "  inbound mTLS: PERMISSIVE from workload PeerAuthentication default/reviews-v2, overriding namespace PeerAuthentication default/default: STRICT",
        "    port 9082: DISABLE from port-level PeerAuthentication default/reviews-v2",
        "    DENY AuthorizationPolicy default/reviews-deny-delete (workload selector, 1 rule)",
    ] {
        assert!(
            reviews.stdout.lines().any(|l| l == expected),
            "{expected}\n{reviews:?}"
        );
    }
    let ratings = run(&["service", "ratings"]);
    assert!(
        ratings
            .stdout
            .lines()
            .any(|l| l
                .contains("subset v3 100% (DestinationRule default/ratings) PROBLEM: subset v3 is missing")),
        "{ratings:?}"
    );
    assert!(ratings.stderr.contains("has problems (exit 4)"), "{ratings:?}");
    let productpage = run(&["workload", "productpage-v1"]);
    assert!(
        productpage.stdout.lines().any(|l| l
            == "    out of scope: ratings.default.svc.cluster.local (not imported: this proxy has no route to it)"),
        "{productpage:?}"
    );
}

#[test]
fn exit_codes_tell_not_found_and_usage_apart() {
    let missing = pilotctl(
        None,
        &[
            "describe",
            "service",
            "nosuch",
            "-f",
            "examples/bookinfo/networking/",
        ],
        &[],
        None,
    );
    assert_eq!(missing.code, 3, "{missing:?}");
    assert!(
        missing.stderr.contains(
            "service nosuch.default.svc.cluster.local not found; known: details.default.svc.cluster.local"
        ),
        "{missing:?}"
    );
    let workload = pilotctl(
        None,
        &[
            "describe",
            "workload",
            "nosuch",
            "-f",
            "examples/bookinfo/networking/",
            "--services",
            "examples/server/services.yaml",
        ],
        &[],
        None,
    );
    assert_eq!(workload.code, 3, "{workload:?}");
    let proxy = pilotctl(
        None,
        &[
            "describe",
            "proxy",
            "reviews-v1.default",
            "-f",
            "examples/bookinfo/networking/",
        ],
        &[],
        None,
    );
    assert_eq!(proxy.code, 2, "a proxy needs a server: {proxy:?}");
    let clean = pilotctl(
        None,
        &[
            "describe",
            "service",
            "details",
            "-f",
            "examples/bookinfo/networking/",
            "--services",
            "examples/server/services.yaml",
        ],
        &[],
        None,
    );
    assert_eq!(clean.code, 0, "{clean:?}");
    let help = pilotctl(None, &["describe", "--help"], &[], None);
    assert!(
        help.stdout.contains("3 not found, 4 something does not work"),
        "{help:?}"
    );
}

#[test]
fn a_custom_policy_with_a_provider_the_mesh_config_lacks_is_shown_with_its_finding() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("custom.yaml");
    std::fs::write(
        &file,
        "apiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {name: ext, namespace: default}\n\
         spec:\n  selector: {matchLabels: {app: ratings}}\n  action: CUSTOM\n  provider:\n    name: opa\n  rules: [{}]\n",
    )
    .unwrap();
    let mesh = dir.path().join("mesh.yaml");
    std::fs::write(
        &mesh,
        "extensionProviders:\n- name: authz\n  envoyExtAuthzGrpc: {service: authz.foo.svc.cluster.local, port: 9000}\n",
    )
    .unwrap();
    let args = [
        "describe",
        "workload",
        "ratings-v1",
        "-f",
        "examples/bookinfo/networking/",
        "-f",
        file.to_str().unwrap(),
        "--services",
        "examples/server/services.yaml",
        "-o",
        "json",
    ];
    let without = pilotctl(None, &args, &[], None);
    assert_eq!(without.code, 0, "{without:?}");
    let with = pilotctl(
        None,
        &[&args[..], &["--mesh-config", mesh.to_str().unwrap()]].concat(),
        &[],
        None,
    );
    assert_eq!(with.code, 4, "{with:?}");
    let description: Value = serde_json::from_str(&with.stdout).unwrap();
    let policy = &description["workloads"][0]["authorization"][0];
    assert_eq!(policy["action"], "CUSTOM", "{description:#}");
    assert_eq!(policy["provider"], "opa", "{description:#}");
    assert!(
        description["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["code"] == "PLT0312" && f["name"] == "ext" && f["severity"] == "error"),
        "{description:#}"
    );
}

/// `pilotctl describe service HOST -f examples/no-effect/` (the two
/// VirtualServices a server accepts that do nothing), `-o json` parsed;
/// the exit code.
fn describe_no_effect(host: &str) -> (i32, Value) {
    let run = pilotctl(
        None,
        &[
            "describe",
            "service",
            host,
            "-f",
            "examples/no-effect/",
            "--services",
            "examples/server/services.yaml",
            "-o",
            "json",
        ],
        &[],
        None,
    );
    let value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("{e}: {run:?}"));
    (run.code, value)
}

#[test]
fn a_route_after_a_catch_all_of_its_own_virtual_service_is_shadowed_as_analyze_says() {
    let (code, description) = describe_no_effect("reviews");
    let routes = routes(&description, "reviews.default.svc.cluster.local");
    let states: Vec<(&str, &str)> = routes
        .iter()
        .map(|r| (r["path"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [("spec.http[0]", "wins"), ("spec.http[1]", "shadowed")],
        "{description:#}"
    );
    assert_eq!(routes[1]["codes"][0], "PLT0211", "{description:#}");
    assert!(
        routes[1]["reason"].as_str().unwrap().contains("spec.http[0]"),
        "{description:#}"
    );
    // A warning: the service still works.
    assert_eq!(code, 0, "{description:#}");
}

#[test]
fn a_virtual_service_bound_only_to_a_missing_gateway_matches_nothing() {
    let (code, description) = describe_no_effect("bookinfo.example.com");
    let routes = routes(&description, "bookinfo.example.com");
    assert_eq!(routes.len(), 1, "{description:#}");
    assert_eq!(routes[0]["state"], "matches-nothing", "{description:#}");
    assert_eq!(routes[0]["codes"][0], "PLT0210", "{description:#}");
    assert!(
        routes[0]["reason"]
            .as_str()
            .unwrap()
            .contains("default/bookinfo-gateway, which does not exist"),
        "{description:#}"
    );
    // An error-level finding: exit 4.
    assert_eq!(code, 4, "{description:#}");
}
