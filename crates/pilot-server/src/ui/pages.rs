//! The console's pages, rendered from a [`MeshView`] into HTML: the
//! overview, one page per object, per service (with its route picture,
//! [`super::svg`]) and per proxy. Pure functions of what was gathered:
//! every value that comes from an object, a service or a proxy goes
//! through [`esc`].

use std::collections::BTreeMap;
use std::fmt::Write;

use pilot_analyze::Finding;
use pilot_model::{ConnectedProxy, DynConfig, Labels};
use pilot_routing::{HttpAction, HttpMatch, L4Match, RouteDestination, RoutingModel, StringMatch};
use serde_json::Value;

use super::html::{badge, esc, link, object_href, page, proxy_href, service_href, table};
use super::mesh::{MeshView, Rank, proxy_states, stored_conditions, stored_messages};
use super::svg::{DestinationBox, Picture, RouteBox, draw};

/// The codes whose findings say a route never matches (an earlier one
/// catches what it matches): pilot-analyze's, consumed by code.
const SHADOWED_CODES: &[&str] = &["PLT0104", "PLT0211"];

fn empty(text: &str) -> String {
    format!("<p class=\"empty\">{}</p>\n", esc(text))
}

/// Preformatted text (an Envoy message); nothing when empty.
fn pre(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!("<pre>{}</pre>", esc(text))
    }
}

fn code(text: &str) -> String {
    format!("<code>{}</code>", esc(text))
}

fn findings_table(findings: &[&Finding], with_object: bool) -> String {
    if findings.is_empty() {
        return empty("pilot-analyze finds nothing here.");
    }
    let rows: Vec<Vec<String>> = findings
        .iter()
        .map(|f| {
            let mut row = vec![badge(&f.severity.to_string()), code(f.code)];
            if with_object {
                row.push(link(
                    &object_href(&f.kind, &f.namespace, &f.name),
                    &format!("{} {}/{}", f.kind, f.namespace, f.name),
                ));
            }
            row.push(code(&f.path));
            row.push(esc(&f.message));
            row
        })
        .collect();
    let head: &[&str] = if with_object {
        &["severity", "code", "object", "field", "message"]
    } else {
        &["severity", "code", "field", "message"]
    };
    table("findings", head, &rows)
}

