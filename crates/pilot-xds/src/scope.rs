//! A proxy's scope: the hosts (services, external hosts) whose clusters,
//! load assignments, listeners and routes it is sent, and why each is
//! there; and generation restricted to it.
//!
//! The rule, as Istio's:
//! - What a namespace can see at all: the services exported to it (a
//!   service's `exportTo`, else the mesh default) and the VirtualServices
//!   and DestinationRules exported to it
//!   ([`pilot_routing::RoutingConfigs::visible_to`]).
//! - Which Sidecar applies to a proxy: the model says
//!   ([`RoutingModel::sidecar_for`]), from the Sidecars compiled into it.
//! - With a Sidecar, the scope holds the visible hosts its egress
//!   listeners import (`namespace/dnsName`: a service's namespace is the
//!   second label of its hostname; external hosts of egress rules have no
//!   namespace, so only `*/host` imports them), and then every host their
//!   routes send or mirror traffic to, so no route names a cluster the
//!   proxy lacks. Without one, every visible host.
//! - Its outbound traffic policy decides what the proxy does with traffic
//!   to any other host: `REGISTRY_ONLY` sends connections to
//!   [`BLACK_HOLE`] and answers HTTP requests for unknown hosts on an
//!   outbound HTTP port with a 502 (the [`BLOCK_ALL`] virtual host, as
//!   Istio's), `ALLOW_ANY` (the default) sends connections to the
//!   passthrough.
//! - Its listeners ([`SidecarListeners`], `sidecar_listeners.rs`): egress
//!   listeners with a port carry their hosts on that port at their own
//!   address (`sidecar_egress.rs`), ingress listeners take the place of
//!   the inbound listeners of the proxy's instances
//!   (`sidecar_ingress.rs`, [`generate_scoped_inbound`]).
//!
//! A scope is the same for every proxy of a namespace that the same Sidecar
//! applies to, and is computed once per push for each (pilot-ads).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_model::{RegistrySnapshot, Service, ServiceDiscovery, ServiceInstance};
use pilot_routing::{
    EgressHost, NamespaceSelector, OutboundMode, RoutingModel, ScopeOrigin, SidecarScope, exported_to,
    host_matches, is_public,
};

use crate::clusters::{CONNECT_TIMEOUT, PASSTHROUGH};
use crate::generate::generate_outbound;
use crate::sidecar_listeners::SidecarListeners;
use crate::util::any;
use crate::{MeshConfig, Proxy, Resources};

/// The cluster `REGISTRY_ONLY` sends traffic to hosts out of scope to: no
/// endpoints, so the connection is refused.
pub const BLACK_HOLE: &str = "BlackHoleCluster";

/// The virtual host `REGISTRY_ONLY` adds to each outbound HTTP route
/// configuration: any host no other virtual host matches is answered 502.
pub const BLOCK_ALL: &str = "block_all";

/// Why a host is in a scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HostReason {
    /// No Sidecar applies and the host is visible in the namespace.
    Visible,
    /// The Sidecar's egress host entry (e.g. `./*`) imports it.
    Imported(String),
    /// A route of a host in scope sends or mirrors traffic to it.
    RouteTarget(String),
}

impl std::fmt::Display for HostReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostReason::Visible => f.write_str("visible"),
            HostReason::Imported(entry) => write!(f, "imported by {entry}"),
            HostReason::RouteTarget(host) => write!(f, "a route of {host} sends to it"),
        }
    }
}

/// A proxy's scope: the hosts it sees and why each is there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ProxyScope {
    /// The proxy's namespace.
    pub namespace: String,
    /// What decided it.
    pub origin: ScopeOrigin,
    /// What becomes of traffic to hosts out of scope.
    pub outbound: OutboundMode,
    /// The hosts in scope, each with why.
    pub hosts: BTreeMap<String, HostReason>,
    /// Whether the namespace's view of VirtualServices and
    /// DestinationRules is its own (some are not exported to every
    /// namespace): then its model is compiled from what it sees.
    pub own_view: bool,
    /// What the Sidecar's listeners add to its hosts: egress listeners
    /// with a port, ingress listeners, inbound limits (none: the usual
    /// listeners for every host in scope, inbound ones from the proxy's
    /// own instances).
    pub listeners: Option<Arc<SidecarListeners>>,
}

