//! The proxy asking for configuration: its identity from Envoy's node id,
//! and what its node metadata says (the contracts themselves are
//! [`pilot_proxy_api`]'s).

use std::collections::BTreeMap;
use std::net::IpAddr;

use pilot_model::Labels;
use pilot_proxy_api::{InterceptionMode, NodeId, ProxyType, metadata as keys};

use crate::XdsError;

/// Which generator builds a proxy's configuration.
///
/// The rule: node metadata `GENERATOR` (as Istio names it) says `grpc` for
/// a proxyless gRPC application (the bootstrap `pilotctl grpc-bootstrap`
/// writes sets it), `envoy` or nothing for an Envoy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Generator {
    /// Envoy: listeners on addresses, filter chains, every xDS feature.
    #[default]
    Envoy,
    /// A gRPC library speaking xDS itself (gRFC A27): listeners named
    /// `host:port` with an API listener, only what gRPC accepts (see the
    /// `grpcgen` module).
    Grpc,
}

/// A connected proxy: `type~ip~id~domain` plus node metadata.
///
/// ```
/// use pilot_xds::{Proxy, ProxyType};
/// let proxy = Proxy::from_node_id("sidecar~10.1.1.3~reviews-v2-7f9d.default~default.svc.cluster.local").unwrap();
/// assert_eq!(proxy.proxy_type, ProxyType::Sidecar);
/// assert_eq!(proxy.ip.to_string(), "10.1.1.3");
/// assert!(Proxy::from_node_id("sidecar~not-an-ip~x~y").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Proxy {
    /// Sidecar, ingress or router.
    pub proxy_type: ProxyType,
    /// The proxy's IP: its own instances are the registry's instances here.
    pub ip: IpAddr,
    /// Unique id, conventionally `<pod>.<namespace>`.
    pub id: String,
    /// DNS domain of the proxy, e.g. `default.svc.cluster.local`.
    pub domain: String,
    /// Labels of the proxy's workload (from node metadata), used by source
    /// matches when the registry does not know the proxy.
    pub labels: Labels,
    /// How traffic reaches the proxy (node metadata `INTERCEPTION_MODE`).
    pub capture: InterceptionMode,
    /// Envoy or proxyless gRPC (node metadata `GENERATOR`).
    pub generator: Generator,
    /// The workload's service account (node metadata `SERVICE_ACCOUNT`),
    /// checked against a credential bound to one.
    pub service_account: Option<String>,
    /// Whether its agent serves it workload certificates over SDS (node
    /// metadata `SDS`): only then does it get mutual TLS.
    pub sds: bool,
    /// The node it runs on (node metadata `NODE_NAME`): a ztunnel serves
    /// that node's workloads, and must send it.
    pub node_name: Option<String>,
}

impl Proxy {
    /// Parses an Envoy node id of the form `type~ip~id~domain`.
    pub fn from_node_id(node_id: &str) -> Result<Self, XdsError> {
        let NodeId {
            proxy_type,
            ip,
            id,
            domain,
        } = node_id.parse::<NodeId>().map_err(|e| XdsError::BadNodeId {
            reason: e.detail(),
            node_id: e.node_id,
        })?;
        Ok(Proxy {
            proxy_type,
            ip,
            id,
            domain,
            labels: Labels::new(),
            capture: InterceptionMode::default(),
            generator: Generator::default(),
            service_account: None,
            sds: false,
            node_name: None,
        })
    }

