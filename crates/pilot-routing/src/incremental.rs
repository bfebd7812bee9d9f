//! Compiling the next model from the previous one: only the hosts the
//! changed objects name are compiled again; every other host's routes and
//! destination are shared with the previous model.
//!
//! An object is changed when it is new, gone, or at another
//! `resourceVersion` (an object without one is taken as changed). A host's
//! entry (its routes, its destination) depends only on the objects that
//! name it (as the host of their routes or policy, or as a destination or
//! mirror) and, through the subsets and hash keys of its routes'
//! destinations, on the objects naming those. So the entries that may
//! change are those of the hosts named by any object (old or new) that
//! names a host a changed object names; they are compiled again from
//! every object naming a host that the objects naming them name, which is
//! all their entries depend on.
//!
//! What is not kept by host makes the whole model compile again: a change
//! of the domain suffix, root namespace or default `exportTo`; a changed
//! EgressRule, IngressRule or Gateway (either API's), GatewayClass,
//! ReferenceGrant, TLSRoute or TCPRoute, or a changed VirtualService bound
//! to an Istio gateway; an IngressRule or gateway-bound VirtualService
//! naming a host whose entry may change (the servers of Istio's gateways
//! are compiled as a whole); a changed destination of a host an HTTPRoute
//! or GRPCRoute attached to a Gateway API Gateway names (its consistent
//! hash key).
//!
//! A changed HTTPRoute or GRPCRoute attached to a Gateway API Gateway
//! compiles again only the virtual hosts of pilot's Gateways it attaches
//! to, as it is and as it was (each listener's hostname it serves): the
//! other virtual hosts are kept. The servers then differ from the previous
//! model's, so the changed hosts are not said
//! ([`Recompiled::changed`] is `None`). An `HTTPS` listener sharing its
//! port with another (they answer each other's hostnames) compiles the
//! whole model again.
//!
//! The Sidecars, authorization policies, PeerAuthentications and
//! RequestAuthentications are each
//! compiled as a whole, again only when one of their objects changed;
//! otherwise the previous model's are kept.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use pilot_api::gateway_api::{GrpcRoute, HttpRoute};
use pilot_api::istio::{DestinationPolicy, IngressRule, IstioService, RouteRule};
use pilot_api::networking::{self, DestinationRule, VirtualService};
use pilot_model::{Config, ConfigKind};

use super::gamma;
use super::v1::resolve;
use super::{
    AuthorizationPolicies, BackendTlsPolicies, MESH_GATEWAY, PeerAuthentications, RequestAuthentications,
    RoutingConfigs, RoutingModel, Settings, Sidecars,
};

/// A model compiled from the previous one
/// ([`RoutingConfigs::compile_from`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Recompiled {
    /// The model: equal to a compilation of the objects from scratch.
    pub model: RoutingModel,
    /// The hosts whose routes or destination differ from the previous
    /// model's; `None` when the whole model was compiled again or the
    /// servers of edge proxies changed (then compare the two models,
    /// [`RoutingModel::changed_hosts`]).
    pub changed: Option<BTreeSet<String>>,
}

impl RoutingConfigs {
    /// The model of these objects, compiled from `before` (the model of
    /// `previous`): hosts no changed object names are shared with it. The
    /// whole model is compiled again when something every host depends on
    /// changed (the domain suffix, the root namespace, the default
    /// `exportTo`, an EgressRule, IngressRule, Gateway or gateway-bound
    /// VirtualService).
    pub fn compile_from(&self, previous: &RoutingConfigs, before: &RoutingModel) -> Recompiled {
        match self.recompile(previous, before) {
            Some(recompiled) => recompiled,
            None => Recompiled {
                model: self.compile(),
                changed: None,
            },
        }
    }

