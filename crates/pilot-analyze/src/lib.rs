//! Checks of pilot configuration as a whole (what per-object validation
//! cannot see), in the manner of `istioctl analyze`: the engine behind
//! `pilotctl analyze`, reusable by anything that holds the objects (a
//! server's status loop, a console).
//! Each finding has a stable code, a severity, the object and the field
//! path:
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0101` | error | yes | a rule, policy or ingress rule names a service that does not exist |
//! | `PLT0102` | error | yes | a route sends traffic (weight > 0) to a subset with no instances |
//! | `PLT0103` | warning | yes | labels (a policy's subset, a match's source) select no instance |
//! | `PLT0104` | warning | no | a route rule is shadowed by an earlier rule whose match covers its own |
//! | `PLT0105` | warning | no | two egress rules conflict as Istio's did: the same host, or different protocols on one port |
//! | `PLT0106` | warning | no (labels) / yes | a destination policy no rule or service uses |
//!
//! The networking.istio.io kinds have their own checks (`PLT02xx`,
//! [`networking`], [`service_entries`]; what is accepted and has no
//! effect, `PLT0210` to `PLT0215`, [`no_effect`]), Sidecars theirs ([`sidecar`]),
//! AuthorizationPolicy, PeerAuthentication and RequestAuthentication too
//! (`PLT03xx`, [`security`], [`peer_authentication`],
//! [`request_authentication`]; CUSTOM providers against `--mesh-config`,
//! [`custom`]), and the Gateway API's routes and Gateways theirs
//! (`PLT04xx`, [`gateway_api`]).
//!
//! Rules for a service are tried highest precedence first, ties by
//! namespace then name, as pilot-xds orders them.

pub mod custom;
pub mod describe;
pub mod gateway_api;
pub mod networking;
pub mod no_effect;
pub mod peer_authentication;
pub mod request_authentication;
pub mod security;
pub mod service_entries;
pub mod sidecar;

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::istio::{DestinationPolicy, EgressRule, IngressRule, IstioService, MatchCondition, RouteRule};
use pilot_model::{Config, ConfigKind, DynConfig};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Worth a look.
    Warning,
    /// Traffic fails or configuration is ignored.
    Error,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

/// One problem found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// Stable code, e.g. `PLT0104`.
    pub code: &'static str,
    /// How bad.
    pub severity: Severity,
    /// The object's kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The field path, e.g. `spec.route[1].labels`.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Every finding code with its name (as Istio names its analysis messages,
/// e.g. `ReferencedResourceNotFound`): what a status's
/// `validationMessages[].type` carries beside the code.
pub const CODES: &[(&str, &str)] = &[
    ("PLT0101", "ServiceNotFound"),
    ("PLT0102", "SubsetWithoutInstances"),
    ("PLT0103", "LabelsSelectNothing"),
    ("PLT0104", "ShadowedRouteRule"),
    ("PLT0105", "ConflictingEgressRules"),
    ("PLT0106", "UnusedDestinationPolicy"),
    ("PLT0201", "DestinationHostNotFound"),
    ("PLT0202", "SubsetNotDefined"),
    ("PLT0203", "SubsetSelectsNothing"),
    ("PLT0204", "ConflictingVirtualServiceHost"),
    ("PLT0205", "SidecarSelectsNothing"),
    ("PLT0206", "ConflictingSidecars"),
    ("PLT0207", "ConflictingServiceEntryHost"),
    ("PLT0208", "ServiceEntrySelectsNothing"),
    ("PLT0209", "ConflictingTcpPort"),
    ("PLT0210", "GatewayNotFound"),
    ("PLT0211", "UnreachableRoute"),
    ("PLT0212", "HostNotFound"),
    ("PLT0213", "DestinationRuleSelectsNothing"),
    ("PLT0214", "ExportedToNoProxy"),
    ("PLT0215", "RulesNeedWaypoint"),
    ("PLT0301", "AuthorizationPolicySelectsNothing"),
    ("PLT0302", "IdentityRuleWithoutMutualTls"),
    ("PLT0303", "PeerAuthenticationSelectsNothing"),
    ("PLT0304", "ConflictingPeerAuthentications"),
    ("PLT0305", "TlsModeConflict"),
    ("PLT0310", "TokensNeverRequired"),
    ("PLT0311", "TargetRefToWaypoint"),
    ("PLT0312", "ExtensionProviderNotFound"),
    ("PLT0313", "ExtensionProviderServiceNotFound"),
    ("PLT0401", "ParentNotFound"),
    ("PLT0402", "BackendNotFound"),
    ("PLT0403", "ListenerWithoutRoutes"),
    ("PLT0404", "RouteBesideVirtualService"),
    ("PLT0405", "SessionNotKept"),
    ("PLT0406", "StreamRuleUnused"),
];

/// The name of finding code `code` ([`CODES`]), or `""` for a code it
/// does not know.
///
/// ```
/// assert_eq!(pilot_analyze::code_name("PLT0210"), "GatewayNotFound");
/// ```
pub fn code_name(code: &str) -> &'static str {
    CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or("", |(_, name)| name)
}

