//! `pilotctl analyze` checks of the Gateway API's kinds (HTTPRoute,
//! GRPCRoute, TLSRoute, TCPRoute and the Gateways they attach to):
//!
//! | code | severity | needs services | finding |
//! |---|---|---|---|
//! | `PLT0401` | error | no (a Gateway) / yes (a Service) | a route's `parentRefs` entry names a Gateway or Service that does not exist: the route attaches to nothing there |
//! | `PLT0402` | error | yes | a route's `backendRefs` entry names a Service that is not in the registry: requests for it fail (500) |
//! | `PLT0403` | warning | no | a Gateway listener that no route attaches to: it serves nothing |
//! | `PLT0404` | warning | no | an HTTPRoute or GRPCRoute routes a Service that a VirtualService for sidecars also routes: two objects decide one host's routes |
//! | `PLT0405` | warning | no | a rule's `sessionPersistence` asks for what the proxies do not do: an `absoluteTimeout` but for a `Permanent` cookie, or one session across several backends (each backend keeps its own sessions; the backend is chosen by weight first) |
//! | `PLT0406` | warning | no | a TLSRoute or TCPRoute (written at `v1alpha2`, which allows up to 16) has rules after its first: a stream has no request to choose a rule by, so only the first rule's backends take traffic |
//!
//! A reference's namespace is the route's unless it names one; a Service
//! is `name.namespace.<domain>`. A listener takes a route when the route
//! names its Gateway, and its `sectionName` and `port` (when given) are the
//! listener's; the listener's `allowedRoutes` admit the route's namespace
//! (`Same`, the default, or `All`; a `Selector` needs the namespaces'
//! labels, which files do not carry: such a listener is not reported) and
//! its kind (by default, the kinds of the listener's protocol).

use std::collections::BTreeSet;

use pilot_api::gateway_api::{
    CookieLifetimeType, FromNamespaces, Gateway, GrpcRoute, HttpRoute, Listener, ParentReference,
    SessionPersistence, SessionPersistenceType, TcpRoute, TlsRoute,
};
use pilot_api::networking::VirtualService;
use pilot_model::{Config, ConfigKind, DynConfig};

use pilot_routing::gateway_api_status::{listener_kinds, names_listener};

use super::networking::{resolve, typed};
use super::{Finding, Services, Severity, finding};

/// The Gateway API's group, which a parent reference names by default.
const GROUP: &str = pilot_api::gateway_api::GROUP;

/// One route of any of the four kinds, as these checks see it.
struct Route<'a> {
    /// The route's kind (`HTTPRoute`).
    kind: &'static str,
    namespace: &'a str,
    parents: Vec<&'a ParentReference>,
    /// Each backend: its field path, group, kind, name, namespace.
    backends: Vec<(String, &'a str, &'a str, &'a str, Option<&'a str>)>,
    finding: Box<dyn Fn(&'static str, Severity, String, String) -> Finding + 'a>,
}

fn route<'a, K: ConfigKind>(
    object: &'a Config<K>,
    parents: &'a Option<Vec<ParentReference>>,
    backends: Vec<(String, &'a str, &'a str, &'a str, Option<&'a str>)>,
) -> Route<'a> {
    Route {
        kind: K::KIND,
        namespace: &object.meta.namespace,
        parents: parents.iter().flatten().collect(),
        backends,
        finding: Box::new(move |code, severity, path, message| {
            finding(object, code, severity, path, message)
        }),
    }
}

