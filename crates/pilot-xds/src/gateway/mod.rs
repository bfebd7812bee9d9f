//! LDS and RDS of edge proxies: the listeners of an ingress (the routing
//! model's ingress-rule servers) and of a router serving `Gateway`s (the
//! gateways' servers whose selector its labels match), with their route
//! configurations. One path for both, as Istio's gateway generation does:
//!
//! - The servers a proxy serves are grouped by port; the first server on a
//!   port decides whether it is plain HTTP (the port's TLS and TCP servers
//!   are left out, as Istio leaves them) or not: then its TLS and TCP
//!   servers share one listener, each with its own filter chains told
//!   apart by SNI (an HTTPS server for `*.example.com` terminated beside
//!   a `TLS` server passing `passthrough.example.com` through).
//! - Plain HTTP servers on one port share one listener and one route
//!   configuration, `http.<port>` (`ingress_<port>` for ingress rules
//!   alone), with a virtual host per host of the servers (a host several
//!   servers name has the routes of each in turn); a server with
//!   `httpsRedirect` makes its hosts require TLS (a redirect to HTTPS).
//! - A route configuration of [`SCOPED_MIN_HOSTS`] exact hosts or more
//!   (none a wildcard) is one per host instead, `<name>/<host>`, each with
//!   its scope (SRDS); the connection manager finds a request's scope by
//!   its own name ([`SCOPE_HEADER`], set by an early header mutation) and
//!   the request's host, made lower case first (a Lua filter).
//! - A server host's namespace part (`ns1/*`) decides which
//!   VirtualServices bind through it (the routing model's business);
//!   SNI matches its name alone.
//! - Each TLS-terminating server gets its own filter chain, matched by SNI
//!   on its hosts (none for `*`), with its certificate (a secret over SDS,
//!   or files) and its own route configuration,
//!   `https.<port>.<port name>.<gateway name>.<namespace>`.
//! - A virtual host's routes are the bound VirtualServices' routes in
//!   order; a request for a host no server names gets Envoy's 404.
//!
//! - TLS passthrough (and `AUTO_PASSTHROUGH`), TCP and TLS servers route
//!   connections, not requests: `l4.rs` (and `sni_dnat.rs`).
//! - A MUTUAL server requires a client certificate its CA signed and, when
//!   it lists `subjectAltNames`, carrying one of them.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use envoy_types::pb::envoy::config::common::mutation_rules::v3 as mutation_rules;
use envoy_types::pb::envoy::config::core::v3::{
    DataSource, HeaderValue, HeaderValueOption, TypedExtensionConfig, data_source, header_value_option,
};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, FilterChainMatch};
use envoy_types::pb::envoy::config::route::v3::VirtualHost;
use envoy_types::pb::envoy::config::route::v3::{ScopedRouteConfiguration, scoped_route_configuration};
use envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpFilter, Rds, ScopedRds, ScopedRoutes, http_connection_manager, http_filter, scoped_routes,
};
use envoy_types::pb::envoy::extensions::http::early_header_mutation::header_mutation::v3::HeaderMutation as EarlyHeaderMutation;
use pilot_model::{Labels, Protocol, ServiceDiscovery, ServiceInstance};
use pilot_routing::{IngressServer, PortSelector, RoutingModel, ServerTlsMode};

mod l4;
pub(crate) mod sni_dnat;

use crate::build::downstream_tls::server_socket;
use crate::build::edge_routes::{
    EdgeRouteConfiguration, EdgeVirtualHost, GatewayVirtualHost, SCOPED_MIN_HOSTS, scoped_by_host,
};
use crate::build::listeners::{
    LUA_FILTER, ListenerPlan, http_filter_chain, http_filter_chain_with, listener, route_to,
};
use crate::build::util::{ads, any};
use crate::{ClusterName, Proxy, ProxyType, ServerCertificates};

/// The listeners and route configurations of an edge proxy (ingress or
/// router): the servers of the model it serves, by port.
pub(crate) fn listeners(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    plan: &mut ListenerPlan,
) {
    plan_edge(proxy, registry, model, certificates, None, plan);
}

