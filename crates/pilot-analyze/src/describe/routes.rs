//! The routes of one service host, in the order that decides: taken from
//! pilot-routing's compiled model (what pilot-xds generates from), each
//! traced back to the object and field it came from, with what it wins
//! for or why it never wins, and its destinations' DestinationRules and
//! subsets.

use std::collections::BTreeMap;

use pilot_api::istio::RouteRule;
use pilot_api::networking::{DestinationRule, VirtualService};
use pilot_model::{Config, ConfigKind, DynConfig};
use pilot_routing::{HttpAction, MESH_GATEWAY, WeightedDestination};
use serde::Serialize;

use super::matches::{http_match_text, l4_match_text};
use super::{Context, ObjectRef, resolve};

/// One service host and what routes its traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceView {
    /// Its hostname.
    pub host: String,
    /// Its ports in the registry (`9080/http HTTP`; empty offline
    /// without `--services`).
    pub ports: Vec<String>,
    /// How many instances the registry has (none: unknown).
    pub instances: Option<usize>,
    /// The VirtualServices that name it, in the order pilot merges them
    /// (namespace, then name).
    pub virtual_services: Vec<VirtualServiceView>,
    /// The DestinationRule of the host (the first by namespace and name).
    pub destination_rule: Option<ObjectRef>,
    /// HTTP routes, first match wins.
    pub http: Vec<RouteView>,
    /// TCP routes, first match wins.
    pub tcp: Vec<RouteView>,
    /// TLS routes, first match wins.
    pub tls: Vec<RouteView>,
}

impl ServiceView {
    /// The objects it shows.
    pub(super) fn objects(&self) -> Vec<ObjectRef> {
        let mut out: Vec<ObjectRef> = self.virtual_services.iter().map(|v| v.object.clone()).collect();
        out.extend(self.destination_rule.clone());
        for route in self.http.iter().chain(&self.tcp).chain(&self.tls) {
            out.push(route.object.clone());
            out.extend(
                route
                    .destinations
                    .iter()
                    .filter_map(|d| d.destination_rule.clone()),
            );
        }
        out
    }

    /// Whether a destination is broken (a missing subset).
    pub(super) fn has_problem(&self) -> bool {
        self.http
            .iter()
            .chain(&self.tcp)
            .chain(&self.tls)
            .flat_map(|r| &r.destinations)
            .any(|d| d.problem.is_some())
    }
}

/// A VirtualService of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VirtualServiceView {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// Its gateways as written (empty: the mesh).
    pub gateways: Vec<String>,
    /// Whether sidecars use it (no gateways, or `mesh` among them).
    pub mesh: bool,
}

/// Whether a route is the one that decides for some requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouteState {
    /// It decides for the requests it matches that no earlier route took.
    Wins,
    /// An earlier route takes every request it matches.
    Shadowed,
    /// No request of a sidecar can match it.
    MatchesNothing,
}

impl std::fmt::Display for RouteState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RouteState::Wins => "wins",
            RouteState::Shadowed => "shadowed",
            RouteState::MatchesNothing => "matches nothing",
        })
    }
}

/// One route.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteView {
    /// Its place in the host's order, from 1.
    pub order: usize,
    /// The object it comes from.
    pub object: ObjectRef,
    /// The field (`spec.http[1]`; a RouteRule's is `spec`).
    pub path: String,
    /// Its `name`, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its matches, any of which admits a request (empty: every request).
    pub matches: Vec<String>,
    /// Whether it decides.
    pub state: RouteState,
    /// What it wins for, or why it does not (naming the route or finding
    /// that says so).
    pub reason: String,
    /// The codes of the findings that say so.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub codes: Vec<String>,
    /// Where it sends what it wins.
    pub destinations: Vec<DestinationView>,
}

/// A destination of a route.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DestinationView {
    /// The host.
    pub host: String,
    /// The subset, by name (VirtualServices) or labels (RouteRules).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subset: Option<String>,
    /// The labels of the subset.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub subset_labels: BTreeMap<String, String>,
    /// The port, when it names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// Its share of the route's traffic, in percent.
    pub weight: u32,
    /// The DestinationRule whose policy and subset it uses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_rule: Option<ObjectRef>,
    /// What is wrong with it (a missing subset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The host `host` and its routes.