/// The services and the label sets of their instances.
#[derive(Debug, Clone, Default)]
pub struct Services {
    /// Instances' labels by hostname.
    pub hosts: BTreeMap<String, Vec<BTreeMap<String, String>>>,
    /// The namespaces that have a connected proxy, when known (a server
    /// knows them; files do not): what `PLT0214` needs.
    pub proxy_namespaces: Option<BTreeSet<String>>,
}

/// The namespace of a proxy from its node id
/// (`sidecar~10.0.0.1~reviews-1.default~default.svc.cluster.local`: the
/// first label of its DNS domain), if it has one.
///
/// ```
/// let node = "sidecar~10.0.0.1~reviews-1.default~default.svc.cluster.local";
/// assert_eq!(pilot_analyze::node_namespace(node).as_deref(), Some("default"));
/// assert_eq!(pilot_analyze::node_namespace("bare"), None);
/// ```
pub fn node_namespace(node_id: &str) -> Option<String> {
    let domain = node_id.split('~').nth(3)?;
    let namespace = domain.split('.').next()?;
    (!namespace.is_empty()).then(|| namespace.to_string())
}

impl Services {
    fn exists(&self, host: &str) -> bool {
        self.hosts.contains_key(host)
    }

    /// Whether some instance of `host` carries every label of `labels`.
    fn selects(&self, host: &str, labels: &BTreeMap<String, String>) -> bool {
        self.hosts.get(host).is_some_and(|instances| {
            instances
                .iter()
                .any(|instance| labels.iter().all(|(k, v)| instance.get(k) == Some(v)))
        })
    }
}

/// Every finding for `objects`; with `services`, also those that need the
/// service registry. `domain` completes short service names
/// (`svc.cluster.local`). Sorted by object, then code.
pub fn analyze(objects: &[DynConfig], services: Option<&Services>, domain: &str) -> Vec<Finding> {
    let typed = Typed::of(objects);
    let mut out = Vec::new();
    shadowed_rules(&typed, domain, &mut out);
    overlapping_egress(&typed, &mut out);
    unused_policies(&typed, services, domain, &mut out);
    if let Some(services) = services {
        references(&typed, services, domain, &mut out);
    }
    networking::analyze(objects, services, domain, &mut out);
    no_effect::analyze(objects, services, domain, &mut out);
    sidecar::analyze(objects, services, &mut out);
    service_entries::analyze(objects, &mut out);
    security::analyze(objects, services, &mut out);
    peer_authentication::analyze(objects, services, domain, &mut out);
    request_authentication::analyze(objects, services, &mut out);
    gateway_api::analyze(objects, services, domain, &mut out);
    out.sort_by(|a, b| {
        (&a.kind, &a.namespace, &a.name, a.code, &a.path).cmp(&(
            &b.kind,
            &b.namespace,
            &b.name,
            b.code,
            &b.path,
        ))
    });
    out
}

struct Typed {
    rules: Vec<Config<RouteRule>>,
    policies: Vec<Config<DestinationPolicy>>,
    egress: Vec<Config<EgressRule>>,
    ingress: Vec<Config<IngressRule>>,
}

