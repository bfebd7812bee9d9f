//! The routing model: the one form of routing configuration that
//! generation reads, whichever API family it was written in.
//!
//! The routing kinds (v1alpha2 `RouteRule`, `DestinationPolicy`,
//! `EgressRule`, `IngressRule`; `networking.istio.io` `VirtualService` and
//! `DestinationRule`, `Gateway`; the Gateway API's `HTTPRoute` and
//! `GRPCRoute` attached to a Service, GAMMA) are compiled by [`RoutingConfigs::compile`] into a
//! [`RoutingModel`]:
//!
//! - per service host, its ordered HTTP routes ([`HttpRoute`]: matches,
//!   weighted destinations, redirect or direct response, rewrite, timeout,
//!   retries, fault, mirror, CORS, header manipulation, websocket), and its
//!   TCP and TLS routes;
//! - per destination host, the [`TrafficPolicy`] of its clusters and its
//!   named [`Subset`]s, each with its own policy. A v1alpha2 rule's
//!   label-selected target is a subset named after its labels
//!   (`version=v1`), which is also how its clusters are named;
//! - the external services proxies may call ([`ExternalService`]), and the
//!   servers of edge proxies ([`IngressServer`]): the ingress rules', and
//!   the gateways' with the VirtualServices bound to them;
//! - what decides each proxy's scope and inbound security, compiled from
//!   the `Sidecar`, `AuthorizationPolicy` and `PeerAuthentication`
//!   objects: each Sidecar's imports, listeners and outbound policy
//!   ([`SidecarScope`], and which one applies to a proxy:
//!   [`RoutingModel::sidecar_for`]), the authorization policies with their
//!   rules ([`AuthorizationPolicies`]), and the mutual TLS modes by
//!   namespace, workload and port ([`PeerAuthentications`]).
//!
//! Generation (pilot-xds) reads the model and nothing else: no routing or
//! security object reaches it.
//!
//! Compilation is pure and deterministic: the same objects give the same
//! model. A host's routes keep the kinds' precedence: v1alpha2 rules by
//! precedence (higher first, ties broken by namespace and name), then the
//! VirtualServices' routes (by namespace and name, each in its order),
//! then the routes of the HTTPRoutes and GRPCRoutes attached to the
//! host's Service, in the Gateway API's precedence (`gamma/`). The model is compiled once per push and
//! shared by every proxy; what depends on the proxy asking (a source
//! match) is kept in the routes and decided at generation.
//!
//! ```
//! use pilot_routing::{HttpAction, RoutingConfigs};
//! use pilot_model::{Labels, document};
//! use pilot_api::istio;
//!
//! let text = r#"
//! apiVersion: config.istio.io/v1alpha2
//! kind: RouteRule
//! metadata: {name: reviews-split, namespace: default}
//! spec:
//!   destination: {name: reviews}
//!   route: [{labels: {version: v1}, weight: 80}, {labels: {version: v2}, weight: 20}]
//! "#;
//! let objects = document::parse("rules.yaml", text, &istio::registry()).unwrap();
//! let model = RoutingConfigs::from_configs(&objects).unwrap().compile();
//! let host = "reviews.default.svc.cluster.local";
//! let routes = model.http_routes(host);
//! assert_eq!(routes[0].name, "default/reviews-split");
//! let HttpAction::Route(to) = &routes[0].action else { panic!() };
//! assert_eq!(to[0].destination.subset, Labels::from_pairs([("version", "v1")]));
//! assert_eq!(to[0].weight, 80);
//! let subsets: Vec<&str> = model.destination(host).unwrap().subsets.iter().map(|s| s.name.as_str()).collect();
//! assert_eq!(subsets, ["version=v1", "version=v2"]);
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use pilot_api::gateway_api::{
    BackendTlsPolicy, Gateway as ApiGateway, GatewayClass, GrpcRoute as GatewayGrpcRoute,
    HttpRoute as GatewayHttpRoute, ReferenceGrant, TcpRoute as GatewayTcpRoute, TlsRoute as GatewayTlsRoute,
};
use pilot_api::istio::{DestinationPolicy, EgressRule, IngressRule, IstioService, RouteRule};
use pilot_api::networking::{DestinationRule, Gateway, Sidecar, VirtualService};
use pilot_api::security::{AuthorizationPolicy, PeerAuthentication, RequestAuthentication};
use pilot_model::{Config, ConfigKind, DynConfig, Labels, StoreError};