pub(super) fn service(context: &Context<'_>, host: &str) -> ServiceView {
    let domain = context.input.domain;
    let objects = context.input.objects;
    let virtual_services = sorted::<VirtualService>(objects);
    let rules = sorted::<DestinationRule>(objects);
    let route_rules = sorted::<RouteRule>(objects);
    let names_host = |vs: &Config<VirtualService>| {
        vs.spec
            .hosts
            .iter()
            .any(|h| resolve(h, &vs.meta.namespace, domain) == host)
    };
    let mine: Vec<&Config<VirtualService>> = virtual_services.iter().filter(|vs| names_host(vs)).collect();
    let registered = context.input.registry.and_then(|r| r.services.get(host));
    let mut view = ServiceView {
        host: host.to_string(),
        ports: registered
            .map(|s| {
                s.ports
                    .iter()
                    .map(|(n, name, p)| format!("{n}/{name} {p}"))
                    .collect()
            })
            .unwrap_or_default(),
        instances: registered.map(|s| s.instances.len()),
        virtual_services: mine
            .iter()
            .map(|vs| VirtualServiceView {
                object: reference(*vs),
                gateways: vs.spec.gateways.clone(),
                mesh: applies_to_mesh(vs),
            })
            .collect(),
        destination_rule: rules
            .iter()
            .find(|r| resolve(&r.spec.host, &r.meta.namespace, domain) == host)
            .map(reference),
        ..Default::default()
    };
    let ports: Option<Vec<u16>> = registered.map(|s| s.ports.iter().map(|p| p.0).collect());
    let tracer = Tracer {
        context,
        host,
        virtual_services: &mine,
        route_rules: &route_rules,
        rules: &rules,
        ports: ports.as_deref(),
    };

    let Some(compiled) = context.model.routes(host) else {
        view.http = tracer.gateway_only();
        for (i, route) in view.http.iter_mut().enumerate() {
            route.order = i + 1;
        }
        return view;
    };
    // HTTP: the compiled order, each route traced to its field.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut catch_all: Option<(String, String)> = None;
    for (i, route) in compiled.http.iter().enumerate() {
        // A named route's compiled name is `namespace/name/route`.
        let owner = tracer.owner(&route.name);
        let index = seen.entry(owner.clone()).or_default();
        let k = *index;
        *index += 1;
        let (object, path, name, destinations) = tracer.http_source(&owner, k, route);
        let matches: Vec<String> = route.matches.iter().map(http_match_text).collect();
        let (state, reason, codes) = tracer.verdict(
            &object,
            &path,
            &matches,
            catch_all.as_ref(),
            route.matches.iter().map(|m| (&m.gateways, m.port)).collect(),
        );
        if route.matches.is_empty() && catch_all.is_none() {
            catch_all = Some((format!("{object}"), path.clone()));
        }
        view.http.push(RouteView {
            order: i + 1,
            object,
            path,
            name,
            matches,
            state,
            reason,
            codes,
            destinations,
        });
    }
    let mut rest = tracer.gateway_only();
    for (i, route) in rest.iter_mut().enumerate() {
        route.order = view.http.len() + i + 1;
    }
    view.http.extend(rest);
    // TCP and TLS.
    for (field, routes, out) in [
        (
            "tcp",
            compiled
                .tcp
                .iter()
                .map(|r| (&r.name, &r.matches, &r.destinations))
                .collect::<Vec<_>>(),
            &mut view.tcp,
        ),
        (
            "tls",
            compiled
                .tls
                .iter()
                .map(|r| (&r.name, &r.matches, &r.destinations))
                .collect::<Vec<_>>(),
            &mut view.tls,
        ),
    ] {
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        let mut catch_all: Option<(String, String)> = None;
        for (i, (name, matches, targets)) in routes.into_iter().enumerate() {
            let owner = tracer.owner(name);
            let index = seen.entry(owner.clone()).or_default();
            let k = *index;
            *index += 1;
            let (object, path, destinations) = tracer.l4_source(&owner, field, k, targets);
            let texts: Vec<String> = matches.iter().map(l4_match_text).collect();
            let (state, reason, codes) = tracer.verdict(
                &object,
                &path,
                &texts,
                catch_all.as_ref(),
                matches.iter().map(|m| (&m.gateways, m.port)).collect(),
            );
            if matches.is_empty() && catch_all.is_none() {
                catch_all = Some((format!("{object}"), path.clone()));
            }
            out.push(RouteView {
                order: i + 1,
                object,
                path,
                name: None,
                matches: texts,
                state,
                reason,
                codes,
                destinations,
            });
        }
    }
    view
}

/// Traces a host's compiled routes back to their objects and fields.
pub(super) struct Tracer<'a> {
    pub(super) context: &'a Context<'a>,
    host: &'a str,
    virtual_services: &'a [&'a Config<VirtualService>],
    route_rules: &'a [Config<RouteRule>],
    pub(super) rules: &'a [Config<DestinationRule>],
    ports: Option<&'a [u16]>,
}