impl Typed {
    fn of(objects: &[DynConfig]) -> Self {
        // One object per name, the last given (as `apply` in file order
        // leaves it), by namespace and name.
        fn all<K: ConfigKind>(objects: &[DynConfig]) -> Vec<Config<K>> {
            let mut typed: BTreeMap<(String, String), Config<K>> = BTreeMap::new();
            for object in objects.iter().filter(|o| o.meta.kind == K::id()) {
                if let Ok(config) = Config::<K>::from_dyn(object) {
                    typed.insert((config.meta.namespace.clone(), config.meta.name.clone()), config);
                }
            }
            typed.into_values().collect()
        }
        Typed {
            rules: all(objects),
            policies: all(objects),
            egress: all(objects),
            ingress: all(objects),
        }
    }
}

pub(crate) fn finding<K: ConfigKind>(
    object: &Config<K>,
    code: &'static str,
    severity: Severity,
    path: impl Into<String>,
    message: String,
) -> Finding {
    Finding {
        code,
        severity,
        kind: K::id().into_owned(),
        namespace: object.meta.namespace.clone(),
        name: object.meta.name.clone(),
        path: path.into(),
        message,
    }
}

/// The hostname a reference in an object of `namespace` names (as
/// pilot-xds resolves it).
fn hostname(service: &IstioService, namespace: &str, domain: &str) -> String {
    service.hostname(namespace, domain)
}

/// PLT0104: for each service, a rule whose match is covered by an earlier
/// rule's is never reached.
fn shadowed_rules(typed: &Typed, domain: &str, out: &mut Vec<Finding>) {
    let mut by_host: BTreeMap<String, Vec<&Config<RouteRule>>> = BTreeMap::new();
    for rule in &typed.rules {
        if let Some(destination) = &rule.spec.destination {
            by_host
                .entry(hostname(destination, &rule.meta.namespace, domain))
                .or_default()
                .push(rule);
        }
    }
    for (host, mut rules) in by_host {
        rules.sort_by(|a, b| {
            b.spec
                .precedence
                .cmp(&a.spec.precedence)
                .then_with(|| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)))
        });
        for (index, rule) in rules.iter().enumerate() {
            let Some(earlier) = rules[..index].iter().find(|e| {
                covers(
                    e.spec.match_condition.as_ref(),
                    rule.spec.match_condition.as_ref(),
                    &e.meta.namespace,
                    &rule.meta.namespace,
                    domain,
                )
            }) else {
                continue;
            };
            let path = if rule.spec.match_condition.is_some() {
                "spec.match"
            } else {
                "spec.precedence"
            };
            out.push(finding(
                *rule,
                "PLT0104",
                Severity::Warning,
                path,
                format!(
                    "never reached: RouteRule {}/{} (precedence {}) comes first for {host} and matches every request this rule matches{}",
                    earlier.meta.namespace,
                    earlier.meta.name,
                    earlier.spec.precedence,
                    if earlier.spec.precedence == rule.spec.precedence {
                        " (equal precedence: the tie goes to namespace, then name); give this rule a higher precedence or a narrower match"
                    } else {
                        "; give this rule a higher precedence"
                    }
                ),
            ));
        }
    }
}

/// Whether every request `inner` matches is matched by `outer` (both in
/// rules of the given namespaces).
fn covers(
    outer: Option<&MatchCondition>,
    inner: Option<&MatchCondition>,
    outer_namespace: &str,
    inner_namespace: &str,
    domain: &str,
) -> bool {
    let Some(outer) = outer else {
        return true;
    };
    let empty = MatchCondition::default();
    let inner = inner.unwrap_or(&empty);
    if let Some(source) = &outer.source {
        let Some(inner_source) = &inner.source else {
            return false;
        };
        if hostname(source, outer_namespace, domain) != hostname(inner_source, inner_namespace, domain)
            || !source
                .labels
                .iter()
                .all(|(k, v)| inner_source.labels.get(k) == Some(v))
        {
            return false;
        }
    }
    if outer.tcp.is_some() && outer.tcp != inner.tcp {
        return false;
    }
    if outer.udp.is_some() && outer.udp != inner.udp {
        return false;
    }
    if let Some(request) = &outer.request {
        for (header, outer_match) in &request.headers {
            let Some(inner_match) = inner.request.as_ref().and_then(|r| r.headers.get(header)) else {
                return false;
            };
            let implied = match (&outer_match.exact, &outer_match.prefix, &outer_match.regex) {
                (Some(exact), _, _) => inner_match.exact.as_ref() == Some(exact),
                (_, Some(prefix), _) => inner_match
                    .exact
                    .as_ref()
                    .or(inner_match.prefix.as_ref())
                    .is_some_and(|value| value.starts_with(prefix.as_str())),
                (_, _, Some(regex)) => inner_match.regex.as_ref() == Some(regex),
                _ => true,
            };
            if !implied {
                return false;
            }
        }
    }
    true
}