/// The route configurations of `proxy`'s [`listeners`] that hold one of
/// `domains` (a gateway server's virtual host for it), built as
/// [`listeners`] builds them, and those alone: with scoped routes, the
/// configurations of those hosts; else each whole configuration naming
/// one. What a server holding the proxy's last configuration sends again
/// when only the routes of these hosts changed
/// ([`RoutingModel::changed_edge_hosts`]).
pub(crate) fn route_configurations_holding(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    domains: &BTreeSet<String>,
) -> Vec<EdgeRouteConfiguration> {
    let mut plan = ListenerPlan::default();
    plan_edge(proxy, registry, model, certificates, Some(domains), &mut plan);
    plan.ingress_routes
}

/// [`listeners`] into `plan`; with `only`, the route configurations
/// holding those domains alone (`plan`'s listeners and scopes are then
/// not the proxy's).
fn plan_edge(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    only: Option<&BTreeSet<String>>,
    plan: &mut ListenerPlan,
) {
    let mut by_port: BTreeMap<u16, Vec<&IngressServer>> = BTreeMap::new();
    for server in model
        .ingress_servers()
        .iter()
        .filter(|s| serves(proxy, s) && certified(proxy, s, certificates))
    {
        by_port.entry(server.port).or_default().push(server);
    }
    let edge = Edge {
        proxy,
        registry,
        own: &[],
        only,
    };
    for (port, servers) in by_port {
        let first = servers[0];
        if first.tls.is_none() && first.protocol.is_http() {
            edge.plain(port, &servers, plan);
            continue;
        }
        // TLS and TCP servers share one listener, their chains told apart
        // by SNI: those terminating TLS for HTTP first, then those routing
        // connections.
        let mut chains = edge.terminating(port, &servers, plan);
        if only.is_some() {
            continue;
        }
        l4::add_chains(port, &servers, registry, model, &mut chains);
        let Some(chain) = chains.first().cloned() else {
            continue;
        };
        let sni = chains.iter().any(|c| {
            c.filter_chain_match
                .as_ref()
                .is_some_and(|m| !m.server_names.is_empty())
        });
        let mut out = listener(&format!("0.0.0.0_{port}"), "0.0.0.0", port, true, chain);
        out.filter_chains = chains;
        if sni {
            out.listener_filters.push(crate::build::l4::tls_inspector());
        }
        plan.listeners.push(out);
    }
    if only.is_none() {
        crate::build::jwt_authn::authenticate_edge(proxy, model, &mut plan.listeners);
    }
}

/// Whether `proxy` can be sent what `server` terminates TLS with: the
/// secret of its certificate and key and, for a MUTUAL server verifying
/// clients without a file, of its certificate authority (the credential's
/// `-cacert`, or the server's own bundle). A server that
/// cannot be served so is left out, as if it were not there: its port's
/// other servers are served at once, and a port it was alone on gets no
/// listener (connections are refused) rather than one Envoy holds until
/// the secret comes. True for a server not terminating TLS over SDS, and
/// without `certificates` (then the proxy waits for the secret).
fn certified(proxy: &Proxy, server: &IngressServer, certificates: Option<&dyn ServerCertificates>) -> bool {
    let (Some(certificates), Some(tls)) = (certificates, &server.tls) else {
        return true;
    };
    let Some(secret) = tls.credential_name.as_deref().filter(|_| server.terminates_tls()) else {
        return true;
    };
    let client_ca = match (&tls.ca_certificates, &tls.client_ca_secret) {
        _ if tls.mode != ServerTlsMode::Mutual => None,
        (Some(_), _) => None,
        (None, Some(bundle)) => Some(bundle.clone()),
        (None, None) => Some(format!("{secret}-cacert")),
    };
    certificates.available(proxy, secret) && client_ca.is_none_or(|ca| certificates.available(proxy, &ca))
}

/// Whether `server`'s connections end in an HTTP connection manager after
/// TLS ends here: an HTTPS server (or an ingress rule's) terminating TLS.
/// A `TLS` server terminating TLS routes connections (`l4.rs`).
pub(crate) fn serves_http(server: &IngressServer) -> bool {
    server.terminates_tls() && (server.gateway.is_empty() || server.protocol == Protocol::Https)
}

/// The SNI names a TLS server matches: its hosts' names without their
/// namespace part, sorted, each once; `None` when one is `*` (every
/// name).
pub(crate) fn server_names(server: &IngressServer) -> Option<Vec<String>> {
    let mut names = Vec::new();
    for host in &server.hosts {
        if host.host == "*" {
            return None;
        }
        names.push(host.host.clone());
    }
    names.sort();
    names.dedup();
    Some(names)
}

