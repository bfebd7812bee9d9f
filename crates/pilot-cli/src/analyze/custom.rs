//! `pilotctl analyze --mesh-config FILE` checks of CUSTOM
//! AuthorizationPolicies against the mesh config's extension providers:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0310` | error | no | a CUSTOM policy names a provider the mesh config's `extensionProviders` does not have: pilot-discovery denies every request its rules match, as Istio does |
//!
//! Without `--mesh-config` the check is not made: the server's mesh config
//! is not known here.

use pilot_api::mesh::ExtensionProviders;
use pilot_api::security::{Action, AuthorizationPolicy};
use pilot_model::DynConfig;

use super::networking::typed;
use super::{Finding, Severity, finding};

/// The findings of `objects` against `providers`, merged into `findings`
/// in their order (by object, then code).
pub(crate) fn analyze(objects: &[DynConfig], providers: &ExtensionProviders, findings: &mut Vec<Finding>) {
    for policy in typed::<AuthorizationPolicy>(objects) {
        let spec = &policy.spec;
        let Some(provider) = spec.provider.as_ref().filter(|_| spec.action == Action::Custom) else {
            continue;
        };
        if providers.get(&provider.name).is_some() {
            continue;
        }
        let known = match providers.names().as_slice() {
            [] => "it has none".to_string(),
            names => format!("it has {}", names.join(", ")),
        };
        findings.push(finding(
            &policy,
            "PLT0310",
            Severity::Error,
            "spec.provider.name",
            format!(
                "extension provider {:?} is not in the mesh config's extensionProviders ({known}): every request this policy's rules match is denied",
                provider.name
            ),
        ));
    }
    findings.sort_by(|a, b| {
        (&a.kind, &a.namespace, &a.name, a.code, &a.path).cmp(&(
            &b.kind,
            &b.namespace,
            &b.name,
            b.code,
            &b.path,
        ))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_absent_from_the_mesh_config_is_an_error() {
        let objects = pilot_model::document::parse(
            "t.yaml",
            r#"apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: absent, namespace: default}
spec:
  action: CUSTOM
  provider: {name: opa}
  rules: [{}]
---
apiVersion: security.istio.io/v1
kind: AuthorizationPolicy
metadata: {name: present, namespace: default}
spec:
  action: CUSTOM
  provider: {name: authz}
  rules: [{}]
"#,
            &pilot_api::default_registry(),
        )
        .unwrap();
        let providers = ExtensionProviders::parse(
            "mesh.yaml",
            "extensionProviders:\n- name: authz\n  envoyExtAuthzHttp: {service: authz.foo.svc.cluster.local, port: 8000}\n",
        )
        .unwrap();
        let mut findings = Vec::new();
        analyze(&objects, &providers, &mut findings);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let found = &findings[0];
        assert_eq!(
            (
                found.code,
                found.severity,
                found.name.as_str(),
                found.path.as_str()
            ),
            ("PLT0310", Severity::Error, "absent", "spec.provider.name")
        );
        assert!(
            found.message.contains("\"opa\"") && found.message.contains("it has authz"),
            "{}",
            found.message
        );
        let mut none = Vec::new();
        analyze(&objects, &ExtensionProviders::default(), &mut none);
        assert_eq!(none.len(), 2);
        assert!(none[0].message.contains("it has none"), "{}", none[0].message);
    }
}
