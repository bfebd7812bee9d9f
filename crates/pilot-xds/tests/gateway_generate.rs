//! A `Gateway` and the VirtualServices bound to it, generated for router
//! proxies: the gateway's selector picks the proxies by their labels,
//! plain HTTP servers on one port share `http.<port>` with a virtual host
//! per host, a SIMPLE TLS server terminates with its files by SNI, a VS
//! bound only to a gateway gives sidecars nothing, and a real Envoy loads
//! what a router gets; past `SCOPED_MIN_HOSTS` exact hosts a connection
//! manager (plain or behind TLS) takes one route configuration per host
//! from scopes keyed by its name and the host.

mod support;

use envoy_types::pb::envoy::config::route::v3::{RouteConfiguration, route, route_action};
use pilot_test_support::certs::TestCerts;
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};
use support::gateway::{edge_gateway, listener, mesh_of, router};

fn mesh(certs: &TestCerts) -> MeshConfig {
    let edge = edge_gateway(
        8443,
        r#"["secure.example.com"]"#,
        certs,
        r#"  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: ["bookinfo.example.com", "default/ratings.example.com", "other/details.example.com"]
"#,
    );
    let text = r#"
---
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: second, namespace: edge}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http-second, protocol: HTTP}
    hosts: ["*.redirect.example.com"]
    tls: {httpsRedirect: true}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: bookinfo, namespace: default}
spec:
  hosts: ["bookinfo.example.com", "secure.example.com"]
  gateways: [edge]
  http:
  - match: [{uri: {prefix: /reviews}}]
    route: [{destination: {host: reviews}}]
  - match: [{uri: {prefix: /only-second}, gateways: [edge/second]}]
    route: [{destination: {host: details}}]
  - route: [{destination: {host: productpage, port: {number: 9080}}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: ratings, namespace: default}
spec:
  hosts: ["*"]
  gateways: [default/edge, edge/second]
  http:
  - route: [{destination: {host: ratings}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: reviews-mesh, namespace: default}
spec:
  hosts: [reviews]
  gateways: [mesh, edge]
  http:
  - route: [{destination: {host: reviews}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: details, namespace: default}
spec:
  hosts: ["details.example.com"]
  gateways: [edge]
  http:
  - route: [{destination: {host: details}}]
"#;
    mesh_of(&format!("{edge}{text}"))
}

fn routes<'a>(resources: &'a Resources, name: &str) -> &'a RouteConfiguration {
    resources
        .routes
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("no route configuration {name}"))
}

