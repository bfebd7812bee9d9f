//! The Gateway API's BackendTLSPolicies, compiled: per Service (and port
//! name), the TLS a proxy originates towards it.
//!
//! - A policy targets Services of its namespace (`group: ""`, `kind:
//!   Service`), the whole Service or, with `sectionName`, the port of
//!   that name. Other targets are not applied.
//! - Its TLS: the server name sent is `validation.hostname`; the server's
//!   certificate must carry one of `subjectAltNames` (a DNS name or a
//!   URI), or `hostname` when none is written; it is verified with the
//!   certificate authorities of the ConfigMaps `caCertificateRefs` names
//!   (their `ca.crt`, concatenated, sent over SDS as one validation
//!   context named `configmap://<namespace>/<name>[,<name>...]`), or with
//!   the system's trust bundle for `wellKnownCACertificates: System`.
//! - A reference to anything but a core ConfigMap cannot be resolved: the
//!   policy still applies, with a validation context named
//!   `unresolved-ca://<namespace>/<policy>` that the ADS server serves as
//!   a certificate authority nothing chains to, so connections to its
//!   backends fail (the Gateway API's rule: a 5xx, never a connection
//!   that skips verification). Another
//!   `wellKnownCACertificates` than `System` makes the policy not apply.
//! - Several policies for one Service and section: the oldest
//!   (`creationTimestamp`) applies, then the first by namespace and name;
//!   the others are `Conflicted` (`gateway_api_status`). A policy for a
//!   port applies there before one for the whole Service.
//! - The edge proxies' (routers' and ingress proxies') clusters of the
//!   Service's ports follow it, in place of a DestinationRule's `tls`: the
//!   Gateway API's support for it is a Gateway's connections to its
//!   backends. Sidecars and proxyless gRPC clients do not (a sidecar keeps
//!   the mesh's mutual TLS or its DestinationRule's `tls`).

use std::collections::BTreeMap;
use std::sync::Arc;

use pilot_api::gateway_api::{BackendTlsPolicy, PolicyTargetReference, SubjectAltNameType};
use pilot_model::{CaBundleName, Config};

use super::{ClientTls, RoutingConfigs, TlsMode};

/// The scheme of the certificate authority a policy names when one of its
/// references cannot be resolved: no credential source serves it.
pub const UNRESOLVED_CA_PREFIX: &str = "unresolved-ca://";

/// The TLS of the Services BackendTLSPolicies target, compiled.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BackendTlsPolicies {
    /// Per host, the policies that apply: one per port name (`None`: the
    /// whole Service).
    by_host: BTreeMap<String, BTreeMap<Option<String>, BackendTls>>,
}

/// The TLS one policy asks for towards a Service (or one of its ports).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct BackendTls {
    /// The policy's namespace and name.
    pub policy: (String, String),
    /// The TLS originated.
    pub tls: ClientTls,
}

impl BackendTlsPolicies {
    pub(crate) fn compile(configs: &RoutingConfigs) -> Self {
        let mut by_host: BTreeMap<String, BTreeMap<Option<String>, BackendTls>> = BTreeMap::new();
        for policy in in_precedence(&configs.backend_tls_policies) {
            let Some(tls) = tls_of(policy) else { continue };
            for target in services(&policy.spec.target_refs) {
                let host = format!(
                    "{}.{}.{}",
                    target.name, policy.meta.namespace, configs.domain_suffix
                );
                // The first in precedence keeps its place.
                by_host
                    .entry(host)
                    .or_default()
                    .entry(target.section_name.clone())
                    .or_insert_with(|| BackendTls {
                        policy: (policy.meta.namespace.clone(), policy.meta.name.clone()),
                        tls: tls.clone(),
                    });
            }
        }
        BackendTlsPolicies { by_host }
    }

    /// The policy that applies to the port `port_name` of the Service
    /// `host`: the one for that port, else the one for the whole Service.
    pub fn for_port(&self, host: &str, port_name: &str) -> Option<&BackendTls> {
        let policies = self.by_host.get(host)?;
        policies
            .get(&Some(port_name.to_string()))
            .or_else(|| policies.get(&None))
    }

    /// Whether no policy applies anywhere.
    pub fn is_empty(&self) -> bool {
        self.by_host.is_empty()
    }
}

/// `policies` in precedence order: the oldest first, then by namespace
/// and name.
pub fn in_precedence(policies: &[Arc<Config<BackendTlsPolicy>>]) -> Vec<&Config<BackendTlsPolicy>> {
    let mut ordered: Vec<&Config<BackendTlsPolicy>> = policies.iter().map(|p| &**p).collect();
    ordered.sort_by(|a, b| {
        (a.meta.creation_timestamp, &a.meta.namespace, &a.meta.name).cmp(&(
            b.meta.creation_timestamp,
            &b.meta.namespace,
            &b.meta.name,
        ))
    });
    ordered
}

/// The targets of a policy that are Services.
pub fn services(targets: &[PolicyTargetReference]) -> impl Iterator<Item = &PolicyTargetReference> {
    targets
        .iter()
        .filter(|t| t.group.as_deref().unwrap_or_default().is_empty() && t.kind == "Service")
}

/// Whether a `caCertificateRefs` entry names a core ConfigMap.
pub fn is_config_map(group: Option<&str>, kind: &str) -> bool {
    group.unwrap_or_default().is_empty() && kind == "ConfigMap"
}

