//! What the routing model looks like to one proxy: the objects visible in
//! its namespace (`exportTo`), and the model restricted to the hosts in
//! its scope (pilot-xds's `scope`), with what a push changed, by host.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::{Destination, HostRoutes, HttpAction, IngressServer, RoutingConfigs, RoutingModel};
use pilot_api::networking::{exported_to, is_public};

impl RoutingConfigs {
    /// The objects visible in `namespace`: the VirtualServices and
    /// DestinationRules exported to it (their `exportTo`, else
    /// [`RoutingConfigs::default_export_to`]); the v1alpha2 kinds have no
    /// `exportTo` and are visible everywhere. Of the routes attached to a
    /// Service (GAMMA), the namespace sees its own consumer routes and,
    /// for the Services it has none for, the producer routes.
    pub fn visible_to(&self, namespace: &str) -> RoutingConfigs {
        let default = &self.default_export_to;
        let mut out = self.clone();
        out.viewer = Some(namespace.to_string());
        out.virtual_services
            .retain(|vs| exported_to(&vs.spec.export_to, &vs.meta.namespace, default, namespace));
        out.destination_rules
            .retain(|dr| exported_to(&dr.spec.export_to, &dr.meta.namespace, default, namespace));
        out
    }

    /// True when some VirtualService or DestinationRule is not visible in
    /// every namespace, or some HTTPRoute or GRPCRoute is a consumer route
    /// of a Service: then each namespace compiles its own model.
    pub fn restricts_visibility(&self) -> bool {
        let default = &self.default_export_to;
        super::gamma::has_consumer_routes(self)
            || self
                .virtual_services
                .iter()
                .any(|vs| !is_public(&vs.spec.export_to, default))
            || self
                .destination_rules
                .iter()
                .any(|dr| !is_public(&dr.spec.export_to, default))
    }
}

impl RoutingModel {
    /// The model restricted to the hosts `in_scope` accepts: their routes
    /// and destinations, and the external services whose host it accepts;
    /// the ingress servers are kept (they belong to ingress proxies, which
    /// have no Sidecar), and so are the settings, Sidecars and security
    /// policies.
    pub fn scoped(&self, in_scope: impl Fn(&str) -> bool) -> RoutingModel {
        self.with_parts(
            self.hosts
                .iter()
                .filter(|(host, _)| in_scope(host))
                .map(|(h, r)| (h.clone(), r.clone()))
                .collect(),
            self.destinations
                .iter()
                .filter(|(host, _)| in_scope(host))
                .map(|(h, d)| (h.clone(), d.clone()))
                .collect(),
            |host| in_scope(host),
        )
    }

