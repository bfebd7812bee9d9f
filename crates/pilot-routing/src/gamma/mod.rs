//! Compilation of the Gateway API's HTTPRoutes and GRPCRoutes whose parent
//! is a Service (GAMMA, the Gateway API for service mesh) into the routing
//! model: the routes of the Service's host, for every sidecar and
//! proxyless gRPC client that calls it.
//!
//! - A parentRef `{group: "", kind: Service, name, namespace?, port?}`
//!   names the host `name.namespace.<domain suffix>` (the namespace is the
//!   route's unless written); a `port` restricts the route to requests on
//!   that Service port. Other parents (Gateways) are not compiled here.
//! - A route in the Service's namespace is a producer route: it applies to
//!   every client. A route in another namespace is a consumer route: it
//!   applies only to clients in the route's namespace, and for them it
//!   replaces the Service's producer routes. A namespace's view
//!   ([`RoutingConfigs::visible_to`]) keeps what its clients see; the whole
//!   mesh's model keeps every route, consumer routes first, each match
//!   restricted to its route's namespace (`source_namespace`), and is not
//!   the one sidecars are served when a consumer route exists
//!   ([`RoutingConfigs::restricts_visibility`]).
//! - Each match of each rule is one route of the model, ordered across all
//!   rules of all routes of one host as the Gateway API orders them: an
//!   exact path, then a regular expression, then the longest path prefix;
//!   then a method match; then the most header matches; then the most
//!   query parameter matches; then the oldest route (`creationTimestamp`);
//!   then the route's namespace and name; then the rule's and the match's
//!   order. GRPCRoutes follow the host's HTTPRoutes, ordered by the length
//!   of the service matched, then of the method, then the most header
//!   matches, then as HTTPRoutes are. A rule without matches matches every
//!   request (`PathPrefix /`); a `PathPrefix` matches whole path segments.
//! - A request no rule matches is answered 404 (on the ports the routes
//!   apply to).
//! - A rule's backends are Services with a port; weight 0 sends nothing;
//!   the share of an invalid backend, or of a Service the registry does
//!   not hold, is answered 500. A
//!   rule with no backend that can take traffic (none, all invalid, or
//!   weights summing to 0) and no redirect answers 500, and so does a rule
//!   with an `ExtensionRef` or `ExternalAuth` filter, which pilot does not
//!   implement.
//! - Filters: request and response header modifiers, request redirect
//!   (scheme, hostname, port, path, status code), URL rewrite (hostname,
//!   path), request mirror (with its percent or fraction), CORS; a backend's own
//!   header modifiers apply to what is sent to it (a backend with another
//!   filter of its own takes no traffic). Timeouts:
//!   `request` is the route's timeout; `backendRequest` each try's (the
//!   route's when `request` is not written). A rule's `retry`
//!   (experimental) retries its `codes` and connection errors (failures,
//!   resets, refused streams), `attempts` times after the first try (1
//!   unless written), `backoff` apart.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use pilot_api::gateway_api::{
    GrpcRoute, GrpcRouteMatch, HttpRoute as GatewayHttpRoute, HttpRouteFilter, HttpRouteMatch,
    ParentReference, PathMatchType, RequestMirror,
};
use pilot_model::{Config, ConfigMeta};

use rules::{grpc_route, http_route};

pub(super) mod edge;
mod rules;

use super::{DirectResponse, HttpAction, HttpMatch, HttpRoute, RoutingConfigs, RoutingModel};

/// Adds the routes of the HTTPRoutes and GRPCRoutes attached to Services
/// to `model`, as `configs.viewer` (a namespace's view, or the whole mesh)
/// sees them.
pub(super) fn compile(configs: &RoutingConfigs, model: &mut RoutingModel) {
    let suffix = &configs.domain_suffix;
    let mut entries: Vec<Entry> = Vec::new();
    for route in &configs.http_routes {
        for parent in service_parents(&route.meta, route.spec.parent_refs.as_deref(), suffix) {
            for (r, rule) in route.spec.rules().iter().enumerate() {
                for (m, request) in rule.matches().iter().enumerate() {
                    entries.push(Entry {
                        key: Key::http(&route.meta, &parent, request, r, m),
                        host: parent.host.clone(),
                        route: http_route(&route.meta, &parent, rule, r, request, suffix, &|_, _| true),
                        parent: parent.clone(),
                    });
                }
            }
        }
    }
    for route in &configs.grpc_routes {
        for parent in service_parents(&route.meta, route.spec.parent_refs.as_deref(), suffix) {
            for (r, rule) in route.spec.rules.iter().flatten().enumerate() {
                let matches = rule
                    .matches
                    .clone()
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| vec![GrpcRouteMatch::default()]);
                for (m, request) in matches.iter().enumerate() {
                    entries.push(Entry {
                        key: Key::grpc(&route.meta, &parent, request, r, m),
                        host: parent.host.clone(),
                        route: grpc_route(&route.meta, &parent, rule, r, request, suffix, &|_, _| true),
                        parent: parent.clone(),
                    });
                }
            }
        }
    }
    let entries = visible(entries, configs.viewer.as_deref());
    let mut by_host: BTreeMap<String, Vec<Entry>> = BTreeMap::new();
    for entry in entries {
        by_host.entry(entry.host.clone()).or_default().push(entry);
    }
    for (host, mut entries) in by_host {
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        // What no rule matches is answered 404, on the ports (and for the
        // namespaces) the routes apply to; other ports of the Service
        // keep their default route.
        let mut unmatched: Vec<(Option<u16>, Option<String>)> = entries
            .iter()
            .flat_map(|e| &e.route.matches)
            .map(|m| (m.port, m.source_namespace.clone()))
            .collect();
        unmatched.sort();
        unmatched.dedup();
        let routes = &mut model.host_mut(&host).http;
        routes.extend(entries.into_iter().map(|e| e.route));
        routes.extend(unmatched.into_iter().map(|(port, source_namespace)| HttpRoute {
            name: NO_MATCH.to_string(),
            matches: vec![HttpMatch {
                port,
                source_namespace,
                ..Default::default()
            }],
            action: HttpAction::DirectResponse(DirectResponse {
                status: 404,
                body: None,
            }),
            ..Default::default()
        }));
    }
}