    fn recompile(&self, previous: &RoutingConfigs, before: &RoutingModel) -> Option<Recompiled> {
        if self.domain_suffix != previous.domain_suffix
            || self.root_namespace != previous.root_namespace
            || self.default_export_to != previous.default_export_to
            || !same_objects(&self.egress_rules, &previous.egress_rules)
            || !same_objects(&self.ingress_rules, &previous.ingress_rules)
            || !same_objects(&self.gateways, &previous.gateways)
            || !same_objects(&self.gateway_classes, &previous.gateway_classes)
            || !same_objects(&self.api_gateways, &previous.api_gateways)
            || !same_objects(&self.reference_grants, &previous.reference_grants)
            || !same_objects(&self.api_tls_routes, &previous.api_tls_routes)
            || !same_objects(&self.api_tcp_routes, &previous.api_tcp_routes)
        {
            return None;
        }
        let suffix = &self.domain_suffix;
        let mut model = before.clone();
        self.compile_wholes(previous, &mut model);
        // The hosts the changed objects name, before and after.
        let mut named_by_changes = HashSet::new();
        let changes = Changed::between(self, previous);
        let mut routes_at_gateways = false;
        for (configs, changed) in [(self, &changes.now), (previous, &changes.before)] {
            for named in configs.named(suffix, |kind, at| changed.contains(&(kind, at))) {
                match named.edge {
                    Edge::Istio => return None,
                    Edge::GatewayApi => routes_at_gateways = true,
                    Edge::Mesh => {}
                }
                named_by_changes.extend(named.mesh_hosts().iter().cloned());
            }
        }
        let mut changed = BTreeSet::new();
        if !named_by_changes.is_empty() {
            changed = self.recompile_hosts(named_by_changes, &mut model)?;
        }
        // A changed route attached to a Gateway API Gateway: its
        // Gateways' virtual hosts it attaches to, now or before.
        if routes_at_gateways {
            let routes = changes.routes(self, previous);
            if !gamma::edge::recompile_hosts(self, &routes, &mut model) {
                return None;
            }
        }
        model.aggregate();
        let global_same = model.sources == before.sources
            && model.sources_by_labels == before.sources_by_labels
            && model.l4_by_source == before.l4_by_source;
        Some(Recompiled {
            model,
            changed: (global_same && !routes_at_gateways).then_some(changed),
        })
    }

    /// Compiles again into `model` the entries of the hosts that may
    /// change with `named_by_changes` (the hosts the changed objects
    /// name): the hosts whose entries changed; `None` when an edge
    /// proxy's server depends on one of them (the model must be compiled
    /// as a whole).
    fn recompile_hosts(
        &self,
        named_by_changes: HashSet<String>,
        model: &mut RoutingModel,
    ) -> Option<BTreeSet<String>> {
        let suffix = &self.domain_suffix;
        // The hosts whose entries may change: named with those, by any
        // object, old or new.
        // (The previous objects naming them are unchanged, so among the
        // new ones, or changed, so named already.)
        // The hosts every object names, worked out once for the passes
        // below.
        let all: Vec<Named> = self.named(suffix, |_, _| true).collect();
        let mut again: HashSet<String> = named_by_changes.clone();
        for named in &all {
            if named.mesh_hosts().iter().any(|h| named_by_changes.contains(h)) {
                if named.edge == Edge::Istio {
                    return None;
                }
                again.extend(named.mesh_hosts().iter().cloned());
            }
        }
        // What their entries depend on: the objects naming a host named
        // with them.
        let mut reach = again.clone();
        for named in &all {
            if named.mesh_hosts().iter().any(|h| again.contains(h)) {
                reach.extend(named.mesh_hosts().iter().cloned());
            }
        }
        let part = self.only_naming(&all, &reach).compile();
        let mut changed = BTreeSet::new();
        let mut destinations_changed = HashSet::new();
        for host in again {
            let routes = part.hosts.get(&host);
            let same = match (routes, model.hosts.get(&host)) {
                (Some(a), Some(b)) => a == b,
                (None, None) => true,
                _ => false,
            };
            if !same {
                match routes {
                    Some(routes) => model.hosts.insert(host.clone(), Arc::clone(routes)),
                    None => model.hosts.remove(&host),
                };
                changed.insert(host.clone());
            }
            let destination = part.destinations.get(&host);
            let same = match (destination, model.destinations.get(&host)) {
                (Some(a), Some(b)) => a == b,
                (None, None) => true,
                _ => false,
            };
            if !same {
                match destination {
                    Some(destination) => model.destinations.insert(host.clone(), Arc::clone(destination)),
                    None => model.destinations.remove(&host),
                };
                destinations_changed.insert(host.clone());
                changed.insert(host);
            }
        }
        // The hash keys of the routes of a Gateway API Gateway come from
        // their destinations' policies.
        let hashed_at_gateways = all
            .iter()
            .any(|n| n.edge_hosts().iter().any(|h| destinations_changed.contains(h)));
        if hashed_at_gateways {
            return None;
        }
        Some(changed)
    }

