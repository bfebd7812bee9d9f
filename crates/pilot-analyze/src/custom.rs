//! `pilotctl analyze --mesh-config FILE` checks of CUSTOM
//! AuthorizationPolicies against the mesh config's extension providers:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0312` | error | no | a CUSTOM policy names a provider the mesh config's `extensionProviders` does not have, or one that is no authorizer (a tracing provider): pilot-discovery denies every request its rules match, as Istio does |
//! | `PLT0313` | error | yes | a CUSTOM policy's provider's service is not in the service registry: pilot-discovery treats the provider as missing and denies every request the policy's rules match, as Istio does |
//!
//! Without `--mesh-config` the check is not made: the server's mesh config
//! is not known here.

use pilot_api::mesh::ExtensionProviders;
use pilot_api::security::{Action, AuthorizationPolicy};
use pilot_model::DynConfig;

use super::networking::typed;
use super::{Finding, Services, Severity, finding};

/// The findings of `objects` against `providers` (and `services`, when
/// known), merged into `findings` in their order (by object, then code).
pub fn analyze(
    objects: &[DynConfig],
    providers: &ExtensionProviders,
    services: Option<&Services>,
    findings: &mut Vec<Finding>,
) {
    for policy in typed::<AuthorizationPolicy>(objects) {
        let spec = &policy.spec;
        let Some(provider) = spec.provider.as_ref().filter(|_| spec.action == Action::Custom) else {
            continue;
        };
        if let Some(known) = providers.get(&provider.name) {
            if known.kind().is_none() {
                findings.push(finding(
                    &policy,
                    "PLT0312",
                    Severity::Error,
                    "spec.provider.name",
                    format!(
                        "extension provider {:?} of the mesh config is not an authorizer (only envoyExtAuthzHttp and envoyExtAuthzGrpc are): every request this policy's rules match is denied",
                        provider.name
                    ),
                ));
            } else if let Some(services) = services
                && !services.exists(known.hostname())
            {
                findings.push(finding(
                    &policy,
                    "PLT0313",
                    Severity::Error,
                    "spec.provider.name",
                    format!(
                        "the service of extension provider {:?}, {}, is not in the service registry: every request this policy's rules match is denied",
                        provider.name,
                        known.hostname()
                    ),
                ));
            }
            continue;
        }
        let known = match providers.names().as_slice() {
            [] => "it has none".to_string(),
            names => format!("it has {}", names.join(", ")),
        };
        findings.push(finding(
            &policy,
            "PLT0312",
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
            "extensionProviders:\n- name: authz\n  envoyExtAuthzHttp: {service: authz.foo.svc.cluster.local, port: 8000}\n\
             - name: opa\n  zipkin: {service: zipkin.istio-system.svc.cluster.local, port: 9411}\n",
        )
        .unwrap();
        let mut tracing = Vec::new();
        analyze(&objects, &providers, None, &mut tracing);
        assert_eq!(tracing.len(), 1, "{tracing:?}");
        assert!(
            tracing[0].message.contains("is not an authorizer"),
            "{}",
            tracing[0].message
        );
        let providers = ExtensionProviders::parse(
            "mesh.yaml",
            "extensionProviders:\n- name: authz\n  envoyExtAuthzHttp: {service: authz.foo.svc.cluster.local, port: 8000}\n",
        )
        .unwrap();
        let mut findings = Vec::new();
        analyze(&objects, &providers, None, &mut findings);
        assert_eq!(findings.len(), 1, "{findings:?}");
        let found = &findings[0];
        assert_eq!(
            (
                found.code,
                found.severity,
                found.name.as_str(),
                found.path.as_str()
            ),
            ("PLT0312", Severity::Error, "absent", "spec.provider.name")
        );
        assert!(
            found.message.contains("\"opa\"") && found.message.contains("it has authz"),
            "{}",
            found.message
        );
        let mut none = Vec::new();
        analyze(&objects, &ExtensionProviders::default(), None, &mut none);
        assert_eq!(none.len(), 2);
        assert!(none[0].message.contains("it has none"), "{}", none[0].message);
        // With the registry: the present provider's service must be in it.
        let mut services = Services::default();
        let mut with_registry = Vec::new();
        analyze(&objects, &providers, Some(&services), &mut with_registry);
        let codes: Vec<_> = with_registry.iter().map(|f| (f.code, f.name.as_str())).collect();
        assert_eq!(codes, [("PLT0312", "absent"), ("PLT0313", "present")]);
        assert!(
            with_registry[1]
                .message
                .contains("authz.foo.svc.cluster.local, is not in the service registry"),
            "{}",
            with_registry[1].message
        );
        services
            .hosts
            .insert("authz.foo.svc.cluster.local".into(), Vec::new());
        let mut registered = Vec::new();
        analyze(&objects, &providers, Some(&services), &mut registered);
        assert_eq!(registered.len(), 1, "{registered:?}");
    }
}
