//! `pilotctl analyze` checks of PeerAuthentication, after Istio's
//! analyzers (`IST0127` no matching workloads, `IST0113` mTLS policy
//! conflict) and its rule that one policy applies per level:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0303` | warning | yes | a PeerAuthentication's selector matches no workload of its namespace |
//! | `PLT0304` | warning | no / yes | more than one PeerAuthentication for one level: two without a selector in one namespace (the mesh's in the root namespace), or two whose selectors match one workload (offline: the same labels); only the oldest applies |
//! | `PLT0305` | error | no (namespace) / yes | a DestinationRule's `tls.mode` disagrees with the PeerAuthentication of the host's workloads: `ISTIO_MUTUAL` to workloads under `DISABLE` (the server expects plaintext), `DISABLE` to workloads under `STRICT` (the server refuses plaintext): requests fail |
//!
//! A PeerAuthentication without `portLevelMtls` selector is refused by
//! validation already (as Istio's). Port-level modes (`portLevelMtls`,
//! a DestinationRule's `portLevelSettings`) are not compared: the registry
//! analyze reads carries no instance ports.

use std::collections::BTreeMap;

use pilot_api::networking::{ClientTlsMode, DestinationRule};
use pilot_api::security::{MtlsMode, PeerAuthentication};
use pilot_model::{Config, DynConfig};
use pilot_routing::DEFAULT_ROOT_NAMESPACE;

use super::networking::{resolve, typed};
use super::security::{Workload, mode, peer_authentications, workloads};
use super::{Finding, Services, Severity, finding};

/// Every PeerAuthentication finding for `objects` into `out`; `domain`
/// completes a DestinationRule's short host.
pub(super) fn analyze(
    objects: &[DynConfig],
    services: Option<&Services>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    // Oldest first, as the generation picks among policies of one level.
    let peers = peer_authentications(objects);
    let workloads = services.map(workloads);
    unmatched_selectors(&peers, workloads.as_deref(), out);
    duplicates(&peers, workloads.as_deref(), out);
    conflicts(&typed::<DestinationRule>(objects), &peers, services, domain, out);
}

/// PLT0303.
fn unmatched_selectors(
    peers: &[Config<PeerAuthentication>],
    workloads: Option<&[Workload]>,
    out: &mut Vec<Finding>,
) {
    let Some(workloads) = workloads else { return };
    for peer in peers {
        let Some(selector) = &peer.spec.selector else {
            continue;
        };
        let namespace = &peer.meta.namespace;
        if !workloads
            .iter()
            .any(|(ns, labels)| ns == namespace && selector.matches(labels))
        {
            out.push(finding(
                peer,
                "PLT0303",
                Severity::Warning,
                "spec.selector",
                format!(
                    "selects no workload: no instance in namespace {namespace} carries {}",
                    super::labels_text(&selector.match_labels)
                ),
            ));
        }
    }
}

/// PLT0304: each policy after the oldest of its level.
fn duplicates(peers: &[Config<PeerAuthentication>], workloads: Option<&[Workload]>, out: &mut Vec<Finding>) {
    for (index, peer) in peers.iter().enumerate() {
        let namespace = &peer.meta.namespace;
        let earlier = &peers[..index];
        let (older, path, level) = match &peer.spec.selector {
            None => {
                let older = earlier
                    .iter()
                    .find(|p| p.meta.namespace == *namespace && p.spec.selector.is_none());
                let level = if namespace == DEFAULT_ROOT_NAMESPACE {
                    "the mesh".to_string()
                } else {
                    format!("namespace {namespace}")
                };
                (older, "metadata.name", level)
            }
            Some(selector) => {
                let older = earlier.iter().find(|p| {
                    let Some(other) = p
                        .spec
                        .selector
                        .as_ref()
                        .filter(|_| p.meta.namespace == *namespace)
                    else {
                        return false;
                    };
                    match workloads {
                        Some(workloads) => workloads.iter().any(|(ns, labels)| {
                            ns == namespace && selector.matches(labels) && other.matches(labels)
                        }),
                        None => other.match_labels == selector.match_labels,
                    }
                });
                let level = format!(
                    "the workloads with {} in namespace {namespace}",
                    super::labels_text(&selector.match_labels)
                );
                (older, "spec.selector", level)
            }
        };
        if let Some(older) = older {
            out.push(finding(
                peer,
                "PLT0304",
                Severity::Warning,
                path,
                format!(
                    "ignored for {level}: PeerAuthentication {}/{} applies there too, and only the oldest one applies",
                    older.meta.namespace, older.meta.name
                ),
            ));
        }
    }
}

