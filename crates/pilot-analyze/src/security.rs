//! `pilotctl analyze` checks of AuthorizationPolicy, in the manner of
//! `istioctl analyze`:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0301` | warning | yes | an AuthorizationPolicy's selector matches no workload of its namespace (of the mesh, in the root namespace) |
//! | `PLT0302` | warning | no (labels) / yes | a rule on peer identities (principals, namespaces) for workloads whose PeerAuthentication is DISABLE: without mutual TLS a caller has no identity, so the rule never matches |
//!
//! A workload is an instance's labels in the namespace of its service's
//! hostname (`name.namespace.svc...`). A workload's mutual TLS mode is its
//! own PeerAuthentication's (a selector matching it), else its namespace's,
//! else the mesh's (root namespace); PERMISSIVE when none says.

use std::collections::BTreeMap;
use std::time::SystemTime;

use pilot_api::security::{AuthorizationPolicy, MtlsMode, PeerAuthentication, Rule, from_entry};
use pilot_model::{Config, DynConfig};
use pilot_routing::DEFAULT_ROOT_NAMESPACE;

use super::networking::typed;
use super::{Finding, Services, Severity, finding};

type Labels = BTreeMap<String, String>;

/// A workload: the namespace and labels of an instance.
pub(super) type Workload = (String, Labels);

/// The workloads of `services`: each instance's labels in the namespace of
/// its service's hostname.
pub(super) fn workloads(services: &Services) -> Vec<Workload> {
    services
        .hosts
        .iter()
        .flat_map(|(host, instances)| {
            let namespace = host.split('.').nth(1).unwrap_or_default().to_string();
            instances
                .iter()
                .map(move |labels| (namespace.clone(), labels.clone()))
        })
        .collect()
}

/// Every AuthorizationPolicy finding for `objects` into `out`.
pub(super) fn analyze(objects: &[DynConfig], services: Option<&Services>, out: &mut Vec<Finding>) {
    let policies = typed::<AuthorizationPolicy>(objects);
    let peers = peer_authentications(objects);
    let workloads: Option<Vec<Workload>> = services.map(workloads);
    for policy in &policies {
        let spec = &policy.spec;
        let namespace = &policy.meta.namespace;
        // The workloads it applies to; without services, one standing for
        // them all: the selector's labels in the policy's namespace.
        let applying: Vec<(String, Labels)> = match &workloads {
            Some(workloads) => workloads
                .iter()
                .filter(|(ns, labels)| spec.applies_to(namespace, DEFAULT_ROOT_NAMESPACE, ns, labels))
                .cloned()
                .collect(),
            None => vec![(
                namespace.clone(),
                spec.selector.clone().unwrap_or_default().match_labels,
            )],
        };
        if let (Some(selector), Some(_)) = (&spec.selector, &workloads)
            && applying.is_empty()
        {
            let scope = if namespace == DEFAULT_ROOT_NAMESPACE {
                "the mesh".to_string()
            } else {
                format!("namespace {namespace}")
            };
            out.push(finding(
                policy,
                "PLT0301",
                Severity::Warning,
                "spec.selector",
                format!(
                    "selects no workload: no instance in {scope} carries {}",
                    super::labels_text(&selector.match_labels)
                ),
            ));
        }
        let plaintext: Vec<&(String, Labels)> = applying
            .iter()
            .filter(|(ns, labels)| mode(&peers, ns, labels) == MtlsMode::Disable)
            .collect();
        if plaintext.is_empty() {
            continue;
        }
        for (index, rule) in spec.rules.iter().enumerate() {
            for path in identity_fields(rule, index) {
                out.push(finding(
                    policy,
                    "PLT0302",
                    Severity::Warning,
                    path,
                    format!(
                        "never matches: it needs the caller's mutual TLS identity, and PeerAuthentication DISABLE applies to {} (labels {} in namespace {})",
                        if plaintext.len() == applying.len() { "every workload it selects" } else { "some workloads it selects" },
                        super::labels_text(&plaintext[0].1),
                        plaintext[0].0,
                    ),
                ));
            }
        }
    }
}

/// The PeerAuthentications of `objects`, oldest first (by creation time,
/// then namespace and name), the order in which Istio picks the one that
/// applies among several of one level.
pub(super) fn peer_authentications(objects: &[DynConfig]) -> Vec<Config<PeerAuthentication>> {
    let mut peers = typed::<PeerAuthentication>(objects);
    peers.sort_by_key(|p| {
        (
            p.meta.creation_timestamp.unwrap_or(SystemTime::UNIX_EPOCH),
            p.meta.namespace.clone(),
            p.meta.name.clone(),
        )
    });
    peers
}

/// The mutual TLS mode of a workload of `namespace` with `labels`:
/// `peers` oldest first (as [`peer_authentications`] gives them), the
/// oldest policy of a level applies.
pub(super) fn mode(peers: &[Config<PeerAuthentication>], namespace: &str, labels: &Labels) -> MtlsMode {
    let set = |p: &&Config<PeerAuthentication>| {
        p.spec
            .mtls
            .as_ref()
            .map(|m| m.mode)
            .filter(|m| *m != MtlsMode::Unset)
    };
    let own = peers.iter().find(|p| {
        p.meta.namespace == namespace && p.spec.selector.as_ref().is_some_and(|s| s.matches(labels))
    });
    let of_namespace = |ns: &str| {
        peers
            .iter()
            .find(|p| p.meta.namespace == ns && p.spec.selector.is_none())
    };
    own.and_then(|p| set(&p))
        .or_else(|| of_namespace(namespace).and_then(|p| set(&p)))
        .or_else(|| of_namespace(DEFAULT_ROOT_NAMESPACE).and_then(|p| set(&p)))
        .unwrap_or(MtlsMode::Permissive)
}