impl ProxyScope {
    /// True when `host` is in scope.
    pub fn contains(&self, host: &str) -> bool {
        self.hosts.contains_key(host)
    }

    /// What proxies sharing a generation must agree on: the hosts, the
    /// outbound mode and, when the namespace has its own view, the
    /// namespace, and the Sidecar's listeners (not why each host is
    /// there).
    pub fn key(&self) -> ScopeKey {
        let mut key = ScopeKey {
            fingerprint: 0,
            view: self.own_view.then(|| self.namespace.clone()),
            outbound: self.outbound,
            hosts: Arc::new(self.hosts.keys().cloned().collect()),
            listeners: self.listeners.clone(),
        };
        let mut hasher = std::hash::DefaultHasher::new();
        (&key.view, key.outbound, &key.hosts, &key.listeners).hash(&mut hasher);
        key.fingerprint = hasher.finish();
        key
    }
}

/// What proxies of one generation share of their scope
/// ([`ProxyScope::key`]). Hashed by a fingerprint of its content taken
/// once, so that classes keyed by it (hundreds per push, each with tens
/// of hosts) hash in constant time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopeKey {
    /// Of the fields below (first, so that unequal keys differ at once).
    fingerprint: u64,
    view: Option<String>,
    outbound: OutboundMode,
    hosts: Arc<BTreeSet<String>>,
    listeners: Option<Arc<SidecarListeners>>,
}

impl ScopeKey {
    /// The namespace whose own view of the rules applies, if any.
    pub fn view(&self) -> Option<&str> {
        self.view.as_deref()
    }

    /// The outbound traffic policy.
    pub fn outbound(&self) -> OutboundMode {
        self.outbound
    }

    /// The hosts in scope.
    pub fn hosts(&self) -> &BTreeSet<String> {
        &self.hosts
    }

    /// The Sidecar's listeners with a port, ingress listeners and inbound
    /// limits, if any.
    pub fn listeners(&self) -> Option<&Arc<SidecarListeners>> {
        self.listeners.as_ref()
    }
}

impl Hash for ScopeKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.fingerprint);
    }
}

/// True when some proxy may see less than the whole mesh: `model` (the
/// push's) has some Sidecar, or some service, VirtualService or
/// DestinationRule is not exported to every namespace. When false every
/// scope is the whole mesh and generation need not look at scopes.
pub fn scoping_applies(registry: &dyn ServiceDiscovery, model: &RoutingModel) -> bool {
    !model.sidecars().is_empty()
        || model.restricts_visibility()
        || registry
            .services()
            .iter()
            .any(|s| !is_public(&s.export_to, model.default_export_to()))
}

/// The namespace of a service's hostname (its second label), if it has one.
pub fn host_namespace(hostname: &str) -> Option<&str> {
    // The second label (what `split('.').nth(1)` gives), found byte by
    // byte: every class of proxies asks it of every service.
    let dot = |s: &str| s.bytes().position(|b| b == b'.');
    let rest = &hostname[dot(hostname)? + 1..];
    Some(&rest[..dot(rest).unwrap_or(rest.len())])
}

/// Where a hostname's namespace label is in it (byte offsets).
type NamespaceAt = (usize, usize);

/// The registry's services as scoping looks them up: by hostname and by
/// the namespace of their hostname ([`host_namespace`]). Built once for a
/// set of services and shared by every scope computed over them
/// ([`scope_in`]), so that a Sidecar importing a few hosts looks those up
/// instead of testing every service of the mesh against each of its
/// entries.
#[derive(Debug, Default)]
pub struct ServiceIndex {
    /// In the registry's order, with where the namespace is in the
    /// hostname.
    services: Vec<(Arc<Service>, Option<NamespaceAt>)>,
    by_name: HashMap<String, Vec<usize>>,
    by_namespace: HashMap<String, Vec<usize>>,
}

