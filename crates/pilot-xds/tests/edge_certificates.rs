//! An edge server terminating TLS with a certificate its proxy cannot be
//! sent over SDS (`ServerCertificates`) is left out of the proxy's
//! listeners: a port it was alone on gets no listener, a port shared with
//! other servers keeps theirs, a MUTUAL server needs its certificate
//! authority too, and its route configuration is neither planned nor
//! patched. Without a `ServerCertificates` every server is served (and
//! its proxy waits for the secret).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use pilot_api::default_registry;
use pilot_model::{Labels, Port, Protocol, Service, document};
use pilot_routing::{RoutingConfigs, RoutingModel};
use pilot_store_memory::MemoryServiceRegistry;
use pilot_xds::serving::{edge_route_configurations_holding, listener_plan};
use pilot_xds::{MeshConfig, Proxy, ServerCertificates, generate};

const OBJECTS: &str = "\
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: edge, namespace: web}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: [plain.example.com]
  - port: {number: 443, name: https, protocol: HTTPS}
    hosts: [held.example.com]
    tls: {mode: SIMPLE, credentialName: held}
  - port: {number: 443, name: https-missing, protocol: HTTPS}
    hosts: [missing.example.com]
    tls: {mode: SIMPLE, credentialName: missing}
  - port: {number: 8443, name: https-alone, protocol: HTTPS}
    hosts: [alone.example.com]
    tls: {mode: SIMPLE, credentialName: missing}
  - port: {number: 9443, name: https-mutual, protocol: HTTPS}
    hosts: [mutual.example.com]
    tls: {mode: MUTUAL, credentialName: held}
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: all, namespace: web}
spec:
  hosts: [plain.example.com, held.example.com, missing.example.com, alone.example.com, mutual.example.com]
  gateways: [edge]
  http: [{route: [{destination: {host: v1}}]}]
";

fn model() -> RoutingModel {
    let objects = document::parse("edge.yaml", OBJECTS, &default_registry()).unwrap();
    RoutingConfigs::from_configs(&objects).unwrap().compile()
}

fn registry() -> MemoryServiceRegistry {
    let registry = MemoryServiceRegistry::new();
    registry.add_service(Service::new(
        "v1.web.svc.cluster.local",
        vec![Port::new("http", 8080, Protocol::Http)],
    ));
    registry
}

fn router() -> Proxy {
    let mut proxy = Proxy::from_node_id("router~10.9.0.2~edge-7d9f.web~web.svc.cluster.local").unwrap();
    proxy.labels = Labels::from_pairs([("istio", "ingressgateway")]);
    proxy
}

/// The secrets `held` alone are sent; every question is recorded.
#[derive(Debug, Default)]
struct Held {
    held: BTreeSet<&'static str>,
    asked: Mutex<Vec<(String, String)>>,
}

impl ServerCertificates for Held {
    fn available(&self, proxy: &Proxy, name: &str) -> bool {
        self.asked
            .lock()
            .unwrap()
            .push((proxy.domain.clone(), name.to_string()));
        self.held.contains(name)
    }
}

/// Each listener's name, with the SNI names of its filter chains.
fn listeners(
    listeners: &[pilot_xds::envoy_types::pb::envoy::config::listener::v3::Listener],
) -> BTreeMap<String, Vec<Vec<String>>> {
    listeners
        .iter()
        .map(|l| {
            let chains = l
                .filter_chains
                .iter()
                .map(|c| {
                    c.filter_chain_match
                        .as_ref()
                        .map(|m| m.server_names.clone())
                        .unwrap_or_default()
                })
                .collect();
            (l.name.clone(), chains)
        })
        .collect()
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn servers_whose_certificates_cannot_be_sent_are_left_out() {
    let model = model();
    let registry = registry();
    let everything = listener_plan(&router(), &registry, &model, None, &[]);
    assert_eq!(
        listeners(&everything.listeners),
        BTreeMap::from([
            ("0.0.0.0_80".to_string(), vec![vec![]]),
            (
                "0.0.0.0_443".to_string(),
                vec![names(&["held.example.com"]), names(&["missing.example.com"])]
            ),
            ("0.0.0.0_8443".to_string(), vec![names(&["alone.example.com"])]),
            ("0.0.0.0_9443".to_string(), vec![names(&["mutual.example.com"])]),
        ])
    );

    // `held` is sent, its certificate authority (`held-cacert`) is not:
    // the MUTUAL server is left out with the servers of `missing`.
    let held = Held {
        held: BTreeSet::from(["held"]),
        ..Default::default()
    };
    let plan = listener_plan(&router(), &registry, &model, Some(&held), &[]);
    assert_eq!(
        listeners(&plan.listeners),
        BTreeMap::from([
            ("0.0.0.0_80".to_string(), vec![vec![]]),
            ("0.0.0.0_443".to_string(), vec![names(&["held.example.com"])]),
        ])
    );
    let routes: Vec<&str> = plan.ingress_routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(routes, ["http.80", "https.443.https.edge.web"]);
    let asked = held.asked.lock().unwrap().clone();
    assert!(
        asked.iter().all(|(domain, _)| domain == "web.svc.cluster.local"),
        "{asked:?}"
    );
    let asked: BTreeSet<&str> = asked.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(asked, BTreeSet::from(["held", "held-cacert", "missing"]));

    // With its certificate authority too, the MUTUAL server is served.
    let with_ca = Held {
        held: BTreeSet::from(["held", "held-cacert"]),
        ..Default::default()
    };
    let plan = listener_plan(&router(), &registry, &model, Some(&with_ca), &[]);
    assert!(listeners(&plan.listeners).contains_key("0.0.0.0_9443"));

    // Generation from a mesh configuration that knows the certificates
    // gives the same listeners.
    let mesh = MeshConfig::new(model.clone()).with_server_certificates(Arc::new(Held {
        held: BTreeSet::from(["held"]),
        ..Default::default()
    }));
    let generated = generate(&router(), &registry, &mesh);
    assert_eq!(
        listeners(&generated.listeners),
        BTreeMap::from([
            ("0.0.0.0_80".to_string(), vec![vec![]]),
            ("0.0.0.0_443".to_string(), vec![names(&["held.example.com"])]),
        ])
    );
    let generated: Vec<&str> = generated.routes.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(generated, ["http.80", "https.443.https.edge.web"]);
}

#[test]
fn a_left_out_servers_routes_are_not_patched_in() {
    // The route configurations an edge patch would send for hosts whose
    // routes changed: none for a server left out.
    let model = model();
    let registry = registry();
    let held = Held {
        held: BTreeSet::from(["held"]),
        ..Default::default()
    };
    let hosts = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<BTreeSet<String>>();
    let patched = |certificates: Option<&dyn ServerCertificates>, domains: &[&str]| {
        edge_route_configurations_holding(&router(), &registry, &model, certificates, &hosts(domains))
            .into_iter()
            .map(|r| r.name)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        patched(None, &["missing.example.com"]),
        ["https.443.https-missing.edge.web"]
    );
    assert!(patched(Some(&held), &["missing.example.com", "alone.example.com"]).is_empty());
    assert_eq!(
        patched(Some(&held), &["held.example.com"]),
        ["https.443.https.edge.web"]
    );
}
