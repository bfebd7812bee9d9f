use std::collections::BTreeMap;

use pilot_api::istio;
use pilot_model::{DynConfig, document};

use super::*;

const DOMAIN: &str = "svc.cluster.local";

fn objects(text: &str) -> Vec<DynConfig> {
    document::parse("t.yaml", text, &istio::registry()).unwrap()
}

fn bookinfo() -> Vec<DynConfig> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/bookinfo");
    document::read_dir(&dir, &istio::registry()).unwrap()
}

fn services(hosts: &[(&str, &[&str])]) -> Services {
    let mut out = Services::default();
    for (host, versions) in hosts {
        out.hosts.insert(
            format!("{host}.default.svc.cluster.local"),
            versions
                .iter()
                .map(|v| BTreeMap::from([("version".to_string(), v.to_string())]))
                .collect(),
        );
    }
    out
}

fn codes(findings: &[Finding]) -> Vec<(&'static str, String, String)> {
    findings
        .iter()
        .map(|f| (f.code, f.name.clone(), f.path.clone()))
        .collect()
}

#[test]
fn bookinfo_reviews_timeout_is_shadowed_by_reviews_default() {
    let findings = analyze(&bookinfo(), None, DOMAIN);
    let shadowed: Vec<&Finding> = findings.iter().filter(|f| f.code == "PLT0104").collect();
    assert_eq!(shadowed.len(), 1, "{findings:#?}");
    let finding = shadowed[0];
    assert_eq!(
        (
            finding.kind.as_str(),
            finding.name.as_str(),
            finding.path.as_str()
        ),
        ("RouteRule", "reviews-timeout", "spec.precedence")
    );
    assert_eq!(finding.severity, Severity::Warning);
    assert!(
        finding
            .message
            .contains("RouteRule default/reviews-default (precedence 1)"),
        "{}",
        finding.message
    );
}

#[test]
fn a_narrower_match_or_a_higher_precedence_is_not_shadowed() {
    let base = "
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: a-catch-all}
spec:
  destination: {name: reviews}
  precedence: 1
  route: [{labels: {version: v1}}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: b-prefix}
spec:
  destination: {name: reviews}
  precedence: 3
  match: {request: {headers: {uri: {prefix: /api}}}}
  route: [{labels: {version: v2}}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: c-longer-prefix}
spec:
  destination: {name: reviews}
  precedence: 2
  match: {request: {headers: {uri: {prefix: /api/v2}}}}
  route: [{labels: {version: v2}}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: d-other-header}
spec:
  destination: {name: reviews}
  precedence: 2
  match: {request: {headers: {end-user: {exact: jason}}}}
  route: [{labels: {version: v3}}]
";
    let findings = analyze(&objects(base), None, DOMAIN);
    // c's /api/v2 is inside b's /api, and b comes first; d is not covered;
    // a (lowest precedence, catch-all) is covered by nothing earlier.
    assert_eq!(
        codes(&findings),
        vec![("PLT0104", "c-longer-prefix".to_string(), "spec.match".to_string())],
        "{findings:#?}"
    );
}

#[test]
fn references_are_checked_against_the_registry() {
    let text = "
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: to-nowhere}
spec:
  destination: {name: missing}
  route: [{labels: {version: v1}}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: split}
spec:
  destination: {name: reviews}
  route:
  - {labels: {version: v1}, weight: 90}
  - {labels: {version: v9}, weight: 10}
  - {labels: {version: v8}, weight: 0}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: v7-policy}
spec:
  destination: {name: reviews, labels: {version: v7}}
  loadBalancing: {name: RANDOM}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: ghost-policy}
spec:
  destination: {name: ghost}
  loadBalancing: {name: RANDOM}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: gateway}
spec:
  port: 80
  destination: {name: nope}
  destinationPort: 9080
  match: {request: {headers: {uri: {prefix: /}}}}
