//! The status the Gateway API asks of an implementation, computed from the
//! objects and the service registry: a GatewayClass whose `controllerName`
//! is pilot's is `Accepted` (`False`, `InvalidParameters`, when it names a
//! `parametersRef`: pilot reads no parameters, and takes none of its
//! Gateways); a Gateway of an accepted class is `Accepted`
//! (`ListenersNotValid` when a listener is not, `False` when none is;
//! `False`, `InvalidParameters`, and not served, when it names
//! `infrastructure.parametersRef`: pilot reads no parameters), with
//! each listener's conditions and `attachedRoutes`, and its addresses
//! (the Services' in front of its router proxies: `Programmed` `False`,
//! `AddressNotAssigned`, when one it asks for is not among them;
//! `Accepted` `False`, `UnsupportedAddress`, for a type other than
//! `IPAddress` and `Hostname`), and, when it names a client certificate
//! for its backends (`tls.backend.clientCertificateRef`), `ResolvedRefs`
//! (`InvalidClientCertificateRef`, `RefNotPermitted`); each route
//! (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute) has, for every parent it
//! names that pilot serves (a Service, for the mesh, or a Gateway of
//! pilot's class), `Accepted` and `ResolvedRefs` with the reasons the
//! specification names (`NoMatchingParent`, `NotAllowedByListeners`,
//! `NoMatchingListenerHostname`, `BackendNotFound`, `RefNotPermitted`,
//! `InvalidKind`); each BackendTLSPolicy has, for every Gateway of pilot's
//! whose routes send traffic to a Service it targets, `Accepted` and
//! `ResolvedRefs` (`Conflicted`, `NoValidCACertificate`,
//! `InvalidCACertificateRef`, `InvalidKind`). Every condition carries the
//! object's generation as its `observedGeneration`.
//!
//! Pure: the status writer (pilot-distribution) calls it each round it
//! writes and keeps a condition's transition time while its status holds.
//! A listener's `ResolvedRefs` also says whether its `certificateRefs`
//! may be followed (`InvalidCertificateRef` for what is not a Secret,
//! `RefNotPermitted` for a Secret of another namespace without a
//! ReferenceGrant), and whether the credential source holds each
//! (`InvalidCertificateRef` for one that does not exist or does not
//! load). A listener is `Programmed` when
//! pilot serves it to the Gateway's router proxies (HTTP, TCP, HTTPS
//! terminating TLS, and TLS listeners passing TLS through or terminating
//! it, their references resolved), and a Gateway when some listener is.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::SystemTime;

use crate::gamma::edge::{GATEWAY_NAME_LABEL, served, shared_hostnames};
use pilot_api::gateway_api::{
    BackendTlsPolicy, FromNamespaces, Gateway, GatewayClass, GrpcRoute, HttpRoute, LabelSelector, Listener,
    ParentReference, ReferenceGrant, SecretObjectReference, TcpRoute, TlsMode, TlsRoute,
};
use pilot_model::{
    Condition, Config, ConfigKey, ConfigKind, DynConfig, GatewayApiStatus, GatewayStatusAddress,
    ListenerStatus, PolicyAncestorStatus, RouteGroupKind, RouteParentStatus,
};

/// The `controllerName` of pilot's GatewayClasses: the Gateways of a class
/// naming it, and the routes attached to them, are pilot's.
pub const CONTROLLER_NAME: &str = "pilot.io/gateway-controller";

const GROUP: &str = pilot_api::gateway_api::GROUP;

/// The ids of the kinds [`statuses`] may give a status to.
pub fn status_kinds() -> Vec<String> {
    [
        GatewayClass::id(),
        Gateway::id(),
        HttpRoute::id(),
        GrpcRoute::id(),
        TlsRoute::id(),
        TcpRoute::id(),
        BackendTlsPolicy::id(),
    ]
    .into_iter()
    .map(|id| id.into_owned())
    .collect()
}

/// What the status reads of the service registry.
pub trait RegistryView {
    /// Whether a Service hostname (`name.namespace.<domain>`) is in the
    /// registry.
    fn exists(&self, host: &str) -> bool;

    /// The Services with an instance labelled `key: value`: each one's
    /// hostname and address (`None` when it has none).
    fn labelled(&self, key: &str, value: &str) -> Vec<(String, Option<IpAddr>)>;
}

/// The Gateway API's status of every object among `objects` that pilot
/// answers for, `registry` telling which Services exist and which are in
/// front of a Gateway's router proxies.
pub fn statuses(
    objects: &[Arc<DynConfig>],
    registry: &dyn RegistryView,
    credentials: Credentials<'_>,
    domain: &str,
    now: SystemTime,
) -> HashMap<ConfigKey, GatewayApiStatus> {
    let service_exists = &|host: &str| registry.exists(host);
    let input = Input::of(objects);
    let mut out = HashMap::new();
    // Pilot's classes: accepted, unless they name parameters (pilot reads
    // none); the Gateways of an accepted one are pilot's.
    let ours: BTreeSet<&str> = input
        .classes
        .iter()
        .filter(|class| accepted_class(class))
        .map(|class| class.meta.name.as_str())
        .collect();
    for class in input
        .classes
        .iter()
        .filter(|c| c.spec.controller_name == CONTROLLER_NAME)
    {
        let condition = condition(class.meta.generation, now);
        let accepted = match class_invalid_parameters(class) {
            Some(message) => condition("Accepted", false, "InvalidParameters", &message),
            None => condition(
                "Accepted",
                true,
                "Accepted",
                "pilot handles this class's Gateways",
            ),
        };
        out.insert(
            class.key(),
            GatewayApiStatus {
                conditions: vec![accepted],
                ..Default::default()
            },
        );
    }
    let gateways: Vec<&Config<Gateway>> = input
        .gateways
        .iter()
        .filter(|g| ours.contains(g.spec.gateway_class_name.as_str()))
        .collect();

    let routes = input.routes();
    // The routes each listener accepted, counted while the routes' status
    // is made.
    let mut attached: HashMap<(ConfigKey, usize), i32> = HashMap::new();
    for route in &routes {
        let mut parents = Vec::new();
        // Mesh routes may send traffic to a Service of any namespace: a
        // sidecar reaches it without the route, so the route widens
        // nothing (the GAMMA specification asks no ReferenceGrant of
        // them). A Gateway's routes expose what they name, so a Service
        // of another namespace needs its namespace's grant.
        let resolved = resolved_refs(route, Some(&input.grants), service_exists, domain);
        let resolved_mesh = resolved_refs(route, None, service_exists, domain);
        for parent in &route.parents {
            let namespace = parent.namespace.as_deref().unwrap_or(route.namespace);
            let accepted = match (parent.group(), parent.kind()) {
                ("", "Service") => {
                    let host = format!("{}.{namespace}.{domain}", parent.name);
                    if service_exists(&host) {
                        Ok(())
                    } else {
                        Err((
                            "NoMatchingParent",
                            format!("the Service {host} is not in the service registry"),
                        ))
                    }
                }
                (GROUP, "Gateway") => {
                    let Some(gateway) = input
                        .gateways
                        .iter()
                        .find(|g| g.meta.namespace == namespace && g.meta.name == parent.name)
                    else {
                        parents.push(parent_status(
                            parent,
                            route,
                            now,
                            Err((
                                "NoMatchingParent",
                                format!("no Gateway {namespace}/{} exists", parent.name),
                            )),
                            &resolved,
                        ));
                        continue;
                    };
                    if !ours.contains(gateway.spec.gateway_class_name.as_str()) {
                        // Another controller's Gateway: its status is theirs.
                        continue;
                    }
                    let taken = attach(gateway, route, parent);
                    for index in taken.as_ref().map(Vec::as_slice).unwrap_or_default() {
                        *attached.entry((gateway.key(), *index)).or_default() += 1;
                    }
                    taken.map(|_| ())
                }
                _ => continue,
            };
            let resolved = match (parent.group(), parent.kind()) {
                ("", "Service") => &resolved_mesh,
                _ => &resolved,
            };
            parents.push(parent_status(parent, route, now, accepted, resolved));
        }
        if !parents.is_empty() {
            out.insert(
                route.key.clone(),
                GatewayApiStatus {
                    parents,
                    ..Default::default()
                },
            );
        }
    }

    policy_statuses(&input, &routes, &ours, credentials, now, &mut out);

    for gateway in gateways {
        let condition = condition(gateway.meta.generation, now);
        let listeners = gateway
            .spec
            .listeners
            .iter()
            .enumerate()
            .map(|(i, listener)| {
                let count = attached.get(&(gateway.key(), i)).copied().unwrap_or(0);
                let certificates = certificate_refs(listener, gateway, input.grants.iter())
                    .and_then(|()| certificates_present(listener, gateway, credentials));
                let clients = client_validation(gateway, listener, input.grants.iter())
                    .map(|validation| clients_verified(&validation, credentials));
                listener_status(listener, count, certificates, clients, &condition)
            })
            .collect::<Vec<ListenerStatus>>();
        let mut listeners = listeners;
        // As the specification has it: a Gateway with a listener pilot
        // does not take (an unsupported protocol) is accepted for the
        // others, `ListenersNotValid`; one with none it takes is not.
        let listener_accepted = |l: &ListenerStatus| {
            l.conditions
                .iter()
                .any(|c| c.type_ == "Accepted" && c.status == "True")
        };
        let refused = listeners.iter().filter(|l| !listener_accepted(l)).count();
        let refused_whole = not_taken(gateway);
        let insecure_fallback = gateway.spec.listeners.iter().any(|listener| {
            client_validation(gateway, listener, input.grants.iter()).is_some_and(|v| v.insecure_fallback)
        });
        // Where its routers are reached (none when it is not served).
        let bound = match &refused_whole {
            Some(_) => Vec::new(),
            None => bound_addresses(gateway, registry, domain),
        };
        if let Some((_, message)) = &refused_whole {
            // Not served at all: none of its listeners is programmed.
            for listener in &mut listeners {
                for c in listener.conditions.iter_mut().filter(|c| c.type_ == "Programmed") {
                    *c = condition("Programmed", false, "Invalid", message);
                }
            }
        }
        let accepted = if let Some((reason, message)) = &refused_whole {
            condition("Accepted", false, reason, message)
        } else if refused == 0 {
            condition("Accepted", true, "Accepted", "pilot serves this Gateway's class")
        } else if refused < listeners.len() {
            condition(
                "Accepted",
                true,
                "ListenersNotValid",
                &format!(
                    "{refused} of its {} listeners are not accepted (see their status)",
                    listeners.len()
                ),
            )
        } else {
            condition(
                "Accepted",
                false,
                "ListenersNotValid",
                "none of its listeners is accepted (see their status)",
            )
        };
        out.insert(
            gateway.key(),
            GatewayApiStatus {
                conditions: [
                    accepted,
                    match &refused_whole {
                        Some((_, message)) => condition("Programmed", false, "Invalid", message),
                        None => with_requested_addresses(
                            gateway_programmed(gateway, &input.grants, credentials, &condition),
                            gateway,
                            &bound,
                            &condition,
                        ),
                    },
                ]
                .into_iter()
                .chain(match &refused_whole {
                    Some(_) => None,
                    None => {
                        backend_client_certificate_resolved(gateway, &input.grants, credentials, &condition)
                    }
                })
                .chain(insecure_fallback.then(|| {
                    condition(
                        "InsecureFrontendValidationMode",
                        true,
                        "ConfigurationChanged",
                        "a listener lets in clients without a valid certificate (tls.frontend mode \
                         AllowInsecureFallback)",
                    )
                }))
                .collect(),
                listeners,
                addresses: bound,
                ..Default::default()
            },
        );
    }
    out
}

