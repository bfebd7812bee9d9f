//! `pilotctl analyze` checks of RequestAuthentication:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0310` | warning | no (labels) / yes | a RequestAuthentication's tokens are accepted but never required: no AuthorizationPolicy applying to its workloads requires a request principal, so a request without a token passes |
//! | `PLT0311` | warning | no | a `targetRef` to a Service, ServiceEntry or GatewayClass: Istio binds those to waypoint proxies, which pilot has none of, so the policy applies to no workload through it |
//!
//! A RequestAuthentication only refuses invalid tokens; a request without
//! one passes unless an AuthorizationPolicy requires it, as Istio's
//! documentation stresses. A workload requires a token when a DENY policy
//! applying to it has a rule `notRequestPrincipals: ["*"]` (and nothing
//! else), or when ALLOW policies apply to it and every rule of every one
//! of them needs a token (each `from` source names `requestPrincipals`,
//! or a `when` condition has values for a `request.auth.*` key).
//!
//! Without the service registry the workloads are the selector's labels
//! in the policy's namespace (for a namespace- or mesh-wide policy, no
//! labels); with it, every instance the policy applies to.

use std::collections::BTreeMap;

use pilot_api::security::{Action, AuthorizationPolicy, RequestAuthentication, Rule};
use pilot_model::DynConfig;
use pilot_routing::DEFAULT_ROOT_NAMESPACE;

use super::networking::typed;
use super::security::{Workload, workloads};
use super::{Finding, Services, Severity, finding};

type Labels = BTreeMap<String, String>;

/// Every RequestAuthentication finding for `objects` into `out`.
pub(super) fn analyze(objects: &[DynConfig], services: Option<&Services>, out: &mut Vec<Finding>) {
    let policies = typed::<AuthorizationPolicy>(objects);
    let all: Option<Vec<Workload>> = services.map(workloads);
    for authentication in typed::<RequestAuthentication>(objects) {
        let spec = &authentication.spec;
        let targets = spec
            .target_ref
            .iter()
            .map(|t| ("spec.targetRef".to_string(), t))
            .chain(
                spec.target_refs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("spec.targetRefs[{i}]"), t)),
            );
        for (path, target) in targets.filter(|(_, t)| !t.is_gateway()) {
            out.push(finding(
                &authentication,
                "PLT0311",
                Severity::Warning,
                path,
                format!(
                    "applies to no workload: a targetRef to {} {:?} binds the policy to waypoint proxies in Istio, and pilot has none; select the workloads with `selector` instead",
                    target.kind, target.name
                ),
            ));
        }
        if spec.jwt_rules.is_empty() {
            continue;
        }
        let namespace = &authentication.meta.namespace;
        let selectors = spec.selected_labels();
        let applying: Vec<Workload> = match &all {
            Some(all) => all
                .iter()
                .filter(|(ns, labels)| {
                    (namespace == DEFAULT_ROOT_NAMESPACE || namespace == ns)
                        && selectors
                            .iter()
                            .any(|s| s.iter().all(|(k, v)| labels.get(k) == Some(v)))
                })
                .cloned()
                .collect(),
            None => selectors
                .into_iter()
                .map(|labels| (namespace.clone(), labels))
                .collect(),
        };
        let Some((ns, labels)) = applying
            .iter()
            .find(|(ns, labels)| !requires_token(&policies, ns, labels))
        else {
            continue;
        };
        out.push(finding(
            &authentication,
            "PLT0310",
            Severity::Warning,
            "spec.jwtRules",
            format!(
                "tokens are checked but never required: no AuthorizationPolicy applying to {} (labels {} in namespace {ns}) requires a request principal, so a request without a token passes (add one with `requestPrincipals: [\"*\"]`)",
                if applying.len() == 1 { "its workloads" } else { "some of its workloads" },
                super::labels_text(labels),
            ),
        ));
    }
}

/// Whether the AuthorizationPolicies applying to a workload of
/// `namespace` with `labels` refuse a request without a token.
fn requires_token(
    policies: &[pilot_model::Config<AuthorizationPolicy>],
    namespace: &str,
    labels: &Labels,
) -> bool {
    let applying: Vec<&AuthorizationPolicy> = policies
        .iter()
        .filter(|p| {
            p.spec
                .applies_to(&p.meta.namespace, DEFAULT_ROOT_NAMESPACE, namespace, labels)
        })
        .map(|p| &p.spec)
        .collect();
    let denies_without = applying
        .iter()
        .any(|p| p.action == Action::Deny && p.rules.iter().any(denies_requests_without_token));
    let allows: Vec<&&AuthorizationPolicy> = applying.iter().filter(|p| p.action == Action::Allow).collect();
    denies_without || (!allows.is_empty() && allows.iter().all(|p| p.rules.iter().all(needs_token)))
}