impl ServiceIndex {
    /// The index of `registry`'s services.
    pub fn new(registry: &dyn ServiceDiscovery) -> Self {
        let mut index = ServiceIndex::default();
        for (i, service) in registry.services().into_iter().enumerate() {
            let owner = host_namespace(&service.hostname).map(|ns| {
                let start = ns.as_ptr() as usize - service.hostname.as_ptr() as usize;
                (start, start + ns.len())
            });
            index.by_name.entry(service.hostname.clone()).or_default().push(i);
            if let Some((start, end)) = owner {
                index
                    .by_namespace
                    .entry(service.hostname[start..end].to_string())
                    .or_default()
                    .push(i);
            }
            index.services.push((service, owner));
        }
        index
    }

    /// How many services it holds.
    pub fn len(&self) -> usize {
        self.services.len()
    }

    /// True when it holds no service.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty()
    }

    fn service(&self, i: usize) -> (&Service, Option<&str>) {
        let (service, owner) = &self.services[i];
        (service, owner.map(|(start, end)| &service.hostname[start..end]))
    }

    /// Adds to `out` the services `entry` of a Sidecar of
    /// `sidecar_namespace` may import; false when that takes a look at
    /// every service (a host pattern in any namespace).
    fn candidates(&self, entry: &EgressHost, sidecar_namespace: &str, out: &mut Vec<usize>) -> bool {
        let namespace = match &entry.namespace {
            NamespaceSelector::Nothing => return true,
            NamespaceSelector::Own => Some(sidecar_namespace),
            NamespaceSelector::Named(ns) => Some(ns.as_str()),
            NamespaceSelector::Any => None,
        };
        if !entry.host.starts_with('*') {
            out.extend(self.by_name.get(&entry.host).into_iter().flatten());
            return true;
        }
        match namespace {
            Some(ns) => {
                out.extend(self.by_namespace.get(ns).into_iter().flatten());
                true
            }
            None => false,
        }
    }
}

/// The Sidecar applying to a proxy, with what made it apply
/// ([`RoutingModel::sidecar_for`]).
pub type Applying<'a> = (&'a Arc<SidecarScope>, ScopeOrigin);

/// The scope of a proxy of `namespace` that `sidecar` applies to (none:
/// every visible host), over `registry` and `view` (the model of what the
/// namespace sees), `mesh` being the push's configuration. [`scope_in`]
/// over an index of `registry`'s services.
pub fn scope_of(
    namespace: &str,
    sidecar: Option<Applying<'_>>,
    registry: &dyn ServiceDiscovery,
    mesh: &MeshConfig,
    view: &RoutingModel,
) -> ProxyScope {
    scope_in(namespace, sidecar, &ServiceIndex::new(registry), mesh, view)
}

