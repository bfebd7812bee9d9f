//! AuthorizationPolicy and PeerAuthentication as ztunnel enforces them:
//! the [`Authorization`] resources pilot serves ztunnel
//! ([`authorizations`]) and, for each workload, the names its Workload
//! lists in `authorization_policies` ([`workload_policies`]), translated
//! from the compiled model as istiod translates them for ztunnel.
//!
//! # AuthorizationPolicy
//! - Scope: a policy with a selector is `WORKLOAD_SELECTOR` (it applies to
//!   the workloads that list it); without, `NAMESPACE`, or `GLOBAL` in the
//!   root namespace.
//! - ALLOW and DENY only: AUDIT and CUSTOM policies are not ztunnel's (a
//!   waypoint's), and are not served.
//! - A rule becomes a [`Rule`] of clauses, all of which must match: one
//!   for its `to` (a [`Match`] per operation: ports), one for its `from`
//!   (a [`Match`] per source: principals, namespaces, IP blocks, service
//!   accounts, each with its `not` form), one per `when` (its values in
//!   the field of its key: `source.ip`, `source.namespace`,
//!   `source.principal`, `destination.ip`, `destination.port`). Values
//!   `*`, `x*` and `*x` are presence, prefix and suffix matches.
//! - What ztunnel cannot see ([`pilot_routing::authorization::Rule::l4_unsupported`]:
//!   hosts, methods, paths, request principals, remote IP blocks, trust
//!   domains, other `when` keys), exactly as istiod: in an ALLOW policy
//!   the rule holding it is left out (so less is allowed; an ALLOW policy
//!   left with no rule allows nothing); in a DENY policy it is left out of
//!   its operation, source or condition, whose [`Match`] is still sent:
//!   where that leaves a `Match` empty, ztunnel skips it (an empty match
//!   matches nothing), so a `to`, `from` or `when` made only of such
//!   fields matches nothing and neither does its rule (the DENY is lost
//!   for it); otherwise the rule denies on the fields ztunnel reads (more
//!   than asked). [`needs_waypoint`] says which applies to a policy.
//! - Ports and addresses that do not parse are left out, as istiod does.
//!   Dry-run policies do not exist in pilot's API: `dry_run` is false.
//!   pilot's AuthorizationPolicy has no `targetRef` (the waypoint's
//!   binding), so every ALLOW and DENY policy is ztunnel's.
//!
//! # PeerAuthentication
//! As istiod, when any PeerAuthentication exists pilot serves the static
//! policy `<root namespace>/istio_converted_static_strict` (DENY a peer
//! without identity, i.e. plaintext, scope `WORKLOAD_SELECTOR`); a
//! workload whose mode is STRICT lists it. A PeerAuthentication with a
//! selector and port-level modes (not in the root namespace) whose ports
//! differ from the workload's mode becomes
//! `<ns>/converted_peer_authentication_<name>`: for a STRICT workload,
//! DENY plaintext except on its PERMISSIVE or DISABLE ports (the static
//! policy is then not listed: any DENY matching denies); for a PERMISSIVE
//! or DISABLE one, DENY plaintext on its STRICT ports. A workload's mode
//! and its ports' are those sidecars get
//! ([`PeerAuthentications::mtls_mode`]): its oldest selecting policy,
//! else its namespace's, else the mesh's, an unset mode inheriting.
//! Where istiod's own code departs from that precedence (a namespace
//! policy with an unset mode does not inherit the mesh's STRICT for port
//! exceptions; a DISABLE port under an inherited STRICT stays strict; a
//! STRICT port of a PERMISSIVE workload under a STRICT mesh is not
//! enforced), pilot follows the precedence: what ztunnel enforces is what
//! a sidecar would.

use std::net::IpAddr;

use pilot_model::Labels;
use pilot_routing::authorization::{Action as PolicyAction, Attribute, Condition, Operation, Policy, Source};
use pilot_routing::{AuthorizationPolicies, MtlsMode, PeerAuthentications, WorkloadMtls};

use super::proto::security::{
    Action, Address, Authorization, Clause, Match, Rule, Scope, ServiceAccountMatch, StringMatch,
};

/// The name (in the root namespace) of the policy denying plaintext that
/// STRICT workloads list.
pub const STATIC_STRICT_POLICY: &str = "istio_converted_static_strict";