/// The TLS `policy` asks for; `None` when it does not apply (no
/// validation, or a well-known set of certificates other than `System`).
pub fn tls_of(policy: &Config<BackendTlsPolicy>) -> Option<ClientTls> {
    let validation = policy.spec.validation.as_ref()?;
    let refs = validation.ca_certificate_refs.as_deref().unwrap_or_default();
    let ca_credential = match validation.well_known_ca_certificates.as_deref() {
        Some("System") if refs.is_empty() => None,
        Some(_) => return None,
        None if refs.is_empty() => return None,
        None if refs.iter().all(|r| is_config_map(r.group.as_deref(), &r.kind)) => {
            let names: Vec<&str> = refs.iter().map(|r| r.name.as_str()).collect();
            Some(CaBundleName::resource(&policy.meta.namespace, &names))
        }
        None => Some(format!(
            "{UNRESOLVED_CA_PREFIX}{}/{}",
            policy.meta.namespace, policy.meta.name
        )),
    };
    let subject_alt_names = match validation.subject_alt_names.as_deref() {
        Some(names) if !names.is_empty() => names
            .iter()
            .filter_map(|san| match san.kind {
                Some(SubjectAltNameType::Hostname) => san.hostname.clone(),
                Some(SubjectAltNameType::Uri) => san.uri.clone(),
                None => None,
            })
            .collect(),
        _ => vec![validation.hostname.clone()],
    };
    Some(ClientTls {
        mode: TlsMode::Simple,
        sni: Some(validation.hostname.clone()),
        subject_alt_names,
        ca_credential,
        ..Default::default()
    })
}

impl RoutingConfigs {
    /// Whether a BackendTLSPolicy of `namespace` names its ConfigMap
    /// `name` among its `caCertificateRefs`, or a Gateway's `tls.frontend`
    /// verifies clients with it: a certificate authority bundle any proxy
    /// may read (certificates, nothing secret, and only those a policy or
    /// a Gateway sends proxies to verify with).
    pub fn names_ca_bundle(&self, namespace: &str, name: &str) -> bool {
        let by_policy = self
            .backend_tls_policies
            .iter()
            .filter(|p| p.meta.namespace == namespace)
            .filter_map(|p| p.spec.validation.as_ref()?.ca_certificate_refs.as_ref())
            .flatten()
            .any(|r| is_config_map(r.group.as_deref(), &r.kind) && r.name == name);
        // A Gateway's listeners verify clients with it (`tls.frontend`).
        let by_gateway = || {
            let grants = self.reference_grants.iter().map(|g| &**g);
            self.api_gateways.iter().any(|gateway| {
                gateway.spec.listeners.iter().any(|listener| {
                    crate::gateway_api_status::client_validation(gateway, listener, grants.clone())
                        .is_some_and(|v| v.namespace == namespace && v.config_maps.iter().any(|n| n == name))
                })
            })
        };
        by_policy || by_gateway()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The policy `name` of namespace `shop` created at `created`
    /// seconds, its spec `spec` (YAML, indented by two).
    fn policy(name: &str, created: u64, spec: &str) -> Arc<Config<BackendTlsPolicy>> {
        let text = format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\nmetadata: {{name: {name}, namespace: shop}}\nspec:\n{}",
            spec.lines().map(|l| format!("  {l}\n")).collect::<String>()
        );
        let objects =
            pilot_model::document::parse("policy.yaml", &text, &pilot_api::default_registry()).unwrap();
        let mut config: Config<BackendTlsPolicy> = Config::from_dyn(&objects[0]).unwrap();
        config.meta.creation_timestamp =
            Some(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(created));
        Arc::new(config)
    }

    const WHOLE: &str = "
targetRefs: [{group: '', kind: Service, name: api}]
validation:
  caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}]
  hostname: api.example.com
";

    #[test]
    fn the_oldest_policy_applies_and_a_port_s_own_first() {
        let configs = RoutingConfigs {
            backend_tls_policies: vec![
                policy(
                    "newer",
                    20,
                    &WHOLE.replace("api.example.com", "newer.example.com"),
                ),
                policy("older", 10, WHOLE),
                policy(
                    "port",
                    30,
                    "
targetRefs: [{group: '', kind: Service, name: api, sectionName: grpc}]
validation:
  wellKnownCACertificates: System
  hostname: grpc.example.com
  subjectAltNames: [{type: URI, uri: 'spiffe://example.com/api'}]
",
                ),
            ],
            ..Default::default()
        };
        let compiled = BackendTlsPolicies::compile(&configs);
        let host = "api.shop.svc.cluster.local";
        let http = compiled.for_port(host, "http").unwrap();
        assert_eq!(http.policy.1, "older");
        assert_eq!(http.tls.sni.as_deref(), Some("api.example.com"));
        assert_eq!(http.tls.subject_alt_names, ["api.example.com"]);
        assert_eq!(http.tls.ca_credential.as_deref(), Some("configmap://shop/ca"));
        let grpc = compiled.for_port(host, "grpc").unwrap();
        assert_eq!(grpc.policy.1, "port");
        assert_eq!(grpc.tls.ca_credential, None, "the system's bundle");
        assert_eq!(grpc.tls.subject_alt_names, ["spiffe://example.com/api"]);
        assert!(
            compiled
                .for_port("other.shop.svc.cluster.local", "http")
                .is_none()
        );
    }

    #[test]
    fn an_unresolvable_reference_makes_connections_fail_and_an_unknown_set_does_not_apply() {
        let other_kind = policy(
            "secret",
            1,
            &WHOLE.replace(
                "{group: '', kind: ConfigMap, name: ca}",
                "{group: '', kind: Secret, name: ca}",
            ),
        );
        let tls = tls_of(&other_kind).unwrap();
        assert_eq!(tls.ca_credential.as_deref(), Some("unresolved-ca://shop/secret"));
        let unknown = policy(
            "unknown",
            1,
            "
targetRefs: [{group: '', kind: Service, name: api}]
validation: {wellKnownCACertificates: example.com/mine, hostname: api.example.com}
",
        );
        assert_eq!(tls_of(&unknown), None);
    }
}