/// Whether `proxy` serves `server`: an ingress-rule server every ingress;
/// a gateway's server every ingress or router carrying its selector's
/// labels (and, for a Gateway API Gateway's, running in its namespace).
/// The client certificate `proxy` presents to the backends a
/// BackendTLSPolicy has it reach over TLS: that of the first Gateway API
/// Gateway it serves that names one (a router serves one Gateway, the
/// one its `gateway.networking.k8s.io/gateway-name` label names).
pub fn backend_client_credential<'m>(proxy: &Proxy, model: &'m RoutingModel) -> Option<&'m str> {
    model
        .ingress_servers()
        .iter()
        .filter(|server| serves(proxy, server))
        .find_map(|server| server.backend_client_credential.as_deref())
}

pub(crate) fn serves(proxy: &Proxy, server: &IngressServer) -> bool {
    let in_namespace = || {
        server
            .namespace
            .as_deref()
            .is_none_or(|namespace| proxy.domain.split('.').next() == Some(namespace))
    };
    match &server.selector {
        None => proxy.proxy_type == ProxyType::Ingress,
        Some(selector) => {
            proxy.proxy_type != ProxyType::Sidecar && selector.is_subset_of(&proxy.labels) && in_namespace()
        }
    }
}

struct Edge<'a> {
    proxy: &'a Proxy,
    registry: &'a dyn ServiceDiscovery,
    /// The proxy's own instances, for source matches (an edge proxy runs
    /// none: its labels decide).
    own: &'a [ServiceInstance],
    /// Route configurations holding these domains alone, when set
    /// ([`route_configurations_holding`]).
    only: Option<&'a BTreeSet<String>>,
}