/// `GET /ui`: replicas, proxies by state per replica, services, objects
/// with problems first.
pub(crate) fn overview(view: &MeshView) -> String {
    let mut body = String::new();
    for error in &view.list_errors {
        let _ = writeln!(body, "<p class=\"badge error\">could not list {}</p>", esc(error));
    }
    // Proxies by state per replica.
    let mut counts: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut proxy_rows = Vec::new();
    for (replica, record) in &view.proxies {
        let (per_type, overall) = proxy_states(record);
        *counts
            .entry(replica.as_str())
            .or_default()
            .entry(overall)
            .or_default() += 1;
        let types: Vec<String> = per_type
            .iter()
            .map(|(t, s)| format!("{t} {}", badge(s)))
            .collect();
        proxy_rows.push((
            overall != "SYNCED",
            vec![
                link(&proxy_href(&record.node_id), &record.node_id),
                esc(replica),
                badge(overall),
                types.join(" "),
                esc(&record.distribution.withheld.len().to_string()),
            ],
        ));
    }
    body.push_str("<h2>Proxies by state</h2>\n");
    if counts.is_empty() {
        body.push_str(&empty("No proxy is connected to any replica."));
    } else {
        let rows: Vec<Vec<String>> = counts
            .iter()
            .map(|(replica, by)| {
                let mut row = vec![esc(replica)];
                for word in ["SYNCED", "STALE", "NACKED", "NOT SENT"] {
                    row.push(esc(&by.get(word).copied().unwrap_or(0).to_string()));
                }
                row
            })
            .collect();
        body.push_str(&table(
            "replicas",
            &["replica", "SYNCED", "STALE", "NACKED", "NOT SENT"],
            &rows,
        ));
        // Problems first.
        proxy_rows.sort_by_key(|(fine, _)| !*fine);
        let rows: Vec<Vec<String>> = proxy_rows.into_iter().map(|(_, row)| row).collect();
        body.push_str(&table(
            "proxies",
            &["proxy", "replica", "state", "per type", "objects withheld"],
            &rows,
        ));
    }
    // Objects, problems first.
    let mut ranked: Vec<(Rank, &DynConfig)> = view.objects.iter().map(|o| (view.rank(o), &**o)).collect();
    ranked.sort_by_key(|(rank, _)| *rank);
    body.push_str("<h2>Objects (problems first)</h2>\n");
    if ranked.is_empty() {
        body.push_str(&empty("No object is stored."));
    } else {
        let rows: Vec<Vec<String>> = ranked
            .iter()
            .map(|(rank, o)| {
                let findings = view.findings_of(o);
                let rejected = o
                    .meta
                    .status
                    .as_ref()
                    .and_then(|s| s.nacks.first())
                    .map(|n| format!("{} {}", esc(&n.type_), esc(&n.message)));
                let first = rejected
                    .or_else(|| {
                        findings
                            .first()
                            .map(|f| format!("{} {}", code(f.code), esc(&f.message)))
                    })
                    .unwrap_or_default();
                let distribution = o.meta.status.as_ref().map(|s| s.summary()).unwrap_or_default();
                vec![
                    badge(rank.word()),
                    esc(&o.meta.kind),
                    esc(&o.meta.namespace),
                    link(
                        &object_href(&o.meta.kind, &o.meta.namespace, &o.meta.name),
                        &o.meta.name,
                    ),
                    esc(&distribution),
                    first,
                ]
            })
            .collect();
        body.push_str(&table(
            "objects",
            &[
                "state",
                "kind",
                "namespace",
                "name",
                "distribution",
                "rejection or first finding",
            ],
            &rows,
        ));
    }
    // Services.
    body.push_str("<h2>Services</h2>\n");
    let hosts = hosts(view);
    if hosts.is_empty() {
        body.push_str(&empty("No service is known to the registries."));
    } else {
        let rows: Vec<Vec<String>> = hosts
            .iter()
            .map(|host| {
                let service = view.services.iter().find(|s| &s.hostname == host);
                let ports: Vec<String> = service
                    .map(|s| s.ports.iter().map(|p| format!("{} {}", p.name, p.port)).collect())
                    .unwrap_or_default();
                let instances = view.instances.get(host).map(Vec::len).unwrap_or(0);
                let routes = view
                    .model
                    .as_ref()
                    .ok()
                    .and_then(|m| m.routes(host))
                    .map(|r| r.http.len() + r.tcp.len() + r.tls.len())
                    .unwrap_or(0);
                vec![
                    link(&service_href(host), host),
                    esc(&ports.join(", ")),
                    esc(&instances.to_string()),
                    esc(&routes.to_string()),
                ]
            })
            .collect();
        body.push_str(&table(
            "services",
            &["host", "ports", "instances", "routes"],
            &rows,
        ));
    }
    body.push_str("<h2>Every finding</h2>\n");
    let all: Vec<&Finding> = view.findings.iter().collect();
    body.push_str(&findings_table(&all, true));
    page(&format!("Mesh (replica {})", view.replica), &body)
}

/// Every host worth a page: the registries' and those with routes.
fn hosts(view: &MeshView) -> Vec<String> {
    let mut hosts: Vec<String> = view.services.iter().map(|s| s.hostname.clone()).collect();
    if let Ok(model) = &view.model {
        hosts.extend(model.hosts().map(|(h, _)| h.to_string()));
    }
    hosts.sort();
    hosts.dedup();
    hosts
}