pub mod authorization;
pub mod backend_tls;
pub mod convert;
mod decode;
mod edge;
mod gamma;
mod gateway;
pub mod gateway_api_status;
mod http;
mod incremental;
mod l4;
mod peer_authentication;
mod policy;
pub mod request_authentication;
mod scope;
mod sidecar;
mod sidecar_ingress;
mod v1;
mod v1alpha2;

pub use authorization::AuthorizationPolicies;
pub use backend_tls::{BackendTls, BackendTlsPolicies};

pub use edge::{
    ExternalPort, ExternalService, GatewayHost, IngressRoute, IngressServer, PortSelector, Resolution,
    ServerHost, ServerTls, ServerTlsMode,
};
pub use gamma::edge::GATEWAY_NAME_LABEL;
pub use http::{
    Cors, DirectResponse, Fault, FaultAbort, FaultDelay, HeaderOperations, Headers, HttpAction, HttpMatch,
    HttpRoute, MESH_GATEWAY, Mirror, Redirect, Retries, Rewrite, RouteDestination, StickySession,
    StringMatch, WeightedDestination,
};
pub use incremental::Recompiled;
pub use l4::{L4Match, TcpRoute, TlsRoute};
pub use peer_authentication::{PeerAuthentications, WorkloadMtls};
pub use policy::{
    ClientTls, ConnectionPool, ConsistentHash, Destination, HashKey, Http2Keepalive, LoadBalancer,
    OutlierDetection, PortTrafficPolicy, RetryBudget, SimpleLb, Subset, TcpKeepalive, TlsMode, TrafficPolicy,
    Warmup,
};
pub use request_authentication::RequestAuthentications;
pub use sidecar::{EgressImport, EgressKind, EgressListener, ScopeOrigin, SidecarScope};
pub use sidecar_ingress::{DefaultEndpoint, InboundLimits, IngressPort, IngressTls, IngressTlsMode};

/// The mesh config's extension providers (the external authorizers CUSTOM
/// AuthorizationPolicies name), as generation reads them.
pub use pilot_api::mesh::{
    EnvoyExtAuthzGrpc, EnvoyExtAuthzHttp, ExtensionProvider, ExtensionProviders, ProviderKind, RequestBody,
};
/// The API's vocabulary the model speaks in: values (host patterns,
/// modes), not objects. Re-exported so that a reader of the model needs
/// no API crate of its own.
pub use pilot_api::networking::{
    EgressHost, NamespaceSelector, OutboundMode, exported_to, host_matches, in_scope, is_public,
};
/// A mutual TLS mode (the model's are never [`MtlsMode::Unset`]).
pub use pilot_api::security::MtlsMode;

use sidecar::Sidecars;

/// The DNS suffix of service hostnames unless said otherwise.
pub const DEFAULT_DOMAIN_SUFFIX: &str = "svc.cluster.local";

