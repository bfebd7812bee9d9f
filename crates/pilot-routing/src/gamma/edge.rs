//! The Gateway API's Gateways at the edge: each listener of a Gateway
//! whose GatewayClass names pilot's controller
//! ([`CONTROLLER_NAME`](crate::gateway_api_status::CONTROLLER_NAME)) is a
//! server of the router proxies that run in the Gateway's namespace with
//! the label [`GATEWAY_NAME_LABEL`] naming it, with the HTTPRoutes and
//! GRPCRoutes attached to it:
//!
//! - A route attaches to a listener its parentRef names (the Gateway, and
//!   the listener's `sectionName` and `port` when written) that admits
//!   the route's kind and namespace (`allowedRoutes`; a namespace
//!   `Selector` by `kubernetes.io/metadata.name` only), when its
//!   hostnames and the listener's meet
//!   ([`gateway_api_status`](crate::gateway_api_status) says the same in
//!   the route's status).
//! - Each hostname the two share (the more specific of a pair, the
//!   listener's when the route names none, the route's when the listener
//!   names none, `*` when neither does) is a virtual host whose routes
//!   are those of every route attached there, in the Gateway API's
//!   precedence (as for routes attached to a Service, `mod.rs`).
//! - Listeners on one port are isolated: a hostname belongs to the
//!   listener whose hostname matches it most specifically (equal, then
//!   the longest wildcard, then none), and only routes attached through
//!   that listener serve it.
//! - A backend in another namespace than its route's takes traffic only
//!   under a ReferenceGrant of that namespace naming the route's kind and
//!   namespace; without one, its share is answered 500.
//! - A redirect without a port, on a listener of another port than 80 (to
//!   which requests come with the port in their Host), goes to its
//!   scheme's port when it names a scheme (written in the location:
//!   `https://example.org:443/`), else to the listener's port.
//! - A `TCP` listener sends every connection to the first (oldest)
//!   TCPRoute attached to it; a `TLS` listener routes connections by their
//!   SNI to the TLSRoutes attached, each for the hostnames it and the
//!   listener share: passing TLS through (`mode: Passthrough`), or ending
//!   it with the listener's certificate and sending the backends what it
//!   carried (`mode: Terminate`).
//!   A stream route's backends are those of its rule, by weight, the
//!   Services it may refer to.
//! - Served: `HTTP` and `TCP` listeners, `HTTPS` listeners terminating
//!   TLS, and `TLS` listeners passing TLS through or terminating it. A
//!   listener terminating TLS does so with its first `certificateRefs`
//!   Secret (of the Gateway's namespace, or another's under a
//!   ReferenceGrant; not served while a reference does not resolve),
//!   which the ADS server sends the router proxies over SDS as
//!   `kubernetes://<namespace>/<name>`; an `HTTPS` listener's own filter
//!   chain matches the SNI of its hostname, a `TLS` one's each route's
//!   hostnames.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use pilot_api::gateway_api::{BackendRef, Gateway, Listener, ParentReference, StreamRouteRule, TlsMode};
use pilot_model::{CaBundleName, Config, ConfigMeta, CredentialName, Labels, Protocol};

use super::super::gateway::intersect;
use super::super::gateway_api_status::{
    accepted_class, admits, backend_client_certificate_ref, certificate_refs, client_validation, granted,
    names_listener, not_taken,
};
use super::super::{
    DirectResponse, GatewayHost, HttpAction, HttpRoute, IngressServer, L4Match, RouteDestination,
    RoutingConfigs, RoutingModel, ServerHost, ServerTls, ServerTlsMode, TcpRoute, TlsRoute,
    WeightedDestination, hash_key,
};
use super::rules::{Permitted, grpc_route, http_route};
use super::{Key, ServiceParent};

/// The label of the router proxies serving a Gateway: its value is the
/// Gateway's name (the proxies run in the Gateway's namespace).
pub const GATEWAY_NAME_LABEL: &str = "gateway.networking.k8s.io/gateway-name";

const GROUP: &str = pilot_api::gateway_api::GROUP;

/// Whether some of `parents` is a Gateway API Gateway: the route is
/// compiled with the edge's servers.
pub(crate) fn at_gateway(parents: Option<&[ParentReference]>) -> bool {
    parents
        .unwrap_or_default()
        .iter()
        .any(|p| p.group() == GROUP && p.kind() == "Gateway")
}

/// Whether `listener` is served to router proxies: HTTP, TCP, HTTPS and
/// TLS terminating TLS with certificates (when they resolve:
/// [`certificate_refs`]), and TLS passed through.
pub(crate) fn served(listener: &Listener) -> bool {
    let terminates = || {
        listener.tls.as_ref().is_some_and(|t| {
            t.mode() == TlsMode::Terminate
                && t.certificate_refs.as_deref().is_some_and(|refs| !refs.is_empty())
        })
    };
    match listener.protocol.as_str() {
        "HTTP" | "TCP" => true,
        "HTTPS" => terminates(),
        "TLS" => passes_through(listener) || terminates(),
        _ => false,
    }
}

/// Whether `listener` is a TLS listener passing TLS through.
fn passes_through(listener: &Listener) -> bool {
    listener.protocol == "TLS"
        && listener
            .tls
            .as_ref()
            .is_some_and(|t| t.mode() == TlsMode::Passthrough)
}