/// The protocol class of an egress port, as Istio told conflicts apart:
/// the HTTP protocols (HTTP, HTTP2, GRPC, HTTPS) are one, TCP and MONGO
/// each another.
fn protocol_class(protocol: &str) -> String {
    let protocol = protocol.to_ascii_uppercase();
    match protocol.as_str() {
        "HTTP" | "HTTP2" | "GRPC" | "HTTPS" => "HTTP".to_string(),
        _ => protocol,
    }
}

/// PLT0105: egress rules that conflict as Istio's egress rules did
/// (`RejectConflictingEgressRules`), the later by namespace and name being
/// the one Istio dropped: two rules for the same host (Envoy takes a domain
/// once), or different protocols on one port (one outbound listener per
/// port). A wildcard host and a host under it (`*.foo.com` and
/// `api.foo.com`) on one port and protocol do not conflict: Envoy routes
/// the exact host to its own virtual host and the rest to the wildcard.
fn overlapping_egress(typed: &Typed, out: &mut Vec<Finding>) {
    let mut hosts: BTreeMap<String, &Config<EgressRule>> = BTreeMap::new();
    let mut ports: BTreeMap<i32, (String, &Config<EgressRule>)> = BTreeMap::new();
    for rule in &typed.egress {
        if let Some(host) = rule.spec.destination.as_ref().map(|d| d.service.as_str()) {
            match hosts.get(&host.to_ascii_lowercase()) {
                Some(other) => out.push(finding(
                    rule,
                    "PLT0105",
                    Severity::Warning,
                    "spec.destination.service",
                    format!(
                        "EgressRule {}/{} is also for {host}: Envoy takes a host once, so this rule is ignored; merge them",
                        other.meta.namespace, other.meta.name
                    ),
                )),
                None => {
                    hosts.insert(host.to_ascii_lowercase(), rule);
                }
            }
        }
        for (i, port) in rule.spec.ports.iter().enumerate() {
            let class = protocol_class(&port.protocol);
            match ports.get(&port.port) {
                Some((other_class, other)) if *other_class != class => out.push(finding(
                    rule,
                    "PLT0105",
                    Severity::Warning,
                    format!("spec.ports[{i}].protocol"),
                    format!(
                        "port {} is {class} here and {other_class} in EgressRule {}/{}: one port carries one protocol, so this port is ignored",
                        port.port, other.meta.namespace, other.meta.name
                    ),
                )),
                Some(_) => {}
                None => {
                    ports.insert(port.port, (class, rule));
                }
            }
        }
    }
}

/// PLT0106: a policy for a subset no rule routes to; with services, also
/// one for a service that does not exist.
fn unused_policies(typed: &Typed, services: Option<&Services>, domain: &str, out: &mut Vec<Finding>) {
    let mut routed: BTreeSet<(String, BTreeMap<String, String>)> = BTreeSet::new();
    let mut ruled: BTreeSet<String> = BTreeSet::new();
    for rule in &typed.rules {
        let Some(destination) = &rule.spec.destination else {
            continue;
        };
        let host = hostname(destination, &rule.meta.namespace, domain);
        ruled.insert(host.clone());
        for route in &rule.spec.route {
            let target = route
                .destination
                .as_ref()
                .map(|d| hostname(d, &rule.meta.namespace, domain))
                .unwrap_or_else(|| host.clone());
            routed.insert((target, route.labels.clone()));
        }
    }
    for policy in &typed.policies {
        let Some(destination) = &policy.spec.destination else {
            continue;
        };
        let host = hostname(destination, &policy.meta.namespace, domain);
        if !destination.labels.is_empty() {
            if !routed.contains(&(host.clone(), destination.labels.clone())) {
                out.push(finding(
                    policy,
                    "PLT0106",
                    Severity::Warning,
                    "spec.destination.labels",
                    format!(
                        "unused: no route rule sends traffic to the subset {} of {host}; a subset policy applies only to a route with exactly these labels",
                        labels_text(&destination.labels)
                    ),
                ));
            }
        } else if let Some(services) = services
            && !services.exists(&host)
            && !ruled.contains(&host)
        {
            out.push(finding(
                policy,
                "PLT0106",
                Severity::Warning,
                "spec.destination",
                format!("unused: no service {host} exists and no route rule names it"),
            ));
        }
    }
}

