//! Checks for configuration that is accepted and has no effect (the
//! question "why isn't my configuration applied?"), as Istio's analyzers
//! answer it (IST0101 for gateways, IST0130 and IST0131 for routes):
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0210` | error | no | a VirtualService names a gateway (`spec.gateways[i]`, or a match's `gateways`) that does not exist |
//! | `PLT0211` | warning | no | a VirtualService HTTP route (or one of its matches) can never match: earlier routes match every request it matches |
//! | `PLT0212` | warning | yes | a VirtualService host or a DestinationRule host that no registry service and no ServiceEntry knows |
//! | `PLT0213` | warning | yes | a DestinationRule's `workloadSelector` selects no workload of its namespace |
//! | `PLT0214` | warning | proxies | an object's `exportTo` leaves it visible to no namespace that has a connected proxy |
//! | `PLT0215` | warning | yes | an AuthorizationPolicy applying to a workload in ambient mode (its instance labelled `istio.io/dataplane-mode: ambient`) has rules ztunnel cannot enforce (HTTP attributes): only a waypoint could, and none is served |
//!
//! Gateway references are Istio's: `ns/name`, a bare `name` in the
//! VirtualService's namespace (`name.ns...` names `ns/name`), `mesh` the
//! sidecars (not a gateway). Routes are compared match by match: a match
//! is covered by an earlier one whose every condition it also has (the
//! same header, method, port ... values; a URI prefix covering its URI); a
//! route without matches (or with an empty match, or only the prefix `/`)
//! matches everything. A route all of whose matches are covered is never
//! used (path `spec.http[i]`); a match alone covered is ineffective (path
//! `spec.http[i].match[k]`), as Istio's IST0131.
//!
//! Hosts of VirtualServices bound only to gateways are not checked against
//! the registry (a gateway serves hosts of its own, as Istio exempts them).
//! PLT0214 is made only when the connected proxies are known
//! ([`Services::proxy_namespaces`]) and there is at least one: with none,
//! no object reaches any proxy whatever its `exportTo`.

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::networking::{
    DestinationRule, Gateway, HttpMatchRequest, ServiceEntry, StringMatch, VirtualService, exported_to,
    hosts_overlap,
};
use pilot_model::{Config, ConfigKind, DynConfig};

use super::networking::{resolve, typed};
use super::{Finding, Services, Severity, finding};

mod waypoint;

/// Every "no effect" finding for `objects` into `out`.
pub(super) fn analyze(
    objects: &[DynConfig],
    services: Option<&Services>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    let virtual_services = typed::<VirtualService>(objects);
    let rules = typed::<DestinationRule>(objects);
    let entries = typed::<ServiceEntry>(objects);
    let gateways: BTreeSet<String> = typed::<Gateway>(objects)
        .iter()
        .map(|g| format!("{}/{}", g.meta.namespace, g.meta.name))
        .collect();
    for vs in &virtual_services {
        missing_gateways(vs, &gateways, out);
        unreachable_routes(vs, out);
    }
    waypoint::needs_waypoint(objects, services, out);
    if let Some(services) = services {
        let known = Known::new(services, &entries);
        unknown_hosts(&virtual_services, &rules, &known, domain, out);
        for rule in &rules {
            selects_nothing(rule, services, out);
        }
        if let Some(namespaces) = &services.proxy_namespaces
            && !namespaces.is_empty()
        {
            for vs in &virtual_services {
                exported_nowhere(vs, &vs.spec.export_to, namespaces, out);
            }
            for rule in &rules {
                exported_nowhere(rule, &rule.spec.export_to, namespaces, out);
            }
            for entry in &entries {
                exported_nowhere(entry, &entry.spec.export_to, namespaces, out);
            }
        }
    }
}

/// A gateway reference of an object of `namespace` as `ns/name`, or `None`
/// for `mesh`.
fn qualify(gateway: &str, namespace: &str) -> Option<String> {
    if gateway == "mesh" {
        return None;
    }
    if gateway.contains('/') {
        return Some(gateway.to_string());
    }
    let mut parts = gateway.split('.');
    Some(match (parts.next(), parts.next()) {
        (Some(name), Some(ns)) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => format!("{namespace}/{gateway}"),
    })
}

/// PLT0210: gateways named and not defined.
fn missing_gateways(vs: &Config<VirtualService>, gateways: &BTreeSet<String>, out: &mut Vec<Finding>) {
    let namespace = &vs.meta.namespace;
    let mut named: Vec<(String, &String)> = vs
        .spec
        .gateways
        .iter()
        .enumerate()
        .map(|(i, g)| (format!("spec.gateways[{i}]"), g))
        .collect();
    for (i, route) in vs.spec.http.iter().enumerate() {
        for (k, m) in route.matches.iter().enumerate() {
            for (j, g) in m.gateways.iter().enumerate() {
                named.push((format!("spec.http[{i}].match[{k}].gateways[{j}]"), g));
            }
        }
    }
    for (i, route) in vs.spec.tls.iter().enumerate() {
        for (k, m) in route.matches.iter().enumerate() {
            for (j, g) in m.gateways.iter().enumerate() {
                named.push((format!("spec.tls[{i}].match[{k}].gateways[{j}]"), g));
            }
        }
    }
    for (i, route) in vs.spec.tcp.iter().enumerate() {
        for (k, m) in route.matches.iter().enumerate() {
            for (j, g) in m.gateways.iter().enumerate() {
                named.push((format!("spec.tcp[{i}].match[{k}].gateways[{j}]"), g));
            }
        }
    }
    // Bound only to gateways, none of which exists: nothing uses it.
    let nowhere = !vs.spec.gateways.is_empty()
        && vs
            .spec
            .gateways
            .iter()
            .all(|g| qualify(g, namespace).is_some_and(|q| !gateways.contains(&q)));
    for (path, gateway) in named {
        let Some(qualified) = qualify(gateway, namespace) else {
            continue;
        };
        if gateways.contains(&qualified) {
            continue;
        }
        let effect = if path.starts_with("spec.gateways") {
            if nowhere {
                "this VirtualService applies nowhere"
            } else {
                "no proxy gets its routes through it"
            }
        } else {
            "this match never selects its route"
        };
        out.push(finding(
            vs,
            "PLT0210",
            Severity::Error,
            path,
            format!("bound to the gateway {qualified}, which does not exist: {effect}"),
        ));
    }
}

/// PLT0211: HTTP routes (and matches) earlier routes make unreachable.
fn unreachable_routes(vs: &Config<VirtualService>, out: &mut Vec<Finding>) {
    let describe = |j: usize| {
        let name = &vs.spec.http[j].name;
        if name.is_empty() {
            format!("spec.http[{j}]")
        } else {
            format!("spec.http[{j}] ({name:?})")
        }
    };
    // Earlier matches, each with its route's index; `None` is a catch-all.
    let mut earlier: Vec<(usize, Option<&HttpMatchRequest>)> = Vec::new();
    for (i, route) in vs.spec.http.iter().enumerate() {
        let coverer =
            |m: Option<&HttpMatchRequest>| earlier.iter().find(|(_, e)| covers(*e, m)).map(|(j, _)| *j);
        if route.matches.is_empty() {
            if let Some(j) = coverer(None) {
                out.push(unreachable(
                    vs,
                    format!("spec.http[{i}]"),
                    &[describe(j)],
                    "every request",
                ));
            }
        } else {
            let covered: Vec<Option<usize>> = route.matches.iter().map(|m| coverer(Some(m))).collect();
            if covered.iter().all(Option::is_some) {
                let by: BTreeSet<usize> = covered.iter().flatten().copied().collect();
                let by: Vec<String> = by.into_iter().map(describe).collect();
                out.push(unreachable(
                    vs,
                    format!("spec.http[{i}]"),
                    &by,
                    "every request this route matches",
                ));
            } else {
                for (k, j) in covered.iter().enumerate() {
                    if let Some(j) = j {
                        out.push(finding(
                            vs,
                            "PLT0211",
                            Severity::Warning,
                            format!("spec.http[{i}].match[{k}]"),
                            format!(
                                "this match never selects the route: the earlier route {} matches every request it matches",
                                describe(*j)
                            ),
                        ));
                    }
                }
            }
        }
        if route.matches.is_empty() {
            earlier.push((i, None));
        } else {
            earlier.extend(route.matches.iter().map(|m| (i, Some(m))));
        }
    }
}

/// A PLT0211 finding for the route at `path`, covered by the routes `by`.
fn unreachable(vs: &Config<VirtualService>, path: String, by: &[String], what: &str) -> Finding {
    let several = by.len() > 1;
    finding(
        vs,
        "PLT0211",
        Severity::Warning,
        path,
        format!(
            "never matches: the earlier route{} {} match{} {what} first; move the more specific route before it",
            if several { "s" } else { "" },
            by.join(", "),
            if several { "" } else { "es" },
        ),
    )
}

/// Whether an earlier match `a` (`None`: no match, everything) matches
/// every request `b` (`None`: everything) matches.
fn covers(a: Option<&HttpMatchRequest>, b: Option<&HttpMatchRequest>) -> bool {
    let Some(a) = a.filter(|a| !catches_all(a)) else {
        return true;
    };
    let Some(b) = b else {
        return false;
    };
    let same = |x: &Option<StringMatch>, y: &Option<StringMatch>| x.is_none() || x == y;
    let uri = match (&a.uri, &b.uri) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(x), Some(y)) if x == y => a.ignore_uri_case == b.ignore_uri_case || a.ignore_uri_case,
        (Some(x), Some(y)) => {
            // A prefix covers an exact value or a longer prefix starting
            // with it (case-sensitively, unless `a` ignores case).
            match (&x.prefix, y.exact.as_ref().or(y.prefix.as_ref())) {
                (Some(prefix), Some(value)) if y.regex.is_none() => {
                    if a.ignore_uri_case {
                        value.to_lowercase().starts_with(&prefix.to_lowercase())
                    } else {
                        !b.ignore_uri_case && value.starts_with(prefix.as_str())
                    }
                }
                _ => false,
            }
        }
    };
    let subset = |x: &BTreeMap<String, StringMatch>, y: &BTreeMap<String, StringMatch>| {
        x.iter().all(|(k, v)| y.get(k) == Some(v))
    };
    let labels = |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>| {
        x.iter().all(|(k, v)| y.get(k) == Some(v))
    };
    uri && same(&a.scheme, &b.scheme)
        && same(&a.method, &b.method)
        && same(&a.authority, &b.authority)
        && subset(&a.headers, &b.headers)
        && subset(&a.query_params, &b.query_params)
        && subset(&a.without_headers, &b.without_headers)
        && (a.port.is_none() || a.port == b.port)
        && labels(&a.source_labels, &b.source_labels)
        && (a.gateways.is_empty()
            || (!b.gateways.is_empty() && b.gateways.iter().all(|g| a.gateways.contains(g))))
        && (a.source_namespace.is_empty() || a.source_namespace == b.source_namespace)
}

/// A match with no condition (or only the URI prefix `/`).
fn catches_all(m: &HttpMatchRequest) -> bool {
    let root = HttpMatchRequest {
        uri: Some(StringMatch {
            prefix: Some("/".into()),
            ..StringMatch::default()
        }),
        ..HttpMatchRequest::default()
    };
    let bare = |m: &HttpMatchRequest| HttpMatchRequest {
        name: String::new(),
        stat_prefix: String::new(),
        ignore_uri_case: false,
        ..m.clone()
    };
    let m = bare(m);
    m == HttpMatchRequest::default() || m == root
}

/// Hosts the registry and the ServiceEntries know.
struct Known<'a> {
    services: &'a Services,
    entry_hosts: Vec<String>,
}

impl<'a> Known<'a> {
    fn new(services: &'a Services, entries: &[Config<ServiceEntry>]) -> Self {
        Known {
            services,
            entry_hosts: entries.iter().flat_map(|e| e.spec.hosts.clone()).collect(),
        }
    }

    /// Whether `host` (resolved; a wildcard matches when it covers some
    /// known host) is known.
    fn knows(&self, host: &str) -> bool {
        if host.contains('*') {
            return self.services.hosts.keys().any(|h| hosts_overlap(host, h))
                || self.entry_hosts.iter().any(|h| hosts_overlap(host, h));
        }
        self.services.hosts.contains_key(host) || self.entry_hosts.iter().any(|h| hosts_overlap(h, host))
    }
}

/// PLT0212: hosts no registry service and no ServiceEntry knows.
fn unknown_hosts(
    virtual_services: &[Config<VirtualService>],
    rules: &[Config<DestinationRule>],
    known: &Known<'_>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    for vs in virtual_services {
        let sidecars = vs.spec.gateways.is_empty() || vs.spec.gateways.iter().any(|g| g == "mesh");
        if !sidecars {
            continue;
        }
        for (i, host) in vs.spec.hosts.iter().enumerate() {
            let resolved = resolve(host, &vs.meta.namespace, domain);
            if !known.knows(&resolved) {
                out.push(finding(
                    vs,
                    "PLT0212",
                    Severity::Warning,
                    format!("spec.hosts[{i}]"),
                    format!(
                        "no service in the registry and no ServiceEntry has the host {resolved}: no sidecar routes it"
                    ),
                ));
            }
        }
    }
    for rule in rules {
        let resolved = resolve(&rule.spec.host, &rule.meta.namespace, domain);
        if !known.knows(&resolved) {
            out.push(finding(
                rule,
                "PLT0212",
                Severity::Warning,
                "spec.host",
                format!(
                    "no service in the registry and no ServiceEntry has the host {resolved}: this DestinationRule applies to no traffic"
                ),
            ));
        }
    }
}

/// PLT0213: a DestinationRule whose `workloadSelector` selects nothing.
fn selects_nothing(rule: &Config<DestinationRule>, services: &Services, out: &mut Vec<Finding>) {
    let Some(selector) = &rule.spec.workload_selector else {
        return;
    };
    let namespace = rule.meta.namespace.as_str();
    let selects = services
        .hosts
        .iter()
        .filter(|(host, _)| host.split('.').nth(1) == Some(namespace))
        .flat_map(|(_, instances)| instances)
        .any(|instance| {
            selector
                .match_labels
                .iter()
                .all(|(k, v)| instance.get(k) == Some(v))
        });
    if !selects {
        out.push(finding(
            rule,
            "PLT0213",
            Severity::Warning,
            "spec.workloadSelector.matchLabels",
            format!(
                "the workload selector selects no workload in namespace {namespace}: this DestinationRule applies to no client"
            ),
        ));
    }
}

/// PLT0214: an `exportTo` that no namespace with a proxy is in.
fn exported_nowhere<K: ConfigKind>(
    object: &Config<K>,
    export_to: &[String],
    namespaces: &BTreeSet<String>,
    out: &mut Vec<Finding>,
) {
    if export_to.is_empty() {
        return;
    }
    if namespaces
        .iter()
        .any(|ns| exported_to(export_to, &object.meta.namespace, &[], ns))
    {
        return;
    }
    let list: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    out.push(finding(
        object,
        "PLT0214",
        Severity::Warning,
        "spec.exportTo",
        format!(
            "exported to {} and no connected proxy is in those namespaces (proxies are in {}): no proxy gets it",
            export_to.join(", "),
            list.join(", ")
        ),
    ));
}

#[cfg(test)]
mod tests;