/// A DENY rule `from: [{source: {notRequestPrincipals: ["*"]}}]` and no
/// other condition: it denies every request without a token.
fn denies_requests_without_token(rule: &Rule) -> bool {
    rule.to.is_none()
        && rule.when.is_empty()
        && rule.from.as_ref().is_some_and(|from| {
            !from.is_empty()
                && from.iter().any(|f| {
                    f.source.as_ref().is_some_and(|s| {
                        s.not_request_principals.iter().any(|p| p == "*")
                            && s.principals.is_empty()
                            && s.not_principals.is_empty()
                            && s.request_principals.is_empty()
                            && s.namespaces.is_empty()
                            && s.not_namespaces.is_empty()
                            && s.ip_blocks.is_empty()
                            && s.not_ip_blocks.is_empty()
                            && s.remote_ip_blocks.is_empty()
                            && s.not_remote_ip_blocks.is_empty()
                    })
                })
        })
}

/// Whether a request without a token never matches an ALLOW rule.
fn needs_token(rule: &Rule) -> bool {
    let from_needs = rule.from.as_ref().is_some_and(|from| {
        !from.is_empty()
            && from.iter().all(|f| {
                f.source
                    .as_ref()
                    .is_some_and(|s| !s.request_principals.is_empty())
            })
    });
    let when_needs = rule
        .when
        .iter()
        .any(|c| c.key.starts_with("request.auth.") && !c.values.is_empty());
    from_needs || when_needs
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

    fn found(text: &str, services: Option<&Services>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        analyze(&objects(text), services, &mut out);
        out.iter().map(|f| (f.name.clone(), f.message.clone())).collect()
    }

    const JWT: &str = r#"
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: reviews-jwt, namespace: default}
spec:
  selector: {matchLabels: {app: reviews}}
  jwtRules: [{issuer: "https://issuer.test", jwksUri: "https://issuer.test/jwks.json"}]
"#;

    #[test]
    fn tokens_accepted_but_never_required_are_reported() {
        let found = found(JWT, None);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0, "reviews-jwt");
        assert!(
            found[0].1.contains("never required")
                && found[0].1.contains("{app=reviews} in namespace default"),
            "{found:?}"
        );
        // An ALLOW policy whose rule does not need a token: still not
        // required.
        let open = format!(
            "{JWT}---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: get-only, namespace: default}}
spec:
  selector: {{matchLabels: {{app: reviews}}}}
  rules: [{{to: [{{operation: {{methods: [GET]}}}}]}}]
"
        );
        assert_eq!(super::tests::found(&open, None).len(), 1);
    }

    #[test]
    fn a_policy_requiring_a_principal_silences_it() {
        for policy in [
            // ALLOW: every rule needs a token.
            r#"
spec:
  selector: {matchLabels: {app: reviews}}
  rules: [{from: [{source: {requestPrincipals: ["*"]}}]}]"#,
            // ALLOW on a claim.
            r#"
spec:
  rules: [{when: [{key: "request.auth.claims[groups]", values: [admin]}]}]"#,
            // DENY requests without a token, mesh-wide.
            r#"
  namespace: istio-system
spec:
  action: DENY
  rules: [{from: [{source: {notRequestPrincipals: ["*"]}}]}]"#,
        ] {
            let (meta_extra, spec) = match policy.split_once("\nspec:") {
                Some((extra, spec)) => (extra, spec),
                None => ("", policy),
            };
            let namespace = if meta_extra.contains("istio-system") {
                "istio-system"
            } else {
                "default"
            };
            let text = format!(
                "{JWT}---\napiVersion: security.istio.io/v1\nkind: AuthorizationPolicy\nmetadata: {{name: require, namespace: {namespace}}}\nspec:{spec}\n"
            );
            assert_eq!(found(&text, None), [], "{text}");
        }
    }

    #[test]
    fn a_target_ref_to_a_service_applies_to_no_workload() {
        let text = r#"
apiVersion: security.istio.io/v1
kind: RequestAuthentication
metadata: {name: waypoint, namespace: default}
spec:
  targetRefs:
  - {group: gateway.networking.k8s.io, kind: Gateway, name: edge}
  - {kind: Service, name: reviews}
"#;
        let mut out = Vec::new();
        analyze(&objects(text), None, &mut out);
        let found: Vec<(&str, &str)> = out.iter().map(|f| (f.code, f.path.as_str())).collect();
        assert_eq!(found, [("PLT0311", "spec.targetRefs[1]")]);
        assert!(
            out[0].message.contains("Service \"reviews\""),
            "{}",
            out[0].message
        );
    }

    #[test]
    fn with_services_each_workload_is_checked() {
        let mut services = Services::default();
        services.hosts.insert(
            "reviews.default.svc.cluster.local".into(),
            vec![
                BTreeMap::from([
                    ("app".to_string(), "reviews".to_string()),
                    ("version".to_string(), "v1".to_string()),
                ]),
                BTreeMap::from([
                    ("app".to_string(), "reviews".to_string()),
                    ("version".to_string(), "v2".to_string()),
                ]),
            ],
        );
        let text = format!(
            "{JWT}---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {{name: v1-needs-token, namespace: default}}
spec:
  selector: {{matchLabels: {{version: v1}}}}
  rules: [{{from: [{{source: {{requestPrincipals: [\"*\"]}}}}]}}]
"
        );
        let found = found(&text, Some(&services));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].1.contains("some of its workloads") && found[0].1.contains("version=v2"),
            "{found:?}"
        );
    }
}