    /// Compiles into `model` (a copy of the model of `previous`) the parts
    /// compiled as wholes whose objects changed: the Sidecars, the
    /// authorization policies, the PeerAuthentications, and whether some
    /// rule is not visible everywhere.
    fn compile_wholes(&self, previous: &RoutingConfigs, model: &mut RoutingModel) {
        if self.restricts_visibility() != model.settings.restricts_visibility {
            model.settings = Arc::new(Settings::of(self));
        }
        if !same_objects(&self.sidecars, &previous.sidecars) {
            model.sidecars = Arc::new(Sidecars::compile(self));
        }
        if !same_objects(&self.authorization_policies, &previous.authorization_policies) {
            model.authorization = Arc::new(AuthorizationPolicies::compile(self));
        }
        if !same_objects(&self.peer_authentications, &previous.peer_authentications) {
            model.peer_authentication = Arc::new(PeerAuthentications::compile(self));
        }
        if !same_objects(&self.request_authentications, &previous.request_authentications) {
            model.request_authentication = Arc::new(RequestAuthentications::compile(self));
        }
        if !same_objects(&self.backend_tls_policies, &previous.backend_tls_policies) {
            model.backend_tls = Arc::new(BackendTlsPolicies::compile(self));
        }
    }

    /// The objects that name a host of `hosts` (with the same settings),
    /// `all` being what each object names (`named`, in its order); the
    /// kinds compiled as a whole are left as they are.
    fn only_naming(&self, all: &[Named], hosts: &HashSet<String>) -> RoutingConfigs {
        fn naming<K>(
            configs: &[Arc<Config<K>>],
            rest: &mut &[Named],
            hosts: &HashSet<String>,
        ) -> Vec<Arc<Config<K>>> {
            let (these, after) = rest.split_at(configs.len());
            *rest = after;
            configs
                .iter()
                .zip(these)
                .filter(|(_, named)| named.mesh_hosts().iter().any(|h| hosts.contains(h)))
                .map(|(c, _)| Arc::clone(c))
                .collect()
        }
        let rest = &mut &all[..];
        RoutingConfigs {
            route_rules: naming(&self.route_rules, rest, hosts),
            destination_policies: naming(&self.destination_policies, rest, hosts),
            virtual_services: naming(&self.virtual_services, rest, hosts),
            destination_rules: naming(&self.destination_rules, rest, hosts),
            http_routes: naming(&self.http_routes, rest, hosts),
            grpc_routes: naming(&self.grpc_routes, rest, hosts),
            gateway_classes: Vec::new(),
            api_gateways: Vec::new(),
            reference_grants: Vec::new(),
            api_tls_routes: Vec::new(),
            api_tcp_routes: Vec::new(),
            backend_tls_policies: Vec::new(),
            egress_rules: Vec::new(),
            ingress_rules: Vec::new(),
            gateways: Vec::new(),
            sidecars: Vec::new(),
            authorization_policies: Vec::new(),
            peer_authentications: Vec::new(),
            request_authentications: Vec::new(),
            domain_suffix: self.domain_suffix.clone(),
            root_namespace: self.root_namespace.clone(),
            default_export_to: self.default_export_to.clone(),
            viewer: self.viewer.clone(),
        }
    }