/// The name of the route answering 404 what no rule of a Service's
/// routes matches.
pub(super) const NO_MATCH: &str = "gateway-api/no-match";

/// Whether some route attached to a Service is a consumer route (in
/// another namespace than the Service's): then each namespace sees routes
/// of its own.
pub(super) fn has_consumer_routes(configs: &RoutingConfigs) -> bool {
    let suffix = &configs.domain_suffix;
    let http = configs
        .http_routes
        .iter()
        .flat_map(|r| service_parents(&r.meta, r.spec.parent_refs.as_deref(), suffix));
    let grpc = configs
        .grpc_routes
        .iter()
        .flat_map(|r| service_parents(&r.meta, r.spec.parent_refs.as_deref(), suffix));
    http.chain(grpc).any(|p| p.consumer)
}

/// The hosts an HTTPRoute names: its parent Services', its backends' and
/// its mirrors' (for the incremental compilation).
pub(super) fn http_route_hosts(route: &Config<GatewayHttpRoute>, suffix: &str) -> Vec<String> {
    let namespace = &route.meta.namespace;
    let mut hosts: Vec<String> = service_parents(&route.meta, route.spec.parent_refs.as_deref(), suffix)
        .into_iter()
        .map(|p| p.host)
        .collect();
    for rule in route.spec.rules_written.iter().flatten() {
        for backend in rule.backend_refs.iter().flatten() {
            hosts.push(service_host(
                &backend.name,
                backend.namespace.as_deref(),
                namespace,
                suffix,
            ));
            hosts.extend(http_mirror_hosts(backend.filters.as_deref(), namespace, suffix));
        }
        hosts.extend(http_mirror_hosts(rule.filters.as_deref(), namespace, suffix));
    }
    hosts
}

/// The hosts a GRPCRoute names, as [`http_route_hosts`].
pub(super) fn grpc_route_hosts(route: &Config<GrpcRoute>, suffix: &str) -> Vec<String> {
    let namespace = &route.meta.namespace;
    let mut hosts: Vec<String> = service_parents(&route.meta, route.spec.parent_refs.as_deref(), suffix)
        .into_iter()
        .map(|p| p.host)
        .collect();
    for rule in route.spec.rules.iter().flatten() {
        for backend in rule.backend_refs.iter().flatten() {
            hosts.push(service_host(
                &backend.name,
                backend.namespace.as_deref(),
                namespace,
                suffix,
            ));
        }
        let mirrors = rule
            .filters
            .iter()
            .flatten()
            .filter_map(|f| f.request_mirror.as_ref());
        hosts.extend(mirrors.filter_map(|m| mirror_host(m, namespace, suffix)));
    }
    hosts
}

/// A Service a route attaches to.
#[derive(Debug, Clone)]
struct ServiceParent {
    /// The Service's hostname.
    host: String,
    /// The Service port the route is restricted to.
    port: Option<u16>,
    /// The route is in another namespace than the Service's.
    consumer: bool,
    /// The route's namespace.
    route_namespace: String,
}

/// The Services among a route's parents, each once.
/// Whether some of `parents` is a Service: the route is compiled into
/// hosts' entries.
pub(super) fn names_service(parents: Option<&[ParentReference]>) -> bool {
    parents
        .unwrap_or_default()
        .iter()
        .any(|p| is_core(p.group()) && p.kind() == "Service")
}