/// PLT0305.
fn conflicts(
    rules: &[Config<DestinationRule>],
    peers: &[Config<PeerAuthentication>],
    services: Option<&Services>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    for rule in rules {
        let Some(tls) = rule.spec.traffic_policy.as_ref().and_then(|p| p.tls.as_ref()) else {
            continue;
        };
        let host = resolve(&rule.spec.host, &rule.meta.namespace, domain);
        // The host's workloads; without the registry (or for a host it
        // lacks), the host's namespace stands for them.
        let Some(host_namespace) = namespace_of(&host) else {
            continue;
        };
        let labels: Vec<BTreeMap<String, String>> = services
            .and_then(|s| s.hosts.get(&host).cloned())
            .unwrap_or_else(|| vec![BTreeMap::new()]);
        let (refused, why) = match tls.mode {
            Some(ClientTlsMode::IstioMutual) => (
                MtlsMode::Disable,
                "sends mutual TLS, and the server expects plaintext (PeerAuthentication DISABLE",
            ),
            Some(ClientTlsMode::Disable) => (
                MtlsMode::Strict,
                "sends plaintext, and the server requires mutual TLS (PeerAuthentication STRICT",
            ),
            _ => continue,
        };
        if let Some(labels) = labels
            .iter()
            .find(|labels| mode(peers, host_namespace, labels) == refused)
        {
            out.push(finding(
                rule,
                "PLT0305",
                Severity::Error,
                "spec.trafficPolicy.tls.mode",
                format!(
                    "requests to {host} fail: the client {why} for {} in namespace {host_namespace})",
                    if labels.is_empty() {
                        "its workloads".to_string()
                    } else {
                        format!("the workload {}", super::labels_text(labels))
                    },
                ),
            ));
        }
    }
}

/// The namespace of a service hostname `name.namespace.svc...`.
fn namespace_of(host: &str) -> Option<&str> {
    let mut parts = host.split('.');
    let (_, namespace, svc) = (parts.next()?, parts.next()?, parts.next()?);
    (svc == "svc").then_some(namespace)
}

#[cfg(test)]
mod tests {
    use pilot_api::{networking, security};
    use pilot_model::{KindRegistry, document};

    use super::*;

    fn objects(text: &str) -> Vec<DynConfig> {
        let registry = KindRegistry::new();
        security::register(&registry).unwrap();
        networking::register(&registry).unwrap();
        document::parse("t.yaml", text, &registry).unwrap()
    }

    fn services() -> Services {
        let mut out = Services::default();
        for (host, labels) in [
            (
                "reviews.default.svc.cluster.local",
                vec![("app", "reviews"), ("version", "v1")],
            ),
            (
                "reviews.default.svc.cluster.local",
                vec![("app", "reviews"), ("version", "v2")],
            ),
            ("ratings.legacy.svc.cluster.local", vec![("app", "ratings")]),
        ] {
            out.hosts.entry(host.into()).or_default().push(
                labels
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
        }
        out
    }

    fn found(objects: &[DynConfig], services: Option<&Services>) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        analyze(objects, services, "svc.cluster.local", &mut out);
        let mut found: Vec<_> = out
            .iter()
            .map(|f| (f.code, f.name.clone(), f.path.clone()))
            .collect();
        found.sort();
        found
    }

    fn peer(name: &str, namespace: &str, selector: &str, mode: &str) -> String {
        let selector = if selector.is_empty() {
            String::new()
        } else {
            format!("  selector: {{matchLabels: {{{selector}}}}}\n")
        };
        format!(
            "---\napiVersion: security.istio.io/v1\nkind: PeerAuthentication\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{selector}  mtls: {{mode: {mode}}}\n"
        )
    }