/// The routing objects a model is compiled from, typed, by kind.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RoutingConfigs {
    /// Route rules.
    pub route_rules: Vec<Arc<Config<RouteRule>>>,
    /// Destination policies.
    pub destination_policies: Vec<Arc<Config<DestinationPolicy>>>,
    /// Egress rules.
    pub egress_rules: Vec<Arc<Config<EgressRule>>>,
    /// Ingress rules.
    pub ingress_rules: Vec<Arc<Config<IngressRule>>>,
    /// Virtual services (`networking.istio.io`).
    pub virtual_services: Vec<Arc<Config<VirtualService>>>,
    /// Destination rules (`networking.istio.io`).
    pub destination_rules: Vec<Arc<Config<DestinationRule>>>,
    /// Gateways (`networking.istio.io`).
    pub gateways: Vec<Arc<Config<Gateway>>>,
    /// Sidecars (`networking.istio.io`): what each proxy sees, compiled
    /// into [`SidecarScope`]s.
    pub sidecars: Vec<Arc<Config<Sidecar>>>,
    /// Authorization policies (`security.istio.io`), compiled into
    /// [`AuthorizationPolicies`].
    pub authorization_policies: Vec<Arc<Config<AuthorizationPolicy>>>,
    /// Peer authentications (`security.istio.io`), compiled into
    /// [`PeerAuthentications`].
    pub peer_authentications: Vec<Arc<Config<PeerAuthentication>>>,
    /// Request authentications (`security.istio.io`), compiled into
    /// [`RequestAuthentications`].
    pub request_authentications: Vec<Arc<Config<RequestAuthentication>>>,
    /// The Gateway API's HTTPRoutes: those attached to a Service (GAMMA)
    /// are compiled into its host's routes.
    pub http_routes: Vec<Arc<Config<GatewayHttpRoute>>>,
    /// The Gateway API's GRPCRoutes, compiled as the HTTPRoutes are.
    pub grpc_routes: Vec<Arc<Config<GatewayGrpcRoute>>>,
    /// The Gateway API's GatewayClasses: those naming pilot's controller
    /// make their Gateways pilot's.
    pub gateway_classes: Vec<Arc<Config<GatewayClass>>>,
    /// The Gateway API's Gateways (`gateway.networking.k8s.io`): those of
    /// pilot's classes are served by router proxies, with the HTTPRoutes
    /// and GRPCRoutes attached to them.
    pub api_gateways: Vec<Arc<Config<ApiGateway>>>,
    /// The Gateway API's ReferenceGrants: a route refers to a Service of
    /// another namespace only under one.
    pub reference_grants: Vec<Arc<Config<ReferenceGrant>>>,
    /// The Gateway API's TLSRoutes: on a Gateway's TLS listener passing
    /// TLS through, connections by their SNI.
    pub api_tls_routes: Vec<Arc<Config<GatewayTlsRoute>>>,
    /// The Gateway API's TCPRoutes: on a Gateway's TCP listener, every
    /// connection.
    pub api_tcp_routes: Vec<Arc<Config<GatewayTcpRoute>>>,
    /// The Gateway API's BackendTLSPolicies, compiled into
    /// [`BackendTlsPolicies`]: the TLS towards the Services they target.
    pub backend_tls_policies: Vec<Arc<Config<BackendTlsPolicy>>>,
    /// The DNS suffix of service hostnames (`svc.cluster.local`).
    pub domain_suffix: String,
    /// The namespace whose selector-less Sidecar is the mesh's default
    /// (`istio-system`).
    pub root_namespace: String,
    /// The namespaces services, VirtualServices and DestinationRules
    /// without `exportTo` are visible to (empty: every namespace).
    pub default_export_to: Vec<String>,
    /// The namespace whose view these objects are
    /// ([`RoutingConfigs::visible_to`]); none: the whole mesh.
    viewer: Option<String>,
}

/// The root namespace unless said otherwise (Istio's default
/// `rootNamespace`): its routing objects are visible to every namespace,
/// its security policies without a selector apply to every workload of
/// the mesh, and those with a selector to the selected workloads of every
/// namespace.
pub const DEFAULT_ROOT_NAMESPACE: &str = "istio-system";

impl Default for RoutingConfigs {
    fn default() -> Self {
        RoutingConfigs {
            route_rules: Vec::new(),
            destination_policies: Vec::new(),
            egress_rules: Vec::new(),
            ingress_rules: Vec::new(),
            virtual_services: Vec::new(),
            destination_rules: Vec::new(),
            gateways: Vec::new(),
            sidecars: Vec::new(),
            authorization_policies: Vec::new(),
            peer_authentications: Vec::new(),
            request_authentications: Vec::new(),
            http_routes: Vec::new(),
            grpc_routes: Vec::new(),
            gateway_classes: Vec::new(),
            api_gateways: Vec::new(),
            reference_grants: Vec::new(),
            api_tls_routes: Vec::new(),
            api_tcp_routes: Vec::new(),
            backend_tls_policies: Vec::new(),
            domain_suffix: DEFAULT_DOMAIN_SUFFIX.into(),
            root_namespace: DEFAULT_ROOT_NAMESPACE.into(),
            default_export_to: Vec::new(),
            viewer: None,
        }
    }
}