fn service_parents(
    meta: &ConfigMeta,
    parents: Option<&[ParentReference]>,
    suffix: &str,
) -> Vec<ServiceParent> {
    let mut seen = BTreeSet::new();
    parents
        .unwrap_or_default()
        .iter()
        .filter(|p| is_core(p.group()) && p.kind() == "Service")
        .filter_map(|p| {
            let namespace = p.namespace.clone().unwrap_or_else(|| meta.namespace.clone());
            let port = match p.port {
                Some(port) => Some(u16::try_from(port).ok()?),
                None => None,
            };
            seen.insert((p.name.clone(), namespace.clone(), port))
                .then(|| ServiceParent {
                    host: format!("{}.{namespace}.{suffix}", p.name),
                    consumer: namespace != meta.namespace,
                    port,
                    route_namespace: meta.namespace.clone(),
                })
        })
        .collect()
}

/// The core API group, as a reference writes it.
fn is_core(group: &str) -> bool {
    group.is_empty() || group == "core"
}

fn service_host(name: &str, namespace: Option<&str>, route_namespace: &str, suffix: &str) -> String {
    format!("{name}.{}.{suffix}", namespace.unwrap_or(route_namespace))
}

fn http_mirror_hosts<'a>(
    filters: Option<&'a [HttpRouteFilter]>,
    namespace: &'a str,
    suffix: &'a str,
) -> impl Iterator<Item = String> + 'a {
    filters
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.request_mirror.as_ref())
        .filter_map(move |m| mirror_host(m, namespace, suffix))
}

fn mirror_host(mirror: &RequestMirror, namespace: &str, suffix: &str) -> Option<String> {
    let backend = mirror.backend_ref.as_ref()?;
    Some(service_host(
        &backend.name,
        backend.namespace.as_deref(),
        namespace,
        suffix,
    ))
}

/// One match of one rule, compiled, with where it goes in its host's
/// order.
struct Entry {
    key: Key,
    host: String,
    route: HttpRoute,
    parent: ServiceParent,
}

/// The entries `viewer`'s clients see (none: the whole mesh's model).
fn visible(entries: Vec<Entry>, viewer: Option<&str>) -> Vec<Entry> {
    let Some(viewer) = viewer else {
        return entries;
    };
    // The hosts for which the viewer's namespace has consumer routes:
    // those replace the Service's producer routes for its clients.
    let overridden: BTreeSet<String> = entries
        .iter()
        .filter(|e| e.parent.consumer && e.parent.route_namespace == viewer)
        .map(|e| e.host.clone())
        .collect();
    entries
        .into_iter()
        .filter(|e| {
            if e.parent.consumer {
                e.parent.route_namespace == viewer
            } else {
                !overridden.contains(&e.host)
            }
        })
        .map(|mut e| {
            // The view is the namespace's own: no match needs to name it.
            for m in &mut e.route.matches {
                m.source_namespace = None;
            }
            e
        })
        .collect()
}

/// Where a match goes among its host's, smallest first.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    /// Producer routes after consumer ones.
    producer: bool,
    /// GRPCRoutes after HTTPRoutes.
    grpc: bool,
    /// An exact path (0), a regular expression (1), a prefix (2).
    path_kind: u8,
    /// The longer path (or gRPC service) first.
    path_len: Reverse<usize>,
    /// The longer gRPC method first.
    method_len: Reverse<usize>,
    /// A method match first.
    no_method: bool,
    headers: Reverse<usize>,
    query_params: Reverse<usize>,
    /// The oldest route first; a route without a creation time last.
    created: (bool, Option<SystemTime>),
    namespace: String,
    name: String,
    rule: usize,
    at: usize,
}

impl Key {
    fn http(
        meta: &ConfigMeta,
        parent: &ServiceParent,
        request: &HttpRouteMatch,
        rule: usize,
        at: usize,
    ) -> Key {
        let path = request.path();
        Key {
            producer: !parent.consumer,
            grpc: false,
            path_kind: match path.match_type() {
                PathMatchType::Exact => 0,
                PathMatchType::RegularExpression => 1,
                _ => 2,
            },
            path_len: Reverse(path.value().len()),
            method_len: Reverse(0),
            no_method: request.method.is_none(),
            headers: Reverse(request.headers.as_ref().map_or(0, Vec::len)),
            query_params: Reverse(request.query_params.as_ref().map_or(0, Vec::len)),
            created: created(meta),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            rule,
            at,
        }
    }

    fn grpc(
        meta: &ConfigMeta,
        parent: &ServiceParent,
        request: &GrpcRouteMatch,
        rule: usize,
        at: usize,
    ) -> Key {
        let method = request.method.as_ref();
        let len = |s: Option<&String>| s.map_or(0, String::len);
        Key {
            producer: !parent.consumer,
            grpc: true,
            path_kind: 0,
            path_len: Reverse(len(method.and_then(|m| m.service.as_ref()))),
            method_len: Reverse(len(method.and_then(|m| m.method.as_ref()))),
            no_method: true,
            headers: Reverse(request.headers.as_ref().map_or(0, Vec::len)),
            query_params: Reverse(0),
            created: created(meta),
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            rule,
            at,
        }
    }
}

fn created(meta: &ConfigMeta) -> (bool, Option<SystemTime>) {
    (meta.creation_timestamp.is_none(), meta.creation_timestamp)
}

#[cfg(test)]
mod tests;
