//! Gateway set-up shared by the gateway tests: a mesh from YAML, a router
//! proxy with labels, the `edge` Gateway's YAML with a SIMPLE TLS server,
//! a gateway listener by port.

use std::collections::BTreeMap;

use pilot_api::default_registry;
use pilot_model::document;
use pilot_test_support::certs::TestCerts;
use pilot_xds::envoy_types::pb::envoy::config::listener::v3::Listener;
use pilot_xds::{MeshConfig, Proxy, Resources};

/// The mesh configuration of the objects in the YAML `text`.
pub(crate) fn mesh_of(text: &str) -> MeshConfig {
    let objects = document::parse("gateway.yaml", text, &default_registry()).unwrap();
    MeshConfig::from_configs(&objects).unwrap()
}

/// A router proxy (`gateway-1.default`) carrying `labels` (a JSON object).
pub(crate) fn router(labels: &str) -> Proxy {
    let metadata: BTreeMap<String, String> = [("LABELS".to_string(), labels.to_string())].into();
    Proxy::from_node_id("router~10.9.0.1~gateway-1.default~default.svc.cluster.local")
        .unwrap()
        .with_metadata(&metadata)
        .unwrap()
}

/// The gateway listener on `port` (`0.0.0.0_<port>`).
pub(crate) fn listener(resources: &Resources, port: u16) -> Option<&Listener> {
    resources
        .listeners
        .iter()
        .find(|l| l.name == format!("0.0.0.0_{port}"))
}

/// The YAML of the Gateway `default/edge` selecting `istio: ingressgateway`,
/// whose first server is HTTPS on `port` for `hosts` (a YAML list),
/// terminated with `certs`' server certificate, then `more_servers` (YAML
/// list items, indented by two).
pub(crate) fn edge_gateway(port: u16, hosts: &str, certs: &TestCerts, more_servers: &str) -> String {
    format!(
        r#"
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {{name: edge, namespace: default}}
spec:
  selector: {{istio: ingressgateway}}
  servers:
  - port: {{number: {port}, name: https, protocol: HTTPS}}
    hosts: {hosts}
    tls: {{mode: SIMPLE, serverCertificate: {cert}, privateKey: {key}}}
{more_servers}"#,
        cert = certs.server_cert.display(),
        key = certs.server_key.display()
    )
}