fn labels_text(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(","))
}

/// PLT0101, PLT0102, PLT0103: references checked against the registry.
fn references(typed: &Typed, services: &Services, domain: &str, out: &mut Vec<Finding>) {
    // The service must exist; if it does, its labels must select an instance.
    fn check<K: ConfigKind>(
        object: &Config<K>,
        reference: &IstioService,
        path: &str,
        what: &str,
        services: &Services,
        domain: &str,
        out: &mut Vec<Finding>,
    ) -> bool {
        let host = hostname(reference, &object.meta.namespace, domain);
        if !services.exists(&host) {
            out.push(finding(
                object,
                "PLT0101",
                Severity::Error,
                path,
                format!("{what} {host} does not exist in the service registry"),
            ));
            return false;
        }
        if !reference.labels.is_empty() && !services.selects(&host, &reference.labels) {
            out.push(finding(
                object,
                "PLT0103",
                Severity::Warning,
                format!("{path}.labels"),
                format!(
                    "no instance of {host} has the labels {}",
                    labels_text(&reference.labels)
                ),
            ));
        }
        true
    }
    for rule in &typed.rules {
        let Some(destination) = &rule.spec.destination else {
            continue;
        };
        let exists = check(
            rule,
            destination,
            "spec.destination",
            "destination service",
            services,
            domain,
            out,
        );
        if let Some(source) = rule.spec.match_condition.as_ref().and_then(|m| m.source.as_ref()) {
            check(
                rule,
                source,
                "spec.match.source",
                "source service",
                services,
                domain,
                out,
            );
        }
        if let Some(mirror) = &rule.spec.mirror {
            check(
                rule,
                mirror,
                "spec.mirror",
                "mirror service",
                services,
                domain,
                out,
            );
        }
        let single = rule.spec.route.len() == 1;
        for (i, route) in rule.spec.route.iter().enumerate() {
            let path = format!("spec.route[{i}]");
            let host = match &route.destination {
                Some(other) => {
                    let other_host = hostname(other, &rule.meta.namespace, domain);
                    if !services.exists(&other_host) {
                        out.push(finding(
                            rule,
                            "PLT0101",
                            Severity::Error,
                            format!("{path}.destination"),
                            format!("route destination {other_host} does not exist in the service registry"),
                        ));
                        continue;
                    }
                    other_host
                }
                None if exists => hostname(destination, &rule.meta.namespace, domain),
                None => continue,
            };
            let weight = route.weight.unwrap_or(if single { 100 } else { 0 });
            if weight > 0 && !services.selects(&host, &route.labels) {
                out.push(finding(
                    rule,
                    "PLT0102",
                    Severity::Error,
                    format!("{path}.labels"),
                    format!(
                        "{weight}% of the traffic goes to the subset {} of {host}, which has no instances: those requests fail with 503",
                        labels_text(&route.labels)
                    ),
                ));
            }
        }
    }
    for policy in &typed.policies {
        if let Some(destination) = &policy.spec.destination {
            check(
                policy,
                destination,
                "spec.destination",
                "destination service",
                services,
                domain,
                out,
            );
        }
    }
    for rule in &typed.ingress {
        if let Some(destination) = &rule.spec.destination {
            check(
                rule,
                destination,
                "spec.destination",
                "destination service",
                services,
                domain,
                out,
            );
        }
    }
}

#[cfg(test)]
mod tests;