/// The scope of a proxy of `namespace` that `sidecar` applies to (none:
/// every visible host), over the registry `services` index and `view`
/// (the model of what the namespace sees: its own when some rule is not
/// exported everywhere), `mesh` being the push's configuration (whose
/// model says whether namespaces have views of their own).
pub fn scope_in(
    namespace: &str,
    sidecar: Option<Applying<'_>>,
    services: &ServiceIndex,
    mesh: &MeshConfig,
    view: &RoutingModel,
) -> ProxyScope {
    let default = mesh.model().default_export_to();
    let visible = |i: usize| {
        let (service, owner) = services.service(i);
        exported_to(&service.export_to, owner.unwrap_or_default(), default, namespace)
    };
    // External hosts have no namespace and are visible everywhere.
    let external = view.external_services();
    let own_view = mesh.model().restricts_visibility();
    let Some((sidecar, origin)) = sidecar else {
        let mut hosts = BTreeMap::new();
        for i in (0..services.len()).filter(|&i| visible(i)) {
            hosts.insert(services.service(i).0.hostname.clone(), HostReason::Visible);
        }
        for e in external {
            hosts.insert(e.host.clone(), HostReason::Visible);
        }
        return ProxyScope {
            namespace: namespace.to_string(),
            origin: ScopeOrigin::NoSidecar,
            outbound: OutboundMode::AllowAny,
            hosts,
            own_view,
            listeners: None,
        };
    };
    let entries: Vec<(&String, &EgressHost)> = sidecar.imports.iter().map(|i| (&i.text, &i.host)).collect();
    // A Sidecar's `.` is its own namespace (the root namespace's, for the
    // mesh default, as Istio reads it).
    let sidecar_namespace = sidecar.namespace.as_str();
    let imports = |entry: &EgressHost, host: &str, host_ns: Option<&str>| match host_ns {
        Some(ns) => entry.imports(sidecar_namespace, ns, host),
        None => entry.namespace == NamespaceSelector::Any && host_matches(&entry.host, host),
    };
    // The services some entry may import, looked up, in the registry's
    // order; then the external hosts. A host listed twice (a service and
    // an external one) is imported for the reason of its last listing.
    let mut candidates = Vec::new();
    let looked_up = entries
        .iter()
        .all(|(_, entry)| services.candidates(entry, sidecar_namespace, &mut candidates));
    if looked_up {
        candidates.sort_unstable();
        candidates.dedup();
    } else {
        candidates = (0..services.len()).collect();
    }
    let mut hosts = BTreeMap::new();
    let mut import = |host: &str, host_ns: Option<&str>| {
        if let Some((text, _)) = entries.iter().find(|(_, entry)| imports(entry, host, host_ns)) {
            hosts.insert(host.to_string(), HostReason::Imported((*text).clone()));
        }
    };
    for i in candidates.into_iter().filter(|&i| visible(i)) {
        let (service, owner) = services.service(i);
        import(&service.hostname, owner);
    }
    for e in external {
        import(&e.host, None);
    }
    // A visible host's namespace (an external listing of it wins, as the
    // last), if it is visible.
    let namespace_of = |host: &str| -> Option<Option<&str>> {
        if external.iter().any(|e| e.host == host) {
            return Some(None);
        }
        let listed = services.by_name.get(host)?;
        listed
            .iter()
            .rev()
            .find(|&&i| visible(i))
            .map(|&i| services.service(i).1)
    };
    // Route targets, to a fixed point.
    let mut frontier: Vec<String> = hosts.keys().cloned().collect();
    while let Some(host) = frontier.pop() {
        for target in view.route_targets(&host) {
            if !hosts.contains_key(&target) && namespace_of(&target).is_some() {
                hosts.insert(target.clone(), HostReason::RouteTarget(host.clone()));
                frontier.push(target);
            }
        }
    }
    // The namespaces of the hosts in scope.
    let namespaces: BTreeMap<&str, Option<&str>> = hosts
        .keys()
        .filter_map(|h| Some((h.as_str(), namespace_of(h)?)))
        .collect();
    let route_targets: BTreeSet<String> = hosts
        .iter()
        .filter(|(_, reason)| matches!(reason, HostReason::RouteTarget(_)))
        .map(|(h, _)| h.clone())
        .collect();
    let listeners = SidecarListeners::of(
        sidecar,
        hosts.keys(),
        |entries, host| {
            let host_ns = namespaces.get(host).copied().flatten();
            entries.iter().any(|entry| imports(entry, host, host_ns))
        },
        &route_targets,
    )
    .map(Arc::new);
    ProxyScope {
        namespace: namespace.to_string(),
        origin,
        outbound: sidecar.outbound,
        hosts,
        own_view,
        listeners,
    }
}

/// The outbound half of a proxy's configuration restricted to `scope`:
/// generation over the registry and the model restricted to the hosts in
/// scope (`model` is what the proxy's namespace sees), with traffic to
/// other hosts sent to [`BLACK_HOLE`] under `REGISTRY_ONLY`; the security
/// policies and mesh settings are `mesh`'s.
pub fn generate_scoped_outbound(
    proxy: &Proxy,
    registry: &RegistrySnapshot,
    mesh: &MeshConfig,
    model: &RoutingModel,
    scope: &ProxyScope,
    own: &[ServiceInstance],
) -> Resources {
    let hosts = || scope.hosts.keys().map(String::as_str);
    let registry = registry.scoped_to(hosts());
    let mesh = MeshConfig::from_model(model.scoped_to(hosts()), mesh);
    let mut resources = generate_outbound(proxy, &registry, &mesh, own);
    if let Some(listeners) = &scope.listeners
        && proxy.generator == crate::Generator::Envoy
    {
        crate::sidecar_egress::egress_listeners(
            proxy,
            &registry,
            mesh.model(),
            listeners,
            own,
            &mut resources,
        );
    }
    if scope.outbound == OutboundMode::RegistryOnly {
        black_hole(&mut resources);
        if proxy.generator != crate::Generator::Grpc {
            block_all(&mut resources);
        }
    }
    resources
}