/// The prefix of the name of a PeerAuthentication's converted policy
/// (`converted_peer_authentication_<name>`, in its namespace).
pub const CONVERTED_PEER_AUTHENTICATION_PREFIX: &str = "converted_peer_authentication_";

/// Every Authorization ztunnel is served: the ALLOW and DENY
/// AuthorizationPolicies, the static STRICT policy when any
/// PeerAuthentication exists, and the converted PeerAuthentications with
/// port-level exceptions; each with its resource name (`<ns>/<name>`),
/// sorted by name.
///
/// ```
/// use pilot_routing::RoutingConfigs;
/// use pilot_xds::ambient::authorization::authorizations;
/// let model = RoutingConfigs::default().compile();
/// assert!(authorizations(model.authorization(), model.peer_authentication(), "istio-system").is_empty());
/// ```
pub fn authorizations(
    policies: &AuthorizationPolicies,
    peer: &PeerAuthentications,
    root_namespace: &str,
) -> Vec<(String, Authorization)> {
    let mut out: Vec<(String, Authorization)> = policies
        .policies()
        .iter()
        .filter_map(|policy| authorization(policy, root_namespace))
        .chain((!peer.is_empty()).then(|| static_strict(root_namespace)))
        .chain(
            peer.selecting()
                .filter_map(|policy| converted_peer_authentication(policy, peer, root_namespace)),
        )
        .map(|a| (format!("{}/{}", a.namespace, a.name), a))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The Authorizations a workload of `namespace` carrying `labels` lists
/// (its Workload's `authorization_policies`): the selecting ALLOW and
/// DENY AuthorizationPolicies of its namespace and of the root namespace,
/// sorted, then its PeerAuthentication's ([`STATIC_STRICT_POLICY`] when
/// its mode is STRICT, or its converted policy when its ports make
/// exceptions). Policies without a selector are not listed: ztunnel
/// applies them by scope.
pub fn workload_policies(
    policies: &AuthorizationPolicies,
    peer: &PeerAuthentications,
    root_namespace: &str,
    namespace: &str,
    labels: &Labels,
) -> Vec<String> {
    let mut out: Vec<String> = policies
        .policies()
        .iter()
        .filter(|p| p.namespace == namespace || p.namespace == root_namespace)
        .filter(|p| p.selector.as_ref().is_some_and(|s| s.is_subset_of(labels)))
        .filter(|p| action(p.action).is_some())
        .map(|p| format!("{}/{}", p.namespace, p.name))
        .collect();
    out.sort();
    let workload = peer.selecting_workload(namespace, labels);
    let strict = effective_mode(workload, peer, namespace, root_namespace) == MtlsMode::Strict;
    match workload.filter(|w| converted_peer_authentication(w, peer, root_namespace).is_some()) {
        Some(w) => out.push(format!(
            "{}/{CONVERTED_PEER_AUTHENTICATION_PREFIX}{}",
            w.namespace, w.name
        )),
        None if strict => out.push(format!("{root_namespace}/{STATIC_STRICT_POLICY}")),
        None => {}
    }
    out
}

/// Why ztunnel cannot enforce `policy` as written, so that only a
/// waypoint could (pilot serves no waypoint yet): the fields it cannot
/// see and what becomes of their rules. `None` when it enforces it all,
/// and for AUDIT and CUSTOM policies (not ztunnel's).
pub fn needs_waypoint(policy: &Policy) -> Option<String> {
    policy.needs_waypoint()
}

/// An AuthorizationPolicy as ztunnel's, if it is ztunnel's (ALLOW, DENY).
fn authorization(policy: &Policy, root_namespace: &str) -> Option<Authorization> {
    let action = action(policy.action)?;
    let scope = match (&policy.selector, policy.namespace == root_namespace) {
        (Some(_), _) => Scope::WorkloadSelector,
        (None, true) => Scope::Global,
        (None, false) => Scope::Namespace,
    };
    let rules = policy
        .rules
        .iter()
        .filter_map(|rule| {
            // An ALLOW rule reading what ztunnel cannot see is left out.
            if action == Action::Allow && !rule.l4_unsupported("").is_empty() {
                return None;
            }
            let mut clauses = Vec::new();
            if let Some(to) = rule.to.as_ref().filter(|to| !to.is_empty()) {
                clauses.push(Clause {
                    matches: to.iter().map(operation).collect(),
                });
            }
            if let Some(from) = rule.from.as_ref().filter(|from| !from.is_empty()) {
                clauses.push(Clause {
                    matches: from.iter().map(|s| source(s, &policy.namespace)).collect(),
                });
            }
            clauses.extend(rule.when.iter().map(|c| Clause {
                matches: vec![condition(c)],
            }));
            Some(Rule { clauses })
        })
        .collect();
    Some(Authorization {
        name: policy.name.clone(),
        namespace: policy.namespace.clone(),
        scope: scope as i32,
        action: action as i32,
        rules,
        dry_run: false,
    })
}

fn action(action: PolicyAction) -> Option<Action> {
    match action {
        PolicyAction::Allow => Some(Action::Allow),
        PolicyAction::Deny => Some(Action::Deny),
        _ => None,
    }
}

fn operation(operation: &Operation) -> Match {
    Match {
        destination_ports: ports(&operation.ports),
        not_destination_ports: ports(&operation.not_ports),
        ..Match::default()
    }
}

fn source(source: &Source, namespace: &str) -> Match {
    Match {
        source_ips: addresses(&source.ip_blocks),
        not_source_ips: addresses(&source.not_ip_blocks),
        namespaces: strings(&source.namespaces),
        not_namespaces: strings(&source.not_namespaces),
        service_accounts: service_accounts(&source.service_accounts, namespace),
        not_service_accounts: service_accounts(&source.not_service_accounts, namespace),
        principals: strings(&source.principals),
        not_principals: strings(&source.not_principals),
        ..Match::default()
    }
}

/// A `when` condition's match: its values in the field of its key; empty
/// (matching nothing at ztunnel) for a key ztunnel cannot see.
fn condition(condition: &Condition) -> Match {
    let (values, not_values) = (&condition.values, &condition.not_values);
    let mut out = Match::default();
    match condition.attribute {
        Attribute::SourceNamespace => {
            out.namespaces = strings(values);
            out.not_namespaces = strings(not_values);
        }
        Attribute::SourcePrincipal => {
            out.principals = strings(values);
            out.not_principals = strings(not_values);
        }
        Attribute::SourceIp => {
            out.source_ips = addresses(values);
            out.not_source_ips = addresses(not_values);
        }
        Attribute::DestinationIp => {
            out.destination_ips = addresses(values);
            out.not_destination_ips = addresses(not_values);
        }
        Attribute::DestinationPort => {
            let parse =
                |v: &Vec<String>| ports(&v.iter().map(|p| p.parse().unwrap_or(0)).collect::<Vec<u32>>());
            out.destination_ports = parse(values);
            out.not_destination_ports = parse(not_values);
        }
        _ => {}
    }
    out
}

/// Istio's string patterns: `*` any non-empty value, `*x` a suffix, `x*`
/// a prefix, else the exact value.
fn strings(values: &[String]) -> Vec<StringMatch> {
    values
        .iter()
        .map(|v| {
            if v == "*" {
                StringMatch::presence()
            } else if let Some(suffix) = v.strip_prefix('*') {
                StringMatch::suffix(suffix)
            } else if let Some(prefix) = v.strip_suffix('*') {
                StringMatch::prefix(prefix)
            } else {
                StringMatch::exact(v.as_str())
            }
        })
        .collect()
}

/// Service accounts `ns/name` (a bare name in the policy's namespace).
fn service_accounts(values: &[String], namespace: &str) -> Vec<ServiceAccountMatch> {
    values
        .iter()
        .map(|v| {
            let (ns, name) = v.split_once('/').unwrap_or((namespace, v));
            ServiceAccountMatch {
                namespace: ns.to_string(),
                service_account: name.to_string(),
            }
        })
        .collect()
}

/// Valid ports (1 to 65535; the model has 0 for one that did not parse).
fn ports(values: &[u32]) -> Vec<u32> {
    values
        .iter()
        .copied()
        .filter(|p| (1..=65535).contains(p))
        .collect()
}

/// Addresses and CIDR blocks that parse, as raw bytes and prefix length.
fn addresses(values: &[String]) -> Vec<Address> {
    values
        .iter()
        .filter_map(|v| {
            let (ip, length) = match v.split_once('/') {
                Some((ip, length)) => {
                    let ip: IpAddr = ip.parse().ok()?;
                    let length: u32 = length.parse().ok()?;
                    let max = if ip.is_ipv4() { 32 } else { 128 };
                    (length <= max).then_some((ip, length))?
                }
                None => {
                    let ip: IpAddr = v.parse().ok()?;
                    (ip, if ip.is_ipv4() { 32 } else { 128 })
                }
            };
            let address = match ip {
                IpAddr::V4(v4) => v4.octets().to_vec(),
                IpAddr::V6(v6) => v6.octets().to_vec(),
            };
            Some(Address { address, length })
        })
        .collect()
}

/// A match of peers without identity (plaintext).
fn plaintext() -> Match {
    Match {
        not_principals: vec![StringMatch::presence()],
        ..Match::default()
    }
}

fn static_strict(root_namespace: &str) -> Authorization {
    Authorization {
        name: STATIC_STRICT_POLICY.to_string(),
        namespace: root_namespace.to_string(),
        scope: Scope::WorkloadSelector as i32,
        action: Action::Deny as i32,
        rules: vec![Rule {
            clauses: vec![Clause {
                matches: vec![plaintext()],
            }],
        }],
        dry_run: false,
    }
}

/// The mode of a workload of `namespace` (ports aside) whose selecting
/// PeerAuthentication is `workload`: its own, else its namespace's, else
/// the mesh's; PERMISSIVE when none says.
fn effective_mode(
    workload: Option<&WorkloadMtls>,
    peer: &PeerAuthentications,
    namespace: &str,
    root_namespace: &str,
) -> MtlsMode {
    let level = |ns: &str| peer.namespace_level(ns).flatten();
    workload
        .and_then(|w| w.mode)
        .or_else(|| level(namespace))
        .or_else(|| level(root_namespace))
        .unwrap_or(MtlsMode::Permissive)
}

/// A PeerAuthentication with a selector whose port-level modes make
/// exceptions to its workloads' mode, as a DENY policy; `None` when its
/// ports change nothing (then the static STRICT policy, or none, says all).
fn converted_peer_authentication(
    policy: &WorkloadMtls,
    peer: &PeerAuthentications,
    root_namespace: &str,
) -> Option<Authorization> {
    if policy.namespace == root_namespace || policy.ports.is_empty() {
        return None;
    }
    let strict = effective_mode(Some(policy), peer, &policy.namespace, root_namespace) == MtlsMode::Strict;
    let rules = if strict {
        // Plaintext is denied but on the ports that accept it.
        let exempt: Vec<u32> = policy
            .ports
            .iter()
            .filter(|(_, mode)| **mode != MtlsMode::Strict)
            .map(|(port, _)| *port)
            .collect();
        if exempt.is_empty() {
            return None;
        }
        let exemptions = exempt.iter().map(|port| Clause {
            matches: vec![Match {
                not_destination_ports: vec![*port],
                ..Match::default()
            }],
        });
        let deny = Clause {
            matches: vec![plaintext()],
        };
        // As istiod orders them: the policy's own STRICT first, an
        // inherited one merged in last.
        let clauses = if policy.mode == Some(MtlsMode::Strict) {
            std::iter::once(deny).chain(exemptions).collect()
        } else {
            exemptions.chain(std::iter::once(deny)).collect()
        };
        vec![Rule { clauses }]
    } else {
        // Plaintext is accepted but on the STRICT ports.
        let rules: Vec<Rule> = policy
            .ports
            .iter()
            .filter(|(_, mode)| **mode == MtlsMode::Strict)
            .map(|(port, _)| Rule {
                clauses: vec![Clause {
                    matches: vec![Match {
                        destination_ports: vec![*port],
                        ..plaintext()
                    }],
                }],
            })
            .collect();
        if rules.is_empty() {
            return None;
        }
        rules
    };
    Some(Authorization {
        name: format!("{CONVERTED_PEER_AUTHENTICATION_PREFIX}{}", policy.name),
        namespace: policy.namespace.clone(),
        scope: Scope::WorkloadSelector as i32,
        action: Action::Deny as i32,
        rules,
        dry_run: false,
    })
}
