//! An edge proxy's route configurations before they are built
//! ([`EdgeRouteConfiguration`]): what the gateway generation (`gateway/`)
//! plans, what [`generate`](crate::generate) builds, and what a server
//! keeping encoded virtual hosts between pushes encodes host by host
//! ([`GatewayVirtualHost`] is the key).

use std::sync::Arc;

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost, virtual_host};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{ServiceDiscovery, ServiceInstance};
use pilot_routing::{GatewayHost, HttpAction, HttpRoute};

use crate::Proxy;

/// An edge proxy's route configuration before it is built: its virtual
/// hosts in order, each one gateway host of one server
/// ([`GatewayVirtualHost`], which a server keeping encoded virtual hosts
/// between pushes can take as it encoded it before) or built already (an
/// ingress rule server's, or a host several servers name).
/// [`build`](Self::build) gives the `RouteConfiguration`.
#[derive(Debug, Clone)]
pub struct EdgeRouteConfiguration {
    /// `RouteConfiguration.name`.
    pub name: String,
    /// `RouteConfiguration.virtual_hosts`, in order.
    pub virtual_hosts: Vec<EdgeVirtualHost>,
    /// `RouteConfiguration.ignore_port_in_host_matching`: a gateway's
    /// hosts match a `Host` header with a port (`validate_clusters` is
    /// always false).
    pub ignore_port_in_host_matching: bool,
    /// `RouteConfiguration.request_headers_to_remove`.
    pub request_headers_to_remove: Vec<String>,
}

impl EdgeRouteConfiguration {
    /// The route configuration.
    pub fn build(&self) -> RouteConfiguration {
        RouteConfiguration {
            name: self.name.clone(),
            virtual_hosts: self.virtual_hosts.iter().map(EdgeVirtualHost::build).collect(),
            validate_clusters: Some(BoolValue { value: false }),
            ignore_port_in_host_matching: self.ignore_port_in_host_matching,
            request_headers_to_remove: self.request_headers_to_remove.clone(),
            ..Default::default()
        }
    }
}

/// The fewest virtual hosts a route configuration has for it to be split
/// into one route configuration per host ([`EdgeRouteConfiguration::by_host`]).
/// Envoy applies a route configuration whole: at 3,000 hosts that takes it
/// about 25 ms per change, at 100 under a millisecond. Below this, one
/// route configuration is cheap to apply, and adding or removing a host
/// changes no listener.
pub const SCOPED_MIN_HOSTS: usize = 100;

impl EdgeRouteConfiguration {
    /// This configuration as one route configuration per virtual host,
    /// each with its scope key (the host's domain, in lower case), for an
    /// HTTP connection manager that picks the configuration by the
    /// request's host (Envoy's scoped routes): a change to one host then
    /// sends Envoy that host's configuration alone. Each is named
    /// `<name>/<domain>`.
    ///
    /// `None` (the configuration stays whole) when it has fewer than
    /// `min_hosts` virtual hosts, or when one serves a wildcard or more
    /// than one domain: a scope is found by exact key, and the host of
    /// a request no scope has gets no route, where a wildcard would have
    /// matched. Two hosts whose domains differ in case alone also keep it
    /// whole (Envoy matches domains case-insensitively).
    pub fn by_host(&self, min_hosts: usize) -> Option<Vec<(String, EdgeRouteConfiguration)>> {
        let domains: Option<Vec<&str>> = self
            .virtual_hosts
            .iter()
            .map(EdgeVirtualHost::only_domain)
            .collect();
        scoped_by_host(&domains?, min_hosts).then(|| self.split_by_host())
    }

    /// This configuration as one per virtual host (see
    /// [`by_host`](Self::by_host)), each with its scope key, whether or
    /// not it is [`scoped_by_host`]: a configuration holding some of a
    /// scoped one's hosts splits into the same configurations as it does.
    pub(crate) fn split_by_host(&self) -> Vec<(String, EdgeRouteConfiguration)> {
        self.virtual_hosts
            .iter()
            .map(|host| {
                let domain = host.only_domain().unwrap_or_default();
                (
                    domain.to_ascii_lowercase(),
                    EdgeRouteConfiguration {
                        name: format!("{}/{domain}", self.name),
                        virtual_hosts: vec![host.clone()],
                        ignore_port_in_host_matching: self.ignore_port_in_host_matching,
                        request_headers_to_remove: self.request_headers_to_remove.clone(),
                    },
                )
            })
            .collect()
    }
}

/// Whether a route configuration whose virtual hosts serve `domains` (one
/// each, in order) is split into one per host
/// ([`EdgeRouteConfiguration::by_host`]): `min_hosts` or more, none empty
/// or a wildcard, no two the same in lower case.
pub(crate) fn scoped_by_host(domains: &[&str], min_hosts: usize) -> bool {
    if domains.len() < min_hosts.max(1) {
        return false;
    }
    let mut keys = std::collections::HashSet::with_capacity(domains.len());
    domains
        .iter()
        .all(|domain| !domain.is_empty() && !domain.contains('*') && keys.insert(domain.to_ascii_lowercase()))
}

/// One virtual host of an [`EdgeRouteConfiguration`].
#[derive(Debug, Clone)]
pub enum EdgeVirtualHost {
    /// Built already (boxed: a virtual host is large, and most are
    /// gateway hosts).
    Built(Box<VirtualHost>),
    /// One gateway host of one server, built on demand.
    Gateway(GatewayVirtualHost),
}

impl EdgeVirtualHost {
    /// The virtual host.
    pub fn build(&self) -> VirtualHost {
        match self {
            EdgeVirtualHost::Built(host) => (**host).clone(),
            EdgeVirtualHost::Gateway(host) => host.build(),
        }
    }

