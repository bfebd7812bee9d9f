//! Typing the routing objects of a push from those of the previous one:
//! an object at the resource version the previous push held is taken as
//! it was typed then, only new versions are decoded.

use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::sync::Arc;

use pilot_api::istio::{DestinationPolicy, EgressRule, IngressRule, RouteRule};
use pilot_api::networking::{DestinationRule, Gateway, Sidecar, VirtualService};
use pilot_api::security::{AuthorizationPolicy, PeerAuthentication, RequestAuthentication};
use pilot_model::{Config, ConfigKind, DynConfig, StoreError};

use super::RoutingConfigs;

impl RoutingConfigs {
    /// The routing kinds among `configs`, typed, as
    /// [`RoutingConfigs::from_configs`] types them, taking each object
    /// `previous` holds at the same resource version from it rather than
    /// decoding it again; the settings (domain suffix, root namespace,
    /// default `exportTo`) are `previous`'s. An object without a resource
    /// version is always decoded.
    pub fn from_configs_reusing<'a>(
        configs: impl IntoIterator<Item = &'a DynConfig>,
        previous: &RoutingConfigs,
    ) -> Result<Self, StoreError> {
        let mut out = RoutingConfigs {
            domain_suffix: previous.domain_suffix.clone(),
            root_namespace: previous.root_namespace.clone(),
            default_export_to: previous.default_export_to.clone(),
            ..RoutingConfigs::default()
        };
        let route_rules = Held::of(&previous.route_rules);
        let destination_policies = Held::of(&previous.destination_policies);
        let egress_rules = Held::of(&previous.egress_rules);
        let ingress_rules = Held::of(&previous.ingress_rules);
        let virtual_services = Held::of(&previous.virtual_services);
        let destination_rules = Held::of(&previous.destination_rules);
        let gateways = Held::of(&previous.gateways);
        let sidecars = Held::of(&previous.sidecars);
        let authorization_policies = Held::of(&previous.authorization_policies);
        let peer_authentications = Held::of(&previous.peer_authentications);
        let request_authentications = Held::of(&previous.request_authentications);
        let http_routes = Held::of(&previous.http_routes);
        let grpc_routes = Held::of(&previous.grpc_routes);
        let gateway_classes = Held::of(&previous.gateway_classes);
        let api_gateways = Held::of(&previous.api_gateways);
        let reference_grants = Held::of(&previous.reference_grants);
        let api_tls_routes = Held::of(&previous.api_tls_routes);
        let api_tcp_routes = Held::of(&previous.api_tcp_routes);
        let backend_tls_policies = Held::of(&previous.backend_tls_policies);
        let ids = super::GatewayApiKindIds::new();
        for config in configs {
            match config.meta.kind.as_str() {
                RouteRule::KIND => out.route_rules.push(route_rules.typed(config)?),
                DestinationPolicy::KIND => out.destination_policies.push(destination_policies.typed(config)?),
                EgressRule::KIND => out.egress_rules.push(egress_rules.typed(config)?),
                IngressRule::KIND => out.ingress_rules.push(ingress_rules.typed(config)?),
                VirtualService::KIND => out.virtual_services.push(virtual_services.typed(config)?),
                DestinationRule::KIND => out.destination_rules.push(destination_rules.typed(config)?),
                Gateway::KIND => out.gateways.push(gateways.typed(config)?),
                Sidecar::KIND => out.sidecars.push(sidecars.typed(config)?),
                AuthorizationPolicy::KIND => out
                    .authorization_policies
                    .push(authorization_policies.typed(config)?),
                PeerAuthentication::KIND => {
                    out.peer_authentications.push(peer_authentications.typed(config)?)
                }
                RequestAuthentication::KIND => out
                    .request_authentications
                    .push(request_authentications.typed(config)?),
                kind if kind == ids.http_route => out.http_routes.push(http_routes.typed(config)?),
                kind if kind == ids.grpc_route => out.grpc_routes.push(grpc_routes.typed(config)?),
                kind if kind == ids.gateway_class => out.gateway_classes.push(gateway_classes.typed(config)?),
                kind if kind == ids.gateway => out.api_gateways.push(api_gateways.typed(config)?),
                kind if kind == ids.reference_grant => {
                    out.reference_grants.push(reference_grants.typed(config)?)
                }
                kind if kind == ids.tls_route => out.api_tls_routes.push(api_tls_routes.typed(config)?),
                kind if kind == ids.tcp_route => out.api_tcp_routes.push(api_tcp_routes.typed(config)?),
                kind if kind == ids.backend_tls_policy => {
                    out.backend_tls_policies.push(backend_tls_policies.typed(config)?)
                }
                _ => {}
            }
        }
        Ok(out)
    }
}

/// The typed objects of one kind a previous push held, with their
/// resource version. Two pushes list a kind's objects in the same order
/// (the store's), so each object is looked for where the last one found
/// left off; only one out of place (an object added, removed or renamed)
/// has them indexed by namespace and name.
struct Held<'a, K> {
    list: &'a [Arc<Config<K>>],
    /// Where the next object is expected in `list`.
    next: Cell<usize>,
    /// `list`'s positions by namespace and name, made at the first object
    /// not where expected.
    by_name: OnceCell<HashMap<(&'a str, &'a str), usize>>,
}

impl<'a, K: ConfigKind + Clone> Held<'a, K> {
    fn of(list: &'a [Arc<Config<K>>]) -> Self {
        Held {
            list,
            next: Cell::new(0),
            by_name: OnceCell::new(),
        }
    }

    /// The held object named as `config` is, if any.
    fn find(&self, config: &DynConfig) -> Option<&'a Arc<Config<K>>> {
        let (namespace, name) = (config.meta.namespace.as_str(), config.meta.name.as_str());
        let at = match self.list.get(self.next.get()) {
            Some(held) if held.meta.namespace == namespace && held.meta.name == name => self.next.get(),
            _ => *self
                .by_name
                .get_or_init(|| {
                    self.list
                        .iter()
                        .enumerate()
                        .map(|(i, c)| ((c.meta.namespace.as_str(), c.meta.name.as_str()), i))
                        .collect()
                })
                .get(&(namespace, name))?,
        };
        self.next.set(at + 1);
        self.list.get(at)
    }

    /// `config` typed: as held (shared), if held at its version.
    fn typed(&self, config: &DynConfig) -> Result<Arc<Config<K>>, StoreError> {
        let held = self.find(config).filter(|held| {
            config.meta.resource_version.is_some()
                && held.meta.resource_version == config.meta.resource_version
        });
        match held {
            Some(held) => Ok(Arc::clone(held)),
            None => Config::from_dyn(config).map(Arc::new),
        }
    }
}