/// Why pilot does not take `gateway` at all, if it does not: the reason
/// its `Accepted` condition gives (`InvalidParameters`,
/// `UnsupportedAddress`) and the message. Such a Gateway is not served.
pub(crate) fn not_taken(gateway: &Config<Gateway>) -> Option<(&'static str, String)> {
    invalid_parameters(gateway)
        .map(|message| ("InvalidParameters", message))
        .or_else(|| unsupported_address(gateway).map(|message| ("UnsupportedAddress", message)))
}

/// Why pilot cannot give `gateway` the addresses it asks for, if it
/// cannot: an address of a type other than `IPAddress` and `Hostname`
/// (`NamedAddress`, or an implementation's own type). pilot binds the
/// addresses of the Services in front of the Gateway's routers (see
/// [`bound_addresses`]), which are IP addresses and hostnames.
fn unsupported_address(gateway: &Config<Gateway>) -> Option<String> {
    let address = gateway
        .spec
        .addresses
        .iter()
        .flatten()
        .find(|a| !matches!(a.address_type(), "IPAddress" | "Hostname"))?;
    Some(format!(
        "spec.addresses: type {:?} is not one pilot gives (IPAddress and Hostname: the addresses of the \
         Services in front of the Gateway's router proxies)",
        address.address_type()
    ))
}

/// The addresses bound to `gateway`: those of the Services of its
/// namespace in front of its router proxies (a Service with an instance
/// labelled `gateway.networking.k8s.io/gateway-name` with the Gateway's
/// name), each one's IP address (`IPAddress`) first, then each one's
/// hostname (`Hostname`), in hostname order. None when no Service fronts
/// them.
fn bound_addresses(
    gateway: &Config<Gateway>,
    registry: &dyn RegistryView,
    domain: &str,
) -> Vec<GatewayStatusAddress> {
    let suffix = format!(".{}.{domain}", gateway.meta.namespace);
    let mut fronting: Vec<(String, Option<IpAddr>)> = registry
        .labelled(GATEWAY_NAME_LABEL, &gateway.meta.name)
        .into_iter()
        .filter(|(host, _)| {
            host.strip_suffix(&suffix)
                .is_some_and(|name| !name.is_empty() && !name.contains('.'))
        })
        .collect();
    fronting.sort();
    fronting.dedup();
    let mut ips: Vec<IpAddr> = fronting.iter().filter_map(|(_, ip)| *ip).collect();
    ips.dedup();
    let address = |type_: &str, value: String| GatewayStatusAddress {
        type_: type_.to_string(),
        value,
    };
    ips.into_iter()
        .map(|ip| address("IPAddress", ip.to_string()))
        .chain(fronting.into_iter().map(|(host, _)| address("Hostname", host)))
        .collect()
}

/// `programmed`, or `Programmed` `False` (`AddressNotAssigned`) when some
/// address `gateway` asks for (`spec.addresses`) is not among those
/// `bound` to it: one with a value, by that value; one without (the
/// implementation chooses), by its type. The routers still serve it: the
/// condition tells where they cannot be reached.
fn with_requested_addresses(
    programmed: Condition,
    gateway: &Config<Gateway>,
    bound: &[GatewayStatusAddress],
    condition: &impl Fn(&str, bool, &str, &str) -> Condition,
) -> Condition {
    if programmed.status != "True" {
        return programmed;
    }
    let same = |requested: &str, bound: &str, type_: &str| match type_ {
        "IPAddress" => requested.parse::<IpAddr>().ok() == bound.parse::<IpAddr>().ok(),
        _ => requested.eq_ignore_ascii_case(bound),
    };
    let missing: Vec<String> = gateway
        .spec
        .addresses
        .iter()
        .flatten()
        .filter(|requested| {
            let type_ = requested.address_type();
            let value = requested.value.as_deref().filter(|v| !v.is_empty());
            !bound
                .iter()
                .filter(|b| b.type_ == type_)
                .any(|b| value.is_none_or(|v| same(v, &b.value, type_)))
        })
        .map(
            |requested| match requested.value.as_deref().filter(|v| !v.is_empty()) {
                Some(value) => format!("{} {value}", requested.address_type()),
                None => format!("an {} of pilot's choosing", requested.address_type()),
            },
        )
        .collect();
    if missing.is_empty() {
        return programmed;
    }
    condition(
        "Programmed",
        false,
        "AddressNotAssigned",
        &format!(
            "{}; but no Service of {} in front of them (with an instance labelled {GATEWAY_NAME_LABEL}={}) \
             has the address it asks for: {}",
            programmed.message,
            gateway.meta.namespace,
            gateway.meta.name,
            missing.join(", ")
        ),
    )
}

/// Whether `class` is pilot's and pilot accepts it: its Gateways are
/// pilot's.
pub(crate) fn accepted_class(class: &Config<GatewayClass>) -> bool {
    class.spec.controller_name == CONTROLLER_NAME && class_invalid_parameters(class).is_none()
}

/// Why pilot does not accept `class`, if it does not: its `parametersRef`
/// names parameters, and pilot reads none (the specification asks for
/// `Accepted` `False`, `InvalidParameters`, for a reference to a kind the
/// implementation does not support). Its Gateways are then not pilot's:
/// they are not served and get no status.
pub(crate) fn class_invalid_parameters(class: &Config<GatewayClass>) -> Option<String> {
    let parameters = class.spec.parameters_ref.as_ref()?;
    Some(format!(
        "parametersRef names {}/{} {:?}: pilot reads no parameters of a GatewayClass, \
         and takes no Gateway of a class that asks for them",
        parameters.group.as_deref().unwrap_or_default(),
        parameters.kind,
        parameters.name
    ))
}

/// Whether pilot refuses `gateway` for its parameters: its
/// `infrastructure.parametersRef` names parameters, and pilot reads none
/// (the specification asks that such a Gateway not be accepted, with
/// reason `InvalidParameters`, rather than served without them).
fn invalid_parameters(gateway: &Config<Gateway>) -> Option<String> {
    let parameters = gateway.spec.infrastructure.as_ref()?.parameters_ref.as_ref()?;
    Some(format!(
        "infrastructure.parametersRef names {}/{} {:?}: pilot reads no parameters of a Gateway, \
         and serves none that asks for them",
        parameters.group.as_deref().unwrap_or_default(),
        parameters.kind,
        parameters.name
    ))
}

/// A Gateway's `Programmed`: true when some listener is served to its
/// router proxies.
fn gateway_programmed(
    gateway: &Config<Gateway>,
    grants: &[Config<ReferenceGrant>],
    credentials: Credentials<'_>,
    condition: &impl Fn(&str, bool, &str, &str) -> Condition,
) -> Condition {
    let pending: Vec<&str> = gateway
        .spec
        .listeners
        .iter()
        .filter(|l| {
            !served(l)
                || certificate_refs(l, gateway, grants.iter())
                    .and_then(|()| certificates_present(l, gateway, credentials))
                    .is_err()
                || client_validation(gateway, l, grants.iter())
                    .is_some_and(|v| !clients_verified(&v, credentials).valid)
        })
        .map(|l| l.name.as_str())
        .collect();
    let proxies = format!(
        "router proxies in {} labelled {GATEWAY_NAME_LABEL}={}",
        gateway.meta.namespace, gateway.meta.name
    );
    if pending.len() == gateway.spec.listeners.len() {
        condition(
            "Programmed",
            false,
            "Pending",
            &format!(
                "none of its listeners is one pilot serves (HTTP, HTTPS, TCP and TLS listeners are, when \
                 their references resolve); {proxies} get none"
            ),
        )
    } else if pending.is_empty() {
        condition("Programmed", true, "Programmed", &format!("served to {proxies}"))
    } else {
        condition(
            "Programmed",
            true,
            "Programmed",
            &format!(
                "served to {proxies}, without the listeners pilot does not serve or whose references do not \
                 resolve: {}",
                pending.join(", ")
            ),
        )
    }
}

/// A condition of an object at `generation`, set `now`.
fn condition(generation: Option<i64>, now: SystemTime) -> impl Fn(&str, bool, &str, &str) -> Condition {
    move |type_, status, reason, message| Condition {
        type_: type_.to_string(),
        status: if status { "True" } else { "False" }.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        observed_generation: generation,
        last_transition_time: now,
    }
}

/// The objects the status reads, typed.
struct Input {
    classes: Vec<Config<GatewayClass>>,
    gateways: Vec<Config<Gateway>>,
    grants: Vec<Config<ReferenceGrant>>,
    http: Vec<Config<HttpRoute>>,
    grpc: Vec<Config<GrpcRoute>>,
    tls: Vec<Config<TlsRoute>>,
    tcp: Vec<Config<TcpRoute>>,
    policies: Vec<Arc<Config<BackendTlsPolicy>>>,
}

fn typed<K: ConfigKind>(objects: &[Arc<DynConfig>]) -> Vec<Config<K>> {
    let id = K::id();
    objects
        .iter()
        .filter(|o| o.meta.kind == id)
        .filter_map(|o| Config::from_dyn(o).ok())
        .collect()
}