    /// The hosts each object compiled by host names, for the objects
    /// `pick` (kind, index) selects; and the ingress rules' and
    /// gateway-bound VirtualServices', marked as such.
    fn named<'a>(
        &'a self,
        suffix: &'a str,
        pick: impl Fn(&'static str, usize) -> bool + 'a,
    ) -> impl Iterator<Item = Named> + 'a {
        let pick = Arc::new(pick);
        let (p1, p2, p3, p4, p5, p6, p7) = (
            Arc::clone(&pick),
            Arc::clone(&pick),
            Arc::clone(&pick),
            Arc::clone(&pick),
            Arc::clone(&pick),
            Arc::clone(&pick),
            pick,
        );
        let rules = self
            .route_rules
            .iter()
            .enumerate()
            .filter(move |(i, _)| p1(RouteRule::KIND, *i))
            .map(move |(_, c)| Named::mesh(route_rule_hosts(c, suffix)));
        let policies = self
            .destination_policies
            .iter()
            .enumerate()
            .filter(move |(i, _)| p2(DestinationPolicy::KIND, *i))
            .map(move |(_, c)| Named::mesh(policy_hosts(c, suffix)));
        let services = self
            .virtual_services
            .iter()
            .enumerate()
            .filter(move |(i, _)| p3(VirtualService::KIND, *i))
            .map(move |(_, c)| Named {
                edge: if c.spec.gateways.iter().any(|g| g != MESH_GATEWAY) {
                    Edge::Istio
                } else {
                    Edge::Mesh
                },
                hosts: virtual_service_hosts(c, suffix),
                in_mesh: true,
            });
        let destination_rules = self
            .destination_rules
            .iter()
            .enumerate()
            .filter(move |(i, _)| p4(DestinationRule::KIND, *i))
            .map(move |(_, c)| Named::mesh(destination_rule_hosts(c, suffix)));
        let http_routes = self
            .http_routes
            .iter()
            .enumerate()
            .filter(move |(i, _)| p6(HTTP_ROUTE, *i))
            .map(move |(_, c)| {
                Named::route(c.spec.parent_refs.as_deref(), gamma::http_route_hosts(c, suffix))
            });
        let grpc_routes = self
            .grpc_routes
            .iter()
            .enumerate()
            .filter(move |(i, _)| p7(GRPC_ROUTE, *i))
            .map(move |(_, c)| {
                Named::route(c.spec.parent_refs.as_deref(), gamma::grpc_route_hosts(c, suffix))
            });
        let ingress = self
            .ingress_rules
            .iter()
            .enumerate()
            .filter(move |(i, _)| p5(IngressRule::KIND, *i))
            .map(move |(_, c)| Named {
                edge: Edge::Istio,
                hosts: ingress_rule_hosts(c, suffix),
                in_mesh: true,
            });
        rules
            .chain(policies)
            .chain(services)
            .chain(destination_rules)
            .chain(http_routes)
            .chain(grpc_routes)
            .chain(ingress)
    }
}

/// The kind ids of the Gateway API's routes (in [`Changed`]).
const HTTP_ROUTE: &str = <HttpRoute as ConfigKind>::KIND;
const GRPC_ROUTE: &str = <GrpcRoute as ConfigKind>::KIND;

/// The hosts one object names.
struct Named {
    hosts: Vec<String>,
    /// Whether it is compiled into the servers of edge proxies.
    edge: Edge,
    /// Whether it is compiled into hosts' entries (a route attached to a
    /// Gateway alone is not).
    in_mesh: bool,
}

impl Named {
    fn mesh(hosts: Vec<String>) -> Self {
        Named {
            hosts,
            edge: Edge::Mesh,
            in_mesh: true,
        }
    }

    /// An HTTPRoute or GRPCRoute of `parents` naming `hosts`.
    fn route(parents: Option<&[pilot_api::gateway_api::ParentReference]>, hosts: Vec<String>) -> Self {
        Named {
            hosts,
            edge: Edge::of_route(parents),
            in_mesh: gamma::names_service(parents),
        }
    }