    fn rule(name: &str, namespace: &str, host: &str, mode: &str) -> String {
        format!(
            "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  host: {host}\n  trafficPolicy: {{tls: {{mode: {mode}}}}}\n"
        )
    }

    #[test]
    fn a_selector_matching_no_workload_is_reported_with_the_registry_only() {
        let text = [
            peer("reviews-strict", "default", "app: reviews", "STRICT"),
            peer("typo", "default", "app: reveiws", "STRICT"),
            peer("elsewhere", "default", "app: ratings", "STRICT"),
        ]
        .concat();
        let objects = objects(&text);
        assert_eq!(
            found(&objects, Some(&services())),
            [
                ("PLT0303", "elsewhere".into(), "spec.selector".into()),
                ("PLT0303", "typo".into(), "spec.selector".into()),
            ]
        );
        assert!(found(&objects, None).is_empty());
    }

    #[test]
    fn two_policies_for_one_level_report_the_younger() {
        let text = [
            peer("a-mesh", "istio-system", "", "STRICT"),
            peer("b-mesh", "istio-system", "", "PERMISSIVE"),
            peer("a-reviews", "default", "app: reviews", "STRICT"),
            peer("b-reviews-v2", "default", "version: v2", "DISABLE"),
            peer("c-reviews", "default", "app: reviews", "PERMISSIVE"),
            peer("namespace", "default", "", "STRICT"),
        ]
        .concat();
        let objects = objects(&text);
        // Offline: the same selector labels, or two without a selector.
        assert_eq!(
            found(&objects, None),
            [
                ("PLT0304", "b-mesh".into(), "metadata.name".into()),
                ("PLT0304", "c-reviews".into(), "spec.selector".into()),
            ]
        );
        // With the registry: reviews v2 carries both app=reviews and version=v2.
        assert_eq!(
            found(&objects, Some(&services())),
            [
                ("PLT0304", "b-mesh".into(), "metadata.name".into()),
                ("PLT0304", "b-reviews-v2".into(), "spec.selector".into()),
                ("PLT0304", "c-reviews".into(), "spec.selector".into()),
            ]
        );
    }

    #[test]
    fn a_destination_rule_disagreeing_with_the_servers_mode_is_an_error() {
        let text = [
            peer("mesh", "istio-system", "", "DISABLE"),
            peer("legacy", "legacy", "", "STRICT"),
            // reviews v2 alone is STRICT.
            peer("reviews-v2", "default", "version: v2", "STRICT"),
            rule("reviews-mtls", "default", "reviews", "ISTIO_MUTUAL"),
            rule("reviews-plain", "default", "reviews", "DISABLE"),
            rule("ratings-plain", "legacy", "ratings", "DISABLE"),
            rule("external", "default", "example.com", "ISTIO_MUTUAL"),
            rule(
                "ratings-mtls",
                "default",
                "ratings.legacy.svc.cluster.local",
                "ISTIO_MUTUAL",
            ),
        ]
        .concat();
        let objects = objects(&text);
        let registry = services();
        let conflicts = |services| {
            found(&objects, services)
                .into_iter()
                .filter(|f| f.0 == "PLT0305")
                .map(|f| f.1)
                .collect::<Vec<_>>()
        };
        // With the registry: reviews v1 is DISABLE (the mesh's), v2 STRICT.
        assert_eq!(
            conflicts(Some(&registry)),
            ["ratings-plain", "reviews-mtls", "reviews-plain"]
        );
        // Offline: each namespace's mode only.
        assert_eq!(conflicts(None), ["ratings-plain", "reviews-mtls"]);
        let mut out = Vec::new();
        analyze(&objects, None, "svc.cluster.local", &mut out);
        let message = &out.iter().find(|f| f.name == "reviews-mtls").unwrap().message;
        assert!(
            message.contains("requests to reviews.default.svc.cluster.local fail: the client sends mutual TLS, and the server expects plaintext"),
            "{message}"
        );
    }
}