impl Input {
    fn of(objects: &[Arc<DynConfig>]) -> Self {
        Input {
            classes: typed(objects),
            gateways: typed(objects),
            grants: typed(objects),
            http: typed(objects),
            grpc: typed(objects),
            tls: typed(objects),
            tcp: typed(objects),
            policies: typed(objects).into_iter().map(Arc::new).collect(),
        }
    }

    fn routes(&self) -> Vec<Route<'_>> {
        let mut routes = Vec::new();
        for r in &self.http {
            let backends = r
                .spec
                .rules_written
                .iter()
                .flatten()
                .flat_map(|rule| rule.backend_refs.iter().flatten())
                .map(|b| Backend {
                    group: b.group.as_deref().unwrap_or(""),
                    kind: b.kind.as_deref().unwrap_or("Service"),
                    name: &b.name,
                    namespace: b.namespace.as_deref(),
                })
                .collect();
            routes.push(Route::new(
                r,
                "HTTPRoute",
                &r.spec.parent_refs,
                r.spec.hostnames.as_deref(),
                backends,
            ));
        }
        for r in &self.grpc {
            let backends = r
                .spec
                .rules
                .iter()
                .flatten()
                .flat_map(|rule| rule.backend_refs.iter().flatten())
                .map(|b| Backend {
                    group: b.group.as_deref().unwrap_or(""),
                    kind: b.kind.as_deref().unwrap_or("Service"),
                    name: &b.name,
                    namespace: b.namespace.as_deref(),
                })
                .collect();
            routes.push(Route::new(
                r,
                "GRPCRoute",
                &r.spec.parent_refs,
                r.spec.hostnames.as_deref(),
                backends,
            ));
        }
        for r in &self.tls {
            let backends = stream_backends(&r.spec.rules);
            routes.push(Route::new(
                r,
                "TLSRoute",
                &r.spec.parent_refs,
                r.spec.hostnames.as_deref(),
                backends,
            ));
        }
        for r in &self.tcp {
            let backends = stream_backends(&r.spec.rules);
            routes.push(Route::new(r, "TCPRoute", &r.spec.parent_refs, None, backends));
        }
        routes
    }
}

fn stream_backends(rules: &[pilot_api::gateway_api::StreamRouteRule]) -> Vec<Backend<'_>> {
    rules
        .iter()
        .flat_map(|rule| &rule.backend_refs)
        .map(|b| Backend {
            group: b.group(),
            kind: b.kind(),
            name: &b.name,
            namespace: b.namespace.as_deref(),
        })
        .collect()
}

/// A route of any kind, as the status sees it.
struct Route<'a> {
    key: ConfigKey,
    kind: &'static str,
    namespace: &'a str,
    generation: Option<i64>,
    parents: Vec<&'a ParentReference>,
    hostnames: &'a [String],
    backends: Vec<Backend<'a>>,
}

impl<'a> Route<'a> {
    fn new<K: ConfigKind>(
        object: &'a Config<K>,
        kind: &'static str,
        parents: &'a Option<Vec<ParentReference>>,
        hostnames: Option<&'a [String]>,
        backends: Vec<Backend<'a>>,
    ) -> Self {
        Route {
            key: object.key(),
            kind,
            namespace: &object.meta.namespace,
            generation: object.meta.generation,
            parents: parents.iter().flatten().collect(),
            hostnames: hostnames.unwrap_or_default(),
            backends,
        }
    }
}

/// One backend reference.
struct Backend<'a> {
    group: &'a str,
    kind: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
}

/// A route's `ResolvedRefs`: every backend a Service that exists and,
/// when `grants` are asked (a Gateway's routes), in the route's namespace
/// or one whose ReferenceGrant lets the route's kind and namespace refer
/// to it.
fn resolved_refs(
    route: &Route<'_>,
    grants: Option<&[Config<ReferenceGrant>]>,
    service_exists: &dyn Fn(&str) -> bool,
    domain: &str,
) -> Result<(), (&'static str, String)> {
    for backend in &route.backends {
        if !backend.group.is_empty() || backend.kind != "Service" {
            return Err((
                "InvalidKind",
                format!(
                    "a backend of kind {:?} (group {:?}) is not one pilot routes to",
                    backend.kind, backend.group
                ),
            ));
        }
        let namespace = backend.namespace.unwrap_or(route.namespace);
        if let Some(grants) = grants
            && namespace != route.namespace
            && !granted(grants, route.kind, route.namespace, namespace, backend.name)
        {
            return Err((
                "RefNotPermitted",
                format!(
                    "no ReferenceGrant in {namespace} lets {}s of {} refer to the Service {}",
                    route.kind, route.namespace, backend.name
                ),
            ));
        }
        let host = format!("{}.{namespace}.{domain}", backend.name);
        if !service_exists(&host) {
            return Err((
                "BackendNotFound",
                format!("the Service {host} is not in the service registry"),
            ));
        }
    }
    Ok(())
}

/// Whether a ReferenceGrant of `namespace` lets routes of `kind`
/// (`HTTPRoute`, …) in `from` refer to its Service `name`.
pub(crate) fn granted<'a>(
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>>,
    kind: &str,
    from: &str,
    namespace: &str,
    name: &str,
) -> bool {
    granted_to(grants, kind, from, namespace, "Service", name)
}

impl crate::RoutingConfigs {
    /// Whether a ReferenceGrant of `namespace` lets Gateways of `from`
    /// refer to its Secret `name` (a listener's `certificateRefs`): what a
    /// router proxy of `from` may read of another namespace.
    pub fn grants_secret(&self, from: &str, namespace: &str, name: &str) -> bool {
        granted_to(
            self.reference_grants.iter().map(|g| &**g),
            "Gateway",
            from,
            namespace,
            "Secret",
            name,
        )
    }
}

/// Whether a ReferenceGrant of `namespace` lets objects of `kind` (of the
/// Gateway API's group) in `from` refer to its core object of kind
/// `to_kind` named `name`.
fn granted_to<'a>(
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>>,
    kind: &str,
    from: &str,
    namespace: &str,
    to_kind: &str,
    name: &str,
) -> bool {
    grants
        .into_iter()
        .filter(|g| g.meta.namespace == namespace)
        .any(|grant| {
            grant
                .spec
                .from
                .iter()
                .any(|f| f.group.as_deref().unwrap_or("") == GROUP && f.kind == kind && f.namespace == from)
                && grant.spec.to.iter().any(|to| {
                    to.group.as_deref().unwrap_or("").is_empty()
                        && to.kind == to_kind
                        && to.name.as_deref().is_none_or(|n| n == name)
                })
        })
}

/// Why a `caCertificateRefs` entry of `kind` (of `group`) is not followed.
fn not_a_config_map(kind: &str, group: Option<&str>) -> String {
    format!(
        "caCertificateRefs names a {kind:?} (group {:?}): pilot reads certificate authorities from ConfigMaps only",
        group.unwrap_or_default()
    )
}

/// How a listener terminating TLS verifies its clients' certificates: the
/// Gateway's `tls.frontend` (the entry of the listener's port, else the
/// default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientValidation {
    /// The namespace of the ConfigMaps whose `ca.crt` verify clients.
    pub(crate) namespace: String,
    /// Their names (none when no reference may be followed).
    pub(crate) config_maps: Vec<String>,
    /// The first reference that may not be followed, and why
    /// (`InvalidCACertificateKind` for another kind than a core ConfigMap,
    /// `RefNotPermitted` for another namespace's without a ReferenceGrant).
    pub(crate) problem: Option<(&'static str, String)>,
    /// `AllowInsecureFallback`: clients without a valid certificate are
    /// let in.
    pub(crate) insecure_fallback: bool,
}

/// The client validation of `listener` of `gateway` (`None` when it
/// terminates no TLS, or its Gateway asks none for its port). References
/// of one namespace are followed: the first followable one's (the
/// Gateway's own, or another under a ReferenceGrant letting Gateways of
/// its namespace refer to ConfigMaps there).
pub(crate) fn client_validation<'a>(
    gateway: &Config<Gateway>,
    listener: &Listener,
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>> + Clone,
) -> Option<ClientValidation> {
    let terminates = match listener.protocol.as_str() {
        "HTTPS" => true,
        "TLS" => listener
            .tls
            .as_ref()
            .is_some_and(|t| t.mode() == TlsMode::Terminate),
        _ => false,
    };
    if !terminates {
        return None;
    }
    let frontend = gateway.spec.tls.as_ref()?.frontend.as_ref()?;
    let for_port = frontend
        .per_port
        .iter()
        .flatten()
        .find(|p| p.port.is_some() && p.port == listener.port)
        .and_then(|p| p.tls.as_ref());
    let validation = for_port.or(frontend.default.as_ref())?.validation.as_ref()?;
    let own = &gateway.meta.namespace;
    let mut out = ClientValidation {
        namespace: String::new(),
        config_maps: Vec::new(),
        problem: None,
        insecure_fallback: validation.mode()
            == pilot_api::gateway_api::FrontendValidationMode::AllowInsecureFallback,
    };
    for reference in &validation.ca_certificate_refs {
        let namespace = reference.namespace.as_deref().unwrap_or(own);
        let problem = if !crate::backend_tls::is_config_map(reference.group.as_deref(), &reference.kind) {
            Some((
                "InvalidCACertificateKind",
                not_a_config_map(&reference.kind, reference.group.as_deref()),
            ))
        } else if namespace != own
            && !granted_to(
                grants.clone(),
                "Gateway",
                own,
                namespace,
                "ConfigMap",
                &reference.name,
            )
        {
            Some((
                "RefNotPermitted",
                format!(
                    "no ReferenceGrant in {namespace} lets Gateways of {own} refer to the ConfigMap {}",
                    reference.name
                ),
            ))
        } else if !out.namespace.is_empty() && out.namespace != namespace {
            Some((
                "InvalidCACertificateRef",
                format!(
                    "the ConfigMap {namespace}/{} is of another namespace than {}: pilot verifies clients with \
                     the ConfigMaps of one namespace",
                    reference.name, out.namespace
                ),
            ))
        } else {
            None
        };
        match problem {
            Some(problem) => {
                out.problem.get_or_insert(problem);
            }
            None => {
                out.namespace = namespace.to_string();
                out.config_maps.push(reference.name.clone());
            }
        }
    }
    Some(out)
}