/// Pilot's Gateways (of a GatewayClass naming pilot's controller that
/// pilot accepts), by namespace and name.
fn ours(configs: &RoutingConfigs) -> Vec<&Config<Gateway>> {
    let classes: BTreeSet<&str> = configs
        .gateway_classes
        .iter()
        .filter(|c| accepted_class(c))
        .map(|c| c.meta.name.as_str())
        .collect();
    let mut gateways: Vec<&Config<Gateway>> = configs
        .api_gateways
        .iter()
        .map(|g| &**g)
        .filter(|g| classes.contains(g.spec.gateway_class_name.as_str()))
        // One whose parameters pilot cannot read, or asking for an address
        // of a type pilot does not give, is not taken (its status says
        // InvalidParameters, UnsupportedAddress).
        .filter(|g| not_taken(g).is_none())
        .collect();
    gateways.sort_by(|a, b| (&a.meta.namespace, &a.meta.name).cmp(&(&b.meta.namespace, &b.meta.name)));
    gateways
}

/// Adds a server per served listener of pilot's Gateways to `model`.
pub(in super::super) fn compile(configs: &RoutingConfigs, model: &mut RoutingModel) {
    for gateway in ours(configs) {
        compile_gateway(configs, gateway, model);
    }
}

/// An HTTPRoute or GRPCRoute as far as its attachment goes.
pub(in super::super) struct RouteRef<'a> {
    kind: &'static str,
    meta: &'a ConfigMeta,
    parents: Option<&'a [ParentReference]>,
    hostnames: &'a [String],
}

impl<'a> RouteRef<'a> {
    pub(in super::super) fn http(route: &'a Config<pilot_api::gateway_api::HttpRoute>) -> Self {
        RouteRef {
            kind: "HTTPRoute",
            meta: &route.meta,
            parents: route.spec.parent_refs.as_deref(),
            hostnames: route.spec.hostnames.as_deref().unwrap_or_default(),
        }
    }

    pub(in super::super) fn grpc(route: &'a Config<pilot_api::gateway_api::GrpcRoute>) -> Self {
        RouteRef {
            kind: "GRPCRoute",
            meta: &route.meta,
            parents: route.spec.parent_refs.as_deref(),
            hostnames: route.spec.hostnames.as_deref().unwrap_or_default(),
        }
    }
}