/// `GET /ui/objects/KIND/NAMESPACE/NAME`; `None` when there is no such object.
pub(crate) fn object(view: &MeshView, kind: &str, namespace: &str, name: &str) -> Option<String> {
    let object = view.object(kind, namespace, name)?;
    let mut body = String::new();
    let version = object.meta.resource_version.clone().unwrap_or_default();
    let _ = writeln!(
        body,
        "<p>{} · version {} · generation {} · {}</p>",
        badge(view.rank(object).word()),
        code(&version),
        code(&object.meta.generation.map(|g| g.to_string()).unwrap_or_default()),
        esc(&object
            .meta
            .status
            .as_ref()
            .map(|s| s.summary())
            .unwrap_or_else(|| "no distribution status yet".into()))
    );
    body.push_str("<h2>Conditions</h2>\n");
    let conditions = stored_conditions(object);
    if conditions.is_empty() {
        body.push_str(&empty("The object's status holds no conditions."));
    } else {
        let rows: Vec<Vec<String>> = conditions
            .iter()
            .map(|c| {
                vec![
                    esc(&c.type_),
                    badge(&c.status),
                    esc(&c.reason),
                    esc(&c.message),
                    esc(&c.observed_generation),
                    esc(&c.last_transition_time),
                ]
            })
            .collect();
        body.push_str(&table(
            "conditions",
            &[
                "type",
                "status",
                "reason",
                "message",
                "observed generation",
                "since",
            ],
            &rows,
        ));
    }
    let messages = stored_messages(object);
    if !messages.is_empty() {
        body.push_str("<h2>Validation messages</h2>\n");
        let rows: Vec<Vec<String>> = messages
            .iter()
            .map(|m| vec![badge(&m.level), code(&m.code), esc(&m.name), esc(&m.description)])
            .collect();
        body.push_str(&table(
            "messages",
            &["level", "code", "name", "description"],
            &rows,
        ));
    }
    body.push_str("<h2>Distribution</h2>\n");
    let verdicts = view.verdicts(object);
    if verdicts.is_empty() {
        body.push_str(&empty("No connected proxy is concerned by this object."));
    } else {
        let rows: Vec<Vec<String>> = verdicts
            .iter()
            .map(|(replica, node, verdict)| {
                let (type_, message) = match verdict {
                    super::mesh::Verdict::Nacked(t, m) | super::mesh::Verdict::Withheld(t, m) => {
                        (t.clone(), m.clone())
                    }
                    _ => Default::default(),
                };
                vec![
                    link(&proxy_href(node), node),
                    esc(replica),
                    badge(verdict.word()),
                    code(&version),
                    esc(&type_),
                    pre(&message),
                ]
            })
            .collect();
        body.push_str(&table(
            "distribution",
            &["proxy", "replica", "verdict", "version", "type", "message"],
            &rows,
        ));
    }
    if let Some(status) = &object.meta.status
        && !status.nacks.is_empty()
    {
        body.push_str("<h3>Rejections in the stored status</h3>\n");
        let rows: Vec<Vec<String>> = status
            .nacks
            .iter()
            .map(|n| vec![esc(&n.type_), esc(&n.proxies.to_string()), pre(&n.message)])
            .collect();
        body.push_str(&table("nacks", &["type", "proxies", "message"], &rows));
    }
    body.push_str("<h2>Analyze findings</h2>\n");
    body.push_str(&findings_table(&view.findings_of(object), false));
    body.push_str("<h2>Spec</h2>\n");
    let spec = serde_json::to_string_pretty(&object.spec).unwrap_or_default();
    let _ = writeln!(body, "<pre>{}</pre>", esc(&spec));
    Some(page(&format!("{kind} {namespace}/{name}"), &body))
}

fn string_match(what: &str, m: &StringMatch) -> String {
    match m {
        StringMatch::Exact(v) => format!("{what} = {v}"),
        StringMatch::Prefix(v) => format!("{what} prefix {v}"),
        StringMatch::Regex(v) => format!("{what} ~ {v}"),
        _ => format!("{what} {m:?}"),
    }
}