/// The Gateway API's kinds are named with their group
/// (`HTTPRoute.gateway.networking.k8s.io`, made by [`ConfigKind::id`]):
/// worked out once per decode of a push's objects, not once per object.
pub(crate) struct GatewayApiKindIds {
    pub(crate) http_route: std::borrow::Cow<'static, str>,
    pub(crate) grpc_route: std::borrow::Cow<'static, str>,
    pub(crate) gateway_class: std::borrow::Cow<'static, str>,
    pub(crate) gateway: std::borrow::Cow<'static, str>,
    pub(crate) reference_grant: std::borrow::Cow<'static, str>,
    pub(crate) tls_route: std::borrow::Cow<'static, str>,
    pub(crate) tcp_route: std::borrow::Cow<'static, str>,
    pub(crate) backend_tls_policy: std::borrow::Cow<'static, str>,
}

impl GatewayApiKindIds {
    pub(crate) fn new() -> Self {
        GatewayApiKindIds {
            http_route: GatewayHttpRoute::id(),
            grpc_route: GatewayGrpcRoute::id(),
            gateway_class: GatewayClass::id(),
            gateway: ApiGateway::id(),
            reference_grant: ReferenceGrant::id(),
            tls_route: GatewayTlsRoute::id(),
            tcp_route: GatewayTcpRoute::id(),
            backend_tls_policy: BackendTlsPolicy::id(),
        }
    }
}

impl RoutingConfigs {
    /// The routing kinds among `configs`, typed; other kinds are ignored.
    /// Fails on an object that does not decode as its kind.
    pub fn from_configs<'a>(configs: impl IntoIterator<Item = &'a DynConfig>) -> Result<Self, StoreError> {
        let mut out = RoutingConfigs::default();
        let ids = GatewayApiKindIds::new();
        for config in configs {
            match config.meta.kind.as_str() {
                RouteRule::KIND => out.route_rules.push(Arc::new(Config::from_dyn(config)?)),
                DestinationPolicy::KIND => out.destination_policies.push(Arc::new(Config::from_dyn(config)?)),
                EgressRule::KIND => out.egress_rules.push(Arc::new(Config::from_dyn(config)?)),
                IngressRule::KIND => out.ingress_rules.push(Arc::new(Config::from_dyn(config)?)),
                VirtualService::KIND => out.virtual_services.push(Arc::new(Config::from_dyn(config)?)),
                DestinationRule::KIND => out.destination_rules.push(Arc::new(Config::from_dyn(config)?)),
                Gateway::KIND => out.gateways.push(Arc::new(Config::from_dyn(config)?)),
                Sidecar::KIND => out.sidecars.push(Arc::new(Config::from_dyn(config)?)),
                AuthorizationPolicy::KIND => out
                    .authorization_policies
                    .push(Arc::new(Config::from_dyn(config)?)),
                PeerAuthentication::KIND => {
                    out.peer_authentications.push(Arc::new(Config::from_dyn(config)?))
                }
                RequestAuthentication::KIND => out
                    .request_authentications
                    .push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.http_route => out.http_routes.push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.grpc_route => out.grpc_routes.push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.gateway_class => {
                    out.gateway_classes.push(Arc::new(Config::from_dyn(config)?))
                }
                kind if kind == ids.gateway => out.api_gateways.push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.reference_grant => {
                    out.reference_grants.push(Arc::new(Config::from_dyn(config)?))
                }
                kind if kind == ids.tls_route => out.api_tls_routes.push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.tcp_route => out.api_tcp_routes.push(Arc::new(Config::from_dyn(config)?)),
                kind if kind == ids.backend_tls_policy => {
                    out.backend_tls_policies.push(Arc::new(Config::from_dyn(config)?))
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// The hostname a reference in an object of `namespace` names:
    /// `service` if given, else `name.namespace.domain`.
    pub fn hostname(&self, service: &IstioService, namespace: &str) -> String {
        service.hostname(namespace, &self.domain_suffix)
    }

    /// The routing model these objects make.
    pub fn compile(&self) -> RoutingModel {
        let mut model = RoutingModel::default();
        v1alpha2::compile(self, &mut model);
        v1::compile(self, &mut model);
        gamma::compile(self, &mut model);
        gamma::edge::compile(self, &mut model);
        model.finish();
        model.settings = Arc::new(Settings::of(self));
        model.sidecars = Arc::new(Sidecars::compile(self));
        model.authorization = Arc::new(AuthorizationPolicies::compile(self));
        model.peer_authentication = Arc::new(PeerAuthentications::compile(self));
        model.request_authentication = Arc::new(RequestAuthentications::compile(self));
        model.backend_tls = Arc::new(BackendTlsPolicies::compile(self));
        model
    }
}

/// The routes of one service host.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct HostRoutes {
    /// HTTP routes, first match wins.
    pub http: Vec<HttpRoute>,
    /// TCP routes, first match wins.
    pub tcp: Vec<TcpRoute>,
    /// TLS routes, first match wins.
    pub tls: Vec<TlsRoute>,
}

/// The compiled routing configuration: routes by host, destinations with
/// their policies and subsets, external services, ingress servers; the
/// Sidecars, authorization policies and mutual TLS modes. See the
/// [module](self) documentation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoutingModel {
    /// Shared with the models compiled from this one where a host's
    /// objects did not change (`incremental.rs`).
    hosts: HashMap<String, Arc<HostRoutes>>,
    destinations: BTreeMap<String, Arc<Destination>>,
    external: Vec<ExternalService>,
    ingress: Vec<IngressServer>,
    sources: HashSet<String>,
    sources_by_labels: bool,
    l4_by_source: bool,
    /// The parts compiled as wholes, shared with the models restricted
    /// to a scope and with those compiled from this one while their
    /// objects are the same.
    settings: Arc<Settings>,
    sidecars: Arc<Sidecars>,
    authorization: Arc<AuthorizationPolicies>,
    peer_authentication: Arc<PeerAuthentications>,
    request_authentication: Arc<RequestAuthentications>,
    backend_tls: Arc<BackendTlsPolicies>,
}

/// The mesh-wide settings a model was compiled with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Settings {
    domain_suffix: String,
    root_namespace: String,
    default_export_to: Vec<String>,
    /// Some VirtualService or DestinationRule is not visible in every
    /// namespace.
    restricts_visibility: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings::of(&RoutingConfigs::default())
    }
}

