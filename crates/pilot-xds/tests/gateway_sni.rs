//! Gateway listeners told apart by SNI, loaded by the real Envoy: an
//! `AUTO_PASSTHROUGH` server routing by the cluster name a sidecar sends
//! as SNI (`outbound_.<port>_.<subset>_.<host>`) to SNI-DNAT clusters
//! without TLS origination, the sidecars sending that SNI with mutual
//! TLS, and an HTTPS server terminated beside a `TLS` passthrough server
//! on one port.

mod support;

use std::collections::BTreeMap;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener, filter};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{TcpProxy, tcp_proxy};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::UpstreamTlsContext;
use pilot_test_support::certs::TestCerts;
use pilot_xds::envoy_types;
use pilot_xds::{MeshConfig, Proxy, Resources, generate, testing};
use prost::Message;
use support::gateway::{edge_gateway, mesh_of as mesh, router};

const REVIEWS: &str = "reviews.default.svc.cluster.local";

fn checked(proxy: &Proxy, mesh: &MeshConfig) -> Resources {
    let resources = generate(proxy, &support::registry(), mesh);
    resources.check().unwrap();
    testing::validate(&pilot_test_support::envoy_binary(), &proxy.node_id(), &resources).unwrap();
    resources
}

fn listener(resources: &Resources, port: u16) -> &Listener {
    support::gateway::listener(resources, port)
        .unwrap_or_else(|| panic!("no listener on {port}: {:?}", resources.listeners))
}

fn cluster<'a>(resources: &'a Resources, name: &str) -> Option<&'a Cluster> {
    resources.clusters.iter().find(|c| c.name == name)
}

/// The chain's server names and the cluster its `tcp_proxy` goes to
/// (empty for another filter).
fn sni_and_cluster(chain: &FilterChain) -> (Vec<String>, String) {
    let names = chain
        .filter_chain_match
        .as_ref()
        .map(|m| m.server_names.clone())
        .unwrap_or_default();
    let cluster = match &chain.filters[0].config_type {
        Some(filter::ConfigType::TypedConfig(any)) if chain.filters[0].name.ends_with("tcp_proxy") => {
            match TcpProxy::decode(any.value.as_slice()).unwrap().cluster_specifier {
                Some(tcp_proxy::ClusterSpecifier::Cluster(c)) => c,
                other => panic!("{other:?}"),
            }
        }
        _ => String::new(),
    };
    (names, cluster)
}

const AUTO_PASSTHROUGH: &str = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: cross-network, namespace: istio-system}
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls, protocol: TLS}
    hosts: ["*.local"]
    tls: {mode: AUTO_PASSTHROUGH}
---
apiVersion: networking.istio.io/v1
kind: DestinationRule
metadata: {name: reviews, namespace: default}
spec:
  host: reviews
  trafficPolicy: {tls: {mode: ISTIO_MUTUAL}, loadBalancer: {simple: RANDOM}}
  subsets:
  - {name: v1, labels: {version: v1}}
  - {name: v2, labels: {version: v2}}
"#;