/// Compiles again into `model`, a model of the same Gateways,
/// GatewayClasses and ReferenceGrants compiled before `changed` changed,
/// the virtual hosts of pilot's Gateways that those HTTPRoutes and
/// GRPCRoutes (each as it is now and as it was) attach to; every other
/// virtual host is kept. `false` (and `model` partly changed) when that
/// cannot be done host by host: a host of an `HTTPS` listener sharing its
/// port with another (which answers the other's hostnames, [`misdirected`]).
pub(in super::super) fn recompile_hosts(
    configs: &RoutingConfigs,
    changed: &[RouteRef<'_>],
    model: &mut RoutingModel,
) -> bool {
    for gateway in ours(configs) {
        let listeners = &gateway.spec.listeners;
        let mut only: Vec<BTreeSet<String>> = vec![BTreeSet::new(); listeners.len()];
        for route in changed {
            for (i, host) in attachments(gateway, route) {
                only[i].insert(host);
            }
        }
        if only.iter().all(BTreeSet::is_empty) {
            continue;
        }
        for (i, listener) in listeners.iter().enumerate() {
            if !only[i].is_empty() && listener.protocol == "HTTPS" && shares_https_port(listeners, i) {
                return false;
            }
        }
        let name = format!("{}/{}", gateway.meta.namespace, gateway.meta.name);
        let attached = attached_routes(configs, gateway, Some(&only));
        for ((listener, hosts), only) in listeners.iter().zip(attached).zip(&only) {
            if only.is_empty() {
                continue;
            }
            let Some(server) = model
                .ingress
                .iter_mut()
                .find(|s| s.gateway == name && s.port_name == listener.name)
            else {
                // Not served (a certificate that does not resolve).
                continue;
            };
            let port = server.port;
            let mut fresh = virtual_hosts(hosts, port);
            for route in fresh.iter_mut().flat_map(|h| &mut h.routes) {
                route.hash = hash_key(&model.destinations, route);
            }
            server.virtual_hosts.retain(|h| !only.contains(&h.host));
            server.virtual_hosts.extend(fresh.into_iter().map(Arc::new));
            server.virtual_hosts.sort_by(|a, b| a.host.cmp(&b.host));
        }
    }
    true
}

/// Whether another served `HTTPS` listener shares listener `index`'s port.
fn shares_https_port(listeners: &[Listener], index: usize) -> bool {
    let listener = &listeners[index];
    listeners
        .iter()
        .enumerate()
        .any(|(i, l)| i != index && l.port == listener.port && l.protocol == "HTTPS" && served(l))
}

/// A route's matches compiled, each with its place in its host's order.
type Compiled = Vec<(Key, HttpRoute)>;

/// Where `route` attaches to `gateway`: (listener index, hostname), once
/// each.
fn attachments(gateway: &Config<Gateway>, route: &RouteRef<'_>) -> Vec<(usize, String)> {
    let listeners = &gateway.spec.listeners;
    let namespace = &route.meta.namespace;
    let mut out = Vec::new();
    for reference in names_gateway(route.parents, gateway, namespace) {
        for (i, listener) in listeners.iter().enumerate() {
            if !served(listener)
                || !names_listener(reference, listener)
                || !admits(listener, route.kind, namespace, &gateway.meta.namespace)
            {
                continue;
            }
            for host in shared_hostnames(listener.hostname.as_deref(), route.hostnames) {
                if owner(listeners, listener.port, &host) == Some(i) {
                    out.push((i, host));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `route` may attach on one of the hostnames `wanted`: where a
/// route attaches is one of its own hostnames, or, when it has none or a
/// wildcard among them, a listener's (the intersection of two hostnames
/// is one of the two).
fn may_attach(route: &RouteRef<'_>, wanted: &BTreeSet<&str>) -> bool {
    route.hostnames.is_empty()
        || route
            .hostnames
            .iter()
            .any(|h| h.starts_with('*') || wanted.contains(h.as_str()))
}

/// Per listener of `gateway`, per hostname, the matches of the HTTPRoutes
/// and GRPCRoutes attached there; of the hostnames of `only` (per
/// listener) when given.
fn attached_routes(
    configs: &RoutingConfigs,
    gateway: &Config<Gateway>,
    only: Option<&[BTreeSet<String>]>,
) -> Vec<BTreeMap<String, Compiled>> {
    let suffix = &configs.domain_suffix;
    let mut attached: Vec<BTreeMap<String, Compiled>> = vec![BTreeMap::new(); gateway.spec.listeners.len()];
    let grants = || configs.reference_grants.iter().map(|g| &**g);
    // Every hostname of `only`: a route is looked at only if it may attach
    // on one of them (of thousands of routes, those naming a changed
    // hostname).
    let wanted: BTreeSet<&str> = only.into_iter().flatten().flatten().map(String::as_str).collect();
    let mut attach = |route: RouteRef<'_>, compile: &dyn Fn(&ServiceParent, Permitted<'_>) -> Compiled| {
        if only.is_some() && !may_attach(&route, &wanted) {
            return;
        }
        let meta = route.meta;
        let permitted = |namespace: &str, name: &str| {
            namespace == meta.namespace || granted(grants(), route.kind, &meta.namespace, namespace, name)
        };
        let parent = ServiceParent {
            host: String::new(),
            port: None,
            consumer: false,
            route_namespace: meta.namespace.clone(),
        };
        let mut compiled: Option<Compiled> = None;
        for (i, host) in attachments(gateway, &route) {
            if only.is_some_and(|only| !only[i].contains(&host)) {
                continue;
            }
            let routes = compiled.get_or_insert_with(|| compile(&parent, &permitted));
            attached[i]
                .entry(host)
                .or_default()
                .extend(routes.iter().cloned());
        }
    };
    for route in &configs.http_routes {
        attach(RouteRef::http(route), &|parent, permitted| {
            let mut out = Vec::new();
            for (r, rule) in route.spec.rules().iter().enumerate() {
                for (m, request) in rule.matches().iter().enumerate() {
                    out.push((
                        Key::http(&route.meta, parent, request, r, m),
                        http_route(&route.meta, parent, rule, r, request, suffix, permitted),
                    ));
                }
            }
            out
        });
    }
    for route in &configs.grpc_routes {
        attach(RouteRef::grpc(route), &|parent, permitted| {
            let mut out = Vec::new();
            for (r, rule) in route.spec.rules.iter().flatten().enumerate() {
                let matches = rule
                    .matches
                    .clone()
                    .filter(|m| !m.is_empty())
                    .unwrap_or_else(|| vec![Default::default()]);
                for (m, request) in matches.iter().enumerate() {
                    out.push((
                        Key::grpc(&route.meta, parent, request, r, m),
                        grpc_route(&route.meta, parent, rule, r, request, suffix, permitted),
                    ));
                }
            }
            out
        });
    }
    attached
}

/// A listener's virtual hosts from the matches attached per hostname, in
/// the Gateway API's precedence.
fn virtual_hosts(hosts: BTreeMap<String, Compiled>, port: u16) -> Vec<GatewayHost> {
    hosts
        .into_iter()
        .map(|(host, mut entries)| {
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            GatewayHost {
                host,
                routes: entries
                    .into_iter()
                    .map(|(_, mut route)| {
                        redirect_to_listener(&mut route, port);
                        route
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The servers of one Gateway's served listeners.
fn compile_gateway(configs: &RoutingConfigs, gateway: &Config<Gateway>, model: &mut RoutingModel) {
    let listeners = &gateway.spec.listeners;
    let grants = || configs.reference_grants.iter().map(|g| &**g);
    let attached = attached_routes(configs, gateway, None);
    let name = format!("{}/{}", gateway.meta.namespace, gateway.meta.name);
    let selector = Labels::from_pairs([(GATEWAY_NAME_LABEL, gateway.meta.name.as_str())]);
    let streams = Streams::attached(configs, gateway);
    // The client certificate its routers present to TLS backends, when
    // its reference may be followed (else they present none).
    let backend_client_credential = backend_client_certificate_ref(gateway, grants())
        .ok()
        .flatten()
        .map(|(namespace, name)| CredentialName::resource(namespace, name));
    for (index, (listener, hosts)) in listeners.iter().zip(attached).enumerate() {
        let Some(port) = listener.port.and_then(|p| u16::try_from(p).ok()) else {
            continue;
        };
        if !served(listener) || certificate_refs(listener, gateway, grants()).is_err() {
            continue;
        }
        let mut server = IngressServer::new(port);
        // A TLS listener's streams are opaque TCP, routed by SNI.
        server.protocol = match listener.protocol.as_str() {
            "TCP" | "TLS" => Protocol::Tcp,
            "HTTPS" => Protocol::Https,
            _ => Protocol::Http,
        };
        server.port_name = listener.name.clone();
        server.gateway = name.clone();
        server.selector = Some(selector.clone());
        server.namespace = Some(gateway.meta.namespace.clone());
        server.backend_client_credential = backend_client_credential.clone();
        server.hosts = vec![ServerHost::any(listener.hostname.as_deref().unwrap_or("*"))];
        if passes_through(listener) {
            server.tls = Some(ServerTls {
                mode: ServerTlsMode::Passthrough,
                ..Default::default()
            });
        }
        // Terminated with the first certificate, a Secret sent over SDS
        // as `kubernetes://<namespace>/<name>`.
        if let Some(reference) = terminated_with(listener) {
            let namespace = reference.namespace.as_deref().unwrap_or(&gateway.meta.namespace);
            let mut tls = ServerTls::credential(CredentialName::resource(namespace, &reference.name));
            // Clients verified by the Gateway's frontend ConfigMaps; a
            // listener none of whose references may be followed is not
            // served (its status says NoValidCACertificate).
            if let Some(validation) = client_validation(gateway, listener, grants()) {
                if validation.config_maps.is_empty() {
                    continue;
                }
                tls.mode = ServerTlsMode::Mutual;
                tls.client_ca_secret = Some(CaBundleName::resource(
                    &validation.namespace,
                    &validation.config_maps,
                ));
                tls.client_certificate_optional = validation.insecure_fallback;
            }
            server.tls = Some(tls);
        }
        server.tls_routes = streams.tls[index].clone();
        server.tcp_routes = streams.tcp[index].clone();
        let mut hosts = virtual_hosts(hosts, port);
        if listener.protocol == "HTTPS" {
            misdirected(listeners, index, &name, &mut hosts);
        }
        server.virtual_hosts = hosts.into_iter().map(Arc::new).collect();
        model.ingress.push(server);
    }
}

/// What an HTTPS listener answers a request whose Host another HTTPS
/// listener on its port owns (the connection's SNI chose this one): 421
/// Misdirected Request, so a client that reused a connection for another
/// name (HTTP/2 coalescing) asks again on a new one. The hostnames this
/// listener owns but no route serves are answered 404 as ever, even where
/// another listener's hostname is more general.
fn misdirected(listeners: &[Listener], index: usize, gateway: &str, hosts: &mut Vec<GatewayHost>) {
    let listener = &listeners[index];
    let others: Vec<&str> = listeners
        .iter()
        .enumerate()
        .filter(|(i, l)| *i != index && l.port == listener.port && l.protocol == "HTTPS" && served(l))
        .map(|(_, l)| l.hostname.as_deref().unwrap_or("*"))
        .collect();
    if others.is_empty() {
        return;
    }
    let answer = |status: u32, host: &str| GatewayHost {
        host: host.to_string(),
        routes: vec![HttpRoute {
            name: format!(
                "{gateway}/{}",
                if status == 421 { "misdirected" } else { "not-found" }
            ),
            action: HttpAction::DirectResponse(DirectResponse { status, body: None }),
            ..Default::default()
        }],
    };
    let mut add = |host: &str, status: u32| {
        if !hosts.iter().any(|h| h.host == host) {
            hosts.push(answer(status, host));
        }
    };
    if let Some(own) = listener.hostname.as_deref() {
        add(own, 404);
    }
    for other in others {
        add(other, 421);
    }
}

/// The certificate an HTTPS or TLS listener terminates TLS with: its
/// first `certificateRefs` entry (the Gateway API lets an implementation
/// use more, one per key type; pilot uses the first).
fn terminated_with(listener: &Listener) -> Option<&pilot_api::gateway_api::SecretObjectReference> {
    let tls = listener.tls.as_ref()?;
    if !matches!(listener.protocol.as_str(), "HTTPS" | "TLS") || tls.mode() != TlsMode::Terminate {
        return None;
    }
    tls.certificate_refs.as_deref()?.first()
}

/// The Gateway API's port of a redirect that names none: the port of its
/// scheme when it names one, else the port of the listener it was asked
/// on. On a listener of port 80 both are the request's (its Host names no
/// port) and the location names none; on another, the request's Host
/// names the listener's port, which a scheme replaces (Envoy writes the
/// scheme's port, `:443`: it has no way to leave it out) and a new
/// hostname would drop (Envoy keeps no port with another host).
fn redirect_to_listener(route: &mut HttpRoute, port: u16) {
    let HttpAction::Redirect(redirect) = &mut route.action else {
        return;
    };
    if redirect.port.is_some() || port == 80 {
        return;
    }
    match redirect.scheme {
        Some(_) => redirect.port_from_scheme = true,
        None => redirect.port = Some(port),
    }
}

/// Per listener of a Gateway, the TLSRoutes and TCPRoutes attached to
/// it, as routes of the model (oldest first, then by namespace and name).
struct Streams {
    tls: Vec<Vec<TlsRoute>>,
    tcp: Vec<Vec<TcpRoute>>,
}

impl Streams {
    fn attached(configs: &RoutingConfigs, gateway: &Config<Gateway>) -> Streams {
        let listeners = &gateway.spec.listeners;
        let mut out = Streams {
            tls: vec![Vec::new(); listeners.len()],
            tcp: vec![Vec::new(); listeners.len()],
        };
        let suffix = &configs.domain_suffix;
        let mut tls: Vec<_> = configs.api_tls_routes.iter().collect();
        tls.sort_by_key(|r| order(&r.meta));
        for route in tls {
            let meta = &route.meta;
            for (i, listener) in listeners.iter().enumerate() {
                if !attaches(
                    route.spec.parent_refs.as_deref(),
                    gateway,
                    meta,
                    listener,
                    "TLSRoute",
                ) {
                    continue;
                }
                let hostnames = route.spec.hostnames.as_deref().unwrap_or_default();
                let sni_hosts = shared_hostnames(listener.hostname.as_deref(), hostnames);
                if sni_hosts.is_empty() {
                    continue;
                }
                let sni_hosts = sni_hosts.into_iter().filter(|h| h != "*").collect();
                out.tls[i].push(TlsRoute {
                    name: format!("{}/{}", meta.namespace, meta.name),
                    matches: vec![L4Match {
                        sni_hosts,
                        ..Default::default()
                    }],
                    destinations: stream_destinations(configs, meta, "TLSRoute", &route.spec.rules, suffix),
                });
            }
        }
        let mut tcp: Vec<_> = configs.api_tcp_routes.iter().collect();
        tcp.sort_by_key(|r| order(&r.meta));
        for route in tcp {
            let meta = &route.meta;
            for (i, listener) in listeners.iter().enumerate() {
                if attaches(
                    route.spec.parent_refs.as_deref(),
                    gateway,
                    meta,
                    listener,
                    "TCPRoute",
                ) {
                    out.tcp[i].push(TcpRoute {
                        name: format!("{}/{}", meta.namespace, meta.name),
                        matches: Vec::new(),
                        destinations: stream_destinations(
                            configs,
                            meta,
                            "TCPRoute",
                            &route.spec.rules,
                            suffix,
                        ),
                    });
                }
            }
        }
        out
    }
}

/// A route's place among routes of its kind: the oldest first, then by
/// namespace and name.
fn order(meta: &ConfigMeta) -> (bool, Option<std::time::SystemTime>, String, String) {
    (
        meta.creation_timestamp.is_none(),
        meta.creation_timestamp,
        meta.namespace.clone(),
        meta.name.clone(),
    )
}

/// Whether a route of `kind` whose parents are `parents` attaches to
/// `listener` of `gateway`.
fn attaches(
    parents: Option<&[ParentReference]>,
    gateway: &Config<Gateway>,
    meta: &ConfigMeta,
    listener: &Listener,
    kind: &str,
) -> bool {
    served(listener)
        && admits(listener, kind, &meta.namespace, &gateway.meta.namespace)
        && names_gateway(parents, gateway, &meta.namespace).any(|p| names_listener(p, listener))
}

/// The destinations of a TLSRoute's or TCPRoute's rule (the first: a
/// stream has no request to tell rules apart) by weight: the Services it
/// may refer to (its own namespace's, another's under a ReferenceGrant).
fn stream_destinations(
    configs: &RoutingConfigs,
    meta: &ConfigMeta,
    kind: &str,
    rules: &[StreamRouteRule],
    suffix: &str,
) -> Vec<WeightedDestination> {
    let grants = configs.reference_grants.iter().map(|g| &**g);
    let permitted = |backend: &BackendRef| {
        let namespace = backend.namespace.as_deref().unwrap_or(&meta.namespace);
        namespace == meta.namespace
            || granted(grants.clone(), kind, &meta.namespace, namespace, &backend.name)
    };
    rules
        .first()
        .map(|rule| rule.backend_refs.as_slice())
        .unwrap_or_default()
        .iter()
        .filter(|b| b.group().is_empty() && b.kind() == "Service" && permitted(b))
        .filter_map(|b| {
            let weight = u32::try_from(b.weight()).ok().filter(|w| *w > 0)?;
            let namespace = b.namespace.as_deref().unwrap_or(&meta.namespace);
            let mut destination =
                RouteDestination::new(format!("{}.{namespace}.{suffix}", b.name), Default::default());
            destination.port = Some(u16::try_from(b.port?).ok()?);
            Some(WeightedDestination::new(destination, weight))
        })
        .collect()
}

/// The parentRefs among `parents` naming `gateway` (a route of
/// `namespace` names a Gateway of its own namespace unless it says
/// another).
fn names_gateway<'a>(
    parents: Option<&'a [ParentReference]>,
    gateway: &'a Config<Gateway>,
    namespace: &'a str,
) -> impl Iterator<Item = &'a ParentReference> + 'a {
    parents.unwrap_or_default().iter().filter(move |p| {
        p.group() == GROUP
            && p.kind() == "Gateway"
            && p.name == gateway.meta.name
            && p.namespace.as_deref().unwrap_or(namespace) == gateway.meta.namespace
    })
}

/// The hostnames a listener of `listener` hostname and a route of
/// `route` hostnames share: each pair that meets, the more specific of
/// the two.
pub(crate) fn shared_hostnames(listener: Option<&str>, route: &[String]) -> Vec<String> {
    let mut out: Vec<String> = match (listener, route.is_empty()) {
        (None, true) => vec!["*".to_string()],
        (Some(listener), true) => vec![listener.to_string()],
        (None, false) => route.to_vec(),
        (Some(listener), false) => route.iter().filter_map(|h| intersect(listener, h)).collect(),
    };
    out.sort();
    out.dedup();
    out
}

/// The listener on `port` whose hostname matches `host` most
/// specifically: an equal hostname, then the longest wildcard covering
/// it, then a listener without a hostname.
fn owner(listeners: &[Listener], port: Option<i32>, host: &str) -> Option<usize> {
    listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| l.port == port && served(l))
        .filter_map(|(i, l)| {
            let rank = match l.hostname.as_deref() {
                None => 0,
                Some(own) if own == host => usize::MAX,
                // A wildcard covering the host: they meet at the host.
                Some(own) if intersect(own, host).as_deref() == Some(host) => own.len(),
                Some(_) => return None,
            };
            Some((rank, std::cmp::Reverse(i)))
        })
        .max()
        .map(|(_, std::cmp::Reverse(i))| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IngressServer;
    use pilot_model::document;

    fn servers(text: &str) -> Vec<IngressServer> {
        let objects = document::parse("edge.yaml", text, &pilot_api::default_registry()).unwrap();
        RoutingConfigs::from_configs(&objects)
            .unwrap()
            .compile()
            .ingress_servers()
            .to_vec()
    }

    /// Per server (listener), its virtual hosts with their routes' names
    /// and the hosts they send to (none: answered without a backend).
    /// A virtual host: its host, and each route's name with the hosts it
    /// sends to.
    type Routed = (String, Vec<(String, Vec<String>)>);

    fn routed(server: &IngressServer) -> Vec<Routed> {
        server
            .virtual_hosts
            .iter()
            .map(|h| {
                let routes = h
                    .routes
                    .iter()
                    .map(|r| {
                        let hosts = match &r.action {
                            HttpAction::Route(to) => to.iter().map(|t| t.destination.host.clone()).collect(),
                            _ => Vec::new(),
                        };
                        (r.name.clone(), hosts)
                    })
                    .collect();
                (h.host.clone(), routes)
            })
            .collect()
    }

    const GATEWAYS: &str = "\
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pilot}
spec: {controllerName: pilot.io/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: infra}
spec:
  gatewayClassName: pilot
  listeners:
  - {name: any, protocol: HTTP, port: 80, allowedRoutes: {namespaces: {from: All}}}
  - {name: shop, protocol: HTTP, port: 80, hostname: shop.example.com}
  - {name: secure, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: theirs, namespace: infra}
spec:
  gatewayClassName: other
  listeners:
  - {name: http, protocol: HTTP, port: 80}
";

    /// pilot's GatewayClass and its Gateway `infra/edge` with `listeners`
    /// (YAML list items), then a document separator.
    fn edge_gateway(listeners: &str) -> String {
        format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: pilot}}\n\
             spec: {{controllerName: pilot.io/gateway-controller}}\n---\n\
             apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: infra}}\n\
             spec:\n  gatewayClassName: pilot\n  listeners:\n{listeners}---\n"
        )
    }

    fn route(name: &str, namespace: &str, parent: &str, hostnames: &str, backend: &str) -> String {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}}}\n\
             spec:\n  parentRefs: [{parent}]\n  hostnames: {hostnames}\n  rules:\n  - backendRefs: [{backend}]\n"
        )
    }

    #[test]
    fn https_listeners_of_a_port_answer_421_for_each_others_hostnames() {
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
                    spec: {controllerName: pilot.io/gateway-controller}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: infra}\n\
                    spec:\n  gatewayClassName: pilot\n  listeners:\n  \
                    - {name: any, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: cert}]}}\n  \
                    - {name: wild, protocol: HTTPS, port: 443, hostname: \"*.example.com\", tls: {certificateRefs: [{name: cert}]}}\n  \
                    - {name: shop, protocol: HTTPS, port: 443, hostname: shop.example.com, tls: {certificateRefs: [{name: cert}]}}\n  \
                    - {name: plain, protocol: HTTP, port: 443, hostname: plain.example.com}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: site, namespace: infra}\n\
                    spec:\n  parentRefs: [{name: edge, sectionName: wild}]\n  hostnames: [a.example.com]\n  \
                    rules: [{backendRefs: [{name: site, port: 8080}]}]\n";
        let servers = servers(text);
        let answers = |name: &str| -> Vec<(String, String)> {
            let server = servers.iter().find(|s| s.port_name == name).unwrap();
            server
                .virtual_hosts
                .iter()
                .map(|h| {
                    let answer = match &h.routes[0].action {
                        HttpAction::DirectResponse(direct) => direct.status.to_string(),
                        _ => "routed".to_string(),
                    };
                    (h.host.clone(), answer)
                })
                .collect()
        };
        let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
            list.iter().map(|(h, a)| (h.to_string(), a.to_string())).collect()
        };
        // The catch-all owns what the others do not: 421 for theirs.
        assert_eq!(
            answers("any"),
            pairs(&[("*.example.com", "421"), ("shop.example.com", "421")])
        );
        // Its own wildcard: its route, 404 for the rest it owns (not the
        // catch-all's 421), 421 for the exact listener's and everything else.
        assert_eq!(
            answers("wild"),
            pairs(&[
                ("a.example.com", "routed"),
                ("*.example.com", "404"),
                ("*", "421"),
                ("shop.example.com", "421")
            ])
        );
        assert_eq!(
            answers("shop"),
            pairs(&[
                ("shop.example.com", "404"),
                ("*", "421"),
                ("*.example.com", "421")
            ])
        );
    }

    #[test]
    fn a_gateway_naming_parameters_is_not_served() {
        let listeners = "  - {name: http, protocol: HTTP, port: 80}\n";
        assert_eq!(servers(&edge_gateway(listeners)).len(), 1);
        let with_parameters = edge_gateway(listeners).replace(
            "  gatewayClassName: pilot\n",
            "  gatewayClassName: pilot\n  infrastructure: {parametersRef: {group: example.com, kind: Params, name: p}}\n",
        );
        assert!(with_parameters.contains("parametersRef"));
        assert!(servers(&with_parameters).is_empty());
    }

    #[test]
    fn a_redirect_without_port_or_scheme_goes_to_its_listeners_port() {
        let text = edge_gateway(
            "  - {name: http, protocol: HTTP, port: 80}
  - {name: alt, protocol: HTTP, port: 8080}
",
        ) + "\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: moved, namespace: infra}
spec:
  parentRefs: [{name: edge}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /host}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: example.org}}]
  - matches: [{path: {type: PathPrefix, value: /scheme}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https}}]
  - matches: [{path: {type: PathPrefix, value: /port}}]
    filters: [{type: RequestRedirect, requestRedirect: {port: 8443}}]