/// The field paths of `rule` that match on a peer identity.
fn identity_fields(rule: &Rule, index: usize) -> Vec<String> {
    let mut found = Vec::new();
    for (entry, from) in rule.from.iter().flatten().enumerate() {
        let Some(source) = &from.source else { continue };
        for (field, values) in [
            ("principals", &source.principals),
            ("notPrincipals", &source.not_principals),
            ("namespaces", &source.namespaces),
            ("notNamespaces", &source.not_namespaces),
        ] {
            if !values.is_empty() {
                found.push(format!("{}.source.{field}", from_entry(index, entry)));
            }
        }
    }
    for (entry, condition) in rule.when.iter().enumerate() {
        if matches!(condition.key.as_str(), "source.principal" | "source.namespace") {
            found.push(format!("spec.rules[{index}].when[{entry}]"));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use pilot_api::security;
    use pilot_model::{KindRegistry, document};

    use super::*;

    fn objects(text: &str) -> Vec<DynConfig> {
        let registry = KindRegistry::new();
        security::register(&registry).unwrap();
        document::parse("t.yaml", text, &registry).unwrap()
    }

    fn services() -> Services {
        let mut out = Services::default();
        for (host, app) in [
            ("reviews.default.svc.cluster.local", "reviews"),
            ("ratings.legacy.svc.cluster.local", "ratings"),
        ] {
            out.hosts.insert(
                host.into(),
                vec![BTreeMap::from([("app".to_string(), app.to_string())])],
            );
        }
        out
    }

    fn found(objects: &[DynConfig], services: Option<&Services>) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        analyze(objects, services, &mut out);
        out.iter()
            .map(|f| (f.code, f.name.clone(), f.path.clone()))
            .collect()
    }

    const POLICIES: &str = r#"
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: reviews-from-productpage, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  rules:
  - from: [{source: {principals: ["cluster.local/ns/default/sa/productpage"]}}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: typo, namespace: default}
spec:
  selector: {matchLabels: {app: reveiws}}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: mesh-ratings, namespace: istio-system}
spec:
  selector: {matchLabels: {app: ratings}}
  action: DENY
  rules:
  - from: [{source: {notNamespaces: [default]}}]
    when: [{key: source.principal, notValues: ["cluster.local/ns/x/sa/y"]}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: wrong-namespace, namespace: default}
spec:
  selector: {matchLabels: {app: ratings}}
"#;

    #[test]
    fn a_selector_matching_no_workload_is_reported() {
        let objects = objects(POLICIES);
        assert_eq!(
            found(&objects, Some(&services())),
            [
                ("PLT0301", "typo".into(), "spec.selector".into()),
                ("PLT0301", "wrong-namespace".into(), "spec.selector".into()),
            ]
        );
        // Without the registry, nothing can be said of selectors.
        assert!(found(&objects, None).is_empty());
    }

    #[test]
    fn identity_rules_on_workloads_without_mutual_tls_never_match() {
        let text = format!(
            "{POLICIES}---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: plaintext, namespace: legacy}}
spec: {{mtls: {{mode: DISABLE}}}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: reviews-plaintext, namespace: default}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  mtls: {{mode: DISABLE}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: mesh, namespace: istio-system}}
spec: {{mtls: {{mode: STRICT}}}}
"
        );
        let parsed = objects(&text);
        let identity: Vec<_> = found(&parsed, Some(&services()))
            .into_iter()
            .filter(|f| f.0 == "PLT0302")
            .collect();
        assert_eq!(
            identity,
            [
                (
                    "PLT0302",
                    "reviews-from-productpage".into(),
                    "spec.rules[0].from[0].source.principals".into()
                ),
                (
                    "PLT0302",
                    "mesh-ratings".into(),
                    "spec.rules[0].from[0].source.notNamespaces".into()
                ),
                ("PLT0302", "mesh-ratings".into(), "spec.rules[0].when[0]".into()),
            ]
        );
        // The workload's own STRICT policy wins over its namespace's DISABLE.
        let strict = format!(
            "{text}---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: ratings-strict, namespace: legacy}}
spec:
  selector: {{matchLabels: {{app: ratings}}}}
  mtls: {{mode: STRICT}}
"
        );
        let names: Vec<String> = found(&objects(&strict), Some(&services()))
            .into_iter()
            .filter(|f| f.0 == "PLT0302")
            .map(|f| f.1)
            .collect();
        assert_eq!(names, ["reviews-from-productpage"]);
    }

    /// Of two namespace-wide PeerAuthentications, the oldest applies, not
    /// the first by name.
    #[test]
    fn the_oldest_peer_authentication_of_a_level_applies() {
        let mesh_ratings = |older: &str, newer: &str| {
            let text = format!(
                "{POLICIES}---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: a-strict, namespace: legacy, creationTimestamp: \"{newer}\"}}
spec: {{mtls: {{mode: STRICT}}}}
---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {{name: z-disable, namespace: legacy, creationTimestamp: \"{older}\"}}
spec: {{mtls: {{mode: DISABLE}}}}
"
            );
            found(&objects(&text), Some(&services()))
                .into_iter()
                .filter(|f| f.0 == "PLT0302")
                .map(|f| f.1)
                .collect::<Vec<_>>()
        };
        // z-disable is the older: ratings has no mutual TLS, mesh-ratings'
        // identity rules never match.
        assert_eq!(
            mesh_ratings("2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"),
            ["mesh-ratings", "mesh-ratings"]
        );
        // a-strict is the older: STRICT applies, nothing to report.
        assert!(mesh_ratings("2024-02-01T00:00:00Z", "2024-01-01T00:00:00Z").is_empty());
    }
}