";
    let registry = services(&[("reviews", &["v1", "v2"])]);
    let findings = analyze(&objects(text), Some(&registry), DOMAIN);
    assert_eq!(
        codes(&findings),
        vec![
            (
                "PLT0101",
                "ghost-policy".to_string(),
                "spec.destination".to_string()
            ),
            (
                "PLT0106",
                "ghost-policy".to_string(),
                "spec.destination".to_string()
            ),
            (
                "PLT0103",
                "v7-policy".to_string(),
                "spec.destination.labels".to_string()
            ),
            (
                "PLT0106",
                "v7-policy".to_string(),
                "spec.destination.labels".to_string()
            ),
            ("PLT0101", "gateway".to_string(), "spec.destination".to_string()),
            ("PLT0102", "split".to_string(), "spec.route[1].labels".to_string()),
            (
                "PLT0101",
                "to-nowhere".to_string(),
                "spec.destination".to_string()
            ),
        ],
        "{findings:#?}"
    );
    let weight = findings.iter().find(|f| f.code == "PLT0102").unwrap();
    assert_eq!(weight.severity, Severity::Error);
    assert!(
        weight.message.contains("10% of the traffic"),
        "{}",
        weight.message
    );
    // Offline, none of the registry's findings.
    let offline = analyze(&objects(text), None, DOMAIN);
    assert!(
        offline
            .iter()
            .all(|f| !matches!(f.code, "PLT0101" | "PLT0102" | "PLT0103")),
        "{offline:#?}"
    );
}

#[test]
fn bookinfo_against_its_registry_has_only_the_shadowed_rule() {
    let registry = services(&[
        ("reviews", &["v1", "v2", "v3"]),
        ("ratings", &["v1"]),
        ("details", &["v1"]),
        ("productpage", &["v1"]),
    ]);
    let findings = analyze(&bookinfo(), Some(&registry), DOMAIN);
    assert_eq!(
        codes(&findings),
        vec![(
            "PLT0104",
            "reviews-timeout".to_string(),
            "spec.precedence".to_string()
        )],
        "{findings:#?}"
    );
}

#[test]
fn overlapping_egress_rules() {
    // As Istio's egress rules: a wildcard and a host under it on one port
    // and protocol are fine; the same host twice, or two protocols on one
    // port, conflict (the later rule by name is reported).
    let text = "
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: all-google}
spec:
  destination: {service: '*.googleapis.com'}
  ports: [{port: 443, protocol: https}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: storage}
spec:
  destination: {service: storage.googleapis.com}
  ports: [{port: 80, protocol: http}, {port: 443, protocol: https}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: storage-again}
spec:
  destination: {service: Storage.googleapis.com}
  ports: [{port: 8080, protocol: http2}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: wikipedia}
spec:
  destination: {service: 91.198.174.192/27}
  ports: [{port: 443, protocol: tcp}, {port: 27017, protocol: mongo}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: x-grpc}
spec:
  destination: {service: grpc.example.com}
  ports: [{port: 80, protocol: grpc}]
";
    let findings = analyze(&objects(text), None, DOMAIN);
    assert_eq!(
        codes(&findings),
        vec![
            (
                "PLT0105",
                "storage-again".to_string(),
                "spec.destination.service".to_string()
            ),
            (
                "PLT0105",
                "wikipedia".to_string(),
                "spec.ports[0].protocol".to_string()
            ),
        ],
        "{findings:#?}"
    );
    assert!(
        findings[1]
            .message
            .contains("port 443 is TCP here and HTTP in EgressRule default/all-google"),
        "{}",
        findings[1].message
    );
}

#[test]
fn every_code_made_has_a_name() {
    // Every code the sources name (CODES among them) is in CODES: a new
    // code without a name fails.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut made = std::collections::BTreeSet::new();
    let mut stack = vec![dir];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for (i, _) in text.match_indices("\"PLT") {
                    let code = &text[i + 1..(i + 8).min(text.len())];
                    if code[3..].bytes().all(|b| b.is_ascii_digit()) {
                        made.insert(code.to_string());
                    }
                }
            }
        }
    }
    let named: std::collections::BTreeSet<String> = CODES.iter().map(|(c, _)| c.to_string()).collect();
    assert_eq!(made, named);
}
