//! Generation of a proxy's resources from the registry and the routing
//! configuration: the whole of it ([`generate`]), and its outbound and
//! inbound halves for callers that share the outbound half between the
//! proxies of one class; a proxy's listeners, by its type
//! ([`listener_plan`]: a sidecar's, `sidecar/`, or an edge proxy's,
//! `gateway/`), and its clusters.

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use pilot_model::{ServiceDiscovery, ServiceInstance};
use pilot_routing::RoutingModel;

use crate::build::clusters::{eds_clusters, load_assignment, outbound};
use crate::build::edge_routes::EdgeRouteConfiguration;
use crate::build::listeners::ListenerPlan;
use crate::build::route_config::route_configuration;
use crate::mesh::MeshTls;
use crate::{Generator, MeshConfig, Proxy, ProxyType, Resources, ServerCertificates};
use crate::{build, gateway, grpcgen, sidecar};

/// Generates every resource for `proxy` from the registry and the routing
/// configuration (its compiled model).
pub fn generate(proxy: &Proxy, registry: &dyn ServiceDiscovery, mesh: &MeshConfig) -> Resources {
    let own = registry.host_instances(&[proxy.ip]);
    let mut resources = generate_outbound(proxy, registry, mesh, &own);
    resources.extend(generate_inbound(proxy, &own, &mesh.resolving_providers(registry)));
    resources
}

/// Everything but the inbound side. It depends on the proxy only through
/// its type, capture mode, domain and labels and through which services (with
/// which labels) it runs, never on its address or its instances' ports: so
/// the sidecars of one deployment share it (pilot-ads's generation cache).
pub fn generate_outbound(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    mesh: &MeshConfig,
    own: &[ServiceInstance],
) -> Resources {
    let model = mesh.model();
    if proxy.generator == Generator::Grpc {
        return grpcgen::outbound(proxy, registry, model, own);
    }
    let (clusters, endpoints) = clusters(proxy, registry, model, mesh.security_for(proxy));
    let mut resources = envoy_listeners_routes(proxy, registry, model, mesh.server_certificates(), own);
    resources.clusters = clusters;
    resources.endpoints = endpoints;
    resources
}

/// An Envoy's outbound listeners and route configurations (no clusters):
/// the part of its configuration that depends on its class (namespace,
/// source-matched rules), and only on the registry's services, never on
/// their endpoints.
fn envoy_listeners_routes(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    own: &[ServiceInstance],
) -> Resources {
    let plan = listener_plan(proxy, registry, model, certificates, own);
    let services = registry.services();
    let mut routes: Vec<RouteConfiguration> = plan
        .http_ports
        .iter()
        .filter(|port| !plan.destination_ports.contains(port))
        .map(|port| route_configuration(*port, &services, model, proxy, own))
        .collect();
    for port in &plan.destination_ports {
        routes.extend(build::destination::route_configurations(
            *port, &services, model, proxy, own,
        ));
    }
    routes.extend(plan.ingress_routes.iter().map(|r| r.build()));
    Resources {
        listeners: plan.listeners,
        scoped_routes: plan.scoped_routes,
        routes,
        ..Default::default()
    }
}

/// The inbound side of a captured sidecar: a cluster and a listener for
/// each of its own instances (with the RBAC filters of the authorization
/// policies of `mesh`'s model applying to it); of a proxyless gRPC proxy, the
/// listeners its xDS-enabled servers ask for (nothing for other proxies).
/// A sidecar with SDS certificates accepts mutual TLS on its inbound
/// listeners as the PeerAuthentication modes of `mesh`'s model say; one without stays
/// plaintext.
pub fn generate_inbound(proxy: &Proxy, own: &[ServiceInstance], mesh: &MeshConfig) -> Resources {
    if proxy.generator == Generator::Grpc {
        return grpcgen::inbound(own);
    }
    if proxy.proxy_type != ProxyType::Sidecar || !proxy.capture.captures() {
        return Resources::default();
    }
    let authorization = build::rbac::Authorization::new(mesh, proxy)
        .with_authentication(mesh.model().request_authentication());
    let mut clusters = build::clusters::inbound(own);
    clusters.extend(authorization.jwks_clusters(own));
    Resources {
        clusters,
        listeners: sidecar::inbound::listeners(
            own,
            |instance| {
                let namespace = proxy.domain.split('.').next().unwrap_or_default();
                let mut labels = proxy.labels.clone();
                labels.0.extend(instance.labels.0.clone());
                match mesh.security_for(proxy) {
                    Some(security) => security.mtls_mode(namespace, &labels, instance.endpoint.port),
                    None => pilot_routing::MtlsMode::Disable,
                }
            },
            &authorization,
        ),
        ..Default::default()
    }
}

/// The listeners of `proxy` (but its inbound ones), with the route
/// configurations they refer to: a sidecar's outbound listeners, or an
/// edge proxy's (the servers it serves, but those terminating TLS with a
/// certificate `certificates` says it cannot be sent).
pub fn listener_plan(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    own: &[ServiceInstance],
) -> ListenerPlan {
    match proxy.proxy_type {
        ProxyType::Sidecar => sidecar::outbound::plan(proxy, registry, model, own),
        ProxyType::Ingress | ProxyType::Router => {
            let mut plan = ListenerPlan::default();
            gateway::listeners(proxy, registry, model, certificates, &mut plan);
            plan
        }
        // A ztunnel is served workloads and authorizations
        // (`ambient/`), never listeners.
        ProxyType::Ztunnel => ListenerPlan::default(),
    }
}

/// Of an edge proxy's [`listener_plan`], the route configurations
/// holding one of `domains` (a gateway server's virtual host for it),
/// built as the plan builds them, and those alone; none for a sidecar or
/// a ztunnel. When the model differs from the one a proxy's last plan
/// came from in those hosts' routes alone
/// ([`RoutingModel::changed_edge_hosts`]), the new plan is the old one
/// with these configurations in place of theirs: its listeners and scopes
/// are the same.
pub fn edge_route_configurations_holding(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    certificates: Option<&dyn ServerCertificates>,
    domains: &std::collections::BTreeSet<String>,
) -> Vec<EdgeRouteConfiguration> {
    match proxy.proxy_type {
        ProxyType::Ingress | ProxyType::Router => {
            gateway::route_configurations_holding(proxy, registry, model, certificates, domains)
        }
        ProxyType::Sidecar | ProxyType::Ztunnel => Vec::new(),
    }
}

/// The clusters for `proxy`, and the load assignments of its EDS clusters.
fn clusters(
    proxy: &Proxy,
    registry: &dyn ServiceDiscovery,
    model: &RoutingModel,
    security: Option<MeshTls<'_>>,
) -> (Vec<Cluster>, Vec<ClusterLoadAssignment>) {
    // The passthrough serves captured traffic only.
    let captured = proxy.proxy_type == ProxyType::Sidecar && proxy.capture.captures();
    let services = registry.services();
    let assignments = eds_clusters(&services, model)
        .iter()
        .map(|c| load_assignment(&c.name, &c.service, &c.port_name, registry))
        .collect();
    let edge = proxy.proxy_type.is_edge();
    let client = edge
        .then(|| gateway::backend_client_credential(proxy, model))
        .flatten();
    let mut clusters = outbound(captured, edge, client, &services, model, security);
    clusters.extend(gateway::sni_dnat::clusters(proxy, &services, model));
    clusters.extend(build::jwt_authn::clusters(build::jwt_authn::edge_policies(
        proxy, model,
    )));
    (clusters, assignments)
}