#[test]
fn auto_passthrough_routes_by_the_cluster_name_in_the_sni() {
    let mesh = mesh(AUTO_PASSTHROUGH);
    let proxy = router(r#"{"istio":"eastwestgateway"}"#);
    let resources = checked(&proxy, &mesh);
    let gateway = listener(&resources, 15443);
    let chains: Vec<(Vec<String>, String)> = gateway.filter_chains.iter().map(sni_and_cluster).collect();
    // A chain per service port and subset the hosts match, no
    // VirtualService needed; the SNI names the cluster it goes to.
    for subset in ["", "v1", "v2"] {
        let sni = format!("outbound_.9080_.{subset}_.{REVIEWS}");
        assert!(
            chains.contains(&(vec![sni.clone()], sni.clone())),
            "{sni} in {chains:?}"
        );
    }
    assert!(
        chains
            .iter()
            .any(|(names, _)| names == &["outbound_.27017_._.mongodb.default.svc.cluster.local".to_string()])
    );
    // No chain for a service that is an external name, none without SNI.
    assert!(!chains.iter().any(|(_, c)| c.contains("httpbin")), "{chains:?}");
    assert!(chains.iter().all(|(names, _)| names.len() == 1));
    assert_eq!(
        gateway.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );

    // The SNI-DNAT cluster reads the subset's load assignment, with the
    // rule's load balancing and no TLS of its own (the client's passes).
    let v1 = cluster(&resources, &format!("outbound_.9080_.v1_.{REVIEWS}")).unwrap();
    assert_eq!(
        v1.eds_cluster_config.as_ref().unwrap().service_name,
        format!("outbound|9080|version=v1|{REVIEWS}")
    );
    assert!(v1.transport_socket.is_none() && v1.transport_socket_matches.is_empty());
    assert_eq!(
        v1.lb_policy,
        envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy::Random as i32
    );
    assert!(
        resources
            .endpoints
            .iter()
            .any(|e| e.cluster_name == format!("outbound|9080|version=v1|{REVIEWS}"))
    );

    // A router the gateway does not select, and a sidecar, get neither.
    for other in [
        router(r#"{"istio":"ingressgateway"}"#),
        Proxy::from_node_id("sidecar~10.9.0.2~client.default~default.svc.cluster.local").unwrap(),
    ] {
        let resources = checked(&other, &mesh);
        assert!(
            !resources
                .clusters
                .iter()
                .any(|c| c.name.starts_with("outbound_."))
        );
        assert!(!resources.listeners.iter().any(|l| l.name == "0.0.0.0_15443"));
    }
}

#[test]
fn sidecars_send_the_cluster_name_as_sni_with_mutual_tls() {
    let mesh = mesh(AUTO_PASSTHROUGH);
    let metadata: BTreeMap<String, String> = [("SDS".to_string(), "true".to_string())].into();
    let proxy = Proxy::from_node_id("sidecar~10.9.0.2~client.default~default.svc.cluster.local")
        .unwrap()
        .with_metadata(&metadata)
        .unwrap();
    let resources = checked(&proxy, &mesh);
    let sni = |name: &str| {
        let socket = cluster(&resources, name)
            .and_then(|c| c.transport_socket.as_ref())
            .unwrap_or_else(|| panic!("{name} originates mutual TLS"));
        let Some(envoy_types::pb::envoy::config::core::v3::transport_socket::ConfigType::TypedConfig(any)) =
            &socket.config_type
        else {
            panic!("no config")
        };
        UpstreamTlsContext::decode(any.value.as_slice()).unwrap().sni
    };
    assert_eq!(
        sni(&format!("outbound|9080||{REVIEWS}")),
        format!("outbound_.9080_._.{REVIEWS}")
    );
    assert_eq!(
        sni(&format!("outbound|9080|version=v2|{REVIEWS}")),
        format!("outbound_.9080_.v2_.{REVIEWS}")
    );
}

#[test]
fn an_https_server_and_a_passthrough_server_share_one_port() {
    let dir = tempfile::tempdir().unwrap();
    let certs = TestCerts::generate(dir.path()).unwrap();
    let edge = edge_gateway(
        443,
        r#"["*.example.com"]"#,
        &certs,
        "  - port: {number: 443, name: tls, protocol: TLS}\n    hosts: [passthrough.example.com]\n    tls: {mode: PASSTHROUGH}\n",
    );
    let text = r#"
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: apps, namespace: default}
spec:
  hosts: ["*.example.com"]
  gateways: [edge]
  http:
  - route: [{destination: {host: productpage}}]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: passthrough, namespace: default}
spec:
  hosts: [passthrough.example.com]
  gateways: [edge]
  tls:
  - match: [{sniHosts: [passthrough.example.com]}]
    route: [{destination: {host: reviews, subset: v1}}]
"#;
    let mut text = format!("{edge}{text}");
    text.push_str(
        "---\napiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: reviews, namespace: default}\nspec:\n  host: reviews\n  subsets: [{name: v1, labels: {version: v1}}]\n",
    );
    let proxy = router(r#"{"istio":"ingressgateway"}"#);
    let resources = checked(&proxy, &mesh(&text));
    assert_eq!(resources.listeners.len(), 1, "{:?}", resources.listeners);
    let port = listener(&resources, 443);
    let chains: Vec<(Vec<String>, String)> = port.filter_chains.iter().map(sni_and_cluster).collect();
    assert_eq!(
        chains,
        [
            // Terminated, then HTTP routes.
            (vec!["*.example.com".to_string()], String::new()),
            // Passed through by its own SNI.
            (
                vec!["passthrough.example.com".to_string()],
                format!("outbound|9080|version=v1|{REVIEWS}")
            ),
        ]
    );
    assert!(port.filter_chains[0].transport_socket.is_some());
    assert!(port.filter_chains[1].transport_socket.is_none());
    let https = resources
        .routes
        .iter()
        .find(|r| r.name == "https.443.https.edge.default")
        .expect("the HTTPS server's routes");
    assert_eq!(https.virtual_hosts[0].domains, ["*.example.com"]);
}

/// Two `AUTO_PASSTHROUGH` servers on two ports: each port's chains are for
/// its own server's hosts only; the SNI-DNAT clusters are those both
/// ports' chains go to.
#[test]
fn each_auto_passthrough_port_routes_only_its_own_servers_hosts() {
    let text = r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: cross-network, namespace: istio-system}
spec:
  selector: {istio: eastwestgateway}
  servers:
  - port: {number: 15443, name: tls-reviews, protocol: TLS}
    hosts: ["reviews.default.svc.cluster.local"]
    tls: {mode: AUTO_PASSTHROUGH}
  - port: {number: 15444, name: tls-mongodb, protocol: TLS}
    hosts: ["default/mongodb.default.svc.cluster.local"]
    tls: {mode: AUTO_PASSTHROUGH}
"#;
    let proxy = router(r#"{"istio":"eastwestgateway"}"#);
    let resources = checked(&proxy, &mesh(text));
    let clusters_of = |port: u16| -> Vec<String> {
        listener(&resources, port)
            .filter_chains
            .iter()
            .map(|chain| sni_and_cluster(chain).1)
            .collect()
    };
    let reviews = clusters_of(15443);
    let mongodb = clusters_of(15444);
    assert_eq!(reviews, [format!("outbound_.9080_._.{REVIEWS}")]);
    assert_eq!(mongodb, ["outbound_.27017_._.mongodb.default.svc.cluster.local"]);
    let mut dnat: Vec<&str> = resources
        .clusters
        .iter()
        .map(|c| c.name.as_str())
        .filter(|name| name.starts_with("outbound_."))
        .collect();
    dnat.sort();
    assert_eq!(dnat, [mongodb[0].as_str(), reviews[0].as_str()]);
}