impl Edge<'_> {
    /// One listener for the plain HTTP servers on `port`, sharing one route
    /// configuration.
    fn plain(&self, port: u16, servers: &[&IngressServer], plan: &mut ListenerPlan) {
        let servers: Vec<&IngressServer> = servers
            .iter()
            .copied()
            .filter(|s| s.tls.is_none() && s.protocol.is_http())
            .collect();
        let name = if servers.iter().all(|s| s.gateway.is_empty()) {
            format!("ingress_{port}")
        } else {
            format!("http.{port}")
        };
        let chain = self.routes_chain(&name, port, &servers, plan);
        plan.listeners
            .push(listener(&format!("0.0.0.0_{port}"), "0.0.0.0", port, true, chain));
    }

    /// The filter chains of the servers on `port` terminating TLS for
    /// HTTP: one per server, matched by SNI, each with its own routes
    /// (added to `plan`).
    fn terminating(
        &self,
        port: u16,
        servers: &[&IngressServer],
        plan: &mut ListenerPlan,
    ) -> Vec<FilterChain> {
        let mut chains = Vec::new();
        let mut taken = BTreeSet::new();
        for server in servers.iter().copied().filter(|s| serves_http(s)) {
            let Some(tls) = &server.tls else { continue };
            let names = server_names(server).unwrap_or_default();
            if !taken.insert(names.clone()) {
                continue;
            }
            let name = if server.gateway.is_empty() {
                format!("ingress_{port}")
            } else {
                let (namespace, gateway) = server.gateway.split_once('/').unwrap_or(("", &server.gateway));
                format!("https.{port}.{}.{gateway}.{namespace}", server.port_name)
            };
            let mut chain = self.routes_chain(&name, port, &[server], plan);
            chain.transport_socket = Some(server_socket(tls, Protocol::Http));
            if !names.is_empty() {
                chain.filter_chain_match = Some(FilterChainMatch {
                    server_names: names,
                    ..Default::default()
                });
            }
            chains.push(chain);
        }
        chains
    }

    /// The HTTP connection manager taking its routes from the route
    /// configuration `name` of `servers` on `port` (added to `plan`, see
    /// [`routes_chain`]). With [`Edge::only`], the configurations holding
    /// those domains alone go to `plan`: with scoped routes, those hosts';
    /// else the whole configuration if it holds one.
    fn routes_chain(
        &self,
        name: &str,
        port: u16,
        servers: &[&IngressServer],
        plan: &mut ListenerPlan,
    ) -> FilterChain {
        // The domains of the configuration's virtual hosts, in order, as
        // `route_configuration` makes them: whether it is scoped.
        let mut domains: Vec<&str> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for server in servers {
            if server.gateway.is_empty() {
                if seen.insert("*") {
                    domains.push("*");
                }
                continue;
            }
            for host in &server.virtual_hosts {
                if seen.insert(&host.host) {
                    domains.push(&host.host);
                }
            }
        }
        let scoped = scoped_by_host(&domains, SCOPED_MIN_HOSTS);
        let only = match self.only {
            Some(only) if !domains.iter().any(|d| only.contains(*d)) => return FilterChain::default(),
            // A whole configuration holding one: built whole.
            Some(_) if !scoped => None,
            only => only,
        };
        routes_chain(self.route_configuration(name, port, servers, only), scoped, plan)
    }

    /// The route configuration `name` of `servers` on `port`: an ingress
    /// rule server's routes under `*`, a gateway server's virtual hosts
    /// (when several servers name a host, its routes are the first's,
    /// then the next's, as Istio merges them); with `only`, those of
    /// these domains alone.
    fn route_configuration(
        &self,
        name: &str,
        port: u16,
        servers: &[&IngressServer],
        only: Option<&BTreeSet<String>>,
    ) -> EdgeRouteConfiguration {
        let mut domains: HashSet<&str> = HashSet::new();
        let mut virtual_hosts = Vec::new();
        let gateway = servers.iter().any(|s| !s.gateway.is_empty());
        for server in servers {
            if server.gateway.is_empty() {
                if only.is_none() && domains.insert("*") {
                    virtual_hosts.push(EdgeVirtualHost::Built(Box::new(VirtualHost {
                        name: name.to_string(),
                        domains: vec!["*".into()],
                        routes: self.ingress_rule_routes(server),
                        ..Default::default()
                    })));
                }
                continue;
            }
            for host in &server.virtual_hosts {
                if only.is_some_and(|only| !only.contains(&host.host)) {
                    continue;
                }
                let part = GatewayVirtualHost::new(
                    self.proxy,
                    self.registry,
                    self.own,
                    host,
                    port,
                    server.https_redirect,
                );
                if domains.insert(&host.host) {
                    virtual_hosts.push(EdgeVirtualHost::Gateway(part));
                } else if let Some(existing) = virtual_hosts.iter_mut().find(|v| v.names_only(&host.host)) {
                    // Another server (another gateway's, or another
                    // namespace's) names the host too: its routes follow.
                    let built = part.build();
                    let existing = existing.built_mut();
                    existing.routes.extend(built.routes);
                    existing.require_tls = existing.require_tls.max(built.require_tls);
                }
            }
        }
        EdgeRouteConfiguration {
            name: name.to_string(),
            virtual_hosts,
            ignore_port_in_host_matching: gateway,
            request_headers_to_remove: Vec::new(),
        }
    }

    /// An ingress rule server's routes, first match wins.
    fn ingress_rule_routes(
        &self,
        server: &IngressServer,
    ) -> Vec<envoy_types::pb::envoy::config::route::v3::Route> {
        let mut routes = Vec::new();
        for ingress_route in &server.routes {
            let target_port = match &ingress_route.port {
                PortSelector::Number(number) => Some(*number),
                PortSelector::Name(name) => self
                    .registry
                    .get_service(&ingress_route.host)
                    .and_then(|s| s.port(name).map(|p| p.port)),
                _ => None,
            };
            let Some(target_port) = target_port else { continue };
            let cluster = ClusterName::outbound(&ingress_route.host, target_port, Labels::new()).to_string();
            let mut route = route_to(&cluster, "/");
            route.name = ingress_route.name.clone();
            route.r#match = Some(crate::build::routes::request_match(&ingress_route.request));
            routes.push(route);
        }
        routes
    }
}