impl Tracer<'_> {
    /// The `namespace/name` of the mesh VirtualService a compiled route
    /// named `name` comes from (`namespace/name` or
    /// `namespace/name/route`), else `name`.
    fn owner(&self, name: &str) -> String {
        self.virtual_services
            .iter()
            .filter(|vs| applies_to_mesh(vs))
            .map(|vs| format!("{}/{}", vs.meta.namespace, vs.meta.name))
            .find(|key| {
                name == key
                    || name
                        .strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .unwrap_or_else(|| name.to_string())
    }

    /// The VirtualService (mesh-bound) named `namespace/name`.
    fn virtual_service(&self, name: &str) -> Option<&Config<VirtualService>> {
        self.virtual_services
            .iter()
            .find(|vs| format!("{}/{}", vs.meta.namespace, vs.meta.name) == name && applies_to_mesh(vs))
            .copied()
    }

    /// The `k`th compiled HTTP route of `name`: its object, field, name
    /// and destinations.
    fn http_source(
        &self,
        name: &str,
        k: usize,
        route: &pilot_routing::HttpRoute,
    ) -> (ObjectRef, String, Option<String>, Vec<DestinationView>) {
        if let Some(vs) = self.virtual_service(name)
            && let Some(http) = vs.spec.http.get(k)
        {
            let single = http.route.len() == 1;
            let destinations = http
                .route
                .iter()
                .map(|d| self.destination(vs, &d.destination, d.weight, single))
                .collect();
            let name = (!http.name.is_empty()).then(|| http.name.clone());
            return (reference(vs), format!("spec.http[{k}]"), name, destinations);
        }
        let object = self
            .route_rules
            .iter()
            .find(|r| format!("{}/{}", r.meta.namespace, r.meta.name) == name)
            .map(reference)
            .unwrap_or_else(|| unknown(name));
        let destinations = match &route.action {
            HttpAction::Route(targets) => targets.iter().map(|t| self.compiled_destination(t)).collect(),
            _ => Vec::new(),
        };
        (object, "spec".to_string(), None, destinations)
    }

    /// The `k`th compiled TCP or TLS route of `name`.
    fn l4_source(
        &self,
        name: &str,
        field: &str,
        k: usize,
        targets: &[WeightedDestination],
    ) -> (ObjectRef, String, Vec<DestinationView>) {
        if let Some(vs) = self.virtual_service(name) {
            let routes = if field == "tcp" {
                vs.spec.tcp.get(k).map(|r| &r.route)
            } else {
                vs.spec.tls.get(k).map(|r| &r.route)
            };
            if let Some(routes) = routes {
                let single = routes.len() == 1;
                let destinations = routes
                    .iter()
                    .map(|d| self.destination(vs, &d.destination, d.weight, single))
                    .collect();
                return (reference(vs), format!("spec.{field}[{k}]"), destinations);
            }
        }
        (
            unknown(name),
            "spec".to_string(),
            targets.iter().map(|t| self.compiled_destination(t)).collect(),
        )
    }

    /// The routes of the host's VirtualServices bound only to gateways:
    /// sidecars never use them.
    fn gateway_only(&self) -> Vec<RouteView> {
        let mut out = Vec::new();
        for vs in self.virtual_services.iter().filter(|vs| !applies_to_mesh(vs)) {
            for (k, http) in vs.spec.http.iter().enumerate() {
                let single = http.route.len() == 1;
                let path = format!("spec.http[{k}]");
                // What analyze says of its gateways (PLT0210: one that
                // does not exist).
                let object = reference(*vs);
                let said: Vec<&crate::Finding> = self.findings_at(&object, "spec.gateways").collect();
                let codes = said.iter().map(|f| f.code.to_string()).collect();
                let mut reason = format!(
                    "its VirtualService is bound only to gateways ({}): sidecars calling {} never use it",
                    vs.spec.gateways.join(", "),
                    self.host
                );
                for finding in &said {
                    reason.push_str(&format!(
                        "; {}: {} ({})",
                        finding.path, finding.message, finding.code
                    ));
                }
                out.push(RouteView {
                    order: 0,
                    object: reference(*vs),
                    path,
                    name: (!http.name.is_empty()).then(|| http.name.clone()),
                    matches: Vec::new(),
                    state: RouteState::MatchesNothing,
                    reason,
                    codes,
                    destinations: http
                        .route
                        .iter()
                        .map(|d| self.destination(vs, &d.destination, d.weight, single))
                        .collect(),
                });
            }
        }
        out
    }

    /// The findings of `object` at or under `path`.
    fn findings_at<'b>(
        &'b self,
        object: &'b ObjectRef,
        path: &'b str,
    ) -> impl Iterator<Item = &'b crate::Finding> {
        self.context.findings.iter().filter(move |f| {
            f.kind == object.kind
                && f.namespace == object.namespace
                && f.name == object.name
                && (f.path == path
                    || f.path.starts_with(&format!("{path}."))
                    || f.path.starts_with(&format!("{path}[")))
        })
    }

    /// Whether the route decides, and why.
    fn verdict(
        &self,
        object: &ObjectRef,
        path: &str,
        matches: &[String],
        catch_all: Option<&(String, String)>,
        conditions: Vec<(&Vec<String>, Option<u16>)>,
    ) -> (RouteState, String, Vec<String>) {
        // Shadowed, as analyze says: PLT0104 for a RouteRule, PLT0211 at
        // the route itself for a VirtualService route (PLT0211 at one of
        // its matches, `spec.http[i].match[k]`, leaves it the others).
        let shadowing = self.context.findings.iter().find(|f| {
            f.kind == object.kind
                && f.namespace == object.namespace
                && f.name == object.name
                && ((f.code == "PLT0104" && object.kind == RouteRule::KIND)
                    || (f.code == "PLT0211" && f.path == path))
        });
        if let Some(finding) = shadowing {
            return (
                RouteState::Shadowed,
                format!("{} ({})", finding.message, finding.code),
                vec![finding.code.to_string()],
            );
        }
        let dead_matches: Vec<&crate::Finding> = self
            .findings_at(object, path)
            .filter(|f| f.code == "PLT0211" && f.path.starts_with(&format!("{path}.match[")))
            .collect();
        // A catch-all of another object earlier in the merged order (one
        // object's own routes are analyze's to judge: PLT0211).
        if let Some((earlier, earlier_path)) = catch_all
            && *earlier != format!("{object}")
        {
            return (
                RouteState::Shadowed,
                format!(
                    "{earlier_path} of {earlier} comes first for {} and matches every request",
                    self.host
                ),
                Vec::new(),
            );
        }
        if !conditions.is_empty()
            && conditions
                .iter()
                .all(|(gateways, _)| !gateways.is_empty() && !gateways.iter().any(|g| g == MESH_GATEWAY))
        {
            return (
                RouteState::MatchesNothing,
                "every match names only gateways: sidecars never match it".to_string(),
                Vec::new(),
            );
        }
        if let Some(ports) = self.ports
            && !ports.is_empty()
            && !conditions.is_empty()
            && conditions
                .iter()
                .all(|(_, port)| port.is_some_and(|p| !ports.contains(&p)))
        {
            return (
                RouteState::MatchesNothing,
                format!("every match names a port {} does not have", self.host),
                Vec::new(),
            );
        }
        let mut reason = if matches.is_empty() {
            "every request no earlier route took".to_string()
        } else {
            format!(
                "requests matching {} that no earlier route took",
                matches.join(" or ")
            )
        };
        for finding in &dead_matches {
            reason.push_str(&format!(
                "; {}: {} ({})",
                finding.path, finding.message, finding.code
            ));
        }
        let codes = dead_matches.iter().map(|f| f.code.to_string()).collect();
        (RouteState::Wins, reason, codes)
    }
}