/// The listeners of `gateway` that take `route` through `parent` (their
/// indices), or why none does.
fn attach(
    gateway: &Config<Gateway>,
    route: &Route<'_>,
    parent: &ParentReference,
) -> Result<Vec<usize>, (&'static str, String)> {
    let named: Vec<(usize, &Listener)> = gateway
        .spec
        .listeners
        .iter()
        .enumerate()
        .filter(|(_, l)| names_listener(parent, l))
        .collect();
    if named.is_empty() {
        return Err((
            "NoMatchingParent",
            format!(
                "the Gateway {}/{} has no listener{}{}",
                gateway.meta.namespace,
                gateway.meta.name,
                parent
                    .section_name
                    .as_ref()
                    .map(|s| format!(" named {s:?}"))
                    .unwrap_or_default(),
                parent.port.map(|p| format!(" on port {p}")).unwrap_or_default()
            ),
        ));
    }
    let allowed: Vec<(usize, &Listener)> = named
        .into_iter()
        .filter(|(_, l)| admits(l, route.kind, route.namespace, &gateway.meta.namespace))
        .collect();
    if allowed.is_empty() {
        return Err((
            "NotAllowedByListeners",
            format!(
                "no listener of the Gateway {}/{} it names allows {}s from the namespace {}",
                gateway.meta.namespace, gateway.meta.name, route.kind, route.namespace
            ),
        ));
    }
    let matching: Vec<usize> = allowed
        .into_iter()
        // The hostnames meet as the edge's serving reads them.
        .filter(|(_, l)| !shared_hostnames(l.hostname.as_deref(), route.hostnames).is_empty())
        .map(|(i, _)| i)
        .collect();
    if matching.is_empty() {
        return Err((
            "NoMatchingListenerHostname",
            "none of the route's hostnames is one a listener it names serves".to_string(),
        ));
    }
    Ok(matching)
}

/// Whether `listener` (of a Gateway in `gateway_namespace`) takes routes
/// of `kind` from `namespace`: its protocol carries the kind, its
/// `allowedRoutes.kinds` name it (when written), and its
/// `allowedRoutes.namespaces` take the namespace.
pub(crate) fn admits(listener: &Listener, kind: &str, namespace: &str, gateway_namespace: &str) -> bool {
    let namespaces = listener.allowed_routes().namespaces();
    listener_kinds(listener).iter().any(|k| k.kind == kind)
        && match namespaces.from() {
            FromNamespaces::All => true,
            FromNamespaces::Same => namespace == gateway_namespace,
            FromNamespaces::Selector => namespaces
                .selector
                .as_ref()
                .is_some_and(|s| selects_namespace(s, namespace)),
            FromNamespaces::None => false,
        }
}

/// The label every namespace carries, its name (Kubernetes sets it).
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Whether `selector` selects the namespace `namespace`. pilot reads no
/// Namespace objects: it knows of a namespace only the label its name
/// gives it, `kubernetes.io/metadata.name`, so a selector naming another
/// label selects no namespace (rather than guess its labels).
fn selects_namespace(selector: &LabelSelector, namespace: &str) -> bool {
    let labels = selector.match_labels.iter().flatten();
    let expressions = selector.match_expressions.iter().flatten();
    if labels.clone().any(|(key, _)| key != NAMESPACE_NAME_LABEL)
        || expressions
            .clone()
            .any(|e| e.key.as_deref() != Some(NAMESPACE_NAME_LABEL))
    {
        return false;
    }
    labels.clone().all(|(_, value)| value == namespace)
        && expressions.clone().all(|e| {
            let listed = e.values.iter().flatten().any(|v| v == namespace);
            match e.operator.as_deref() {
                Some("In") => listed,
                Some("NotIn") => !listed,
                Some("Exists") => true,
                _ => false,
            }
        })
}

/// Whether `parent`'s `sectionName` and `port` (when written) are
/// `listener`'s: the parent names that listener of its Gateway.
pub fn names_listener(parent: &ParentReference, listener: &Listener) -> bool {
    parent.section_name.as_ref().is_none_or(|s| *s == listener.name)
        && parent.port.is_none_or(|p| Some(p) == listener.port)
}

/// The route kinds a listener takes: those its `allowedRoutes.kinds`
/// names that its protocol carries, or its protocol's (HTTP and HTTPS:
/// HTTPRoute and GRPCRoute; TLS: TLSRoute; TCP: TCPRoute).
pub fn listener_kinds(listener: &Listener) -> Vec<RouteGroupKind> {
    let carried: &[&str] = match listener.protocol.as_str() {
        "HTTP" | "HTTPS" => &["HTTPRoute", "GRPCRoute"],
        "TLS" => &["TLSRoute"],
        "TCP" => &["TCPRoute"],
        _ => &[],
    };
    let kind = |k: &str| RouteGroupKind {
        group: GROUP.to_string(),
        kind: k.to_string(),
    };
    match &listener.allowed_routes().kinds {
        Some(named) => named
            .iter()
            .filter(|k| k.group() == GROUP && carried.contains(&k.kind.as_str()))
            .map(|k| kind(&k.kind))
            .collect(),
        None => carried.iter().map(|k| kind(k)).collect(),
    }
}

/// What status knows of the credential source: `None` when the server has
/// none (no Secret or bundle is served).
pub type Credentials<'a> = Option<&'a dyn CredentialsHeld>;

/// Whether a credential source holds a Secret or a certificate authority
/// bundle (that loads).
pub trait CredentialsHeld {
    /// The Secret `name` of `namespace` is there.
    fn holds_secret(&self, namespace: &str, name: &str) -> bool;
    /// The ConfigMap `name` of `namespace` holds a bundle.
    fn holds_ca_bundle(&self, namespace: &str, name: &str) -> bool;
}

impl<T: pilot_model::CredentialSource + ?Sized> CredentialsHeld for T {
    fn holds_secret(&self, namespace: &str, name: &str) -> bool {
        self.get(namespace, name).is_some()
    }

    fn holds_ca_bundle(&self, namespace: &str, name: &str) -> bool {
        self.ca_bundle(namespace, name).is_some()
    }
}

/// Whether each Secret a listener terminating TLS names is there
/// (`InvalidCertificateRef` otherwise, as the conformance's
/// GatewayInvalidTLSConfiguration expects of a Secret that does not exist
/// or holds no certificate and key).
fn certificates_present(
    listener: &Listener,
    gateway: &Config<Gateway>,
    credentials: Credentials<'_>,
) -> Result<(), (&'static str, String)> {
    let refs = listener
        .tls
        .as_ref()
        .filter(|tls| listener.protocol == "HTTPS" || tls.mode() == TlsMode::Terminate)
        .and_then(|tls| tls.certificate_refs.as_deref())
        .unwrap_or_default();
    for reference in refs {
        let namespace = reference.namespace.as_deref().unwrap_or(&gateway.meta.namespace);
        let Some(exists) = credentials else {
            return Err((
                "InvalidCertificateRef",
                format!(
                    "the Secret {namespace}/{} cannot be read: pilot-discovery has no credential source \
                     (--credentials-dir, --kube-credentials)",
                    reference.name
                ),
            ));
        };
        if !exists.holds_secret(namespace, &reference.name) {
            return Err((
                "InvalidCertificateRef",
                format!(
                    "the Secret {namespace}/{} does not exist or holds no certificate and key that load",
                    reference.name
                ),
            ));
        }
    }
    Ok(())
}

/// The Secret a Gateway's routers present to backends as their client
/// certificate (`tls.backend.clientCertificateRef`), `(namespace, name)`,
/// when the reference may be followed: a core `Secret`
/// (`InvalidClientCertificateRef` otherwise), of the Gateway's namespace
/// or of one whose ReferenceGrant lets Gateways of its namespace refer to
/// it (`RefNotPermitted` otherwise). `None` when the Gateway names none.
pub(crate) fn backend_client_certificate_ref<'a, 'g>(
    gateway: &'g Config<Gateway>,
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>>,
) -> Result<Option<(&'g str, &'g str)>, (&'static str, String)> {
    let Some(reference) = gateway
        .spec
        .tls
        .as_ref()
        .and_then(|tls| tls.backend.as_ref())
        .and_then(|backend| backend.client_certificate_ref.as_ref())
    else {
        return Ok(None);
    };
    followed_secret(
        reference,
        gateway,
        grants,
        "InvalidClientCertificateRef",
        "tls.backend.clientCertificateRef",
    )
    .map(Some)
}

/// A Gateway's `ResolvedRefs`, when it names a client certificate for its
/// backends: `True` when the Secret may be followed and holds a
/// certificate and key that load; `False` with
/// [`backend_client_certificate_ref`]'s reason, or
/// `InvalidClientCertificateRef` for a Secret that is not there.
fn backend_client_certificate_resolved(
    gateway: &Config<Gateway>,
    grants: &[Config<ReferenceGrant>],
    credentials: Credentials<'_>,
    condition: &impl Fn(&str, bool, &str, &str) -> Condition,
) -> Option<Condition> {
    let (namespace, name) = match backend_client_certificate_ref(gateway, grants.iter()) {
        Ok(None) => return None,
        Ok(Some(secret)) => secret,
        Err((reason, message)) => return Some(condition("ResolvedRefs", false, reason, &message)),
    };
    let held = credentials.is_some_and(|held| held.holds_secret(namespace, name));
    Some(if held {
        condition(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            "its routers present the Secret of tls.backend.clientCertificateRef to TLS backends",
        )
    } else {
        condition(
            "ResolvedRefs",
            false,
            "InvalidClientCertificateRef",
            &format!(
                "tls.backend.clientCertificateRef: the Secret {namespace}/{name} does not exist or holds no \
                 certificate and key that load"
            ),
        )
    })
}

