//! A Gateway server host's namespace part (`ns/host`, `./host`, `*/host`,
//! `host`), generated for router proxies from Istio's own samples and
//! loaded by the real Envoy: only the VirtualServices of the host's
//! namespace bind through it (HTTP virtual hosts, HTTPS servers' routes,
//! TCP routes), SNI matches the host's name alone, TLS terminated for
//! HTTP offers ALPN `h2` and `http/1.1`, and an `AUTO_PASSTHROUGH` server
//! exposes only the services of its hosts' namespaces.
//!
//! Samples, as written there unless said:
//! - istio/api `networking/v1alpha3/gateway.proto` (commit b8f8791), the
//!   Gateway reference: [`MY_GATEWAY`] (its certificate paths replaced by
//!   test files), [`BOOKINFO_RULE`], [`BOOKINFO_MONGO`] and
//!   [`NAMESPACE_RESTRICTED`].
//! - istio/istio `samples/multicluster/expose-services.yaml` (commit
//!   86c9f01): [`CROSS_NETWORK`], given a namespace and its host a
//!   namespace part.
//!
//! The other VirtualServices are written for these tests.

mod support;

use std::net::IpAddr;

use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::DownstreamTlsContext;
use pilot_model::{Labels, NetworkEndpoint, Port, Protocol, Service, ServiceInstance};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_test_support::certs::TestCerts;
use pilot_xds::envoy_types;
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};
use prost::Message;
use support::gateway::{listener, mesh_of, router};

/// The Gateway reference's first example: ports 80 (redirect), 443 and
/// 9443 (HTTPS; 9443 for `bookinfo-namespace/*.bookinfo.com`), 9080
/// (HTTP, `*`) and 2379 (MONGO, `*`).
const MY_GATEWAY: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: my-gateway
  namespace: some-config-namespace
spec:
  selector:
    app: my-gateway-controller
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - uk.bookinfo.com
    - eu.bookinfo.com
    tls:
      httpsRedirect: true # sends 301 redirect for http requests
  - port:
      number: 443
      name: https-443
      protocol: HTTPS
    hosts:
    - uk.bookinfo.com
    - eu.bookinfo.com
    tls:
      mode: SIMPLE # enables HTTPS on this port
      serverCertificate: SERVER_CERT
      privateKey: SERVER_KEY
  - port:
      number: 9443
      name: https-9443
      protocol: HTTPS
    hosts:
    - "bookinfo-namespace/*.bookinfo.com"
    tls:
      mode: SIMPLE # enables HTTPS on this port
      credentialName: bookinfo-secret # fetches certs from Kubernetes secret
  - port:
      number: 9080
      name: http-wildcard
      protocol: HTTP
    hosts:
    - "*"
  - port:
      number: 2379 # to expose internal service via external port 2379
      name: mongo
      protocol: MONGO
    hosts:
    - "*"
"#;

/// The reference's VirtualService bound to `my-gateway` (and the mesh).
const BOOKINFO_RULE: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: bookinfo-rule
  namespace: bookinfo-namespace
spec:
  hosts:
  - reviews.prod.svc.cluster.local
  - uk.bookinfo.com
  - eu.bookinfo.com
  gateways:
  - some-config-namespace/my-gateway
  - mesh # applies to all the sidecars in the mesh
  http:
  - match:
    - headers:
        cookie:
          exact: "user=dev-123"
    route:
    - destination:
        port:
          number: 7777
        host: reviews.qa.svc.cluster.local
  - match:
    - uri:
        prefix: /reviews/
    route:
    - destination:
        port:
          number: 9080 # can be omitted if it's the only port for reviews
        host: reviews.prod.svc.cluster.local
      weight: 80
    - destination:
        host: reviews.qa.svc.cluster.local
      weight: 20
"#;

/// The reference's TCP VirtualService: port 27017 to Mongo's 5555.
const BOOKINFO_MONGO: &str = r#"
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata:
  name: bookinfo-mongo
  namespace: bookinfo-namespace
spec:
  hosts:
  - mongosvr.prod.svc.cluster.local # name of internal Mongo service
  gateways:
  - some-config-namespace/my-gateway # can omit the namespace if gateway is in same namespace as virtual service.
  tcp:
  - match:
    - port: 27017
    route:
    - destination:
        host: mongo.prod.svc.cluster.local
        port:
          number: 5555
"#;