fn cluster_of(route: &envoy_types::pb::envoy::config::route::v3::Route) -> String {
    match &route.action {
        Some(route::Action::Route(action)) => match &action.cluster_specifier {
            Some(route_action::ClusterSpecifier::Cluster(c)) => c.clone(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_router_with_the_gateways_labels_serves_its_servers_and_envoy_loads_them() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).unwrap();
    let mesh = mesh(&certs);
    let registry = support::registry();
    let proxy = router(r#"{"istio":"ingressgateway","app":"gw"}"#);
    let resources = generate(&proxy, &registry, &mesh);
    resources.check().unwrap();

    // Both gateways' HTTP servers on 8080: one listener, one route
    // configuration, a virtual host per host.
    assert_eq!(resources.listeners.len(), 2, "{:?}", resources.listeners);
    assert!(listener(&resources, 8080).is_some());
    let http = routes(&resources, "http.8080");
    let hosts: Vec<(&str, &[String])> = http
        .virtual_hosts
        .iter()
        .map(|v| (v.name.as_str(), v.domains.as_slice()))
        .collect();
    let names: Vec<&str> = hosts.iter().map(|h| h.0).collect();
    // `other/details.example.com` binds only VirtualServices of `other`;
    // `*` of ratings meets `ratings.example.com` and `*.redirect.example.com`.
    assert_eq!(
        names,
        [
            "bookinfo.example.com:8080",
            "ratings.example.com:8080",
            "*.redirect.example.com:8080"
        ]
    );
    let bookinfo = &http.virtual_hosts[0];
    // The route bound to the other gateway is left out; destinations
    // without a port go to the service's; ratings' `*` adds its routes.
    let clusters: Vec<String> = bookinfo.routes.iter().map(cluster_of).collect();
    assert_eq!(
        clusters,
        [
            "outbound|9080||reviews.default.svc.cluster.local",
            "outbound|9080||productpage.default.svc.cluster.local",
            "outbound|9080||ratings.default.svc.cluster.local"
        ]
    );
    assert_eq!(bookinfo.require_tls, 0);
    assert_eq!(
        http.virtual_hosts[2].require_tls, 2,
        "httpsRedirect: every request"
    );

    // The HTTPS server: TLS with its files, its own routes.
    let https = listener(&resources, 8443).unwrap();
    assert_eq!(https.filter_chains.len(), 1);
    let chain = &https.filter_chains[0];
    assert_eq!(
        chain.filter_chain_match.as_ref().unwrap().server_names,
        ["secure.example.com"]
    );
    assert!(chain.transport_socket.is_some());
    let secure = routes(&resources, "https.8443.https.edge.default");
    assert_eq!(secure.virtual_hosts.len(), 1);
    assert_eq!(secure.virtual_hosts[0].domains, ["secure.example.com"]);

    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
}

#[test]
fn proxies_the_selector_does_not_pick_and_sidecars_get_no_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).unwrap();
    let mesh = mesh(&certs);
    let registry = support::registry();
    let other = generate(&router(r#"{"istio":"egressgateway"}"#), &registry, &mesh);
    assert!(other.listeners.is_empty(), "{:?}", other.listeners);
    assert!(other.routes.is_empty());

    // A sidecar gets the routes of the VirtualService bound to `mesh` too
    // (reviews-mesh), not those bound only to gateways.
    let sidecar =
        Proxy::from_node_id("sidecar~10.1.1.2~reviews-v2.default~default.svc.cluster.local").unwrap();
    let resources = generate(&sidecar, &registry, &mesh);
    let port = routes(&resources, "9080");
    let route_names: Vec<&str> = port
        .virtual_hosts
        .iter()
        .flat_map(|v| &v.routes)
        .map(|r| r.name.as_str())
        .collect();
    assert!(route_names.contains(&"default/reviews-mesh"), "{route_names:?}");
    assert!(
        !route_names.iter().any(|n| n.starts_with("default/bookinfo")
            || n.starts_with("default/details")
            || n.starts_with("default/ratings")),
        "{route_names:?}"
    );
    assert!(mesh.model().http_routes("bookinfo.example.com").is_empty());
}

/// The HTTP connection manager of the listener on `port`'s first chain.
fn manager_of(
    resources: &Resources,
    port: u16,
) -> envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager
{
    use envoy_types::pb::envoy::config::listener::v3::filter;
    use prost::Message;
    let chain = &listener(resources, port).unwrap().filter_chains[0];
    let Some(filter::ConfigType::TypedConfig(config)) = &chain.filters[0].config_type else {
        panic!("{chain:?}")
    };
    Message::decode(config.value.as_slice()).unwrap()
}

/// A Gateway's server for every host on 8080 and a VirtualService per
/// host of `hosts`, routed to reviews.
fn many_hosts(hosts: &[String]) -> MeshConfig {
    many_hosts_on(
        "apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: default}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 8080, name: http, protocol: HTTP}
    hosts: [\"*\"]
",
        hosts,
    )
}

/// The Gateway `gateway` (YAML) and a VirtualService bound to it per host
/// of `hosts`, routed to reviews.
fn many_hosts_on(gateway: &str, hosts: &[String]) -> MeshConfig {
    let mut text = gateway.to_string();
    for (i, host) in hosts.iter().enumerate() {
        text.push_str(&format!(
            "---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {{name: vs-{i}, namespace: default}}
spec:
  hosts: [\"{host}\"]
  gateways: [edge]
  http:
  - route: [{{destination: {{host: reviews}}}}]
"
        ));
    }
    mesh_of(&text)
}

#[test]
fn past_enough_exact_hosts_each_host_gets_its_own_scope_and_route_configuration() {
    use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::key::fragment;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
        http_connection_manager::RouteSpecifier, scoped_routes,
    };
    let registry = support::registry();
    let proxy = router(r#"{"istio":"ingressgateway"}"#);
    let count = pilot_xds::serving::SCOPED_MIN_HOSTS;
    let mut hosts: Vec<String> = (0..count).map(|i| format!("h{i}.example.com")).collect();
    hosts[1] = "Upper.Example.com".into();
    let resources = generate(&proxy, &registry, &many_hosts(&hosts));
    resources.check().unwrap();
    let manager = manager_of(&resources, 8080);
    let Some(RouteSpecifier::ScopedRoutes(scoped)) = &manager.route_specifier else {
        panic!("not scoped: {:?}", manager.route_specifier)
    };
    assert!(
        matches!(
            scoped.config_specifier,
            Some(scoped_routes::ConfigSpecifier::ScopedRds(_))
        ),
        "{scoped:?}"
    );
    // One scope per host, its key the connection manager's name and the
    // host in lower case, its routes `http.8080/<host>` holding that host
    // alone.
    assert_eq!(resources.scoped_routes.len(), count);
    for host in &hosts {
        let name = format!("http.8080/{host}");
        let scope = resources
            .scoped_routes
            .iter()
            .find(|s| s.route_configuration_name == name)
            .unwrap_or_else(|| panic!("no scope for {host}"));
        let key: Vec<_> = scope
            .key
            .as_ref()
            .unwrap()
            .fragments
            .iter()
            .map(|f| f.r#type.clone())
            .collect();
        assert_eq!(
            key,
            [
                Some(fragment::Type::StringKey("http.8080".into())),
                Some(fragment::Type::StringKey(host.to_ascii_lowercase()))
            ]
        );
        let config = routes(&resources, &name);
        assert_eq!(config.virtual_hosts.len(), 1);
        assert_eq!(config.virtual_hosts[0].domains, std::slice::from_ref(host));
        assert!(config.ignore_port_in_host_matching);
        assert_eq!(
            config.request_headers_to_remove,
            [pilot_xds::serving::SCOPE_HEADER]
        );
    }
    assert_eq!(resources.routes.len(), count);
    // The host is made lower case before anything else.
    assert_eq!(manager.http_filters[0].name, "envoy.filters.http.lua");
    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();

    // One host fewer, or one wildcard host among them: one route
    // configuration, over RDS.
    for hosts in [
        hosts[1..].to_vec(),
        [hosts.clone(), vec!["*.wild.example.com".to_string()]].concat(),
    ] {
        let resources = generate(&proxy, &registry, &many_hosts(&hosts));
        resources.check().unwrap();
        let manager = manager_of(&resources, 8080);
        assert!(
            matches!(&manager.route_specifier, Some(RouteSpecifier::Rds(rds)) if rds.route_config_name == "http.8080"),
            "{:?}",
            manager.route_specifier
        );
        assert_eq!(routes(&resources, "http.8080").virtual_hosts.len(), hosts.len());
        assert!(resources.scoped_routes.is_empty());
        assert_ne!(manager.http_filters[0].name, "envoy.filters.http.lua");
    }
}

#[test]
fn an_https_server_with_enough_hosts_takes_its_routes_from_its_own_scopes() {
    use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::key::fragment;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).unwrap();
    let gateway = edge_gateway(
        8443,
        r#"["*.example.com"]"#,
        &certs,
        "  - port: {number: 8080, name: http, protocol: HTTP}\n    hosts: [\"*\"]\n",
    );
    let hosts: Vec<String> = (0..pilot_xds::serving::SCOPED_MIN_HOSTS)
        .map(|i| format!("h{i}.example.com"))
        .collect();
    let registry = support::registry();
    let proxy = router(r#"{"istio":"ingressgateway"}"#);
    let resources = generate(&proxy, &registry, &many_hosts_on(&gateway, &hosts));
    resources.check().unwrap();
    // Both ports' connection managers take scopes, each keyed by its own
    // name: the HTTPS server's chain and the plain listener's.
    for (port, name) in [(8443, "https.8443.https.edge.default"), (8080, "http.8080")] {
        let manager = manager_of(&resources, port);
        assert!(
            matches!(&manager.route_specifier, Some(RouteSpecifier::ScopedRoutes(s)) if s.name == name),
            "{port}: {:?}",
            manager.route_specifier
        );
        let scopes = resources
            .scoped_routes
            .iter()
            .filter(|s| {
                s.key.as_ref().unwrap().fragments[0].r#type == Some(fragment::Type::StringKey(name.into()))
            })
            .count();
        assert_eq!(scopes, hosts.len(), "{name}");
        assert_eq!(
            routes(&resources, &format!("{name}/h7.example.com"))
                .virtual_hosts
                .len(),
            1
        );
    }
    assert!(
        listener(&resources, 8443).unwrap().filter_chains[0]
            .transport_socket
            .is_some(),
        "TLS ends before the scoped routes"
    );
    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
}