    /// [`scoped`](Self::scoped) to the set `hosts`: each is looked up
    /// rather than every host of the model tested (a proxy's scope holds a
    /// few hosts of thousands, and every class of proxies makes one).
    pub fn scoped_to<'a>(&self, hosts: impl IntoIterator<Item = &'a str>) -> RoutingModel {
        let hosts: BTreeSet<&str> = hosts.into_iter().collect();
        self.with_parts(
            hosts
                .iter()
                .filter_map(|host| {
                    let (h, r) = self.hosts.get_key_value(*host)?;
                    Some((h.clone(), Arc::clone(r)))
                })
                .collect(),
            hosts
                .iter()
                .filter_map(|host| {
                    let (h, d) = self.destinations.get_key_value(*host)?;
                    Some((h.clone(), Arc::clone(d)))
                })
                .collect(),
            |host| hosts.contains(host),
        )
    }

    /// A model of `hosts` and `destinations` (taken from this one), the
    /// external services whose host `external_in_scope` accepts, and this
    /// model's ingress servers.
    fn with_parts(
        &self,
        hosts: HashMap<String, Arc<HostRoutes>>,
        destinations: BTreeMap<String, Arc<Destination>>,
        external_in_scope: impl Fn(&str) -> bool,
    ) -> RoutingModel {
        let mut out = RoutingModel {
            hosts,
            destinations,
            external: self
                .external
                .iter()
                .filter(|e| external_in_scope(&e.host))
                .cloned()
                .collect(),
            ingress: self.ingress.clone(),
            sources: Default::default(),
            sources_by_labels: false,
            l4_by_source: false,
            settings: Arc::clone(&self.settings),
            sidecars: Arc::clone(&self.sidecars),
            authorization: Arc::clone(&self.authorization),
            peer_authentication: Arc::clone(&self.peer_authentication),
            request_authentication: Arc::clone(&self.request_authentication),
            backend_tls: Arc::clone(&self.backend_tls),
        };
        out.finish();
        out
    }

    /// The hosts `host`'s routes send or mirror traffic to (its own
    /// included when a route forwards to the whole service).
    pub fn route_targets(&self, host: &str) -> BTreeSet<String> {
        let mut targets = BTreeSet::new();
        let Some(routes) = self.hosts.get(host) else {
            return targets;
        };
        for route in &routes.http {
            if let HttpAction::Route(to) = &route.action {
                targets.extend(to.iter().map(|w| w.destination.host.clone()));
            }
            targets.extend(route.mirrors.iter().map(|m| m.destination.host.clone()));
        }
        for destinations in routes
            .tcp
            .iter()
            .map(|r| &r.destinations)
            .chain(routes.tls.iter().map(|r| &r.destinations))
        {
            targets.extend(destinations.iter().map(|w| w.destination.host.clone()));
        }
        targets.remove("");
        targets
    }

    /// The hosts whose routes or destination differ between `self` and
    /// `before`; `None` when something not kept by host (external
    /// services, ingress servers, source matches) differs: then every host
    /// may have changed. The Sidecars and security policies are not
    /// compared: they are wholes ([`RoutingModel::sidecars`],
    /// [`RoutingModel::authorization`],
    /// [`RoutingModel::peer_authentication`]).
    pub fn changed_hosts(&self, before: &RoutingModel) -> Option<BTreeSet<String>> {
        if !self.same_ingress(before) {
            return None;
        }
        self.changed_mesh_hosts(before)
    }

    /// Whether the edge servers ([`RoutingModel::ingress_servers`]) are
    /// the same as `before`'s: a virtual host the models share is the same
    /// without looking into it.
    pub fn same_ingress(&self, before: &RoutingModel) -> bool {
        self.ingress.len() == before.ingress.len()
            && self.ingress.iter().zip(&before.ingress).all(|(server, old)| {
                server.virtual_hosts.len() == old.virtual_hosts.len()
                    && server
                        .virtual_hosts
                        .iter()
                        .zip(&old.virtual_hosts)
                        .all(|(h, o)| Arc::ptr_eq(h, o) || h == o)
                    && same_but_virtual_hosts(server, old)
            })
    }

    /// [`RoutingModel::changed_hosts`] for the proxies that are not served
    /// the edge servers (sidecars, proxyless clients, ztunnels): the
    /// servers are not compared. An edge proxy's configuration may differ
    /// though no host is named.
    pub fn changed_mesh_hosts(&self, before: &RoutingModel) -> Option<BTreeSet<String>> {
        if self.external != before.external
            || self.sources != before.sources
            || self.sources_by_labels != before.sources_by_labels
        {
            return None;
        }
        let mut changed = BTreeSet::new();
        // Entries shared with `before` (a model compiled from it) are the
        // same without looking into them.
        for (host, routes) in &self.hosts {
            if !before
                .hosts
                .get(host)
                .is_some_and(|b| Arc::ptr_eq(b, routes) || b == routes)
            {
                changed.insert(host.clone());
            }
        }
        changed.extend(
            before
                .hosts
                .keys()
                .filter(|h| !self.hosts.contains_key(*h))
                .cloned(),
        );
        for (host, destination) in &self.destinations {
            if !before
                .destinations
                .get(host)
                .is_some_and(|b| Arc::ptr_eq(b, destination) || b == destination)
            {
                changed.insert(host.clone());
            }
        }
        changed.extend(
            before
                .destinations
                .keys()
                .filter(|h| !self.destinations.contains_key(*h))
                .cloned(),
        );
        Some(changed)
    }

    /// The domains of the gateway servers' virtual hosts whose routes
    /// differ between `self` and `before`, when nothing else an edge
    /// proxy's listeners and routes are generated from differs: every
    /// other part of the model (but the services' own routes, which edge
    /// proxies are not served) is the same, and every ingress server is
    /// the same but for the routes of its virtual hosts, which name the
    /// same domains in the same order. `None` otherwise. An edge proxy's
    /// listeners and scopes are then the same, and of its route
    /// configurations only those holding one of the domains differ.
    pub fn changed_edge_hosts(&self, before: &RoutingModel) -> Option<BTreeSet<String>> {
        fn same<T: PartialEq>(a: &Arc<T>, b: &Arc<T>) -> bool {
            Arc::ptr_eq(a, b) || a == b
        }
        let rest_same = self.external == before.external
            && self.sources == before.sources
            && self.sources_by_labels == before.sources_by_labels
            && self.l4_by_source == before.l4_by_source
            && same(&self.settings, &before.settings)
            && same(&self.sidecars, &before.sidecars)
            && same(&self.authorization, &before.authorization)
            && same(&self.peer_authentication, &before.peer_authentication)
            && same(&self.request_authentication, &before.request_authentication)
            && same(&self.backend_tls, &before.backend_tls)
            && self.destinations.len() == before.destinations.len()
            && self
                .destinations
                .iter()
                .zip(&before.destinations)
                .all(|((h, d), (hb, db))| h == hb && same(d, db));
        if !rest_same || self.ingress.len() != before.ingress.len() {
            return None;
        }
        let mut changed = BTreeSet::new();
        for (server, old) in self.ingress.iter().zip(&before.ingress) {
            if server.virtual_hosts.len() != old.virtual_hosts.len() {
                return None;
            }
            for (host, old) in server.virtual_hosts.iter().zip(&old.virtual_hosts) {
                if host.host != old.host {
                    return None;
                }
                if !same(host, old) {
                    changed.insert(host.host.clone());
                }
            }
            if !same_but_virtual_hosts(server, old) {
                return None;
            }
        }
        Some(changed)
    }
}

/// Whether two edge servers are the same but for their virtual hosts
/// (every field named: a new one is compared or left out here on
/// purpose).
fn same_but_virtual_hosts(server: &IngressServer, old: &IngressServer) -> bool {
    let IngressServer {
        port,
        protocol,
        port_name,
        gateway,
        selector,
        namespace,
        hosts,
        tls,
        https_redirect,
        routes,
        virtual_hosts: _,
        tcp_routes,
        tls_routes,
        backend_client_credential,
    } = server;
    *port == old.port
        && *protocol == old.protocol
        && *port_name == old.port_name
        && *gateway == old.gateway
        && *selector == old.selector
        && *namespace == old.namespace
        && *hosts == old.hosts
        && *tls == old.tls
        && *https_redirect == old.https_redirect
        && *routes == old.routes
        && *tcp_routes == old.tcp_routes
        && *tls_routes == old.tls_routes
        && *backend_client_credential == old.backend_client_credential
}
