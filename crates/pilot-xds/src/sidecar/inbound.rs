//! LDS of a captured sidecar, inbound: a listener for each of its own
//! instances, to 127.0.0.1, with the RBAC filters of the authorization
//! policies applying to it and the mutual TLS its PeerAuthentication
//! mode asks for (a Sidecar's ingress listeners take their place:
//! `ingress.rs`).

use std::collections::BTreeSet;

use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager;
use pilot_model::ServiceInstance;

use crate::ClusterName;
use crate::build::listeners::{inbound_http_filter_chain, listener, route_to, tcp_filter_chain};
use crate::build::rbac::Authorization;

/// Inbound listeners for a captured sidecar's own instances, to 127.0.0.1,
/// with the RBAC filters of the authorization policies applying to them.
pub(crate) fn listeners(
    own: &[ServiceInstance],
    mtls: impl Fn(&ServiceInstance) -> pilot_routing::MtlsMode,
    authz: &Authorization,
) -> Vec<Listener> {
    let mut listeners = Vec::new();
    let mut taken = BTreeSet::new();
    for instance in own {
        let (ip, port) = (instance.endpoint.address.to_string(), instance.endpoint.port);
        if !taken.insert((ip.clone(), port)) {
            continue;
        }
        let cluster =
            ClusterName::inbound(&instance.service.hostname, instance.endpoint.service_port.port).to_string();
        let mut chain = if instance.endpoint.service_port.protocol.is_http() {
            inbound_http_filter_chain(
                &format!("inbound_{port}"),
                http_connection_manager::RouteSpecifier::RouteConfig(RouteConfiguration {
                    name: format!("inbound|{port}"),
                    virtual_hosts: vec![VirtualHost {
                        name: format!("inbound|{port}"),
                        domains: vec!["*".into()],
                        routes: vec![route_to(&cluster, "/")],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            )
        } else {
            tcp_filter_chain(&cluster)
        };
        authz.secure(&mut chain, &instance.labels);
        let mut inbound = listener(&format!("{ip}_{port}"), &ip, port, false, chain);
        crate::build::security::secure_inbound(&mut inbound, mtls(instance));
        listeners.push(inbound);
    }
    listeners
}