impl Settings {
    fn of(configs: &RoutingConfigs) -> Self {
        Settings {
            domain_suffix: configs.domain_suffix.clone(),
            root_namespace: configs.root_namespace.clone(),
            default_export_to: configs.default_export_to.clone(),
            restricts_visibility: configs.restricts_visibility(),
        }
    }
}

impl RoutingModel {
    /// Whether Gateway API routes attached to the Service of `host`
    /// (GAMMA) route its requests on `port`, for the clients of some
    /// namespace.
    pub fn has_service_routes(&self, host: &str, port: u16) -> bool {
        self.http_routes(host).iter().any(|route| {
            route.name == gamma::NO_MATCH && route.matches.iter().any(|m| m.port.is_none_or(|p| p == port))
        })
    }

    /// The HTTP routes of `host` in the order they apply.
    pub fn http_routes(&self, host: &str) -> &[HttpRoute] {
        self.hosts
            .get(host)
            .map(|h| h.http.as_slice())
            .unwrap_or_default()
    }

    /// Every host with routes, in no particular order.
    pub fn hosts(&self) -> impl Iterator<Item = (&str, &HostRoutes)> {
        self.hosts.iter().map(|(host, routes)| (host.as_str(), &**routes))
    }

    /// The routes of `host`.
    pub fn routes(&self, host: &str) -> Option<&HostRoutes> {
        self.hosts.get(host).map(|h| &**h)
    }

    /// What is known of destination `host`: its policy and subsets.
    pub fn destination(&self, host: &str) -> Option<&Destination> {
        self.destinations.get(host).map(|d| &**d)
    }

    /// Every destination with a policy or subsets, by host.
    pub fn destinations(&self) -> impl Iterator<Item = &Destination> {
        self.destinations.values().map(|d| &**d)
    }