    /// Applies node metadata: `LABELS` (a JSON object or `k=v,k=v`),
    /// `INTERCEPTION_MODE` (`NONE` turns capture off), `GENERATOR`
    /// (`grpc` for proxyless gRPC, `envoy`), `SERVICE_ACCOUNT`, `SDS` and
    /// `NODE_NAME` (which a ztunnel must send).
    pub fn with_metadata(mut self, metadata: &BTreeMap<String, String>) -> Result<Self, XdsError> {
        if let Some(labels) = metadata.get(keys::LABELS) {
            self.labels = parse_labels(labels).map_err(|reason| XdsError::BadNodeId {
                node_id: self.node_id(),
                reason,
            })?;
        }
        if let Some(mode) = metadata.get(keys::INTERCEPTION_MODE) {
            self.capture = mode
                .parse::<InterceptionMode>()
                .map_err(|e| XdsError::BadNodeId {
                    node_id: self.node_id(),
                    reason: e.0,
                })?;
        }
        if let Some(account) = metadata.get(keys::SERVICE_ACCOUNT).filter(|a| !a.is_empty()) {
            self.service_account = Some(account.clone());
        }
        if let Some(node) = metadata.get(keys::NODE_NAME).filter(|n| !n.is_empty()) {
            self.node_name = Some(node.clone());
        }
        if self.proxy_type == ProxyType::Ztunnel && self.node_name.is_none() {
            return Err(XdsError::BadNodeId {
                node_id: self.node_id(),
                reason: format!(
                    "a ztunnel's node metadata must name its node ({}): it serves that node's workloads",
                    keys::NODE_NAME
                ),
            });
        }
        if let Some(sds) = metadata.get(keys::SDS) {
            self.sds = sds.eq_ignore_ascii_case("true");
        }
        if let Some(generator) = metadata.get(keys::GENERATOR) {
            self.generator = match generator.to_ascii_lowercase().as_str() {
                "grpc" => Generator::Grpc,
                "envoy" | "" => Generator::Envoy,
                other => {
                    return Err(XdsError::BadNodeId {
                        node_id: self.node_id(),
                        reason: format!("metadata GENERATOR {other:?} is not grpc or envoy"),
                    });
                }
            };
        }
        Ok(self)
    }

    /// The node id this proxy was parsed from.
    pub fn node_id(&self) -> String {
        NodeId {
            proxy_type: self.proxy_type,
            ip: self.ip,
            id: self.id.clone(),
            domain: self.domain.clone(),
        }
        .to_string()
    }
}

fn parse_labels(text: &str) -> Result<Labels, String> {
    if text.trim_start().starts_with('{') {
        let map: BTreeMap<String, String> =
            serde_json::from_str(text).map_err(|e| format!("LABELS is not a JSON object of strings: {e}"))?;
        return Ok(Labels(map));
    }
    text.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("LABELS entry {pair:?} is not key=value"))
        })
        .collect::<Result<BTreeMap<_, _>, _>>()
        .map(Labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids() {
        let proxy = Proxy::from_node_id("router~::1~gw~svc.cluster.local").unwrap();
        assert_eq!(proxy.proxy_type, ProxyType::Router);
        assert_eq!(proxy.node_id(), "router~::1~gw~svc.cluster.local");
        for bad in [
            "",
            "sidecar~1.2.3.4~x",
            "gateway~1.2.3.4~x~d",
            "sidecar~1.2.3.4~~d",
            "a~b~c~d~e",
        ] {
            let err = Proxy::from_node_id(bad).unwrap_err();
            assert!(err.to_string().contains("node id"), "{err}");
        }
    }

    #[test]
    fn metadata() {
        let metadata: BTreeMap<String, String> = [
            (
                "LABELS".to_string(),
                r#"{"app":"reviews","version":"v2"}"#.to_string(),
            ),
            ("INTERCEPTION_MODE".to_string(), "NONE".to_string()),
        ]
        .into();
        let proxy = Proxy::from_node_id("sidecar~10.0.0.1~a~b")
            .unwrap()
            .with_metadata(&metadata)
            .unwrap();
        assert_eq!(proxy.labels.get("version"), Some("v2"));
        assert_eq!(proxy.capture, InterceptionMode::None);
        let metadata: BTreeMap<String, String> =
            [("LABELS".to_string(), "app=ratings,version=v1".to_string())].into();
        let proxy = proxy.with_metadata(&metadata).unwrap();
        assert_eq!(proxy.labels.get("app"), Some("ratings"));
        let metadata: BTreeMap<String, String> =
            [("INTERCEPTION_MODE".to_string(), "MAGIC".to_string())].into();
        assert!(proxy.clone().with_metadata(&metadata).is_err());
        assert_eq!(proxy.generator, Generator::Envoy);
        let metadata: BTreeMap<String, String> = [("GENERATOR".to_string(), "grpc".to_string())].into();
        let grpc = proxy.clone().with_metadata(&metadata).unwrap();
        assert_eq!(grpc.generator, Generator::Grpc);
        let metadata: BTreeMap<String, String> = [("GENERATOR".to_string(), "istio".to_string())].into();
        let err = proxy.with_metadata(&metadata).unwrap_err();
        assert!(err.to_string().contains("GENERATOR \"istio\""), "{err}");
    }
}