    /// The hosts whose entries depend on it.
    fn mesh_hosts(&self) -> &[String] {
        if self.in_mesh { &self.hosts } else { &[] }
    }

    /// Of a route attached to a Gateway API Gateway, the hosts its virtual
    /// hosts there depend on (their destinations' hash keys).
    fn edge_hosts(&self) -> &[String] {
        if self.edge == Edge::GatewayApi {
            &self.hosts
        } else {
            &[]
        }
    }
}

/// Whether an object is compiled into the servers of edge proxies, and
/// how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edge {
    /// Not at all: only into hosts' entries.
    Mesh,
    /// An IngressRule or a VirtualService bound to an Istio Gateway: a
    /// change compiles the whole model again.
    Istio,
    /// An HTTPRoute or GRPCRoute attached to a Gateway API Gateway: a
    /// change compiles again the virtual hosts it attaches to
    /// ([`gamma::edge::recompile_hosts`]).
    GatewayApi,
}

impl Edge {
    fn of_route(parents: Option<&[pilot_api::gateway_api::ParentReference]>) -> Self {
        if gamma::edge::at_gateway(parents) {
            Edge::GatewayApi
        } else {
            Edge::Mesh
        }
    }
}

/// The changed objects of the kinds compiled by host, by kind and index:
/// in the new objects, and in the previous ones.
struct Changed {
    now: HashSet<(&'static str, usize)>,
    before: HashSet<(&'static str, usize)>,
}

impl Changed {
    fn between(now: &RoutingConfigs, before: &RoutingConfigs) -> Self {
        let mut changed = Changed {
            now: HashSet::new(),
            before: HashSet::new(),
        };
        changed.kind(RouteRule::KIND, &now.route_rules, &before.route_rules);
        changed.kind(
            DestinationPolicy::KIND,
            &now.destination_policies,
            &before.destination_policies,
        );
        changed.kind(
            VirtualService::KIND,
            &now.virtual_services,
            &before.virtual_services,
        );
        changed.kind(
            DestinationRule::KIND,
            &now.destination_rules,
            &before.destination_rules,
        );
        changed.kind(HTTP_ROUTE, &now.http_routes, &before.http_routes);
        changed.kind(GRPC_ROUTE, &now.grpc_routes, &before.grpc_routes);
        changed
    }

    /// The changed HTTPRoutes and GRPCRoutes, as they are in `now` and
    /// as they were in `before`.
    fn routes<'a>(
        &self,
        now: &'a RoutingConfigs,
        before: &'a RoutingConfigs,
    ) -> Vec<gamma::edge::RouteRef<'a>> {
        let mut out = Vec::new();
        for (configs, changed) in [(now, &self.now), (before, &self.before)] {
            for &(kind, i) in changed {
                match kind {
                    HTTP_ROUTE => out.push(gamma::edge::RouteRef::http(&configs.http_routes[i])),
                    GRPC_ROUTE => out.push(gamma::edge::RouteRef::grpc(&configs.grpc_routes[i])),
                    _ => {}
                }
            }
        }
        out
    }

    fn kind<T>(&mut self, kind: &'static str, now: &[Arc<Config<T>>], before: &[Arc<Config<T>>]) {
        self.now
            .extend(changed(now, before).into_iter().map(|i| (kind, i)));
        self.before
            .extend(changed(before, now).into_iter().map(|i| (kind, i)));
    }
}

/// Whether two lists hold the same objects at the same resource versions,
/// in the same order.
fn same_objects<T>(now: &[Arc<Config<T>>], before: &[Arc<Config<T>>]) -> bool {
    now.len() == before.len()
        && now.iter().zip(before).all(|(a, b)| {
            a.meta.namespace == b.meta.namespace
                && a.meta.name == b.meta.name
                && a.meta.resource_version.is_some()
                && a.meta.resource_version == b.meta.resource_version
        })
}