/// Whether a listener's `certificateRefs` are ones pilot may follow: each a
/// core `Secret`, in the Gateway's namespace or one whose ReferenceGrant
/// lets the Gateway's namespace refer to it. (Whether the Secret exists
/// is [`certificates_present`]'s: routing serves the listener whatever
/// the credential source holds, and its router waits for the certificate.)
pub(crate) fn certificate_refs<'a>(
    listener: &Listener,
    gateway: &Config<Gateway>,
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>> + Clone,
) -> Result<(), (&'static str, String)> {
    let refs = listener
        .tls
        .as_ref()
        .and_then(|tls| tls.certificate_refs.as_deref())
        .unwrap_or_default();
    let terminates = listener
        .tls
        .as_ref()
        .is_some_and(|tls| listener.protocol == "HTTPS" || tls.mode() == TlsMode::Terminate);
    if terminates && refs.is_empty() {
        // The CRDs let `options` stand in for them; pilot reads no option.
        return Err((
            "InvalidCertificateRef",
            "the listener ends TLS but names no certificateRefs: pilot takes a listener's certificate from              certificateRefs only (it applies no tls.options)"
                .to_string(),
        ));
    }
    for reference in refs {
        followed_secret(
            reference,
            gateway,
            grants.clone(),
            "InvalidCertificateRef",
            "the certificate reference",
        )?;
    }
    Ok(())
}

/// A Gateway's reference to a Secret, `(namespace, name)`, when pilot
/// may follow it: a core `Secret` (`invalid` otherwise; `what` names the
/// reference in the message), of the Gateway's namespace or of one whose
/// ReferenceGrant lets Gateways of its namespace refer to it
/// (`RefNotPermitted` otherwise).
fn followed_secret<'g, 'a>(
    reference: &'g SecretObjectReference,
    gateway: &'g Config<Gateway>,
    grants: impl IntoIterator<Item = &'a Config<ReferenceGrant>>,
    invalid: &'static str,
    what: &str,
) -> Result<(&'g str, &'g str), (&'static str, String)> {
    if !reference.group().is_empty() || reference.kind() != "Secret" {
        return Err((
            invalid,
            format!(
                "{what} {:?} is a {:?} of group {:?}, not a Secret",
                reference.name,
                reference.kind(),
                reference.group()
            ),
        ));
    }
    let namespace = reference.namespace.as_deref().unwrap_or(&gateway.meta.namespace);
    if namespace != gateway.meta.namespace
        && !granted_to(
            grants,
            "Gateway",
            &gateway.meta.namespace,
            namespace,
            "Secret",
            &reference.name,
        )
    {
        return Err((
            "RefNotPermitted",
            format!(
                "{what} {:?}: no ReferenceGrant in {namespace} lets Gateways of {} refer to the Secret {}",
                reference.name, gateway.meta.namespace, reference.name
            ),
        ));
    }
    Ok((namespace, reference.name.as_str()))
}

