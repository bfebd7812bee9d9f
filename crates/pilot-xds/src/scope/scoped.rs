//! Generation restricted to a proxy's scope: the outbound half over the
//! hosts in scope (with `REGISTRY_ONLY`'s black hole and 502 catch-all,
//! and the Sidecar's egress listeners), and the inbound half with the
//! Sidecar's ingress listeners.

use envoy_types::pb::envoy::config::cluster::v3::{Cluster, cluster};
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, Route, RouteMatch, VirtualHost, route, route_match,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use pilot_model::{RegistrySnapshot, ServiceInstance};
use pilot_routing::{OutboundMode, RoutingModel};

use super::ProxyScope;
use crate::build::cluster::{CONNECT_TIMEOUT, PASSTHROUGH};
use crate::build::util::any;
use crate::generate::{generate_inbound, generate_outbound};
use crate::{MeshConfig, Proxy, Resources};

/// The cluster `REGISTRY_ONLY` sends traffic to hosts out of scope to: no
/// endpoints, so the connection is refused.
pub const BLACK_HOLE: &str = "BlackHoleCluster";

/// The virtual host `REGISTRY_ONLY` adds to each outbound HTTP route
/// configuration: any host no other virtual host matches is answered 502.
pub const BLOCK_ALL: &str = "block_all";

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
        crate::sidecar::egress::egress_listeners(
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
/// ([`generate_inbound`](crate::serving::generate_inbound)); the Sidecar's
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
        return generate_inbound(proxy, own, mesh);
    };
    let mut resources = if listeners.ingress.is_empty() {
        generate_inbound(proxy, own, mesh)
    } else {
        let namespace = proxy.domain.split('.').next().unwrap_or_default();
        let authorization = crate::build::rbac::Authorization::new(mesh, proxy)
            .with_authentication(mesh.model().request_authentication());
        let (mut clusters, listeners) = crate::sidecar::ingress::ingress_listeners(
            proxy,
            own,
            &listeners.ingress,
            |labels, port| match mesh.security_for(proxy) {
                Some(security) => security.mtls_mode(namespace, labels, port),
                None => pilot_routing::MtlsMode::Disable,
            },
            &authorization,
        );
        clusters.extend(authorization.jwks_clusters(own));
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
        crate::sidecar::ingress::limit(&mut resources.clusters, limits);
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
            connect_timeout: Some(crate::build::util::duration(CONNECT_TIMEOUT)),
            ..Default::default()
        });
    }
}