    /// Its domain, when it has exactly one.
    pub(crate) fn only_domain(&self) -> Option<&str> {
        match self {
            EdgeVirtualHost::Built(host) if host.domains.len() == 1 => Some(&host.domains[0]),
            EdgeVirtualHost::Built(_) => None,
            EdgeVirtualHost::Gateway(host) => Some(&host.host.host),
        }
    }

    /// Whether its only domain is `domain`.
    pub(crate) fn names_only(&self, domain: &str) -> bool {
        match self {
            EdgeVirtualHost::Built(host) => host.domains.len() == 1 && host.domains[0] == domain,
            EdgeVirtualHost::Gateway(host) => host.host.host == domain,
        }
    }

    /// The virtual host, built (in place) if it was not.
    pub(crate) fn built_mut(&mut self) -> &mut VirtualHost {
        if let EdgeVirtualHost::Gateway(host) = self {
            *self = EdgeVirtualHost::Built(Box::new(host.build()));
        }
        match self {
            EdgeVirtualHost::Built(host) => host,
            EdgeVirtualHost::Gateway(_) => unreachable!("built just above"),
        }
    }
}

/// A gateway host of one server on one port, with everything else its
/// virtual host depends on: whether the server redirects to HTTPS, which
/// of its routes' matches admit the proxy, and the port each destination
/// naming none is sent to (its service's, as the registry has it).
///
/// Two are equal when they hold the same host (the same allocation: the
/// routing model shares a host that did not change between models, and
/// this holds it, so its address is not reused while it lives) and the
/// rest is equal: equal values build equal virtual hosts, so a server can
/// key the encoded virtual host by it.
#[derive(Debug, Clone)]
pub struct GatewayVirtualHost {
    host: Arc<GatewayHost>,
    port: u16,
    https_redirect: bool,
    /// For each match of the routes in order: whether it admits the proxy.
    admitted: Vec<bool>,
    /// For each destination without a port (each route's targets, then
    /// its mirrors, in order): the port it is sent to.
    ports: Vec<Option<u16>>,
}

impl PartialEq for GatewayVirtualHost {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.host, &other.host)
            && self.port == other.port
            && self.https_redirect == other.https_redirect
            && self.admitted == other.admitted
            && self.ports == other.ports
    }
}

impl Eq for GatewayVirtualHost {}

impl std::hash::Hash for GatewayVirtualHost {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.host).hash(state);
        self.port.hash(state);
        self.https_redirect.hash(state);
        self.admitted.hash(state);
        self.ports.hash(state);
    }
}

impl GatewayVirtualHost {
    /// `host` of a server on `port` (redirecting to HTTPS or not) as
    /// `proxy` (running `own`) is served it, destinations' ports from
    /// `registry`.
    pub(crate) fn new(
        proxy: &Proxy,
        registry: &dyn ServiceDiscovery,
        own: &[ServiceInstance],
        host: &Arc<GatewayHost>,
        port: u16,
        https_redirect: bool,
    ) -> Self {
        // A gateway's port is not the service's: a destination naming no
        // port goes to its service's (the first HTTP one, else the first).
        let port_of = |name: &str| {
            let service = registry.get_service(name)?;
            service
                .ports
                .iter()
                .find(|p| p.protocol.is_http())
                .or(service.ports.first())
                .map(|p| p.port)
        };
        let mut ports = Vec::new();
        for route in &host.routes {
            if let HttpAction::Route(targets) = &route.action {
                for target in targets.iter().filter(|t| t.destination.port.is_none()) {
                    ports.push(port_of(&target.destination.host));
                }
            }
            for mirror in route.mirrors.iter().filter(|m| m.destination.port.is_none()) {
                ports.push(port_of(&mirror.destination.host));
            }
        }
        GatewayVirtualHost {
            host: Arc::clone(host),
            port,
            https_redirect,
            admitted: super::routes::admitted(&host.routes, own, proxy),
            ports,
        }
    }

    /// The domain it serves.
    pub fn domain(&self) -> &str {
        &self.host.host
    }

    /// The virtual host: its routes (those whose matches admit the proxy
    /// and are on this port), each destination with its port.
    pub fn build(&self) -> VirtualHost {
        let (host, port) = (&*self.host, self.port);
        let mut ports = self.ports.iter().copied();
        let mut flags = self.admitted.iter().copied();
        let mut out = Vec::new();
        for route in &host.routes {
            let route = with_ports(route, &mut ports);
            if route.matches.is_empty() {
                out.push(super::routes::envoy_route(&route, None, &host.host, port));
                continue;
            }
            for request in &route.matches {
                // A match on another port is not this server's.
                if flags.next().unwrap_or(true) && request.port.is_none_or(|p| p == port) {
                    out.push(super::routes::envoy_route(
                        &route,
                        Some(request),
                        &host.host,
                        port,
                    ));
                }
            }
        }
        VirtualHost {
            name: format!("{}:{port}", host.host),
            domains: vec![host.host.clone()],
            routes: out,
            require_tls: if self.https_redirect {
                virtual_host::TlsRequirementType::All as i32
            } else {
                0
            },
            ..Default::default()
        }
    }
}

/// `route` with a port on every destination naming none, taken in order
/// from `ports` (as [`GatewayVirtualHost::new`] found them).
fn with_ports(route: &HttpRoute, ports: &mut impl Iterator<Item = Option<u16>>) -> HttpRoute {
    let mut route = route.clone();
    if let HttpAction::Route(targets) = &mut route.action {
        for target in targets.iter_mut().filter(|t| t.destination.port.is_none()) {
            target.destination.port = ports.next().flatten();
        }
    }
    for mirror in route.mirrors.iter_mut().filter(|m| m.destination.port.is_none()) {
        mirror.destination.port = ports.next().flatten();
    }
    route
}