/// Whether sidecars use a VirtualService.
fn applies_to_mesh(vs: &Config<VirtualService>) -> bool {
    vs.spec.gateways.is_empty() || vs.spec.gateways.iter().any(|g| g == MESH_GATEWAY)
}

/// The typed objects of kind `K`, by namespace and name (one per name,
/// the last given).
fn sorted<K: ConfigKind>(objects: &[DynConfig]) -> Vec<Config<K>> {
    let mut typed: BTreeMap<(String, String), Config<K>> = BTreeMap::new();
    for object in objects.iter().filter(|o| o.meta.kind == K::id()) {
        if let Ok(config) = Config::<K>::from_dyn(object) {
            typed.insert((config.meta.namespace.clone(), config.meta.name.clone()), config);
        }
    }
    typed.into_values().collect()
}

pub(super) fn reference<K: ConfigKind>(config: &Config<K>) -> ObjectRef {
    ObjectRef {
        kind: K::id().into_owned(),
        namespace: config.meta.namespace.clone(),
        name: config.meta.name.clone(),
    }
}

/// An object known only by its compiled route's name (`namespace/name`).
fn unknown(name: &str) -> ObjectRef {
    let (namespace, name) = name.split_once('/').unwrap_or(("", name));
    ObjectRef {
        kind: String::new(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}
