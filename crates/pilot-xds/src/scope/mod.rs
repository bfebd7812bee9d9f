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
//! - Its listeners ([`SidecarListeners`], `sidecar/layout.rs`): egress
//!   listeners with a port carry their hosts on that port at their own
//!   address (`sidecar/egress.rs`), ingress listeners take the place of
//!   the inbound listeners of the proxy's instances
//!   (`sidecar/ingress.rs`, [`generate_scoped_inbound`]).
//!
//! The registry's services are indexed for it once (`index.rs`);
//! generation restricted to a scope is `scoped.rs`'s.
//!
//! A scope is the same for every proxy of a namespace that the same Sidecar
//! applies to, and is computed once per push for each (pilot-ads).

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use pilot_model::ServiceDiscovery;
use pilot_routing::{
    EgressHost, NamespaceSelector, OutboundMode, RoutingModel, ScopeOrigin, SidecarScope, exported_to,
    host_matches, in_scope, is_public,
};

mod index;
mod scoped;

pub use index::ServiceIndex;
pub use scoped::{BLACK_HOLE, BLOCK_ALL, generate_scoped_inbound, generate_scoped_outbound};

use crate::MeshConfig;
use crate::sidecar::layout::SidecarListeners;

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
    // Whether an entry names a host (imports or excludes it).
    let names = |entry: &EgressHost, host: &str, host_ns: Option<&str>| match host_ns {
        Some(ns) => entry.names(sidecar_namespace, ns, host),
        None => entry.namespace == NamespaceSelector::Any && host_matches(&entry.host, host),
    };
    // Whether an entry imports a host that no exclusion of its listener
    // takes away.
    let imports = |index: usize, host: &str, host_ns: Option<&str>| {
        let import = &sidecar.imports[index];
        !import.host.exclude
            && names(&import.host, host, host_ns)
            && !sidecar.imports.iter().any(|other| {
                other.listener == import.listener && other.host.exclude && names(&other.host, host, host_ns)
            })
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
        if let Some(index) = (0..entries.len()).find(|&index| imports(index, host, host_ns)) {
            hosts.insert(host.to_string(), HostReason::Imported(entries[index].0.clone()));
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
            in_scope(entries, |entry| names(entry, host, host_ns))
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
