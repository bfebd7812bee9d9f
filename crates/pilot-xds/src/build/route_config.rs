//! RDS of a sidecar: one route configuration per outbound HTTP port, a
//! virtual host per service with an HTTP port of that number (named by
//! every name a client may use for it) and per external service, each
//! with the routing model's HTTP routes of its host, in order
//! (`routes.rs`).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::google::protobuf::BoolValue;
use pilot_model::{Service, ServiceInstance};
use pilot_routing::RoutingModel;

use super::routes::{admitted, virtual_host_routes};
use crate::Proxy;
use crate::names::route_config_name;

/// The route configuration of outbound HTTP port `port`: a virtual host
/// for every service with an HTTP port of that number.
pub fn route_configuration(
    port: u16,
    services: &[std::sync::Arc<Service>],
    model: &RoutingModel,
    proxy: &Proxy,
    own: &[ServiceInstance],
) -> RouteConfiguration {
    let mut used_domains = BTreeSet::new();
    let mut virtual_hosts = Vec::new();
    for service in services {
        let Some(service_port) = service.port_by_number(port).filter(|p| p.protocol.is_http()) else {
            continue;
        };
        let domains: Vec<String> = domains(service, proxy)
            .into_iter()
            .filter(|d| used_domains.insert(d.clone()))
            .collect();
        if domains.is_empty() {
            continue;
        }
        let host_routes = model.http_routes(&service.hostname);
        let admitted = admitted(host_routes, own, proxy);
        let default_hash = model.default_hash(&service.hostname, port);
        let routes = virtual_host_routes(
            service,
            service_port.port,
            port,
            host_routes,
            &admitted,
            default_hash,
        );
        virtual_hosts.push(VirtualHost {
            name: format!("{}:{port}", service.hostname),
            domains,
            routes,
            ..Default::default()
        });
    }
    virtual_hosts.extend(super::egress::virtual_hosts(
        port,
        model,
        proxy,
        own,
        &mut used_domains,
    ));
    RouteConfiguration {
        name: route_config_name(port),
        virtual_hosts,
        validate_clusters: Some(BoolValue { value: false }),
        ignore_port_in_host_matching: true,
        ..Default::default()
    }
}

/// The names a client may use for a service: the hostname, for a service
/// of the cluster's domain `name.namespace` and `name.namespace.svc` and the
/// short name within the proxy's own namespace, and the address. Without a port: a sidecar's route configurations set
/// `ignore_port_in_host_matching`, so Envoy matches `Host: name:port` (any
/// port) against `name`, as Istio's sidecars do; the listener's port already
/// chose the route configuration. (Proxyless gRPC matches the target's
/// authority with its port: `domains_with_port`.)
pub fn domains(service: &Service, proxy: &Proxy) -> Vec<String> {
    let mut names = Vec::with_capacity(5);
    names.push(service.hostname.clone());
    // A wildcard host (a service entry's `*.example.com`) is matched as
    // itself.
    if service.hostname.starts_with('*') {
        return names;
    }
    let parts: Vec<&str> = service.hostname.split('.').collect();
    // Shorter names only for a service of the proxy's cluster domain
    // (`name.namespace.svc.<domain>`), as Istio's sidecars: a host outside
    // it (a service entry's `api.example.com`) is matched as itself.
    let cluster_suffix = proxy
        .domain
        .split_once('.')
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let in_cluster = parts.len() >= 3
        && parts[2] == "svc"
        && (cluster_suffix.is_empty()
            || service
                .hostname
                .strip_suffix(cluster_suffix)
                .is_some_and(|head| head.ends_with('.')));
    if in_cluster {
        names.push(format!("{}.{}", parts[0], parts[1]));
        if parts.len() >= 3 {
            names.push(format!("{}.{}.{}", parts[0], parts[1], parts[2]));
        }
        let proxy_namespace = proxy.domain.split('.').next().unwrap_or_default();
        if parts[1] == proxy_namespace {
            names.push(parts[0].to_string());
        }
    }
    if let Some(address) = service.address {
        names.push(address.to_string());
    }
    // Each name once, in order, in place.
    let mut kept = 0;
    for i in 0..names.len() {
        if !names[..kept].contains(&names[i]) {
            names.swap(kept, i);
            kept += 1;
        }
    }
    names.truncate(kept);
    names
}

/// [`domains`], each with `:port` and without: the names a proxyless gRPC
/// client's target may carry (its route configurations match the authority
/// as given, port included).
pub(crate) fn domains_with_port(service: &Service, port: u16, proxy: &Proxy) -> Vec<String> {
    domains(service, proxy)
        .into_iter()
        .flat_map(|name| [format!("{name}:{port}"), name])
        .collect()
}