/// The reference's example of restricting binding: any VirtualService of
/// `ns1`, only `foo.bar.com` of `ns2`.
const NAMESPACE_RESTRICTED: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: my-gateway
  namespace: some-config-namespace
spec:
  selector:
    app: my-gateway-controller
  servers:
  - port:
      number: 80
      name: http
      protocol: HTTP
    hosts:
    - "ns1/*"
    - "ns2/foo.bar.com"
"#;

/// Istio's multicluster east-west gateway, in `istio-system`, its host
/// restricted to `ns1` (the sample says `"*.local"`).
const CROSS_NETWORK: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: cross-network-gateway
  namespace: istio-system
spec:
  selector:
    istio: eastwestgateway
  servers:
    - port:
        number: 15443
        name: tls
        protocol: TLS
      tls:
        mode: AUTO_PASSTHROUGH
      hosts:
        - "ns1/*.local"
"#;

/// A VirtualService `namespace/name` bound to `gateways` for `hosts`
/// (YAML lists), routing every request to `destination`.
fn bound(namespace: &str, name: &str, gateways: &str, hosts: &str, destination: &str) -> String {
    format!(
        r#"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  hosts: {hosts}
  gateways: {gateways}
  http:
  - route: [{{destination: {{host: {destination}}}}}]
"#
    )
}

/// Services: reviews in `prod` and `qa`, mongo in `prod`, ratings in
/// `ns1` and `ns2`, each with one instance.
fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    let services = [
        ("reviews.prod.svc.cluster.local", vec![9080], "10.2.0.1"),
        ("reviews.qa.svc.cluster.local", vec![9080, 7777], "10.2.0.2"),
        ("mongo.prod.svc.cluster.local", vec![5555], "10.2.0.3"),
        ("ratings.ns1.svc.cluster.local", vec![9080], "10.2.1.1"),
        ("ratings.ns2.svc.cluster.local", vec![9080], "10.2.2.1"),
    ];
    for (hostname, ports, address) in services {
        let ports: Vec<Port> = ports
            .into_iter()
            .map(|p| {
                let protocol = if p == 5555 {
                    Protocol::Mongo
                } else {
                    Protocol::Http
                };
                Port::new(format!("port-{p}"), p, protocol)
            })
            .collect();
        let service = registry.add_service(Service::new(hostname, ports));
        for port in &service.ports {
            registry
                .add_instance(ServiceInstance::new(
                    service.clone(),
                    NetworkEndpoint::new(address.parse::<IpAddr>().unwrap(), port.port, port.clone()),
                    Labels::new(),
                ))
                .unwrap();
        }
    }
    registry
}

fn checked(proxy: &Proxy, mesh: &MeshConfig) -> Resources {
    let resources = generate(proxy, &registry(), mesh);
    resources.check().unwrap();
    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

fn my_gateway_controller() -> Proxy {
    router(r#"{"app":"my-gateway-controller"}"#)
}

fn routes<'a>(resources: &'a Resources, name: &str) -> &'a RouteConfiguration {
    resources
        .routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route configuration {name}: {:?}", resources.routes))
}

/// Each virtual host's name with the clusters of its routes.
fn virtual_hosts(routes: &RouteConfiguration) -> Vec<(String, Vec<String>)> {
    routes
        .virtual_hosts
        .iter()
        .map(|v| {
            let clusters = v
                .routes
                .iter()
                .map(|r| match &r.action {
                    Some(route::Action::Route(action)) => match &action.cluster_specifier {
                        Some(route_action::ClusterSpecifier::Cluster(c)) => c.clone(),
                        Some(route_action::ClusterSpecifier::WeightedClusters(w)) => w
                            .clusters
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join("+"),
                        other => format!("{other:?}"),
                    },
                    other => format!("{other:?}"),
                })
                .collect();
            (v.name.clone(), clusters)
        })
        .collect()
}

fn gateway_listener(resources: &Resources, port: u16) -> &Listener {
    listener(resources, port).unwrap_or_else(|| panic!("no listener on {port}: {:?}", resources.listeners))
}

fn server_names(chain: &FilterChain) -> Vec<String> {
    chain
        .filter_chain_match
        .as_ref()
        .map(|m| m.server_names.clone())
        .unwrap_or_default()
}

fn alpn(chain: &FilterChain) -> Vec<String> {
    let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(any)) =
        chain
            .transport_socket
            .as_ref()
            .and_then(|s| s.config_type.as_ref())
    else {
        panic!("a TLS transport socket: {chain:?}");
    };
    DownstreamTlsContext::decode(any.value.as_slice())
        .unwrap()
        .common_tls_context
        .unwrap()
        .alpn_protocols
}