/// The HTTP connection manager taking its routes from `config` (added to
/// `plan`): over RDS as one route configuration, or, `scoped` (with
/// [`SCOPED_MIN_HOSTS`] exact hosts or more, [`scoped_by_host`]), as one
/// per host, each with its scope (SRDS), the request's host picking the
/// scope ([`EdgeRouteConfiguration::by_host`]): a change to one host then
/// sends Envoy that host's routes alone.
fn routes_chain(config: EdgeRouteConfiguration, scoped: bool, plan: &mut ListenerPlan) -> FilterChain {
    if !scoped {
        let chain = http_filter_chain(
            &config.name,
            http_connection_manager::RouteSpecifier::Rds(Rds {
                config_source: Some(ads()),
                route_config_name: config.name.clone(),
            }),
        );
        plan.ingress_routes.push(config);
        return chain;
    }
    let by_host = config.split_by_host();
    let string_key = |key: &str| scoped_route_configuration::key::Fragment {
        r#type: Some(scoped_route_configuration::key::fragment::Type::StringKey(
            key.to_string(),
        )),
    };
    for (key, mut host) in by_host {
        plan.scoped_routes.push(ScopedRouteConfiguration {
            name: host.name.clone(),
            route_configuration_name: host.name.clone(),
            key: Some(scoped_route_configuration::Key {
                fragments: vec![string_key(&config.name), string_key(&key)],
            }),
            ..Default::default()
        });
        host.request_headers_to_remove = vec![SCOPE_HEADER.to_string()];
        plan.ingress_routes.push(host);
    }
    http_filter_chain_with(
        &config.name,
        http_connection_manager::RouteSpecifier::ScopedRoutes(ScopedRoutes {
            name: config.name.clone(),
            scope_key_builder: Some(scope_key()),
            rds_config_source: Some(ads()),
            config_specifier: Some(scoped_routes::ConfigSpecifier::ScopedRds(ScopedRds {
                scoped_rds_config_source: Some(ads()),
                ..Default::default()
            })),
        }),
        |manager| {
            manager.early_header_mutation_extensions = vec![name_the_manager(&config.name)];
            manager.http_filters.insert(0, lower_case_host());
        },
    )
}

/// The header a connection manager with scoped routes sets to its own
/// name on every request before its scope is chosen (whatever the client
/// sent in it): the scopes Envoy is sent are the proxy's, every such
/// connection manager's, so a scope's key starts with the name of the
/// manager it belongs to. The route configurations remove it before a
/// request goes on.
pub const SCOPE_HEADER: &str = "x-pilot-scope";

/// The early header mutation setting [`SCOPE_HEADER`] to `name`.
fn name_the_manager(name: &str) -> TypedExtensionConfig {
    let mutation = EarlyHeaderMutation {
        mutations: vec![mutation_rules::HeaderMutation {
            action: Some(mutation_rules::header_mutation::Action::Append(
                HeaderValueOption {
                    header: Some(HeaderValue {
                        key: SCOPE_HEADER.into(),
                        value: name.into(),
                        ..Default::default()
                    }),
                    append_action: header_value_option::HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
                    ..Default::default()
                },
            )),
        }],
    };
    TypedExtensionConfig {
        name: "envoy.http.early_header_mutation.header_mutation".into(),
        typed_config: Some(any(&mutation)),
    }
}

/// A scope's key: the connection manager's name ([`SCOPE_HEADER`]), then
/// the request's host (`:authority`) up to any `:port`.
fn scope_key() -> scoped_routes::ScopeKeyBuilder {
    use scoped_routes::scope_key_builder::{FragmentBuilder, fragment_builder};
    let header = |name: &str, element_separator: &str| FragmentBuilder {
        r#type: Some(fragment_builder::Type::HeaderValueExtractor(
            fragment_builder::HeaderValueExtractor {
                name: name.into(),
                element_separator: element_separator.into(),
                extract_type: Some(fragment_builder::header_value_extractor::ExtractType::Index(0)),
            },
        )),
    };
    scoped_routes::ScopeKeyBuilder {
        fragments: vec![header(SCOPE_HEADER, ""), header(":authority", ":")],
    }
}

/// The source of [`lower_case_host`]'s Lua filter.
const LOWER_CASE_HOST: &str = "function envoy_on_request(handle)
  local headers = handle:headers()
  local host = headers:get(\":authority\")
  if host ~= nil then
    local lower = string.lower(host)
    if lower ~= host then
      headers:replace(\":authority\", lower)
    end
  end
end
";

/// The filter making a request's host lower case before its route is
/// chosen: Envoy matches a virtual host's domains case-insensitively but
/// a scope's key exactly, so `Example.COM` would find no scope. Changing
/// the header makes Envoy pick the scope and the route again; a host in
/// lower case already (what clients send) is left as it is.
fn lower_case_host() -> HttpFilter {
    HttpFilter {
        name: LUA_FILTER.into(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&Lua {
            default_source_code: Some(DataSource {
                specifier: Some(data_source::Specifier::InlineString(LOWER_CASE_HOST.into())),
                ..Default::default()
            }),
            ..Default::default()
        }))),
        ..Default::default()
    }
}