/// What status says of a listener's client validation: the first
/// reference that does not resolve (why), and whether its clients can be
/// verified (every ConfigMap followed holds a bundle: the proxies trust
/// nothing of a partial one).
struct ClientsVerified {
    problem: Option<(&'static str, String)>,
    valid: bool,
}

fn clients_verified(validation: &ClientValidation, credentials: Credentials<'_>) -> ClientsVerified {
    let mut problem = validation.problem.clone();
    let mut valid = !validation.config_maps.is_empty();
    for name in &validation.config_maps {
        if !credentials.is_some_and(|held| held.holds_ca_bundle(&validation.namespace, name)) {
            valid = false;
            problem.get_or_insert((
                "InvalidCACertificateRef",
                format!(
                    "the ConfigMap {}/{name} does not exist or its ca.crt holds no PEM certificate",
                    validation.namespace
                ),
            ));
        }
    }
    ClientsVerified { problem, valid }
}

fn listener_status(
    listener: &Listener,
    attached_routes: i32,
    certificates: Result<(), (&'static str, String)>,
    clients: Option<ClientsVerified>,
    condition: &impl Fn(&str, bool, &str, &str) -> Condition,
) -> ListenerStatus {
    let clients_unverified = clients.as_ref().is_some_and(|c| !c.valid);
    let supported_kinds = listener_kinds(listener);
    let protocol_known = matches!(listener.protocol.as_str(), "HTTP" | "HTTPS" | "TLS" | "TCP");
    let named_unsupported = listener
        .allowed_routes()
        .kinds
        .as_ref()
        .is_some_and(|named| named.len() > supported_kinds.len());
    let accepted = if !protocol_known {
        condition(
            "Accepted",
            false,
            "UnsupportedProtocol",
            &format!("pilot does not serve the protocol {:?}", listener.protocol),
        )
    } else if clients_unverified {
        condition(
            "Accepted",
            false,
            "NoValidCACertificate",
            "the Gateway's tls.frontend names no certificate authority that verifies this listener's clients \
             (see ResolvedRefs)",
        )
    } else {
        condition("Accepted", true, "Accepted", "pilot takes this listener")
    };
    let resolved = if named_unsupported {
        condition(
            "ResolvedRefs",
            false,
            "InvalidRouteKinds",
            "some route kinds in allowedRoutes.kinds are not ones this listener's protocol carries",
        )
    } else if let Err((reason, message)) = &certificates {
        condition("ResolvedRefs", false, reason, message)
    } else if let Some((reason, message)) = clients.as_ref().and_then(|c| c.problem.as_ref()) {
        condition("ResolvedRefs", false, reason, message)
    } else {
        condition(
            "ResolvedRefs",
            true,
            "ResolvedRefs",
            "the listener's references resolved",
        )
    };
    ListenerStatus {
        name: listener.name.clone(),
        supported_kinds,
        attached_routes,
        conditions: vec![
            accepted,
            condition(
                "Conflicted",
                false,
                "NoConflicts",
                "no other listener claims its port and hostname",
            ),
            if !protocol_known {
                condition(
                    "Programmed",
                    false,
                    "Invalid",
                    "the listener is not accepted: pilot serves it to no proxy",
                )
            } else if certificates.is_err() {
                condition(
                    "Programmed",
                    false,
                    "Invalid",
                    "its certificate references do not resolve (see ResolvedRefs): the router proxies end no TLS on it",
                )
            } else if !served(listener) {
                condition(
                    "Programmed",
                    false,
                    "Pending",
                    &format!(
                        "pilot does not serve {} listeners {}of the Gateway API to router proxies yet",
                        listener.protocol,
                        if listener.tls.is_some() {
                            "terminating TLS "
                        } else {
                            ""
                        }
                    ),
                )
            } else if clients_unverified {
                condition(
                    "Programmed",
                    false,
                    "Invalid",
                    "no certificate authority verifies its clients (see Accepted): the router proxies do not serve it",
                )
            } else {
                condition(
                    "Programmed",
                    true,
                    "Programmed",
                    "served to the Gateway's router proxies",
                )
            },
            resolved,
        ],
    }
}

fn parent_status(
    parent: &ParentReference,
    route: &Route<'_>,
    now: SystemTime,
    accepted: Result<(), (&'static str, String)>,
    resolved: &Result<(), (&'static str, String)>,
) -> RouteParentStatus {
    let condition = condition(route.generation, now);
    let accepted = match accepted {
        Ok(()) => condition("Accepted", true, "Accepted", "the parent accepted the route"),
        Err((reason, message)) => condition("Accepted", false, reason, &message),
    };
    let resolved = match resolved {
        Ok(()) => condition("ResolvedRefs", true, "ResolvedRefs", "every backend resolved"),
        Err((reason, message)) => condition("ResolvedRefs", false, reason, message),
    };
    RouteParentStatus {
        parent_ref: serde_json::to_value(parent).unwrap_or_default(),
        controller_name: CONTROLLER_NAME.to_string(),
        conditions: vec![accepted, resolved],
    }
}

/// Each BackendTLSPolicy's status, for each of pilot's Gateways with a
/// route sending traffic to a Service it targets (its ancestors):
/// `Accepted` (`Conflicted` when an older policy targets the same Service
/// and section, `Invalid` for a well-known set of certificates other than
/// `System`, `NoValidCACertificate` when no `caCertificateRefs` entry
/// resolves) and `ResolvedRefs` (`InvalidKind` for an entry that is not a
/// core ConfigMap, `InvalidCACertificateRef` for a ConfigMap the credential
/// source lacks or whose `ca.crt` holds no certificate).
fn policy_statuses(
    input: &Input,
    routes: &[Route<'_>],
    ours: &BTreeSet<&str>,
    credentials: Credentials<'_>,
    now: SystemTime,
    out: &mut HashMap<ConfigKey, GatewayApiStatus>,
) {
    let ordered = crate::backend_tls::in_precedence(&input.policies);
    for (rank, policy) in ordered.iter().enumerate() {
        let namespace = policy.meta.namespace.as_str();
        let targets: Vec<_> = crate::backend_tls::services(&policy.spec.target_refs).collect();
        // The Gateways of pilot's classes whose routes send to a target.
        let mut ancestors: BTreeSet<(&str, &str)> = BTreeSet::new();
        for route in routes {
            let sends = route.backends.iter().any(|b| {
                b.group.is_empty()
                    && b.kind == "Service"
                    && b.namespace.unwrap_or(route.namespace) == namespace
                    && targets.iter().any(|t| t.name == b.name)
            });
            if !sends {
                continue;
            }
            for parent in &route.parents {
                if (parent.group(), parent.kind()) != (GROUP, "Gateway") {
                    continue;
                }
                let parent_namespace = parent.namespace.as_deref().unwrap_or(route.namespace);
                let ours = input.gateways.iter().any(|g| {
                    g.meta.namespace == parent_namespace
                        && g.meta.name == parent.name
                        && ours.contains(g.spec.gateway_class_name.as_str())
                });
                if ours {
                    ancestors.insert((parent_namespace, parent.name.as_str()));
                }
            }
        }
        if ancestors.is_empty() {
            continue;
        }
        let condition = condition(policy.meta.generation, now);
        let (resolved, valid) = ca_refs(policy, credentials);
        let conflicted = ordered[..rank].iter().find(|earlier| {
            earlier.meta.namespace == policy.meta.namespace
                && crate::backend_tls::services(&earlier.spec.target_refs).any(|t| {
                    targets
                        .iter()
                        .any(|mine| mine.name == t.name && mine.section_name == t.section_name)
                })
        });
        let well_known = policy
            .spec
            .validation
            .as_ref()
            .and_then(|v| v.well_known_ca_certificates.as_deref());
        let accepted = if let Some(earlier) = conflicted {
            condition(
                "Accepted",
                false,
                "Conflicted",
                &format!(
                    "the older BackendTLSPolicy {}/{} targets the same Service and section",
                    earlier.meta.namespace, earlier.meta.name
                ),
            )
        } else if let Some(set) = well_known.filter(|set| *set != "System") {
            condition(
                "Accepted",
                false,
                "Invalid",
                &format!("wellKnownCACertificates {set:?} is not a set pilot knows (System is)"),
            )
        } else if !valid {
            condition(
                "Accepted",
                false,
                "NoValidCACertificate",
                "no caCertificateRefs entry resolves: connections to the targets fail",
            )
        } else {
            condition("Accepted", true, "Accepted", "pilot applies this policy")
        };
        let resolved = match &resolved {
            Ok(()) => condition("ResolvedRefs", true, "ResolvedRefs", "every reference resolves"),
            Err((reason, message)) => condition("ResolvedRefs", false, reason, message),
        };
        let ancestors = ancestors
            .into_iter()
            .map(|(namespace, name)| PolicyAncestorStatus {
                ancestor_ref: serde_json::json!({
                    "group": GROUP,
                    "kind": "Gateway",
                    "namespace": namespace,
                    "name": name,
                }),
                controller_name: CONTROLLER_NAME.to_string(),
                conditions: vec![accepted.clone(), resolved.clone()],
            })
            .collect();
        out.insert(
            policy.key(),
            GatewayApiStatus {
                ancestors,
                ..Default::default()
            },
        );
    }
}

/// A policy's `caCertificateRefs`: whether each resolves (the first that
/// does not, with the reason), and whether at least one does (or the
/// policy names a well-known set instead).
fn ca_refs(
    policy: &Config<BackendTlsPolicy>,
    credentials: Credentials<'_>,
) -> (Result<(), (&'static str, String)>, bool) {
    let refs = policy
        .spec
        .validation
        .as_ref()
        .and_then(|v| v.ca_certificate_refs.as_deref())
        .unwrap_or_default();
    let namespace = &policy.meta.namespace;
    let mut first_error = None;
    let mut any_valid = refs.is_empty();
    for reference in refs {
        let error = if !crate::backend_tls::is_config_map(reference.group.as_deref(), &reference.kind) {
            Some((
                "InvalidKind",
                not_a_config_map(&reference.kind, reference.group.as_deref()),
            ))
        } else {
            match credentials {
                None => Some((
                    "InvalidCACertificateRef",
                    format!(
                        "the ConfigMap {namespace}/{} cannot be read: pilot-discovery has no credential source \
                         (--ca-bundles-dir, --kube-credentials)",
                        reference.name
                    ),
                )),
                Some(held) if !held.holds_ca_bundle(namespace, &reference.name) => Some((
                    "InvalidCACertificateRef",
                    format!(
                        "the ConfigMap {namespace}/{} does not exist or its ca.crt holds no PEM certificate",
                        reference.name
                    ),
                )),
                Some(_) => None,
            }
        };
        match error {
            Some(error) => {
                first_error.get_or_insert(error);
            }
            None => any_valid = true,
        }
    }
    (first_error.map_or(Ok(()), Err), any_valid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::document;

    const DOMAIN: &str = "cluster.local";

    /// A credential source holding the Secrets and bundles its function
    /// says it holds.
    struct Holding<F: Fn(&str, &str) -> bool>(F);

    impl<F: Fn(&str, &str) -> bool> CredentialsHeld for Holding<F> {
        fn holds_secret(&self, namespace: &str, name: &str) -> bool {
            (self.0)(namespace, name)
        }

        fn holds_ca_bundle(&self, namespace: &str, name: &str) -> bool {
            (self.0)(namespace, name)
        }
    }

    /// A registry of `hosts` (no address, no instance) and of `fronting`
    /// Services (hostname, address, the Gateway whose router is their
    /// instance).
    struct TestRegistry<'a> {
        hosts: &'a [&'a str],
        fronting: &'a [(&'a str, Option<IpAddr>, &'a str)],
    }

    impl RegistryView for TestRegistry<'_> {
        fn exists(&self, host: &str) -> bool {
            self.hosts.contains(&host) || self.fronting.iter().any(|(h, _, _)| *h == host)
        }

        fn labelled(&self, key: &str, value: &str) -> Vec<(String, Option<IpAddr>)> {
            self.fronting
                .iter()
                .filter(|(_, _, gateway)| key == GATEWAY_NAME_LABEL && *gateway == value)
                .map(|(host, ip, _)| (host.to_string(), *ip))
                .collect()
        }
    }

    /// Every registry Service exists.
    struct Everything;

    impl RegistryView for Everything {
        fn exists(&self, _: &str) -> bool {
            true
        }

        fn labelled(&self, _: &str, _: &str) -> Vec<(String, Option<IpAddr>)> {
            Vec::new()
        }
    }

    fn statuses_of(text: &str, services: &[&str]) -> HashMap<String, GatewayApiStatus> {
        statuses_in(
            text,
            &TestRegistry {
                hosts: services,
                fronting: &[],
            },
        )
    }

    fn statuses_in(text: &str, registry: &dyn RegistryView) -> HashMap<String, GatewayApiStatus> {
        let objects: Vec<Arc<DynConfig>> = document::parse("t.yaml", text, &pilot_api::default_registry())
            .unwrap()
            .into_iter()
            .map(Arc::new)
            .collect();
        let every_secret = Holding(|_, _| true);
        statuses(
            &objects,
            registry,
            Some(&every_secret),
            DOMAIN,
            SystemTime::UNIX_EPOCH,
        )
        .into_iter()
        .map(|(key, status)| {
            (
                format!("{}/{}", pilot_model::kind_name(&key.kind), key.name),
                status,
            )
        })
        .collect()
    }

    /// (type, status, reason) of each condition.
    fn said(conditions: &[Condition]) -> Vec<(String, String, String)> {
        conditions
            .iter()
            .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
            .collect()
    }

    fn c(type_: &str, status: &str, reason: &str) -> (String, String, String) {
        (type_.into(), status.into(), reason.into())
    }

    const EDGE: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
        spec: {controllerName: pilot.io/gateway-controller}\n---\n\
        apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: other}\n\
        spec: {controllerName: example.com/other}\n---\n\
        apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: web, generation: 3}\n\
        spec:\n  gatewayClassName: pilot\n  listeners:\n  - {name: http, protocol: HTTP, port: 80, hostname: \"*.example.com\"}\n  \
        - {name: all, protocol: HTTP, port: 8080, allowedRoutes: {namespaces: {from: All}}}\n  \
        - {name: secure, protocol: HTTPS, port: 443, hostname: secure.example.com, tls: {certificateRefs: [{name: cert}]}}\n---\n\
        apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: theirs, namespace: web}\n\
        spec:\n  gatewayClassName: other\n  listeners:\n  - {name: http, protocol: HTTP, port: 80}\n";

    fn route(name: &str, namespace: &str, parent: &str, hostnames: &str, backend: &str) -> String {
        format!(
            "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: {name}, namespace: {namespace}, generation: 2}}\n\
             spec:\n  parentRefs:\n  - {parent}\n  hostnames: {hostnames}\n  rules:\n  - backendRefs:\n    - {backend}\n"
        )
    }

    #[test]
    fn a_gateways_addresses_are_its_fronting_services_and_those_it_asks_for_are_checked() {
        // The Services of the Gateway's namespace with a router of its as
        // instance: each one's IP, then each one's hostname. A Service of
        // another namespace, or fronting another Gateway, is not.
        let ip = |text: &str| Some(text.parse::<IpAddr>().unwrap());
        let fronting = [
            ("edge.web.cluster.local", ip("10.96.0.80"), "edge"),
            ("edge-headless.web.cluster.local", None, "edge"),
            ("edge.store.cluster.local", ip("10.96.1.80"), "edge"),
            ("other.web.cluster.local", ip("10.96.0.81"), "other"),
        ];
        let registry = TestRegistry {
            hosts: &[],
            fronting: &fronting,
        };
        let gateway = |addresses: &str| {
            EDGE.replace(
                "spec:\n  gatewayClassName: pilot\n",
                &format!("spec:\n  gatewayClassName: pilot\n  addresses: {addresses}\n"),
            )
        };
        let found = statuses_in(&gateway("[]"), &registry);
        let edge = &found["Gateway/edge"];
        let addresses: Vec<(&str, &str)> = edge
            .addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.value.as_str()))
            .collect();
        assert_eq!(
            addresses,
            [
                ("IPAddress", "10.96.0.80"),
                ("Hostname", "edge-headless.web.cluster.local"),
                ("Hostname", "edge.web.cluster.local"),
            ]
        );
        assert_eq!(
            said(&edge.conditions),
            [
                c("Accepted", "True", "Accepted"),
                c("Programmed", "True", "Programmed")
            ]
        );
        // Asked for: an IP (with or without a value) or a hostname that is
        // bound is programmed; one that is not says AddressNotAssigned
        // (and names it), still served.
        for (asked, programmed) in [
            ("[{type: IPAddress}]", c("Programmed", "True", "Programmed")),
            ("[{value: 10.96.0.80}]", c("Programmed", "True", "Programmed")),
            (
                "[{type: Hostname, value: edge.web.cluster.local}]",
                c("Programmed", "True", "Programmed"),
            ),
            (
                "[{type: IPAddress, value: 10.96.0.99}]",
                c("Programmed", "False", "AddressNotAssigned"),
            ),
            (
                "[{type: Hostname, value: elsewhere.example.com}]",
                c("Programmed", "False", "AddressNotAssigned"),
            ),
        ] {
            let found = statuses_in(&gateway(asked), &registry);
            let edge = &found["Gateway/edge"];
            assert_eq!(said(&edge.conditions)[1], programmed, "{asked}");
            if programmed.1 == "False" {
                let message = &edge.conditions[1].message;
                assert!(
                    message.contains("10.96.0.99") || message.contains("elsewhere.example.com"),
                    "{message}"
                );
            }
        }
        // No Service in front of the routers: no address; one asked for
        // without a value cannot be given.
        let alone = TestRegistry {
            hosts: &[],
            fronting: &[],
        };
        let found = statuses_in(&gateway("[{type: IPAddress}]"), &alone);
        let edge = &found["Gateway/edge"];
        assert!(edge.addresses.is_empty());
        assert_eq!(
            said(&edge.conditions)[1],
            c("Programmed", "False", "AddressNotAssigned")
        );
        // A type pilot does not give: not accepted, not served.
        let text = gateway("[{type: NamedAddress, value: public}]");
        let found = statuses_in(&text, &registry);
        let edge = &found["Gateway/edge"];
        assert_eq!(
            said(&edge.conditions),
            [
                c("Accepted", "False", "UnsupportedAddress"),
                c("Programmed", "False", "Invalid")
            ]
        );
        assert!(edge.addresses.is_empty());
        let objects = document::parse("t.yaml", &text, &pilot_api::default_registry()).unwrap();
        let model = crate::RoutingConfigs::from_configs(&objects).unwrap().compile();
        assert!(
            model.ingress_servers().is_empty(),
            "{:?}",
            model.ingress_servers()
        );
    }

    #[test]
    fn a_gateways_backend_client_certificate_is_a_secret_it_may_refer_to() {
        // tls.backend.clientCertificateRef: ResolvedRefs says whether it
        // resolves, and the edge's servers of the Gateway carry it as the
        // credential their routers present (none when it does not).
        let with = |reference: &str| {
            EDGE.replacen(
                "  listeners:\n  - {name: http,",
                &format!("  tls: {{backend: {{clientCertificateRef: {reference}}}}}\n  listeners:\n  - {{name: http,"),
                1,
            )
        };
        let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
                     metadata: {name: g, namespace: certs}\nspec:\n  from: [{group: gateway.networking.k8s.io, \
                     kind: Gateway, namespace: web}]\n  to: [{group: \"\", kind: Secret}]\n";
        let cases = [
            (
                with("{name: client}"),
                Some("True/ResolvedRefs"),
                Some("kubernetes://web/client"),
            ),
            (
                with("{group: example.com, kind: Secret, name: client}"),
                Some("False/InvalidClientCertificateRef"),
                None,
            ),
            (
                with("{kind: ConfigMap, name: client}"),
                Some("False/InvalidClientCertificateRef"),
                None,
            ),
            (
                with("{name: client, namespace: certs}"),
                Some("False/RefNotPermitted"),
                None,
            ),
            (
                with("{name: client, namespace: certs}") + grant,
                Some("True/ResolvedRefs"),
                Some("kubernetes://certs/client"),
            ),
            (EDGE.to_string(), None, None),
        ];
        for (text, resolved, credential) in cases {
            let found = statuses_of(&text, &[]);
            let said_resolved = found["Gateway/edge"]
                .conditions
                .iter()
                .find(|c| c.type_ == "ResolvedRefs")
                .map(|c| format!("{}/{}", c.status, c.reason));
            assert_eq!(said_resolved.as_deref(), resolved, "{text}");
            assert!(
                found["Gateway/edge"]
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Accepted" && c.status == "True"),
                "{text}"
            );
            let objects = document::parse("t.yaml", &text, &pilot_api::default_registry()).unwrap();
            let model = crate::RoutingConfigs::from_configs(&objects).unwrap().compile();
            let servers = model.ingress_servers();
            assert!(!servers.is_empty(), "{text}");
            for server in servers {
                assert_eq!(server.backend_client_credential.as_deref(), credential, "{text}");
            }
        }
    }

    #[test]
    fn a_class_naming_parameters_is_not_accepted_and_its_gateways_are_not_pilots() {
        // GatewayClass parametersRef: pilot reads no parameters, so the
        // class is refused (InvalidParameters) rather than its Gateways
        // served without them; those Gateways and their routes get no
        // status from pilot, and the edge serves none of them.
        let text = EDGE.replace(
            "spec: {controllerName: pilot.io/gateway-controller}",
            "spec: {controllerName: pilot.io/gateway-controller, parametersRef: {group: \"\", kind: ConfigMap, name: tuning, namespace: web}}",
        ) + &route("shop", "web", "{name: edge}", "[shop.example.com]", "{name: shop, port: 80}");
        let found = statuses_of(&text, &["shop.web.cluster.local"]);
        let class = &found["GatewayClass/pilot"].conditions;
        assert_eq!(said(class), [c("Accepted", "False", "InvalidParameters")]);
        assert!(
            class[0].message.contains("ConfigMap \"tuning\""),
            "{}",
            class[0].message
        );
        assert!(!found.contains_key("Gateway/edge"), "{found:?}");
        assert!(!found.contains_key("HTTPRoute/shop"), "{found:?}");
        let objects = document::parse("t.yaml", &text, &pilot_api::default_registry()).unwrap();
        let model = crate::RoutingConfigs::from_configs(&objects).unwrap().compile();
        assert!(
            model.ingress_servers().is_empty(),
            "nothing served: {:?}",
            model.ingress_servers()
        );
    }

    #[test]
    fn pilots_class_and_gateway_are_accepted_and_listeners_count_their_routes() {
        let text = format!(
            "{EDGE}{}{}",
            route(
                "shop",
                "web",
                "{name: edge}",
                "[shop.example.com]",
                "{name: shop, port: 80}"
            ),
            route(
                "other-ns",
                "store",
                "{name: edge, namespace: web}",
                "[]",
                "{name: shop, port: 80}"
            ),
        );
        let found = statuses_of(&text, &["shop.web.cluster.local", "shop.store.cluster.local"]);
        assert_eq!(
            said(&found["GatewayClass/pilot"].conditions),
            [c("Accepted", "True", "Accepted")]
        );
        assert!(
            !found.contains_key("GatewayClass/other"),
            "another controller's class"
        );
        assert!(
            !found.contains_key("Gateway/theirs"),
            "another controller's Gateway"
        );
        let edge = &found["Gateway/edge"];
        assert_eq!(
            said(&edge.conditions),
            [
                c("Accepted", "True", "Accepted"),
                c("Programmed", "True", "Programmed")
            ]
        );
        assert!(
            edge.conditions[1]
                .message
                .starts_with("served to router proxies in web")
                && !edge.conditions[1].message.contains("without"),
            "every listener is served, the HTTPS one with its certificate: {}",
            edge.conditions[1].message
        );
        assert_eq!(edge.conditions[0].observed_generation, Some(3));
        let programmed: Vec<(&str, &str)> = edge
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.conditions[2].status.as_str()))
            .collect();
        assert_eq!(
            programmed,
            [("http", "True"), ("all", "True"), ("secure", "True")]
        );
        let counts: Vec<(&str, i32)> = edge
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.attached_routes))
            .collect();
        // shop attaches to both (same namespace); other-ns only to `all`.
        assert_eq!(counts, [("http", 1), ("all", 2), ("secure", 0)]);
        let shop = &found["HTTPRoute/shop"].parents[0];
        assert_eq!(shop.controller_name, CONTROLLER_NAME);
        assert_eq!(shop.parent_ref, serde_json::json!({"name": "edge"}));
        assert_eq!(
            said(&shop.conditions),
            [
                c("Accepted", "True", "Accepted"),
                c("ResolvedRefs", "True", "ResolvedRefs")
            ]
        );
        assert_eq!(shop.conditions[0].observed_generation, Some(2));
    }

    #[test]
    fn a_route_refused_by_its_parent_says_why() {
        let cases = [
            ("{name: nowhere}", "[]", "NoMatchingParent"),
            ("{name: edge, sectionName: missing}", "[]", "NoMatchingParent"),
            ("{name: edge, port: 9999}", "[]", "NoMatchingParent"),
            (
                "{name: edge, sectionName: http, namespace: web}",
                "[shop.example.org]",
                "NoMatchingListenerHostname",
            ),
        ];
        for (parent, hostnames, reason) in cases {
            let text = format!(
                "{EDGE}{}",
                route("r", "web", parent, hostnames, "{name: shop, port: 80}")
            );
            let found = statuses_of(&text, &["shop.web.cluster.local"]);
            let conditions = said(&found["HTTPRoute/r"].parents[0].conditions);
            assert_eq!(conditions[0], c("Accepted", "False", reason), "{parent}");
        }
        // From another namespace, only the listener allowing All takes it.
        let text = format!(
            "{EDGE}{}",
            route(
                "r",
                "store",
                "{name: edge, namespace: web, sectionName: http}",
                "[]",
                "{name: s, port: 80}"
            )
        );
        let found = statuses_of(&text, &["s.store.cluster.local"]);
        assert_eq!(
            said(&found["HTTPRoute/r"].parents[0].conditions)[0],
            c("Accepted", "False", "NotAllowedByListeners")
        );
        // A route to another controller's Gateway gets no status from pilot.
        let text = format!(
            "{EDGE}{}",
            route("r", "web", "{name: theirs}", "[]", "{name: s, port: 80}")
        );
        assert!(!statuses_of(&text, &[]).contains_key("HTTPRoute/r"));
    }

    #[test]
    fn backends_resolve_in_the_registry_and_a_gateways_routes_cross_namespaces_only_under_a_reference_grant()
    {
        let mesh = |backend: &str| {
            route(
                "r",
                "shop",
                "{group: \"\", kind: Service, name: cart}",
                "[]",
                backend,
            )
        };
        let services = ["cart.shop.cluster.local", "db.data.cluster.local"];
        let statuses = |text: &str| -> Vec<Vec<(String, String, String)>> {
            statuses_of(text, &services)["HTTPRoute/r"]
                .parents
                .iter()
                .map(|p| said(&p.conditions))
                .collect()
        };
        let resolved = |text: &str| statuses(text).swap_remove(0);
        assert_eq!(
            resolved(&mesh("{name: cart, port: 80}")),
            [
                c("Accepted", "True", "Accepted"),
                c("ResolvedRefs", "True", "ResolvedRefs")
            ]
        );
        assert_eq!(
            resolved(&mesh("{name: gone, port: 80}"))[1],
            c("ResolvedRefs", "False", "BackendNotFound")
        );
        assert_eq!(
            resolved(&mesh("{group: example.com, kind: Bucket, name: b}"))[1],
            c("ResolvedRefs", "False", "InvalidKind")
        );
        // One route, a Service parent and a Gateway parent, a backend of
        // another namespace: the mesh needs no grant, the Gateway does.
        let both = format!(
            "{EDGE}{}",
            route(
                "r",
                "shop",
                "{group: \"\", kind: Service, name: cart}\n  - {name: edge, namespace: web, sectionName: all}",
                "[]",
                "{name: db, namespace: data, port: 5432}",
            )
        );
        let [mesh_parent, edge_parent] = <[_; 2]>::try_from(statuses(&both)).unwrap();
        assert_eq!(mesh_parent[1], c("ResolvedRefs", "True", "ResolvedRefs"));
        assert_eq!(edge_parent[0], c("Accepted", "True", "Accepted"));
        assert_eq!(edge_parent[1], c("ResolvedRefs", "False", "RefNotPermitted"));
        let grant = "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {name: shop, namespace: data}\n\
            spec:\n  from:\n  - {group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: shop}\n  to:\n  - {group: \"\", kind: Service}\n";
        let granted = statuses(&format!("{both}{grant}"));
        assert_eq!(granted[0][1], c("ResolvedRefs", "True", "ResolvedRefs"));
        assert_eq!(granted[1][1], c("ResolvedRefs", "True", "ResolvedRefs"));
        // A Service parent missing from the registry.
        let text = route(
            "r",
            "shop",
            "{group: \"\", kind: Service, name: gone}",
            "[]",
            "{name: cart, port: 80}",
        );
        assert_eq!(resolved(&text)[0], c("Accepted", "False", "NoMatchingParent"));
    }

    #[test]
    fn a_namespace_selector_is_read_by_the_namespace_name_label_only() {
        let selector = |text: &str| -> LabelSelector { serde_json::from_str(text).unwrap() };
        let by_name = selector(r#"{"matchLabels": {"kubernetes.io/metadata.name": "web"}}"#);
        assert!(selects_namespace(&by_name, "web"));
        assert!(!selects_namespace(&by_name, "store"));
        let listed = selector(
            r#"{"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["web", "store"]}]}"#,
        );
        assert!(selects_namespace(&listed, "store"));
        assert!(!selects_namespace(&listed, "infra"));
        let not_listed = selector(
            r#"{"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["web"]}]}"#,
        );
        assert!(selects_namespace(&not_listed, "store"));
        assert!(!selects_namespace(&not_listed, "web"));
        // Another label: pilot does not know a namespace's other labels.
        let other = selector(r#"{"matchLabels": {"gateway-conformance": "backend"}}"#);
        assert!(!selects_namespace(&other, "web"));
        let absent = selector(r#"{"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}"#);
        assert!(!selects_namespace(&absent, "web"));
    }

    #[test]
    fn a_secret_the_credential_source_lacks_is_an_invalid_certificate_ref() {
        // GatewayInvalidTLSConfiguration's nonexistent and malformed
        // Secrets: the source holds neither.
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
                    spec: {controllerName: pilot.io/gateway-controller}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: infra}\n\
                    spec:\n  gatewayClassName: pilot\n  listeners:\n  \
                    - {name: held, protocol: HTTPS, port: 443, hostname: a.example.com, tls: {certificateRefs: [{name: cert}]}}\n  \
                    - {name: missing, protocol: HTTPS, port: 443, hostname: b.example.com, tls: {certificateRefs: [{name: nonexistent}]}}\n";
        let objects: Vec<Arc<DynConfig>> = document::parse("t.yaml", text, &pilot_api::default_registry())
            .unwrap()
            .into_iter()
            .map(Arc::new)
            .collect();
        let held = Holding(|namespace, name| (namespace, name) == ("infra", "cert"));
        let conditions = |credentials: Credentials<'_>| {
            let found = statuses(&objects, &Everything, credentials, DOMAIN, SystemTime::UNIX_EPOCH);
            let edge = found
                .iter()
                .find(|(key, status)| key.name == "edge" && !status.listeners.is_empty())
                .map(|(_, status)| status)
                .unwrap();
            let listeners: Vec<Vec<(String, String, String)>> = edge
                .listeners
                .iter()
                .map(|l| {
                    l.conditions
                        .iter()
                        .filter(|c| c.type_ == "ResolvedRefs" || c.type_ == "Programmed")
                        .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                        .collect()
                })
                .collect();
            (listeners, edge.listeners[1].conditions[3].message.clone())
        };
        let s = |t: &str, st: &str, r: &str| (t.to_string(), st.to_string(), r.to_string());
        let resolved = vec![
            s("Programmed", "True", "Programmed"),
            s("ResolvedRefs", "True", "ResolvedRefs"),
        ];
        let invalid = vec![
            s("Programmed", "False", "Invalid"),
            s("ResolvedRefs", "False", "InvalidCertificateRef"),
        ];
        let (listeners, message) = conditions(Some(&held));
        assert_eq!(listeners, [resolved, invalid.clone()]);
        assert!(message.contains("infra/nonexistent does not exist"), "{message}");
        // No credential source: no Secret can be read.
        let (listeners, message) = conditions(None);
        assert_eq!(listeners, [invalid.clone(), invalid]);
        assert!(message.contains("no credential source"), "{message}");
    }

    #[test]
    fn a_certificate_in_another_namespace_needs_a_reference_grant() {
        let gateway = |refs: &str| {
            format!(
                "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {{name: pilot}}\n\
                 spec: {{controllerName: pilot.io/gateway-controller}}\n---\n\
                 apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: edge, namespace: infra}}\n\
                 spec:\n  gatewayClassName: pilot\n  listeners:\n  \
                 - {{name: https, protocol: HTTPS, port: 443, tls: {{certificateRefs: [{refs}]}}}}\n"
            )
        };
        let grant = |to: &str| {
            format!(
                "---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\n\
                 metadata: {{name: certs, namespace: web}}\nspec:\n  \
                 from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: infra}}]\n  to: [{to}]\n"
            )
        };
        let resolved = |text: &str| {
            let found = statuses_of(text, &[]);
            let listener = &found["Gateway/edge"].listeners[0];
            let of = |type_: &str| listener.conditions.iter().find(|c| c.type_ == type_).unwrap();
            let (condition, programmed) = (of("ResolvedRefs"), of("Programmed"));
            // Served exactly while its references resolve.
            assert_eq!(
                (programmed.status.as_str(), programmed.reason.as_str()),
                if condition.status == "True" {
                    ("True", "Programmed")
                } else {
                    ("False", "Invalid")
                },
                "{text}"
            );
            (condition.status.clone(), condition.reason.clone())
        };
        let t = |reason: &str| ("True".to_string(), reason.to_string());
        let f = |reason: &str| ("False".to_string(), reason.to_string());
        // The Gateway's own namespace: no grant needed.
        assert_eq!(resolved(&gateway("{name: cert}")), t("ResolvedRefs"));
        // Another namespace: refused without a grant (the conformance's
        // GatewaySecretMissingReferenceGrant), taken with one naming the
        // Secret or every Secret (…ReferenceGrantSpecific, …AllInNamespace).
        let other = gateway("{group: \"\", kind: Secret, name: certificate, namespace: web}");
        assert_eq!(resolved(&other), f("RefNotPermitted"));
        let specific = grant("{group: \"\", kind: Secret, name: certificate}");
        assert_eq!(resolved(&format!("{other}{specific}")), t("ResolvedRefs"));
        let all = grant("{group: \"\", kind: Secret}");
        assert_eq!(resolved(&format!("{other}{all}")), t("ResolvedRefs"));
        // A grant for another Secret (…InvalidReferenceGrant) or kind.
        let wrong = grant("{group: \"\", kind: Secret, name: not-the-certificate}");
        assert_eq!(resolved(&format!("{other}{wrong}")), f("RefNotPermitted"));
        let services = grant("{group: \"\", kind: Service}");
        assert_eq!(resolved(&format!("{other}{services}")), f("RefNotPermitted"));
        // Not a Secret.
        assert_eq!(
            resolved(&gateway("{group: example.com, kind: Vault, name: cert}")),
            f("InvalidCertificateRef")
        );
        // Options in their stead (the CRDs allow it): pilot reads none, so
        // the listener has no certificate and is not served.
        let options_only = gateway("").replace(
            "tls: {certificateRefs: []}",
            "tls: {options: {example.com/certificate-from: vault}}",
        );
        assert!(options_only.contains("options"), "{options_only}");
        assert_eq!(resolved(&options_only), f("InvalidCertificateRef"));
    }

    #[test]
    fn a_backend_tls_policy_has_a_status_for_each_gateway_routing_to_its_services() {
        let text = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pilot}\n\
                    spec: {controllerName: pilot.io/gateway-controller}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: edge, namespace: infra}\n\
                    spec:\n  gatewayClassName: pilot\n  listeners: [{name: http, protocol: HTTP, port: 80}]\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: api, namespace: infra}\n\
                    spec:\n  parentRefs: [{name: edge}]\n  rules: [{backendRefs: [{name: api, port: 443}]}]\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n\
                    metadata: {name: first, namespace: infra, creationTimestamp: '2026-01-01T00:00:00Z'}\n\
                    spec:\n  targetRefs: [{group: '', kind: Service, name: api}]\n  \
                    validation: {caCertificateRefs: [{group: '', kind: ConfigMap, name: ca}], hostname: api.example.com}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n\
                    metadata: {name: second, namespace: infra, creationTimestamp: '2026-01-02T00:00:00Z'}\n\
                    spec:\n  targetRefs: [{group: '', kind: Service, name: api}]\n  \
                    validation: {wellKnownCACertificates: System, hostname: api.example.com}\n---\n\
                    apiVersion: gateway.networking.k8s.io/v1\nkind: BackendTLSPolicy\n\
                    metadata: {name: unrouted, namespace: infra}\n\
                    spec:\n  targetRefs: [{group: '', kind: Service, name: idle}]\n  \
                    validation: {wellKnownCACertificates: System, hostname: idle.example.com}\n";
        let found = statuses_of(text, &[]);
        let conditions = |name: &str| -> Vec<(String, String, String)> {
            let status = &found[&format!("BackendTLSPolicy/{name}")];
            assert_eq!(status.ancestors.len(), 1, "{name}");
            assert_eq!(status.ancestors[0].ancestor_ref["name"], "edge");
            assert_eq!(status.ancestors[0].ancestor_ref["kind"], "Gateway");
            status.ancestors[0]
                .conditions
                .iter()
                .map(|c| (c.type_.clone(), c.status.clone(), c.reason.clone()))
                .collect()
        };
        let triple = |t: &str, s: &str, r: &str| (t.to_string(), s.to_string(), r.to_string());
        assert_eq!(
            conditions("first"),
            [
                triple("Accepted", "True", "Accepted"),
                triple("ResolvedRefs", "True", "ResolvedRefs")
            ]
        );
        // The younger policy for the same Service: conflicted.
        assert_eq!(conditions("second")[0], triple("Accepted", "False", "Conflicted"));
        // A policy no route of a Gateway sends traffic under has no
        // ancestor to report for.
        assert!(!found.contains_key("BackendTLSPolicy/unrouted"));
    }
}