/// Every Gateway API finding for `objects` into `out`.
pub(super) fn analyze(
    objects: &[DynConfig],
    services: Option<&Services>,
    domain: &str,
    out: &mut Vec<Finding>,
) {
    let gateways = typed::<Gateway>(objects);
    let http = typed::<HttpRoute>(objects);
    let grpc = typed::<GrpcRoute>(objects);
    let tls = typed::<TlsRoute>(objects);
    let tcp = typed::<TcpRoute>(objects);
    let mut routes = Vec::new();
    for object in &http {
        let mut backends = Vec::new();
        for (i, rule) in object.spec.rules_written.iter().flatten().enumerate() {
            for (j, b) in rule.backend_refs.iter().flatten().enumerate() {
                let path = format!("spec.rules[{i}].backendRefs[{j}]");
                backends.push((
                    path,
                    b.group.as_deref().unwrap_or(""),
                    b.kind.as_deref().unwrap_or("Service"),
                    b.name.as_str(),
                    b.namespace.as_deref(),
                ));
            }
        }
        routes.push(route(object, &object.spec.parent_refs, backends));
    }
    for object in &grpc {
        let mut backends = Vec::new();
        for (i, rule) in object.spec.rules.iter().flatten().enumerate() {
            for (j, b) in rule.backend_refs.iter().flatten().enumerate() {
                let path = format!("spec.rules[{i}].backendRefs[{j}]");
                backends.push((
                    path,
                    b.group.as_deref().unwrap_or(""),
                    b.kind.as_deref().unwrap_or("Service"),
                    b.name.as_str(),
                    b.namespace.as_deref(),
                ));
            }
        }
        routes.push(route(object, &object.spec.parent_refs, backends));
    }
    for object in &tls {
        later_stream_rules(object, object.spec.rules.len(), out);
        routes.push(route(
            object,
            &object.spec.parent_refs,
            stream_backends(&object.spec.rules),
        ));
    }
    for object in &tcp {
        later_stream_rules(object, object.spec.rules.len(), out);
        routes.push(route(
            object,
            &object.spec.parent_refs,
            stream_backends(&object.spec.rules),
        ));
    }

    for route in &routes {
        for (i, parent) in route.parents.iter().enumerate() {
            let namespace = parent.namespace.as_deref().unwrap_or(route.namespace);
            let path = format!("spec.parentRefs[{i}]");
            match (parent.group(), parent.kind()) {
                (GROUP, "Gateway")
                    if !gateways
                        .iter()
                        .any(|g| g.meta.namespace == namespace && g.meta.name == parent.name) =>
                {
                    out.push((route.finding)(
                        "PLT0401",
                        Severity::Error,
                        path,
                        format!(
                            "no Gateway {namespace}/{} exists: the route attaches to nothing there",
                            parent.name
                        ),
                    ));
                }
                ("", "Service") => {
                    let host = resolve(&parent.name, namespace, domain);
                    if let Some(services) = services
                        && !services.exists(&host)
                    {
                        out.push((route.finding)(
                            "PLT0401",
                            Severity::Error,
                            path,
                            format!(
                                "the Service {host} is not in the service registry: the route routes nothing"
                            ),
                        ));
                    }
                }
                _ => {}
            }
        }
        if let Some(services) = services {
            for (path, group, kind, name, backend_namespace) in &route.backends {
                if !group.is_empty() || *kind != "Service" {
                    continue;
                }
                let host = resolve(name, backend_namespace.unwrap_or(route.namespace), domain);
                if !services.exists(&host) {
                    out.push((route.finding)(
                        "PLT0402",
                        Severity::Error,
                        path.clone(),
                        format!("the Service {host} is not in the service registry: requests sent to it fail (500)"),
                    ));
                }
            }
        }
    }

    listeners_without_routes(&gateways, &routes, out);
    routes_beside_virtual_services(&http, &grpc, &typed::<VirtualService>(objects), domain, out);
    for object in &http {
        for (i, rule) in object.spec.rules_written.iter().flatten().enumerate() {
            let backends = rule.backend_refs.as_ref().map_or(0, Vec::len);
            sessions_not_kept(object, i, rule.session_persistence.as_ref(), backends, out);
        }
    }
    for object in &grpc {
        for (i, rule) in object.spec.rules.iter().flatten().enumerate() {
            let backends = rule.backend_refs.as_ref().map_or(0, Vec::len);
            sessions_not_kept(object, i, rule.session_persistence.as_ref(), backends, out);
        }
    }
}