fn tcp_cluster(chain: &FilterChain) -> String {
    match &chain.filters[0].config_type {
        Some(filter::ConfigType::TypedConfig(any)) if any.type_url.ends_with("TcpProxy") => {
            match TcpProxy::decode(any.value.as_slice()).unwrap().cluster_specifier {
                Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
                other => panic!("{other:?}"),
            }
        }
        other => panic!("not a tcp_proxy: {other:?}"),
    }
}

#[test]
fn a_namespace_part_binds_only_that_namespaces_virtual_services() {
    let mut text = NAMESPACE_RESTRICTED.to_string();
    let gw = "[some-config-namespace/my-gateway]";
    text += &bound(
        "ns1",
        "any",
        gw,
        "[uk.bookinfo.com]",
        "ratings.ns1.svc.cluster.local",
    );
    text += &bound(
        "ns2",
        "foo",
        gw,
        "[foo.bar.com, baz.bar.com]",
        "ratings.ns2.svc.cluster.local",
    );
    // ns3 names both hosts: neither server host admits ns3.
    text += &bound(
        "ns3",
        "both",
        "[some-config-namespace/my-gateway, ns3/local]",
        "[foo.bar.com, uk.bookinfo.com]",
        "reviews.prod.svc.cluster.local",
    );
    // `./*` is the gateway's own namespace (ns3), `*/host` any namespace.
    text += r#"
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: local, namespace: ns3}
spec:
  selector: {app: my-gateway-controller}
  servers:
  - port: {number: 8080, name: http-local, protocol: HTTP}
    hosts: ["./*", "*/open.example.com"]
  - port: {number: 80, name: http-80, protocol: HTTP}
    hosts: ["./uk.bookinfo.com"]
"#;
    text += &bound(
        "ns1",
        "open",
        "[ns3/local]",
        "[open.example.com, uk.bookinfo.com]",
        "ratings.ns1.svc.cluster.local",
    );
    let resources = checked(&my_gateway_controller(), &mesh_of(&text));

    let ns1 = "outbound|9080||ratings.ns1.svc.cluster.local";
    let ns2 = "outbound|9080||ratings.ns2.svc.cluster.local";
    let ns3 = "outbound|9080||reviews.prod.svc.cluster.local";
    assert_eq!(
        virtual_hosts(routes(&resources, "http.80")),
        [
            (
                "uk.bookinfo.com:80".to_string(),
                vec![ns3.to_string(), ns1.to_string()]
            ),
            ("foo.bar.com:80".to_string(), vec![ns2.to_string()]),
        ],
        "ns1's host through ns1/*, only foo.bar.com of ns2; ns3's through \
         ns3/local's own server on the port only, the servers' routes in \
         gateway order (ns3/local first)"
    );
    assert_eq!(
        virtual_hosts(routes(&resources, "http.8080")),
        [
            ("open.example.com:8080".to_string(), vec![ns1.to_string()]),
            ("foo.bar.com:8080".to_string(), vec![ns3.to_string()]),
            ("uk.bookinfo.com:8080".to_string(), vec![ns3.to_string()]),
        ],
        "./* takes ns3's hosts; */open.example.com ns1's open.example.com alone"
    );
}