/// The inbound half of a proxy's configuration under `scope`: the
/// Sidecar's ingress listeners when it has some (for a proxy with or
/// without capture), else the listeners of the proxy's own instances
/// ([`generate_inbound`](crate::parts::generate_inbound)); the Sidecar's
/// inbound connection pool limits the inbound clusters. Without a scope,
/// what `generate_inbound` gives.
pub fn generate_scoped_inbound(
    proxy: &Proxy,
    own: &[ServiceInstance],
    mesh: &MeshConfig,
    scope: Option<&ProxyScope>,
) -> Resources {
    let listeners = scope.and_then(|s| s.listeners.as_deref()).filter(|_| {
        proxy.generator == crate::Generator::Envoy && proxy.proxy_type == crate::ProxyType::Sidecar
    });
    let Some(listeners) = listeners else {
        return crate::generate::generate_inbound(proxy, own, mesh);
    };
    let mut resources = if listeners.ingress.is_empty() {
        crate::generate::generate_inbound(proxy, own, mesh)
    } else {
        let namespace = proxy.domain.split('.').next().unwrap_or_default();
        let (clusters, listeners) = crate::sidecar_ingress::ingress_listeners(
            proxy,
            own,
            &listeners.ingress,
            |labels, port| match mesh.security_for(proxy) {
                Some(security) => security.mtls_mode(namespace, labels, port),
                None => pilot_routing::MtlsMode::Disable,
            },
            &crate::rbac::Authorization::new(mesh.model().authorization(), proxy),
        );
        Resources {
            clusters,
            listeners,
            ..Default::default()
        }
    };
    // Ingress listeners carry their own limits (`IngressPort::limits`).
    if let Some(limits) = &listeners.inbound_limits
        && listeners.ingress.is_empty()
    {
        crate::sidecar_ingress::limit(&mut resources.clusters, limits);
    }
    resources
}

/// Adds the [`BLOCK_ALL`] virtual host to every route configuration that
/// has no catch-all of its own.
fn block_all(resources: &mut Resources) {
    for config in &mut resources.routes {
        if config
            .virtual_hosts
            .iter()
            .any(|v| v.domains.iter().any(|d| d == "*"))
        {
            continue;
        }
        config.virtual_hosts.push(VirtualHost {
            name: BLOCK_ALL.into(),
            domains: vec!["*".into()],
            routes: vec![Route {
                name: BLOCK_ALL.into(),
                r#match: Some(RouteMatch {
                    path_specifier: Some(route_match::PathSpecifier::Prefix("/".into())),
                    ..Default::default()
                }),
                action: Some(route::Action::DirectResponse(DirectResponseAction {
                    status: 502,
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
}

/// Sends what went to the passthrough to [`BLACK_HOLE`] instead.
fn black_hole(resources: &mut Resources) {
    let mut used = false;
    for listener in &mut resources.listeners {
        for chain in &mut listener.filter_chains {
            for f in &mut chain.filters {
                let Some(filter::ConfigType::TypedConfig(config)) = &mut f.config_type else {
                    continue;
                };
                if config.type_url != <TcpProxy as prost::Name>::type_url() {
                    continue;
                }
                let Ok(mut proxy) = <TcpProxy as prost::Message>::decode(config.value.as_slice()) else {
                    continue;
                };
                if proxy.cluster_specifier == Some(tcp_proxy::ClusterSpecifier::Cluster(PASSTHROUGH.into())) {
                    proxy.cluster_specifier = Some(tcp_proxy::ClusterSpecifier::Cluster(BLACK_HOLE.into()));
                    proxy.stat_prefix = BLACK_HOLE.into();
                    *config = any(&proxy);
                    used = true;
                }
            }
        }
    }
    resources.clusters.retain(|c| c.name != PASSTHROUGH);
    if used {
        resources.clusters.push(Cluster {
            name: BLACK_HOLE.into(),
            cluster_discovery_type: Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::Static as i32,
            )),
            connect_timeout: Some(crate::util::duration(CONNECT_TIMEOUT)),
            ..Default::default()
        });
    }
}