fn http_match(m: &HttpMatch) -> String {
    let mut parts = Vec::new();
    let fields = [
        ("uri", &m.uri),
        ("scheme", &m.scheme),
        ("method", &m.method),
        ("authority", &m.authority),
    ];
    for (what, value) in fields {
        if let Some(value) = value {
            parts.push(string_match(what, value));
        }
    }
    for (name, value) in &m.headers {
        parts.push(string_match(&format!("header {name}"), value));
    }
    for (name, value) in &m.query_params {
        parts.push(string_match(&format!("query {name}"), value));
    }
    for (name, value) in &m.without_headers {
        parts.push(format!("not {}", string_match(&format!("header {name}"), value)));
    }
    if let Some(port) = m.port {
        parts.push(format!("port {port}"));
    }
    if !m.source_labels.is_empty() {
        parts.push(format!("source {}", m.source_labels));
    }
    if let Some(service) = &m.source_service {
        parts.push(format!("source service {service}"));
    }
    if let Some(namespace) = &m.source_namespace {
        parts.push(format!("source namespace {namespace}"));
    }
    if !m.gateways.is_empty() {
        parts.push(format!("gateways {}", m.gateways.join(",")));
    }
    if parts.is_empty() {
        "every request".into()
    } else {
        parts.join(", ")
    }
}

fn l4_match(m: &L4Match) -> String {
    let text = format!("{m:?}");
    text.strip_prefix("L4Match ").unwrap_or(&text).to_string()
}

/// The object a compiled route comes from (`namespace/name[/route]`):
/// a VirtualService's, else a v1alpha2 RouteRule's, with the index of
/// its `spec.http` entry given the routes of that object seen so far.
fn route_source<'a>(
    view: &'a MeshView,
    route_name: &str,
    seen: &mut BTreeMap<(String, String), usize>,
) -> Option<(&'a DynConfig, Option<usize>)> {
    let mut parts = route_name.splitn(3, '/');
    let (namespace, name) = (parts.next()?, parts.next()?);
    let named = parts.next();
    if let Some(vs) = view.object("VirtualService", namespace, name) {
        let counter = seen.entry((namespace.into(), name.into())).or_default();
        let index = http_index(&vs.spec, named, *counter);
        *counter += 1;
        return Some((vs, Some(index)));
    }
    view.object("RouteRule", namespace, name)
        .map(|rule| (&**rule, None))
}

/// The index in a VirtualService's `spec.http` of a route compiled from
/// it: the entry named `named` when the route has a name, else the
/// `seen`-th (routes are compiled in their order).
fn http_index(spec: &Value, named: Option<&str>, seen: usize) -> usize {
    named
        .and_then(|route| {
            spec.get("http")?
                .as_array()?
                .iter()
                .position(|h| h.get("name").and_then(Value::as_str) == Some(route))
        })
        .unwrap_or(seen)
}

/// The finding that says this route never matches, if any.
fn shadowing<'a>(view: &'a MeshView, object: &DynConfig, index: Option<usize>) -> Option<&'a Finding> {
    shadowed_by(view.findings_of(object), index)
}

/// Among one object's findings, the one (by code) that says its route
/// `spec.http[index]` never matches; a v1alpha2 rule (`index` none) is
/// one route.
fn shadowed_by(findings: Vec<&Finding>, index: Option<usize>) -> Option<&Finding> {
    findings.into_iter().find(|f| {
        SHADOWED_CODES.contains(&f.code)
            && match index {
                None => true,
                Some(i) => {
                    let field = format!("spec.http[{i}]");
                    f.path == field
                        || f.path.starts_with(&format!("{field}."))
                        || f.path.starts_with(&format!("{field}["))
                }
            }
    })
}