    /// The policy of `host`'s subset selected by `labels` (empty: the whole
    /// service): the subset's own, else the host's.
    pub fn policy_for(&self, host: &str, labels: &Labels) -> Option<&TrafficPolicy> {
        self.destinations.get(host)?.policy_for(labels)
    }

    /// What a consistent hash of `host`'s whole service hashes on `port`
    /// (its DestinationRule's load balancer, or the port-level one): the
    /// hash policy of the route that sends the host's requests to the
    /// service itself when no rule routes them.
    pub fn default_hash(&self, host: &str, port: u16) -> Option<&HashKey> {
        match &self
            .destinations
            .get(host)?
            .policy
            .as_ref()?
            .for_port(port)
            .load_balancer
        {
            Some(LoadBalancer::ConsistentHash(hash)) => Some(&hash.key),
            _ => None,
        }
    }

    /// The external services proxies may call, in the order configured.
    pub fn external_services(&self) -> &[ExternalService] {
        &self.external
    }

    /// The servers of edge proxies: the ingress rules', by port, then the
    /// gateways', by gateway namespace and name and in their order.
    pub fn ingress_servers(&self) -> &[IngressServer] {
        &self.ingress
    }

    /// The services some route's source match names: only proxies running
    /// one of them can see routes other proxies do not.
    pub fn source_services(&self) -> &HashSet<String> {
        &self.sources
    }

    /// Whether some route's match names its source by workload labels
    /// alone (a VirtualService's `sourceLabels`, HTTP, TCP or TLS): then
    /// every proxy's labels matter.
    pub fn sources_by_labels(&self) -> bool {
        self.sources_by_labels
    }

    /// Whether some TCP or TLS route's match names its source (labels or
    /// namespace): then a proxy's outbound listeners depend on it.
    pub fn l4_by_source(&self) -> bool {
        self.l4_by_source
    }

    /// The DNS suffix of service hostnames it was compiled with.
    pub fn domain_suffix(&self) -> &str {
        &self.settings.domain_suffix
    }

    /// The namespace of mesh-wide Sidecars and security policies.
    pub fn root_namespace(&self) -> &str {
        &self.settings.root_namespace
    }

    /// Where services, VirtualServices and DestinationRules without an
    /// `exportTo` of their own are visible (empty: every namespace).
    pub fn default_export_to(&self) -> &[String] {
        &self.settings.default_export_to
    }

    /// Whether some VirtualService or DestinationRule it was compiled from
    /// is not visible in every namespace
    /// ([`RoutingConfigs::restricts_visibility`]): then each namespace
    /// sees a model of its own. Ask the whole mesh's model: one compiled
    /// from a namespace's view (`RoutingConfigs::visible_to`) says it of
    /// that view only.
    pub fn restricts_visibility(&self) -> bool {
        self.settings.restricts_visibility
    }

    /// Every Sidecar, compiled, by namespace and name.
    pub fn sidecars(&self) -> &[Arc<SidecarScope>] {
        self.sidecars.all()
    }

    /// The Sidecar that applies to a proxy of `namespace` whose workload
    /// has `labels`, with what made it apply: the first (by name) of the
    /// namespace whose workload selector matches, else the namespace's
    /// selector-less one, else the root namespace's selector-less one.
    pub fn sidecar_for(&self, namespace: &str, labels: &Labels) -> Option<(&Arc<SidecarScope>, ScopeOrigin)> {
        self.sidecars.applying(self.root_namespace(), namespace, labels)
    }

    /// The authorization policies, compiled.
    pub fn authorization(&self) -> &AuthorizationPolicies {
        &self.authorization
    }

    /// The mutual TLS modes of the PeerAuthentications, compiled.
    pub fn peer_authentication(&self) -> &PeerAuthentications {
        &self.peer_authentication
    }

    /// The RequestAuthentications (JWT rules), compiled.
    pub fn request_authentication(&self) -> &RequestAuthentications {
        &self.request_authentication
    }

    /// The BackendTLSPolicies, compiled.
    pub fn backend_tls(&self) -> &BackendTlsPolicies {
        &self.backend_tls
    }