/// The indexes of the objects of `now` that `before` does not hold at the
/// same resource version.
fn changed<T>(now: &[Arc<Config<T>>], before: &[Arc<Config<T>>]) -> Vec<usize> {
    let moved = |config: &Config<T>, version: Option<Option<&str>>| {
        let now = config.meta.resource_version.as_deref();
        now.is_none() || version != Some(now)
    };
    // Two pushes list a kind's objects in the same order (the store's):
    // when the lists pair up by name, each object is compared with its
    // pair's version, without an index.
    if now.len() == before.len() {
        let mut out = Vec::new();
        let paired = now.iter().zip(before).enumerate().all(|(i, (a, b))| {
            if a.meta.namespace != b.meta.namespace || a.meta.name != b.meta.name {
                return false;
            }
            if moved(a, Some(b.meta.resource_version.as_deref())) {
                out.push(i);
            }
            true
        });
        if paired {
            return out;
        }
    }
    let versions: HashMap<(&str, &str), Option<&str>> = before
        .iter()
        .map(|c| {
            (
                (c.meta.namespace.as_str(), c.meta.name.as_str()),
                c.meta.resource_version.as_deref(),
            )
        })
        .collect();
    now.iter()
        .enumerate()
        .filter(|(_, c)| {
            let held = versions.get(&(c.meta.namespace.as_str(), c.meta.name.as_str()));
            moved(c, held.copied())
        })
        .map(|(i, _)| i)
        .collect()
}

fn hostname(service: &IstioService, namespace: &str, suffix: &str) -> String {
    service.hostname(namespace, suffix)
}

fn route_rule_hosts(rule: &Config<RouteRule>, suffix: &str) -> Vec<String> {
    let namespace = &rule.meta.namespace;
    let spec = &rule.spec;
    let mut hosts: Vec<String> = spec
        .destination
        .iter()
        .chain(spec.route.iter().filter_map(|t| t.destination.as_ref()))
        .chain(&spec.mirror)
        .map(|d| hostname(d, namespace, suffix))
        .collect();
    if let Some(source) = spec.match_condition.as_ref().and_then(|m| m.source.as_ref()) {
        hosts.push(hostname(source, namespace, suffix));
    }
    hosts
}

fn policy_hosts(policy: &Config<DestinationPolicy>, suffix: &str) -> Vec<String> {
    policy
        .spec
        .destination
        .iter()
        .map(|d| hostname(d, &policy.meta.namespace, suffix))
        .collect()
}

fn ingress_rule_hosts(rule: &Config<IngressRule>, suffix: &str) -> Vec<String> {
    rule.spec
        .destination
        .iter()
        .map(|d| hostname(d, &rule.meta.namespace, suffix))
        .collect()
}

fn destination_rule_hosts(rule: &Config<DestinationRule>, suffix: &str) -> Vec<String> {
    vec![resolve(&rule.spec.host, &rule.meta.namespace, suffix)]
}

fn virtual_service_hosts(service: &Config<VirtualService>, suffix: &str) -> Vec<String> {
    let namespace = &service.meta.namespace;
    let spec = &service.spec;
    let http = spec.http.iter().flat_map(|h| {
        h.route
            .iter()
            .map(|r| &r.destination)
            .chain(&h.mirror)
            .chain(h.mirrors.iter().map(|m| &m.destination))
    });
    let tcp = spec
        .tcp
        .iter()
        .flat_map(|t| t.route.iter().map(|r| &r.destination));
    let tls = spec
        .tls
        .iter()
        .flat_map(|t| t.route.iter().map(|r| &r.destination));
    let destinations = http
        .chain(tcp)
        .chain(tls)
        .map(|d: &networking::Destination| d.host.as_str());
    spec.hosts
        .iter()
        .map(String::as_str)
        .chain(destinations)
        .map(|h| resolve(h, namespace, suffix))
        .collect()
}

#[cfg(test)]
#[path = "incremental_tests.rs"]
mod tests;