/// PLT0405: what rule `index`'s `persistence` asks that the proxies do
/// not do (Envoy's stateful sessions have no lifetime for a header; they
/// keep a session on one endpoint of the backend the weights chose).
fn sessions_not_kept<K: ConfigKind>(
    object: &Config<K>,
    index: usize,
    persistence: Option<&SessionPersistence>,
    backends: usize,
    out: &mut Vec<Finding>,
) {
    let Some(persistence) = persistence else {
        return;
    };
    let path = format!("spec.rules[{index}].sessionPersistence");
    let mut warn = |at: String, message: &str| {
        out.push(finding(
            object,
            "PLT0405",
            Severity::Warning,
            at,
            message.to_string(),
        ));
    };
    if persistence.absolute_timeout.is_some() {
        if persistence.persistence_type() == SessionPersistenceType::Header {
            warn(
                format!("{path}.absoluteTimeout"),
                "a header-based session does not expire: the header names its endpoint as long as the client sends it",
            );
        } else if persistence.lifetime_type() == CookieLifetimeType::Session {
            warn(
                format!("{path}.absoluteTimeout"),
                "a Session cookie does not expire before the browser session ends: only a Permanent cookie \
                 lasts absoluteTimeout (its Max-Age)",
            );
        }
    }
    if backends > 1 {
        warn(
            path,
            "the rule has several backends: a session stays on one endpoint of the backend its request was sent to, \
             and each request's backend is chosen by weight first",
        );
    }
}

/// PLT0406: the rules of a TLSRoute or TCPRoute after its first, which
/// take no traffic.
fn later_stream_rules<K: ConfigKind>(object: &Config<K>, rules: usize, out: &mut Vec<Finding>) {
    for index in 1..rules {
        out.push(finding(
            object,
            "PLT0406",
            Severity::Warning,
            format!("spec.rules[{index}]"),
            format!(
                "a {} stream takes its route's first rule: a stream has no request to choose a rule by, \
                 so this rule's backends take no traffic",
                K::KIND
            ),
        ));
    }
}

fn stream_backends(
    rules: &[pilot_api::gateway_api::StreamRouteRule],
) -> Vec<(String, &str, &str, &str, Option<&str>)> {
    let mut backends = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        for (j, b) in rule.backend_refs.iter().enumerate() {
            backends.push((
                format!("spec.rules[{i}].backendRefs[{j}]"),
                b.group(),
                b.kind(),
                b.name.as_str(),
                b.namespace.as_deref(),
            ));
        }
    }
    backends
}

