//! A Sidecar's ingress listeners, generated: for each, an inbound
//! listener on its port (at its `bind`, else 0.0.0.0; bound for
//! `captureMode: NONE` or a proxy without capture, else reached by
//! original destination) and an inbound cluster to its default endpoint
//! (loopback, the proxy's own address, or a Unix domain socket). They
//! take the place of the listeners the proxy's own instances would get.
//! The PeerAuthentications and AuthorizationPolicies of the workload
//! apply to them as to any inbound listener, for the port the listener
//! receives on, except that a listener with `tls` terminates TLS with its
//! own certificate instead of the mesh's mutual TLS (`build/downstream_tls.rs`);
//! the listener's `connectionPool`, else the Sidecar's
//! `inboundConnectionPool`, sets its inbound cluster's circuit breakers.

use envoy_types::pb::envoy::config::cluster::v3::{
    CircuitBreakers, Cluster, circuit_breakers::Thresholds, cluster,
};
use envoy_types::pb::envoy::config::core::v3::{Address, Pipe, address};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint,
};
use envoy_types::pb::envoy::config::listener::v3::Listener;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager;
use envoy_types::pb::google::protobuf::UInt32Value;
use pilot_model::{Labels, Protocol, ServiceInstance};
use pilot_routing::{DefaultEndpoint, InboundLimits, IngressPort, MtlsMode};

use crate::build::cluster::{base, set_protocol};
use crate::build::listeners::{inbound_http_filter_chain, listener, route_to, tcp_filter_chain};
use crate::build::rbac::Authorization;
use crate::build::util::socket;
use crate::{ClusterName, Proxy};

/// The inbound clusters and listeners of `ingress`: `mtls` gives the mode
/// for the workload's labels and a port, `authz` its RBAC filters.
pub(crate) fn ingress_listeners(
    proxy: &Proxy,
    own: &[ServiceInstance],
    ingress: &[IngressPort],
    mtls: impl Fn(&Labels, u16) -> MtlsMode,
    authz: &Authorization,
) -> (Vec<Cluster>, Vec<Listener>) {
    let mut clusters: Vec<Cluster> = Vec::new();
    let mut listeners: Vec<Listener> = Vec::new();
    for port in ingress {
        let address = if port.bind.is_empty() {
            "0.0.0.0"
        } else {
            &port.bind
        };
        let name = format!("{address}_{}", port.port);
        if listeners.iter().any(|l| l.name == name) {
            continue;
        }
        // The own instance on that port names the cluster and adds its
        // labels; without one, the cluster is the port's alone.
        let instance = own.iter().find(|i| i.endpoint.port == port.port);
        let cluster_name = match instance {
            Some(i) => ClusterName::inbound(&i.service.hostname, i.endpoint.service_port.port).to_string(),
            None => format!("inbound|{}||", port.port),
        };
        // TLS terminated here: the application is spoken to in clear,
        // HTTP for an HTTPS port.
        let protocol = match &port.tls {
            Some(tls) => tls.after_termination(port.protocol),
            None => port.protocol,
        };
        if !clusters.iter().any(|c| c.name == cluster_name) {
            let mut cluster = endpoint_cluster(&cluster_name, proxy, port, protocol);
            if let Some(limits) = &port.limits {
                limit(std::slice::from_mut(&mut cluster), limits);
            }
            clusters.push(cluster);
        }
        let mut labels = proxy.labels.clone();
        if let Some(i) = instance {
            labels.0.extend(i.labels.0.clone());
        }
        let mut chain = if protocol.is_http() {
            inbound_http_filter_chain(
                &format!("inbound_{}", port.port),
                http_connection_manager::RouteSpecifier::RouteConfig(RouteConfiguration {
                    name: format!("inbound|{}", port.port),
                    virtual_hosts: vec![VirtualHost {
                        name: format!("inbound|{}", port.port),
                        domains: vec!["*".into()],
                        routes: vec![route_to(&cluster_name, "/")],
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            )
        } else {
            tcp_filter_chain(&cluster_name)
        };
        authz.secure(&mut chain, &labels);
        let bound = port.uncaptured || !proxy.capture.captures();
        let mut inbound = listener(&name, address, port.port, bound, chain);
        match &port.tls {
            Some(tls) => {
                for chain in &mut inbound.filter_chains {
                    chain.transport_socket = crate::build::downstream_tls::ingress_socket(tls, protocol);
                }
            }
            None => crate::build::security::secure_inbound(&mut inbound, mtls(&labels, port.port)),
        }
        listeners.push(inbound);
    }
    (clusters, listeners)
}

/// Sets the circuit breakers of `limits` on every cluster.
pub(crate) fn limit(clusters: &mut [Cluster], limits: &InboundLimits) {
    let count = |n: Option<u32>| n.map(|value| UInt32Value { value });
    for cluster in clusters {
        cluster.circuit_breakers = Some(CircuitBreakers {
            thresholds: vec![Thresholds {
                max_connections: count(limits.max_connections),
                max_pending_requests: count(limits.max_pending_requests),
                max_requests: count(limits.max_requests),
                max_retries: count(limits.max_retries),
                ..Default::default()
            }],
            ..Default::default()
        });
    }
}

/// A static cluster to the listener's default endpoint.
fn endpoint_cluster(name: &str, proxy: &Proxy, port: &IngressPort, protocol: Protocol) -> Cluster {
    let address = match &port.endpoint {
        DefaultEndpoint::Loopback(ip, p) => socket(ip, *p),
        DefaultEndpoint::InstanceIp(p) => socket(&proxy.ip.to_string(), *p),
        DefaultEndpoint::Unix(path) => Address {
            address: Some(address::Address::Pipe(Pipe {
                path: path.clone(),
                mode: 0,
            })),
        },
    };
    let mut cluster = base(name, cluster::DiscoveryType::Static);
    cluster.load_assignment = Some(ClusterLoadAssignment {
        cluster_name: name.to_string(),
        endpoints: vec![LocalityLbEndpoints {
            lb_endpoints: vec![LbEndpoint {
                host_identifier: Some(lb_endpoint::HostIdentifier::Endpoint(Endpoint {
                    address: Some(address),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    });
    set_protocol(&mut cluster, protocol);
    cluster
}