#[test]
fn the_references_gateway_binds_by_namespace_on_every_server_kind() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).unwrap();
    let gateway = MY_GATEWAY
        .replace("SERVER_CERT", certs.server_cert.to_str().unwrap())
        .replace("SERVER_KEY", certs.server_key.to_str().unwrap());
    let mut text = format!("{gateway}---{BOOKINFO_RULE}---{BOOKINFO_MONGO}");
    // The same kind of rule from another namespace, for a host the 9443
    // server's `*.bookinfo.com` covers.
    text += &bound(
        "elsewhere",
        "fr",
        "[some-config-namespace/my-gateway]",
        "[fr.bookinfo.com]",
        "ratings.ns2.svc.cluster.local",
    );
    let resources = checked(&my_gateway_controller(), &mesh_of(&text));

    let weighted =
        "outbound|9080||reviews.prod.svc.cluster.local+outbound|9080||reviews.qa.svc.cluster.local";
    let bookinfo = vec![
        "outbound|7777||reviews.qa.svc.cluster.local".to_string(),
        weighted.to_string(),
    ];
    // 9443: `bookinfo-namespace/*.bookinfo.com` takes bookinfo-rule's
    // hosts, not elsewhere's fr.bookinfo.com; SNI is the name alone, and
    // ALPN offers HTTP/2.
    let https = gateway_listener(&resources, 9443);
    assert_eq!(https.filter_chains.len(), 1);
    assert_eq!(server_names(&https.filter_chains[0]), ["*.bookinfo.com"]);
    assert_eq!(alpn(&https.filter_chains[0]), ["h2", "http/1.1"]);
    assert_eq!(
        virtual_hosts(routes(
            &resources,
            "https.9443.https-9443.my-gateway.some-config-namespace"
        )),
        [
            ("uk.bookinfo.com:9443".to_string(), bookinfo.clone()),
            ("eu.bookinfo.com:9443".to_string(), bookinfo.clone()),
        ]
    );
    // 9080's `*` (any namespace) takes both namespaces' rules (and, as
    // Istio does, a virtual host without routes for the TCP rule's host).
    let wildcard: Vec<String> = virtual_hosts(routes(&resources, "http.9080"))
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        wildcard,
        [
            "mongosvr.prod.svc.cluster.local:9080",
            "reviews.prod.svc.cluster.local:9080",
            "uk.bookinfo.com:9080",
            "eu.bookinfo.com:9080",
            "fr.bookinfo.com:9080"
        ]
    );
    // 2379's `*`: bookinfo-mongo's TCP route (its match names port
    // 27017, which is not this server's: Istio's sample binds nothing
    // here, and neither does this).
    assert!(listener(&resources, 2379).is_none(), "{:?}", resources.listeners);
}

#[test]
fn a_tcp_server_binds_by_namespace() {
    // The reference's mongo server, on the port bookinfo-mongo matches,
    // once for any namespace and once for another namespace than its.
    let gateway = |hosts: &str| {
        format!(
            r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata:
  name: my-gateway
  namespace: some-config-namespace
spec:
  selector:
    app: my-gateway-controller
  servers:
  - port:
      number: 27017
      name: mongo
      protocol: MONGO
    hosts:
    - "{hosts}"
---{BOOKINFO_MONGO}"#
        )
    };
    let any = checked(&my_gateway_controller(), &mesh_of(&gateway("*")));
    let chains = &gateway_listener(&any, 27017).filter_chains;
    assert_eq!(chains.len(), 1);
    assert_eq!(
        tcp_cluster(&chains[0]),
        "outbound|5555||mongo.prod.svc.cluster.local"
    );
    let own = checked(
        &my_gateway_controller(),
        &mesh_of(&gateway("bookinfo-namespace/*")),
    );
    assert_eq!(gateway_listener(&own, 27017).filter_chains.len(), 1);
    let other = checked(&my_gateway_controller(), &mesh_of(&gateway("./*")));
    assert!(
        listener(&other, 27017).is_none(),
        "./* is some-config-namespace: bookinfo-mongo does not bind"
    );
}

#[test]
fn auto_passthrough_exposes_only_its_hosts_namespaces_services() {
    let proxy = router(r#"{"istio":"eastwestgateway"}"#);
    let snis = |text: &str| {
        let resources = checked(&proxy, &mesh_of(text));
        let chains: Vec<String> = gateway_listener(&resources, 15443)
            .filter_chains
            .iter()
            .flat_map(server_names)
            .collect();
        let clusters: Vec<String> = resources
            .clusters
            .iter()
            .filter(|c| c.name.starts_with("outbound_."))
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(chains, clusters, "a chain per SNI-DNAT cluster");
        chains
    };
    assert_eq!(
        snis(CROSS_NETWORK),
        ["outbound_.9080_._.ratings.ns1.svc.cluster.local"]
    );
    // The sample as written, `*.local`: every namespace's services.
    let every = snis(&CROSS_NETWORK.replace("ns1/*.local", "*.local"));
    assert!(every.contains(&"outbound_.9080_._.ratings.ns2.svc.cluster.local".to_string()));
    assert!(every.contains(&"outbound_.9080_._.ratings.ns1.svc.cluster.local".to_string()));
    assert_eq!(every.len(), 6, "{every:?}");
    // `./*.local`: the gateway's namespace, istio-system, holds none.
    let resources = generate(
        &proxy,
        &registry(),
        &mesh_of(&CROSS_NETWORK.replace("ns1/*.local", "./*.local")),
    );
    assert!(listener(&resources, 15443).is_none(), "{:?}", resources.listeners);
}