/// PLT0403: listeners no route attaches to.
fn listeners_without_routes(gateways: &[Config<Gateway>], routes: &[Route<'_>], out: &mut Vec<Finding>) {
    for gateway in gateways {
        for (i, listener) in gateway.spec.listeners.iter().enumerate() {
            let allowed = listener.allowed_routes();
            let from = allowed.namespaces().from();
            if from == FromNamespaces::Selector {
                continue;
            }
            let kinds: BTreeSet<String> = listener_kinds(listener).into_iter().map(|k| k.kind).collect();
            let attached = routes.iter().any(|route| {
                kinds.contains(route.kind)
                    && match from {
                        FromNamespaces::All => true,
                        FromNamespaces::Same => route.namespace == gateway.meta.namespace,
                        FromNamespaces::None | FromNamespaces::Selector => false,
                    }
                    && route
                        .parents
                        .iter()
                        .any(|parent| takes(gateway, listener, route, parent))
            });
            if !attached {
                out.push(finding(
                    gateway,
                    "PLT0403",
                    Severity::Warning,
                    format!("spec.listeners[{i}]"),
                    format!(
                        "no route attaches to the listener {:?}: it serves nothing",
                        listener.name
                    ),
                ));
            }
        }
    }
}

/// Whether `parent` of `route` names `listener` of `gateway`.
fn takes(
    gateway: &Config<Gateway>,
    listener: &Listener,
    route: &Route<'_>,
    parent: &ParentReference,
) -> bool {
    parent.group() == GROUP
        && parent.kind() == "Gateway"
        && parent.name == gateway.meta.name
        && parent.namespace.as_deref().unwrap_or(route.namespace) == gateway.meta.namespace
        && names_listener(parent, listener)
}

/// PLT0404: an HTTPRoute or GRPCRoute whose parent is a Service that a
/// VirtualService bound to sidecars (no `gateways`, or `mesh`) also
/// routes.
fn routes_beside_virtual_services(
    http: &[Config<HttpRoute>],
    grpc: &[Config<GrpcRoute>],
    virtual_services: &[Config<VirtualService>],
    domain: &str,
    out: &mut Vec<Finding>,
) {
    let for_sidecars: Vec<(&Config<VirtualService>, Vec<String>)> = virtual_services
        .iter()
        .filter(|vs| vs.spec.gateways.is_empty() || vs.spec.gateways.iter().any(|g| g == "mesh"))
        .map(|vs| {
            let hosts = vs
                .spec
                .hosts
                .iter()
                .map(|h| resolve(h, &vs.meta.namespace, domain))
                .collect();
            (vs, hosts)
        })
        .collect();
    let check = |parents: &Option<Vec<ParentReference>>,
                 namespace: &str,
                 report: &mut dyn FnMut(String, String)| {
        for (i, parent) in parents.iter().flatten().enumerate() {
            if !parent.group().is_empty() || parent.kind() != "Service" {
                continue;
            }
            let host = resolve(
                &parent.name,
                parent.namespace.as_deref().unwrap_or(namespace),
                domain,
            );
            for (vs, hosts) in &for_sidecars {
                if hosts.contains(&host) {
                    report(
                        format!("spec.parentRefs[{i}]"),
                        format!(
                            "the VirtualService {}/{} also routes {host} for sidecars: two objects decide this host's routes; write them in one",
                            vs.meta.namespace, vs.meta.name
                        ),
                    );
                }
            }
        }
    };
    for route in http {
        check(
            &route.spec.parent_refs,
            &route.meta.namespace,
            &mut |path, message| {
                out.push(finding(route, "PLT0404", Severity::Warning, path, message));
            },
        );
    }
    for route in grpc {
        check(
            &route.spec.parent_refs,
            &route.meta.namespace,
            &mut |path, message| {
                out.push(finding(route, "PLT0404", Severity::Warning, path, message));
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use pilot_model::document;

    use crate::{Services, analyze};

    const DOMAIN: &str = "svc.cluster.local";

    fn findings(text: &str, services: Option<&Services>) -> Vec<(String, String, String)> {
        let objects = document::parse("test.yaml", text, &pilot_api::default_registry()).unwrap();
        analyze(&objects, services, DOMAIN)
            .into_iter()
            .filter(|f| f.code.starts_with("PLT04"))
            .map(|f| (f.code.to_string(), format!("{}/{}", f.kind, f.name), f.path))
            .collect()
    }

    fn services(hosts: &[&str]) -> Services {
        Services {
            hosts: hosts
                .iter()
                .map(|h| (h.to_string(), vec![BTreeMap::new()]))
                .collect(),
            proxy_namespaces: None,
        }
    }

    const GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: web}\n\
        spec:\n  gatewayClassName: pilot\n  listeners:\n  - {name: http, protocol: HTTP, port: 80}\n  - {name: tcp, protocol: TCP, port: 9000}\n";

    #[test]
    fn session_persistence_the_proxies_do_not_keep_is_a_warning() {
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: shop, namespace: web}\n\
             spec:\n  parentRefs: [{group: \"\", kind: Service, name: shop}]\n  rules:\n  \
             - sessionPersistence: {sessionName: kept, absoluteTimeout: 1h, cookieConfig: {lifetimeType: Permanent}}\n    \
             backendRefs: [{name: shop, port: 80}]\n  \
             - sessionPersistence: {sessionName: idle}\n    backendRefs: [{name: shop, port: 80}]\n  \
             - sessionPersistence: {type: Header, absoluteTimeout: 1h}\n    backendRefs: [{name: shop, port: 80}]\n  \
             - sessionPersistence: {}\n    backendRefs: [{name: shop, port: 80}, {name: shop-v2, port: 80}]\n  \
             - sessionPersistence: {absoluteTimeout: 1h}\n    backendRefs: [{name: shop, port: 80}]\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: GRPCRoute\nmetadata: {name: calls, namespace: web}\n\
             spec:\n  parentRefs: [{group: \"\", kind: Service, name: shop}]\n  rules:\n  \
             - sessionPersistence: {type: Header, absoluteTimeout: 1m}\n    backendRefs: [{name: shop, port: 80}]\n";
        let found: Vec<(String, String, String)> = findings(text, None)
            .into_iter()
            .filter(|f| f.0 == "PLT0405")
            .collect();
        let route = "HTTPRoute.gateway.networking.k8s.io/shop".to_string();
        assert_eq!(
            found,
            [
                (
                    "PLT0405".into(),
                    "GRPCRoute.gateway.networking.k8s.io/calls".into(),
                    "spec.rules[0].sessionPersistence.absoluteTimeout".into()
                ),
                (
                    "PLT0405".into(),
                    route.clone(),
                    "spec.rules[2].sessionPersistence.absoluteTimeout".into()
                ),
                (
                    "PLT0405".into(),
                    route.clone(),
                    "spec.rules[3].sessionPersistence".into()
                ),
                (
                    "PLT0405".into(),
                    route,
                    "spec.rules[4].sessionPersistence.absoluteTimeout".into()
                ),
            ]
        );
    }

    #[test]
    fn the_rules_after_a_stream_route_s_first_are_a_warning() {
        let rules = "  rules:\n  - backendRefs: [{name: a, port: 9000}]\n  - backendRefs: [{name: b, port: 9000}]\n  \
             - backendRefs: [{name: c, port: 9000}]\n";
        let text = format!(
            "{GATEWAY}---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TCPRoute\nmetadata: {{name: db, namespace: web}}\n\
             spec:\n  parentRefs: [{{name: edge, sectionName: tcp}}]\n{rules}\
             ---\napiVersion: gateway.networking.k8s.io/v1alpha2\nkind: TLSRoute\nmetadata: {{name: sni, namespace: web}}\n\
             spec:\n  parentRefs: [{{name: edge}}]\n  rules:\n  - backendRefs: [{{name: a, port: 443}}]\n\
             ---\napiVersion: gateway.networking.k8s.io/v1\nkind: TCPRoute\nmetadata: {{name: one, namespace: web}}\n\
             spec:\n  parentRefs: [{{name: edge, sectionName: tcp}}]\n  rules:\n  - backendRefs: [{{name: a, port: 9000}}]\n"
        );
        let found: Vec<(String, String, String)> = findings(&text, None)
            .into_iter()
            .filter(|f| f.0 == "PLT0406")
            .collect();
        let route = "TCPRoute.gateway.networking.k8s.io/db".to_string();
        assert_eq!(
            found,
            [
                ("PLT0406".into(), route.clone(), "spec.rules[1]".into()),
                ("PLT0406".into(), route, "spec.rules[2]".into()),
            ]
        );
    }

    #[test]
    fn a_missing_parent_and_backend_are_errors_and_an_unused_listener_a_warning() {
        let text = format!(
            "{GATEWAY}---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: shop, namespace: web}}\n\
             spec:\n  parentRefs:\n  - {{name: edge}}\n  - {{name: nowhere}}\n  - {{group: \"\", kind: Service, name: cart}}\n  \
             rules:\n  - backendRefs:\n    - {{name: shop, port: 80}}\n    - {{name: gone, port: 80}}\n"
        );
        let services = services(&["shop.web.svc.cluster.local"]);
        let found = findings(&text, Some(&services));
        let route = "HTTPRoute.gateway.networking.k8s.io/shop".to_string();
        assert_eq!(
            found,
            [
                (
                    "PLT0403".to_string(),
                    "Gateway.gateway.networking.k8s.io/edge".to_string(),
                    "spec.listeners[1]".to_string()
                ),
                ("PLT0401".into(), route.clone(), "spec.parentRefs[1]".into()),
                ("PLT0401".into(), route.clone(), "spec.parentRefs[2]".into()),
                ("PLT0402".into(), route, "spec.rules[0].backendRefs[1]".into()),
            ]
        );
        // Without the registry, only what the files show.
        let found = findings(&text, None);
        assert_eq!(found.len(), 2, "{found:?}");
    }

    #[test]
    fn a_listener_takes_routes_of_its_namespace_kinds_section_and_port() {
        let route = |namespace: &str, kind: &str, parent: &str| {
            format!(
                "---\napiVersion: gateway.networking.k8s.io/v1\nkind: {kind}\nmetadata: {{name: r, namespace: {namespace}}}\n\
                 spec:\n  parentRefs:\n  - {parent}\n  rules:\n  - backendRefs:\n    - {{name: s, port: 80}}\n"
            )
        };
        let unused = |text: String| -> Vec<String> {
            findings(&text, None)
                .into_iter()
                .filter(|(code, _, _)| code == "PLT0403")
                .map(|(_, _, path)| path)
                .collect()
        };
        // Both listeners taken: an HTTPRoute on http, a TCPRoute on tcp.
        let both = format!(
            "{GATEWAY}{}{}",
            route("web", "HTTPRoute", "{name: edge}"),
            route("web", "TCPRoute", "{name: edge, sectionName: tcp}")
        );
        assert!(unused(both).is_empty());
        // Another namespace is not the listener's by default.
        let other = format!(
            "{GATEWAY}{}",
            route("shop", "HTTPRoute", "{name: edge, namespace: web}")
        );
        assert_eq!(unused(other), ["spec.listeners[0]", "spec.listeners[1]"]);
        // A port or section that is not the listener's.
        let port = format!(
            "{GATEWAY}{}",
            route("web", "HTTPRoute", "{name: edge, port: 8080}")
        );
        assert_eq!(unused(port), ["spec.listeners[0]", "spec.listeners[1]"]);
        // An HTTPRoute does not attach to the TCP listener.
        let kind = format!(
            "{GATEWAY}{}",
            route("web", "HTTPRoute", "{name: edge, sectionName: tcp}")
        );
        assert_eq!(unused(kind), ["spec.listeners[0]", "spec.listeners[1]"]);
    }

    #[test]
    fn an_httproute_and_a_virtual_service_for_one_service_are_reported() {
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: split, namespace: shop}\n\
            spec:\n  parentRefs:\n  - {group: \"\", kind: Service, name: cart, port: 80}\n  rules:\n  - backendRefs:\n    - {name: cart, port: 80}\n\
            ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: cart, namespace: shop}\n\
            spec:\n  hosts: [cart]\n  http:\n  - route:\n    - destination: {host: cart}\n\
            ---\napiVersion: networking.istio.io/v1\nkind: VirtualService\nmetadata: {name: edge-cart, namespace: shop}\n\
            spec:\n  hosts: [cart]\n  gateways: [edge]\n  http:\n  - route:\n    - destination: {host: cart}\n";
        let found = findings(text, None);
        assert_eq!(
            found,
            [(
                "PLT0404".to_string(),
                "HTTPRoute.gateway.networking.k8s.io/split".to_string(),
                "spec.parentRefs[0]".to_string()
            )]
        );
    }
}