/// The picture of `host`'s routing as the model compiles it.
fn picture(view: &MeshView, model: &RoutingModel, host: &str) -> Picture {
    let mut picture = Picture {
        host: host.to_string(),
        ..Picture::default()
    };
    let mut destinations: Vec<RouteDestination> = Vec::new();
    let mut index_of = |destination: &RouteDestination, picture: &mut Picture| -> usize {
        if let Some(at) = destinations.iter().position(|d| d == destination) {
            return at;
        }
        destinations.push(destination.clone());
        let subset = (!destination.subset.is_empty()).then(|| subset_name(model, destination));
        let endpoints = endpoints(view, &destination.host, &destination.subset, picture);
        picture.destinations.push(DestinationBox {
            host: destination.host.clone(),
            subset,
            port: destination.port,
            endpoints,
        });
        destinations.len() - 1
    };
    let whole = RouteDestination::new(host, Labels::default());
    let mut seen = BTreeMap::new();
    let routes = model.routes(host);
    let http = routes.map(|r| r.http.as_slice()).unwrap_or_default();
    for (i, route) in http.iter().enumerate() {
        let source = route_source(view, &route.name, &mut seen);
        let shadowed = source
            .and_then(|(object, index)| shadowing(view, object, index))
            .map(|f| format!("{} {}: {}", f.code, f.path, f.message));
        let rejected = source.and_then(|(object, _)| rejection(view, object));
        let label = match source {
            Some((_, Some(index))) => format!("http #{i}: {} spec.http[{index}]", route.name),
            _ => format!("http #{i}: {}", route.name),
        };
        let (to, action) = match &route.action {
            HttpAction::Route(list) if list.is_empty() => {
                (vec![(index_of(&whole, &mut picture), 100, 100)], None)
            }
            HttpAction::Route(list) => {
                let total: u32 = list.iter().map(|w| w.weight).sum::<u32>().max(1);
                let to = list
                    .iter()
                    .map(|w| {
                        (
                            index_of(&w.destination, &mut picture),
                            w.weight * 100 / total,
                            w.weight,
                        )
                    })
                    .collect();
                (to, None)
            }
            HttpAction::Redirect(r) => (
                Vec::new(),
                Some(format!(
                    "redirect {} {}",
                    r.authority.clone().unwrap_or_default(),
                    r.uri.clone().unwrap_or_default()
                )),
            ),
            HttpAction::DirectResponse(d) => (Vec::new(), Some(format!("direct response {}", d.status))),
            _ => (Vec::new(), Some("another action".into())),
        };
        let action = match (&action, &route.fault) {
            (None, Some(_)) => Some("fault injected".to_string()),
            _ => action,
        };
        picture.routes.push(RouteBox {
            label,
            matches: route
                .matches
                .iter()
                .map(http_match)
                .filter(|m| m != "every request")
                .collect(),
            action,
            shadowed,
            rejected,
            to,
        });
    }
    let l4 = routes
        .map(|r| {
            r.tcp
                .iter()
                .map(|t| ("tcp", &t.name, &t.matches, &t.destinations))
                .chain(
                    r.tls
                        .iter()
                        .map(|t| ("tls", &t.name, &t.matches, &t.destinations)),
                )
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for (i, (protocol, name, matches, list)) in l4.into_iter().enumerate() {
        let total: u32 = list.iter().map(|w| w.weight).sum::<u32>().max(1);
        let to = list
            .iter()
            .map(|w| {
                (
                    index_of(&w.destination, &mut picture),
                    w.weight * 100 / total,
                    w.weight,
                )
            })
            .collect();
        picture.routes.push(RouteBox {
            label: format!("{protocol} #{i}: {name}"),
            matches: matches.iter().map(l4_match).collect(),
            action: None,
            shadowed: None,
            rejected: None,
            to,
        });
    }
    if picture.routes.is_empty() {
        // No route: every request goes to the whole service.
        let to = vec![(index_of(&whole, &mut picture), 100, 100)];
        picture.routes.push(RouteBox {
            label: "no route: the service itself".into(),
            matches: Vec::new(),
            action: None,
            shadowed: None,
            rejected: None,
            to,
        });
    }
    picture
}

/// What the proxies did with `object` when some rejected it:
/// `WITHHELD by 2 of 3 proxies`, `NACKED by 1 of 3 proxies`.
fn rejection(view: &MeshView, object: &DynConfig) -> Option<String> {
    let verdicts = view.verdicts(object);
    let count = |word: &str| verdicts.iter().filter(|(_, _, v)| v.word() == word).count();
    let words: Vec<String> = ["WITHHELD", "NACKED"]
        .into_iter()
        .filter(|word| count(word) > 0)
        .map(|word| format!("{word} by {} of {} proxies", count(word), verdicts.len()))
        .collect();
    (!words.is_empty()).then(|| words.join(", "))
}

/// A subset's name: its DestinationRule's, else its labels.
fn subset_name(model: &RoutingModel, destination: &RouteDestination) -> String {
    model
        .destination(&destination.host)
        .and_then(|d| d.subsets.iter().find(|s| s.labels == destination.subset))
        .map(|s| s.name.clone())
        .unwrap_or_else(|| destination.subset.to_string())
}

/// The endpoints of `host` whose labels carry `subset`, added to the
/// picture's endpoints (once each).
fn endpoints(view: &MeshView, host: &str, subset: &Labels, picture: &mut Picture) -> Vec<usize> {
    let Some(instances) = view.instances.get(host) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for instance in instances.iter().filter(|i| subset.is_subset_of(&i.labels)) {
        let address = format!("{}:{}", instance.endpoint.address, instance.endpoint.port);
        let at = match picture.endpoints.iter().position(|(a, _)| *a == address) {
            Some(at) => at,
            None => {
                picture.endpoints.push((address, instance.labels.to_string()));
                picture.endpoints.len() - 1
            }
        };
        if !out.contains(&at) {
            out.push(at);
        }
    }
    out
}

/// `GET /ui/services/HOST`; `None` for a host neither a registry nor a
/// route knows.
pub(crate) fn service(view: &MeshView, host: &str) -> Option<String> {
    if !hosts(view).iter().any(|h| h == host) {
        return None;
    }
    let mut body = String::new();
    let model = match &view.model {
        Ok(model) => model,
        Err(error) => {
            let _ = writeln!(
                body,
                "<p class=\"badge error\">the routing model does not compile: {}</p>",
                esc(error)
            );
            return Some(page(&format!("Service {host}"), &body));
        }
    };
    let picture = picture(view, model, host);
    body.push_str("<h2>Routing</h2>\n<p>As pilot-routing compiles it for the data plane: host, routes in the order they apply (a shadowed route is dashed: it never matches), destinations with their weights, endpoints.</p>\n");
    body.push_str(&draw(&picture));
    body.push('\n');
    // The same in a table, with the shadowing findings in full.
    let rows: Vec<Vec<String>> = picture
        .routes
        .iter()
        .map(|r| {
            let to: Vec<String> =
                r.to.iter()
                    .map(|(d, percent, _)| {
                        let d = &picture.destinations[*d];
                        format!("{} {} {percent}%", d.host, d.subset.clone().unwrap_or_default())
                    })
                    .collect();
            vec![
                esc(&r.label),
                esc(&if r.matches.is_empty() {
                    "every request".into()
                } else {
                    r.matches.join("; ")
                }),
                esc(&to.join(", ")),
                match (&r.shadowed, &r.rejected) {
                    (Some(why), _) => format!("{} {}", badge("shadowed"), esc(why)),
                    (None, Some(rejected)) => format!("{} {}", badge("rejected"), esc(rejected)),
                    (None, None) => badge("winning"),
                },
            ]
        })
        .collect();
    body.push_str(&table(
        "routes",
        &["route", "matches", "destinations", "state"],
        &rows,
    ));
    if let Some(destination) = model.destination(host) {
        body.push_str("<h2>Subsets</h2>\n");
        let rows: Vec<Vec<String>> = destination
            .subsets
            .iter()
            .map(|s| {
                let count = view
                    .instances
                    .get(host)
                    .map(|list| list.iter().filter(|i| s.labels.is_subset_of(&i.labels)).count())
                    .unwrap_or(0);
                vec![esc(&s.name), esc(&s.labels.to_string()), esc(&count.to_string())]
            })
            .collect();
        body.push_str(&table("subsets", &["subset", "labels", "instances"], &rows));
    }
    body.push_str(&workloads_section(view, host));
    // The objects that name this host, with their findings.
    let short = host.split('.').next().unwrap_or(host);
    let related: Vec<&Finding> = view
        .findings
        .iter()
        .filter(|f| {
            view.object(&f.kind, &f.namespace, &f.name)
                .is_some_and(|o| names_host(&o.spec, host, short))
        })
        .collect();
    body.push_str("<h2>Findings about objects that name this host</h2>\n");
    body.push_str(&findings_table(&related, true));
    Some(page(&format!("Service {host}"), &body))
}

/// The service's workloads: each instance's address and port, the
/// workload it is (when its registry knows), its node and, in ambient
/// mode, the ztunnel of that node that serves it.
fn workloads_section(view: &MeshView, host: &str) -> String {
    let Some(instances) = view.instances.get(host).filter(|list| !list.is_empty()) else {
        return String::new();
    };
    let ztunnel_of = |node: &str| -> String {
        view.proxies
            .iter()
            .find(|(_, p)| p.node_id.starts_with("ztunnel~") && p.node_name.as_deref() == Some(node))
            .map(|(_, p)| link(&proxy_href(&p.node_id), &p.node_id))
            .unwrap_or_else(|| "none connected".into())
    };
    let rows: Vec<Vec<String>> = instances
        .iter()
        .map(|instance| {
            let workload = instance.workload.as_deref();
            let node = workload.and_then(|w| w.node.as_deref());
            let ambient = workload.is_some_and(|w| w.in_ambient(&Labels::new()));
            vec![
                esc(&format!(
                    "{}:{}",
                    instance.endpoint.address, instance.endpoint.port
                )),
                esc(&workload
                    .map(|w| format!("{}.{}", w.name, w.namespace))
                    .unwrap_or_default()),
                esc(node.unwrap_or("")),
                match (ambient, node) {
                    (true, Some(node)) => ztunnel_of(node),
                    (true, None) => "ambient, node unknown".into(),
                    (false, _) => "not in ambient mode".into(),
                },
            ]
        })
        .collect();
    format!(
        "<h2>Workloads</h2>\n{}",
        table("workloads", &["endpoint", "workload", "node", "ztunnel"], &rows)
    )
}

/// Whether some string in `spec` is the host or its short name.
fn names_host(spec: &Value, host: &str, short: &str) -> bool {
    match spec {
        Value::String(s) => s == host || s == short,
        Value::Array(list) => list.iter().any(|v| names_host(v, host, short)),
        Value::Object(map) => map.values().any(|v| names_host(v, host, short)),
        _ => false,
    }
}

/// `GET /ui/proxies/ID`, with its scope when it is connected here.
pub(crate) fn proxy(
    view: &MeshView,
    replica: &str,
    record: &ConnectedProxy,
    scope: Option<Result<pilot_xds::ProxyScope, String>>,
) -> String {
    let mut body = String::new();
    let (per_type, overall) = proxy_states(record);
    let _ = writeln!(
        body,
        "<p>{} · replica {} · {} stream · as of {}</p>",
        badge(overall),
        esc(replica),
        if record.incremental {
            "incremental"
        } else {
            "state-of-the-world"
        },
        esc(&humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string())
    );
    body.push_str("<h2>What it was sent</h2>\n");
    let rows: Vec<Vec<String>> = per_type
        .iter()
        .map(|(name, state)| {
            let t = record.types.get(*name).cloned().unwrap_or_default();
            let nack = t
                .nack
                .map(|n| format!("version {}: {}", n.version, n.message))
                .unwrap_or_default();
            vec![
                esc(name),
                badge(state),
                code(&t.sent.unwrap_or_default()),
                code(&t.acked.unwrap_or_default()),
                pre(&nack),
            ]
        })
        .collect();
    body.push_str(&table(
        "types",
        &["type", "state", "push sent", "push ACKed", "last NACK"],
        &rows,
    ));
    body.push_str("<p>Versions are the serving replica's push numbers. Per kind, the store revision it has in full:</p>\n");
    match &record.distribution.acked {
        Some(revisions) if !revisions.is_empty() => {
            let rows: Vec<Vec<String>> = revisions
                .iter()
                .map(|(kind, revision)| vec![esc(kind), code(&revision.to_string())])
                .collect();
            body.push_str(&table("revisions", &["kind", "revision ACKed"], &rows));
        }
        _ => body.push_str(&empty("It has not ACKed a complete push yet.")),
    }
    body.push_str("<h2>What it rejected</h2>\n");
    if let Some(nack) = &record.distribution.nack {
        let _ = writeln!(
            body,
            "<div>{} {}: <pre>{}</pre></div>",
            badge("NACKED"),
            esc(&nack.type_),
            esc(&nack.message)
        );
    }
    if record.distribution.withheld.is_empty() {
        body.push_str(&empty("It is served every object that concerns it."));
    } else {
        let rows: Vec<Vec<String>> = record
            .distribution
            .withheld
            .iter()
            .map(|w| {
                vec![
                    link(
                        &object_href(&w.kind, &w.namespace, &w.name),
                        &format!("{} {}/{}", w.kind, w.namespace, w.name),
                    ),
                    code(&w.resource_version),
                    esc(&w.type_),
                    pre(&w.message),
                ]
            })
            .collect();
        body.push_str(&table(
            "withheld",
            &["object withheld", "version rejected", "type", "message"],
            &rows,
        ));
    }
    body.push_str("<h2>Scope</h2>\n");
    match scope {
        None => {
            let _ = writeln!(
                body,
                "<p class=\"empty\">Connected to replica {}: its scope is on that replica's console.</p>",
                esc(replica)
            );
        }
        Some(Err(why)) => body.push_str(&empty(&why)),
        Some(Ok(scope)) => {
            let _ = writeln!(
                body,
                "<p>namespace {} · decided by {}</p>",
                code(&scope.namespace),
                esc(&scope.origin.to_string())
            );
            let rows: Vec<Vec<String>> = scope
                .hosts
                .iter()
                .map(|(host, reason)| vec![link(&service_href(host), host), esc(&reason.to_string())])
                .collect();
            body.push_str(&table("scope", &["host", "why"], &rows));
        }
    }
    if let Some(process) = &record.process {
        body.push_str("<h2>Envoy's process (pilot-agent's report)</h2>\n");
        let rows = vec![vec![
            esc(&process.restarts.to_string()),
            esc(&process.epoch.to_string()),
            esc(process.last_exit.as_deref().unwrap_or("")),
        ]];
        body.push_str(&table(
            "process",
            &["restarts", "epoch", "last unexpected exit"],
            &rows,
        ));
    }
    let _ = view;
    page(&format!("Proxy {}", record.node_id), &body)
}

/// A page for what is not there (404).
pub(crate) fn not_found(what: &str) -> String {
    page(
        "Not found",
        &format!("<p>{}</p><p>{}</p>", esc(what), link("/ui", "the overview")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_analyze::Severity;

    fn finding(code: &'static str, path: &str) -> Finding {
        Finding {
            code,
            severity: Severity::Warning,
            kind: "VirtualService".into(),
            namespace: "default".into(),
            name: "reviews".into(),
            path: path.into(),
            message: "an earlier route matches every request it matches".into(),
        }
    }

    #[test]
    fn a_compiled_route_is_found_in_its_virtual_service_by_name_else_by_order() {
        let spec = serde_json::json!({"http": [{"name": "jason"}, {}, {"name": "canary"}]});
        assert_eq!(http_index(&spec, Some("canary"), 1), 2);
        assert_eq!(http_index(&spec, Some("jason"), 0), 0);
        assert_eq!(http_index(&spec, None, 1), 1);
        // A name the spec does not have (it changed since): by order.
        assert_eq!(http_index(&spec, Some("gone"), 2), 2);
    }

    #[test]
    fn a_route_is_shadowed_by_the_finding_on_its_own_field_only() {
        let on_second = finding("PLT0211", "spec.http[1]");
        let on_tenth = finding("PLT0211", "spec.http[10].match[0]");
        let other = finding("PLT0210", "spec.http[0].match[0].gateways[0]");
        let findings = || vec![&on_second, &on_tenth, &other];
        assert_eq!(shadowed_by(findings(), Some(1)), Some(&on_second));
        assert_eq!(shadowed_by(findings(), Some(10)), Some(&on_tenth));
        // spec.http[1] is not spec.http[10]'s prefix, and other codes do
        // not shadow.
        assert_eq!(shadowed_by(vec![&on_tenth], Some(1)), None);
        assert_eq!(shadowed_by(findings(), Some(0)), None);
        // A v1alpha2 rule is one route: PLT0104 on it shadows it.
        let rule = finding("PLT0104", "spec.match");
        assert_eq!(shadowed_by(vec![&rule], None), Some(&rule));
    }
}