";
        // Per listener's port, each route's redirect port, scheme and
        // whether the port is the scheme's.
        type Redirects = Vec<(Option<u16>, Option<String>, bool)>;
        let redirects: BTreeMap<u16, Redirects> = servers(&text)
            .iter()
            .map(|server| {
                let redirects = server.virtual_hosts[0]
                    .routes
                    .iter()
                    .map(|route| match &route.action {
                        HttpAction::Redirect(r) => (r.port, r.scheme.clone(), r.port_from_scheme),
                        other => panic!("{other:?}"),
                    })
                    .collect();
                (server.port, redirects)
            })
            .collect();
        let https = || Some("https".to_string());
        assert_eq!(
            redirects,
            BTreeMap::from([
                // HTTP's own port is left out of the location.
                (
                    80,
                    vec![
                        (None, https(), false),
                        (None, None, false),
                        (Some(8443), None, false)
                    ]
                ),
                (
                    8080,
                    vec![
                        (None, https(), true),
                        (Some(8080), None, false),
                        (Some(8443), None, false)
                    ]
                ),
            ]),
            "routes by their prefixes' precedence: /scheme, /host, /port"
        );
    }

    #[test]
    fn pilots_gateways_listeners_serve_the_routes_attached_to_them() {
        let text = format!(
            "{GATEWAYS}{}{}{}{}",
            // Through the catch-all listener, for any host but the one
            // the `shop` listener owns.
            route(
                "site",
                "infra",
                "{name: edge, sectionName: any}",
                "[site.example.com, shop.example.com]",
                "{name: site, port: 8080}"
            ),
            // Through `shop` only (its hostname), from its own namespace.
            route(
                "shop",
                "infra",
                "{name: edge, sectionName: shop}",
                "[]",
                "{name: shop, port: 8080}"
            ),
            // Another namespace: only `any` admits it; its backend in
            // infra is refused without a ReferenceGrant.
            route(
                "web",
                "web",
                "{name: edge, namespace: infra}",
                "[web.example.com]",
                "{name: site, namespace: infra, port: 8080}"
            ),
            // Another controller's Gateway: not pilot's to serve.
            route(
                "theirs",
                "infra",
                "{name: theirs}",
                "[]",
                "{name: site, port: 8080}"
            ),
        );
        let servers = servers(&text);
        let ports: Vec<(u16, &str)> = servers.iter().map(|s| (s.port, s.port_name.as_str())).collect();
        assert_eq!(
            ports,
            [(80, "any"), (80, "shop"), (443, "secure")],
            "HTTP and HTTPS listeners of pilot's Gateway only"
        );
        assert_eq!(servers[0].tls, None);
        assert_eq!(
            servers[2].tls,
            Some(ServerTls::credential("kubernetes://infra/cert")),
            "terminated with the listener's Secret of the Gateway's namespace"
        );
        for server in &servers {
            assert_eq!(server.gateway, "infra/edge");
            assert_eq!(server.namespace.as_deref(), Some("infra"));
            assert_eq!(
                server.selector,
                Some(Labels::from_pairs([(GATEWAY_NAME_LABEL, "edge")]))
            );
        }
        let site = "site.infra.svc.cluster.local".to_string();
        assert_eq!(
            routed(&servers[0]),
            [
                (
                    "site.example.com".to_string(),
                    vec![("infra/site/0".to_string(), vec![site.clone()])]
                ),
                // Not permitted: the share has no host, answered 500.
                (
                    "web.example.com".to_string(),
                    vec![("web/web/0".to_string(), vec![])]
                ),
            ]
        );
        assert_eq!(
            routed(&servers[1]),
            [(
                "shop.example.com".to_string(),
                vec![(
                    "infra/shop/0".to_string(),
                    vec!["shop.infra.svc.cluster.local".to_string()]
                )]
            )],
            "shop.example.com is the shop listener's: site's route does not serve it"
        );

        // Under a ReferenceGrant, web's backend takes its traffic.
        let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
            metadata: {name: web, namespace: infra}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: web}]\n  \
            to: [{group: \"\", kind: Service}]\n";
        let servers = self::servers(&format!("{text}{grant}"));
        assert_eq!(
            routed(&servers[0])[1],
            (
                "web.example.com".to_string(),
                vec![("web/web/0".to_string(), vec![site])]
            )
        );
    }

    #[test]
    fn tcp_and_tls_listeners_route_connections() {
        let text = edge_gateway(
            "  - {name: tcp, protocol: TCP, port: 9000}
  - {name: tls, protocol: TLS, port: 8443, hostname: \"*.example.com\", tls: {mode: Passthrough}}
  - {name: ended, protocol: TLS, port: 9443, tls: {mode: Terminate, certificateRefs: [{name: cert}]}}
",
        ) + "\
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: db, namespace: infra}
spec:
  parentRefs: [{name: edge, sectionName: tcp}]
  rules: [{backendRefs: [{name: db, port: 5432, weight: 3}, {name: db-next, port: 5432, weight: 1}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: TLSRoute
metadata: {name: shop, namespace: infra}
spec:
  parentRefs: [{name: edge}]
  hostnames: [shop.example.com, shop.example.org]
  rules: [{backendRefs: [{name: shop, port: 443}]}]
";
        let servers = servers(&text);
        let listeners: Vec<(&str, u16)> = servers.iter().map(|s| (s.port_name.as_str(), s.port)).collect();
        assert_eq!(listeners, [("tcp", 9000), ("tls", 8443), ("ended", 9443)]);
        let tcp = &servers[0];
        assert_eq!(tcp.protocol, Protocol::Tcp);
        assert!(tcp.tls.is_none() && tcp.tls_routes.is_empty());
        let to: Vec<(String, Option<u16>, u32)> = tcp.tcp_routes[0]
            .destinations
            .iter()
            .map(|d| (d.destination.host.clone(), d.destination.port, d.weight))
            .collect();
        assert_eq!(
            to,
            [
                ("db.infra.svc.cluster.local".to_string(), Some(5432), 3),
                ("db-next.infra.svc.cluster.local".to_string(), Some(5432), 1)
            ]
        );
        let tls = &servers[1];
        assert_eq!(tls.tls.as_ref().map(|t| t.mode), Some(ServerTlsMode::Passthrough));
        assert!(tls.tcp_routes.is_empty());
        assert_eq!(tls.tls_routes.len(), 1);
        assert_eq!(
            tls.tls_routes[0].matches[0].sni_hosts,
            ["shop.example.com"],
            "the hostnames the route and the listener share"
        );
        // Terminated with the listener's Secret, then the route's
        // backends by the route's hostnames (the listener has none).
        let ended = &servers[2];
        assert_eq!(ended.protocol, Protocol::Tcp);
        let tls = ended.tls.as_ref().unwrap();
        assert_eq!(tls.mode, ServerTlsMode::Simple);
        assert_eq!(tls.credential_name.as_deref(), Some("kubernetes://infra/cert"));
        assert_eq!(
            ended.tls_routes[0].matches[0].sni_hosts,
            ["shop.example.com", "shop.example.org"]
        );
    }

    #[test]
    fn hostnames_meet_at_the_more_specific() {
        let route = |hosts: &[&str]| hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>();
        assert_eq!(shared_hostnames(None, &[]), ["*"]);
        assert_eq!(shared_hostnames(Some("a.example.com"), &[]), ["a.example.com"]);
        assert_eq!(
            shared_hostnames(
                Some("*.wildcard.io"),
                &route(&[
                    "non.matching.com",
                    "wildcard.io",
                    "foo.wildcard.io",
                    "foo.bar.wildcard.io"
                ])
            ),
            ["foo.bar.wildcard.io", "foo.wildcard.io"]
        );
        assert_eq!(
            shared_hostnames(Some("very.specific.com"), &route(&["*.specific.com"])),
            ["very.specific.com"]
        );
        assert!(shared_hostnames(Some("very.specific.com"), &route(&["specific.but.wrong.com"])).is_empty());
    }
}
