//! Hosts Istio's v1alpha1-era routing accepted, generated and loaded by
//! the real Envoy: wildcard egress hosts (`*.foo.com`, `*-bar.foo.com`,
//! `*`) with a route rule and a destination policy on them, and ingress
//! rules without a port.

mod support;

use envoy_types::pb::envoy::config::cluster::v3::cluster;
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, VirtualHost, route, route_action};
use pilot_api::istio;
use pilot_model::document;
use pilot_test_support::envoy_binary;
use pilot_xds::{MeshConfig, Resources, generate, testing};

const RULES: &str = r#"
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: foo-wildcard, namespace: default}
spec:
  destination: {service: "*.foo.com"}
  ports: [{port: 80, protocol: http}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: bar-suffix, namespace: default}
spec:
  destination: {service: "*-bar.foo.com"}
  ports: [{port: 80, protocol: http}, {port: 8080, protocol: http2}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: any-host, namespace: default}
spec:
  destination: {service: "*"}
  ports: [{port: 8080, protocol: http}]
---
apiVersion: config.istio.io/v1alpha2
kind: EgressRule
metadata: {name: google, namespace: default}
spec:
  destination: {service: "*.google.com"}
  ports: [{port: 80, protocol: http}, {port: 443, protocol: https}]
---
apiVersion: config.istio.io/v1alpha2
kind: RouteRule
metadata: {name: foo-timeout, namespace: default}
spec:
  destination: {service: "*.foo.com"}
  http_req_timeout: {simple_timeout: {timeout: 3s}}
---
apiVersion: config.istio.io/v1alpha2
kind: DestinationPolicy
metadata: {name: google-cb, namespace: default}
spec:
  destination: {service: "*.google.com"}
  circuitBreaker: {simpleCb: {maxConnections: 7, httpConsecutiveErrors: 3}}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: no-port, namespace: default}
spec:
  destination: {name: productpage}
  destinationPort: 9080
  match: {request: {headers: {uri: {prefix: /productpage}}}}
---
apiVersion: config.istio.io/v1alpha2
kind: IngressRule
metadata: {name: no-port-tls, namespace: default}
spec:
  tlsSecret: ingress-certs
  destination: {name: reviews}
  destinationPort: 9080
"#;

fn mesh() -> MeshConfig {
    let configs = document::parse("hosts.yaml", RULES, &istio::registry()).unwrap();
    MeshConfig::from_configs(configs.iter()).unwrap()
}

fn generated(proxy: &str) -> (pilot_xds::Proxy, Resources) {
    let (_, proxy) = support::proxies()
        .into_iter()
        .find(|(name, _)| *name == proxy)
        .unwrap();
    let resources = generate(&proxy, &support::registry(), &mesh());
    resources.check().unwrap();
    (proxy, resources)
}

fn vhost<'a>(resources: &'a Resources, port: u16, host: &str) -> &'a VirtualHost {
    let config: &RouteConfiguration = resources
        .routes
        .iter()
        .find(|r| r.name == port.to_string())
        .unwrap();
    config
        .virtual_hosts
        .iter()
        .find(|v| v.domains == [host])
        .unwrap_or_else(|| {
            panic!(
                "no virtual host for {host} on {port}: {:#?}",
                config.virtual_hosts
            )
        })
}

#[test]
fn wildcard_egress_hosts_route_and_envoy_loads_them() {
    let (proxy, resources) = generated("reviews-v2-sidecar");
    for (port, host) in [
        (80, "*.foo.com"),
        (80, "*-bar.foo.com"),
        (8080, "*-bar.foo.com"),
        (8080, "*"),
        (80, "*.google.com"),
    ] {
        let vhost = vhost(&resources, port, host);
        let Some(route::Action::Route(action)) = &vhost.routes.last().unwrap().action else {
            panic!("{host}: not a route");
        };
        assert_eq!(
            action.cluster_specifier,
            Some(route_action::ClusterSpecifier::Cluster(format!(
                "outbound|{port}||{host}"
            )))
        );
        let cluster = resources
            .clusters
            .iter()
            .find(|c| c.name == format!("outbound|{port}||{host}"))
            .unwrap();
        assert_eq!(
            cluster.cluster_discovery_type,
            Some(cluster::ClusterDiscoveryType::Type(
                cluster::DiscoveryType::OriginalDst as i32
            ))
        );
    }
    // The route rule for *.foo.com applies to its egress virtual host.
    let foo = vhost(&resources, 80, "*.foo.com");
    let Some(route::Action::Route(action)) = &foo.routes[0].action else {
        panic!("not a route");
    };
    assert_eq!(action.timeout.as_ref().map(|t| t.seconds), Some(3), "{foo:#?}");
    // The destination policy for *.google.com is on its clusters.
    let google = resources
        .clusters
        .iter()
        .find(|c| c.name == "outbound|80||*.google.com")
        .unwrap();
    let thresholds = &google.circuit_breakers.as_ref().unwrap().thresholds[0];
    assert_eq!(thresholds.max_connections.as_ref().map(|v| v.value), Some(7));
    assert!(google.outlier_detection.is_some());
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
    // Without capture too (listeners bound on 127.0.0.1).
    let (proxy, resources) = generated("productpage-no-capture");
    vhost(&resources, 8080, "*");
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
}

#[test]
fn ingress_rules_without_a_port_are_served_on_80_and_with_tls_on_443() {
    let (proxy, resources) = generated("ingress");
    let names: Vec<&str> = resources.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["0.0.0.0_80", "0.0.0.0_443"]);
    let on = |name: &str| resources.routes.iter().find(|r| r.name == name).unwrap();
    assert_eq!(
        on("ingress_80").virtual_hosts[0].routes[0].name,
        "default/no-port"
    );
    assert_eq!(
        on("ingress_443").virtual_hosts[0].routes[0].name,
        "default/no-port-tls"
    );
    let tls = &resources.listeners[1].filter_chains[0];
    assert!(tls.transport_socket.is_some());
    testing::validate(&envoy_binary(), &proxy.node_id(), &resources).unwrap();
}