    fn host_mut(&mut self, host: &str) -> &mut HostRoutes {
        Arc::make_mut(self.hosts.entry(host.to_string()).or_default())
    }

    fn destination_mut(&mut self, host: &str) -> &mut Destination {
        Arc::make_mut(self.destinations.entry(host.to_string()).or_insert_with(|| {
            Arc::new(Destination {
                host: host.to_string(),
                ..Default::default()
            })
        }))
    }

    /// Adds the subset selected by `labels` to `host` unless it has it.
    fn add_subset(&mut self, host: &str, labels: &Labels) -> &mut Subset {
        let destination = self.destination_mut(host);
        let at = match destination.subsets.iter().position(|s| &s.labels == labels) {
            Some(at) => at,
            None => {
                destination.subsets.push(Subset::from_labels(labels.clone()));
                destination.subsets.len() - 1
            }
        };
        &mut destination.subsets[at]
    }

    /// Orders what compilation left unordered, records the source
    /// services, and gives each route its destinations' hash key.
    fn finish(&mut self) {
        let destinations = &self.destinations;
        for route in self
            .ingress
            .iter_mut()
            .flat_map(|s| &mut s.virtual_hosts)
            .flat_map(|h| &mut Arc::make_mut(h).routes)
        {
            route.hash = hash_key(destinations, route);
        }
        for routes in self.hosts.values_mut() {
            hash_routes(destinations, routes);
        }
        for destination in self.destinations.values_mut() {
            if !destination.subsets.is_sorted_by(|a, b| a.labels <= b.labels) {
                Arc::make_mut(destination)
                    .subsets
                    .sort_by(|a, b| a.labels.cmp(&b.labels));
            }
        }
        self.aggregate();
    }

    /// Records what is said of the model as a whole from its hosts'
    /// routes: the source services, whether some route's source is named
    /// by labels alone, whether some TCP or TLS route names its source.
    fn aggregate(&mut self) {
        self.sources = self
            .hosts
            .values()
            .flat_map(|h| &h.http)
            .flat_map(|r| &r.matches)
            .filter_map(|m| m.source_service.clone())
            .collect();
        let l4_sources = self
            .hosts
            .values()
            .flat_map(|h| {
                h.tcp
                    .iter()
                    .flat_map(|r| &r.matches)
                    .chain(h.tls.iter().flat_map(|r| &r.matches))
            })
            .any(|m| !m.source_labels.is_empty());
        self.l4_by_source = l4_sources;
        self.sources_by_labels = l4_sources
            || self
                .hosts
                .values()
                .flat_map(|h| &h.http)
                .flat_map(|r| &r.matches)
                .any(|m| m.source_service.is_none() && !m.source_labels.is_empty());
    }
}

/// Gives each of `routes`' HTTP routes its destinations' hash key,
/// copying them only when one changes (they may be shared).
fn hash_routes(destinations: &BTreeMap<String, Arc<Destination>>, routes: &mut Arc<HostRoutes>) {
    let hashes: Vec<Option<HashKey>> = routes.http.iter().map(|r| hash_key(destinations, r)).collect();
    if routes.http.iter().zip(&hashes).any(|(r, h)| r.hash != *h) {
        for (route, hash) in Arc::make_mut(routes).http.iter_mut().zip(hashes) {
            route.hash = hash;
        }
    }
}

/// The key a consistent hash of `route`'s destinations hashes: the one
/// their policies (on their port, if they name one) share, if any.
fn hash_key(destinations: &BTreeMap<String, Arc<Destination>>, route: &HttpRoute) -> Option<HashKey> {
    let HttpAction::Route(targets) = &route.action else {
        return None;
    };
    let mut keys = targets.iter().map(|t| {
        let policy = destinations
            .get(&t.destination.host)?
            .policy_for(&t.destination.subset)?;
        let policy = match t.destination.port {
            Some(port) => policy.for_port(port),
            None => policy,
        };
        match &policy.load_balancer {
            Some(LoadBalancer::ConsistentHash(hash)) => Some(hash.key.clone()),
            _ => None,
        }
    });
    let first = keys.next()??;
    keys.all(|k| k.as_ref() == Some(&first)).then_some(first)
}

#[cfg(test)]
mod tests;
