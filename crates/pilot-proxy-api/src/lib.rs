//! The contracts between a proxy and pilot-discovery, written once for both
//! ends: the node id a proxy presents ([`NodeId`], `type~ip~id~domain`),
//! its [`ProxyType`], how its traffic is captured ([`InterceptionMode`],
//! node metadata `INTERCEPTION_MODE`), the other node metadata keys
//! ([`metadata`]), and the reports pilot-agent posts of its Envoy's process
//! life ([`ProxyEvent`], `POST /v1/proxy-events`).
//!
//! pilot-agent builds these and pilot-discovery parses them.
//!
//! ```
//! use pilot_proxy_api::{NodeId, ProxyType};
//! let node: NodeId = "sidecar~10.1.1.3~reviews-v2-7f9d.default~default.svc.cluster.local".parse().unwrap();
//! assert_eq!(node.proxy_type, ProxyType::Sidecar);
//! assert_eq!(node.to_string(), "sidecar~10.1.1.3~reviews-v2-7f9d.default~default.svc.cluster.local");
//! let err = "sidecar~not-an-ip~x~y".parse::<NodeId>().unwrap_err();
//! assert_eq!(err.part, pilot_proxy_api::NodeIdPart::Ip);
//! ```

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The separator of the node id's parts.
pub const NODE_ID_SEPARATOR: char = '~';

/// The node metadata keys a proxy sends and pilot-discovery reads.
pub mod metadata {
    /// The workload's labels: a JSON object of strings (or `k=v,k=v`).
    pub const LABELS: &str = "LABELS";
    /// How traffic reaches the proxy: an [`InterceptionMode`](super::InterceptionMode).
    pub const INTERCEPTION_MODE: &str = "INTERCEPTION_MODE";
    /// The workload's service account.
    pub const SERVICE_ACCOUNT: &str = "SERVICE_ACCOUNT";
    /// Which generator serves the proxy: `envoy` (or absent) or `grpc`.
    pub const GENERATOR: &str = "GENERATOR";
    /// `true` when the proxy's agent serves it workload certificates over
    /// SDS: only then is it configured for mutual TLS.
    pub const SDS: &str = "SDS";
    /// The Kubernetes node a ztunnel runs on (and serves the workloads of).
    pub const NODE_NAME: &str = "NODE_NAME";
    /// The proxy's pod name (ztunnel sends it).
    pub const NAME: &str = "NAME";
    /// The proxy's namespace (ztunnel sends it).
    pub const NAMESPACE: &str = "NAMESPACE";
    /// The proxy's cluster id.
    pub const CLUSTER_ID: &str = "CLUSTER_ID";
}

/// A proxy's node id, `type~ip~id~domain`: built by pilot-agent
/// ([`Display`](fmt::Display)), parsed by pilot-discovery
/// ([`FromStr`]); the two are inverse.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeId {
    /// Sidecar, ingress or router.
    pub proxy_type: ProxyType,
    /// The proxy's IP: its own instances are the registry's instances here.
    pub ip: IpAddr,
    /// Unique id, conventionally `<pod>.<namespace>`; never empty.
    pub id: String,
    /// DNS domain of the proxy, e.g. `default.svc.cluster.local`.
    pub domain: String,
}

/// The part of a node id that is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeIdPart {
    /// The whole: not four parts separated by `~`.
    Layout,
    /// The proxy type (first part).
    Type,
    /// The IP (second part).
    Ip,
    /// The id (third part).
    Id,
    /// The domain (fourth part).
    Domain,
}

impl fmt::Display for NodeIdPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NodeIdPart::Layout => "layout",
            NodeIdPart::Type => "type",
            NodeIdPart::Ip => "ip",
            NodeIdPart::Id => "id",
            NodeIdPart::Domain => "domain",
        })
    }
}

/// A node id that does not parse or cannot be built, naming the part at
/// fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad node id {node_id:?}: {part}: {reason}")]
pub struct NodeIdError {
    /// The node id as given (or as it would have been built).
    pub node_id: String,
    /// The part at fault.
    pub part: NodeIdPart,
    /// What is wrong with it.
    pub reason: String,
}

impl NodeIdError {
    /// The part and the reason, without the node id: `ip: "x" is not an IP
    /// address`.
    pub fn detail(&self) -> String {
        format!("{}: {}", self.part, self.reason)
    }
}

impl NodeId {
    /// A node id from its parts, checked as [`FromStr`] would check the
    /// text: the id is not empty, and neither id nor domain contains `~`.
    pub fn new(
        proxy_type: ProxyType,
        ip: IpAddr,
        id: impl Into<String>,
        domain: impl Into<String>,
    ) -> Result<Self, NodeIdError> {
        let node = NodeId {
            proxy_type,
            ip,
            id: id.into(),
            domain: domain.into(),
        };
        let bad = |part, reason: String| NodeIdError {
            node_id: node.to_string(),
            part,
            reason,
        };
        if node.id.is_empty() {
            return Err(bad(NodeIdPart::Id, "the id part is empty".into()));
        }
        for (part, value) in [(NodeIdPart::Id, &node.id), (NodeIdPart::Domain, &node.domain)] {
            if value.contains(NODE_ID_SEPARATOR) {
                return Err(bad(
                    part,
                    format!("{value:?} contains '{NODE_ID_SEPARATOR}', the node id's separator"),
                ));
            }
        }
        Ok(node)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = NODE_ID_SEPARATOR;
        write!(
            f,
            "{}{s}{}{s}{}{s}{}",
            self.proxy_type, self.ip, self.id, self.domain
        )
    }
}

impl FromStr for NodeId {
    type Err = NodeIdError;

    fn from_str(node_id: &str) -> Result<Self, Self::Err> {
        let bad = |part, reason: String| NodeIdError {
            node_id: node_id.to_string(),
            part,
            reason,
        };
        let parts: Vec<&str> = node_id.split(NODE_ID_SEPARATOR).collect();
        let [kind, ip, id, domain] = parts.as_slice() else {
            return Err(bad(
                NodeIdPart::Layout,
                format!(
                    "expected 4 parts type~ip~id~domain separated by '~', found {}",
                    parts.len()
                ),
            ));
        };
        let proxy_type = kind
            .parse::<ProxyType>()
            .map_err(|e| bad(NodeIdPart::Type, e.0))?;
        let ip = ip
            .parse::<IpAddr>()
            .map_err(|_| bad(NodeIdPart::Ip, format!("{ip:?} is not an IP address")))?;
        if id.is_empty() {
            return Err(bad(NodeIdPart::Id, "the id part is empty".into()));
        }
        Ok(NodeId {
            proxy_type,
            ip,
            id: id.to_string(),
            domain: domain.to_string(),
        })
    }
}

/// What kind of proxy a node is: the first part of its node id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProxyType {
    /// A sidecar next to one application instance.
    Sidecar,
    /// An ingress proxy at the edge of the mesh.
    Ingress,
    /// A router (egress or gateway) with no instances of its own.
    Router,
    /// Istio's ambient node proxy: one per node, serving the node's
    /// workloads; it subscribes to workloads and authorizations
    /// (`istio.workload.Address`, `istio.security.Authorization`) over
    /// delta xDS, never to Envoy's types. Its node id is
    /// `ztunnel~<ip>~<pod>.<namespace>~<namespace>.svc.cluster.local`, its
    /// node in the metadata [`metadata::NODE_NAME`].
    Ztunnel,
}

/// A word that is not a proxy type or an interception mode; the message
/// lists the accepted ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnknownValue(pub String);

impl ProxyType {
    /// The node id's spelling: `sidecar`, `ingress` or `router`.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyType::Sidecar => "sidecar",
            ProxyType::Ingress => "ingress",
            ProxyType::Router => "router",
            ProxyType::Ztunnel => "ztunnel",
        }
    }

    /// Whether the proxy is at the edge (a router or an ingress proxy): it
    /// serves gateways and connects to their backends.
    pub fn is_edge(self) -> bool {
        matches!(self, ProxyType::Router | ProxyType::Ingress)
    }
}

impl FromStr for ProxyType {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "sidecar" => Ok(ProxyType::Sidecar),
            "ingress" => Ok(ProxyType::Ingress),
            "router" => Ok(ProxyType::Router),
            "ztunnel" => Ok(ProxyType::Ztunnel),
            other => Err(UnknownValue(format!(
                "proxy type {other:?} is not sidecar, ingress, router or ztunnel"
            ))),
        }
    }
}

impl fmt::Display for ProxyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How traffic reaches a sidecar: node metadata `INTERCEPTION_MODE`, spelled
/// `REDIRECT`, `TPROXY` or `NONE` (parsed in any case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum InterceptionMode {
    /// iptables REDIRECT all traffic to the proxy's virtual listener, which
    /// dispatches on the original destination (the default).
    #[default]
    Redirect,
    /// iptables TPROXY, likewise to the virtual listener.
    Tproxy,
    /// No capture (a VM without iptables, a test): outbound listeners bind
    /// 127.0.0.1 at each service port, and applications call them there.
    None,
}

impl InterceptionMode {
    /// Every mode, in the order the agent's flag lists them.
    pub const ALL: [InterceptionMode; 3] = [
        InterceptionMode::Redirect,
        InterceptionMode::Tproxy,
        InterceptionMode::None,
    ];

    /// The metadata spelling: `REDIRECT`, `TPROXY` or `NONE`.
    pub fn as_str(self) -> &'static str {
        match self {
            InterceptionMode::Redirect => "REDIRECT",
            InterceptionMode::Tproxy => "TPROXY",
            InterceptionMode::None => "NONE",
        }
    }

    /// True when iptables send the workload's traffic through the proxy
    /// (`REDIRECT` or `TPROXY`): the proxy then listens on one virtual
    /// port and dispatches on the original destination.
    pub fn captures(self) -> bool {
        self != InterceptionMode::None
    }
}

impl FromStr for InterceptionMode {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "REDIRECT" => Ok(InterceptionMode::Redirect),
            "TPROXY" => Ok(InterceptionMode::Tproxy),
            "NONE" => Ok(InterceptionMode::None),
            other => Err(UnknownValue(format!(
                "INTERCEPTION_MODE {other:?} is not NONE, REDIRECT or TPROXY"
            ))),
        }
    }
}

impl fmt::Display for InterceptionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What happened to a proxy's Envoy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// An epoch started.
    Started,
    /// An epoch exited (`expected` says whether the agent meant it to).
    Exited,
    /// The agent will start Envoy again after `backoff_ms`.
    Restarting,
    /// The retry budget is spent; the agent exits non-zero.
    BudgetExhausted,
    /// The agent drained and stopped Envoy (SIGTERM).
    Stopped,
}

impl EventKind {
    /// The wire spelling: `started`, `exited`, `restarting`,
    /// `budget_exhausted` or `stopped`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Started => "started",
            EventKind::Exited => "exited",
            EventKind::Restarting => "restarting",
            EventKind::BudgetExhausted => "budget_exhausted",
            EventKind::Stopped => "stopped",
        }
    }
}

/// One report of Envoy's process life, as pilot-agent posts it to
/// `POST /v1/proxy-events` (JSON; unknown fields are refused). Each
/// carries the cumulative restart count, so a lost report is healed by the
/// next one.
///
/// ```
/// use pilot_proxy_api::{EventKind, ProxyEvent};
/// let mut event = ProxyEvent::new("sidecar~10.0.0.1~a.default~default.svc.cluster.local", EventKind::Exited, 3, 1);
/// event.signal = Some(9);
/// let json = serde_json::to_value(&event).unwrap();
/// assert_eq!(json["kind"], "exited");
/// assert!(json.get("exit_code").is_none());
/// let back: ProxyEvent = serde_json::from_value(json).unwrap();
/// assert_eq!(back, event);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyEvent {
    /// The proxy's node id (`type~ip~id~domain`).
    pub node: String,
    /// What happened.
    pub kind: EventKind,
    /// The epoch concerned.
    pub epoch: u32,
    /// Envoy's process id, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The exit code, for exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended Envoy, for exits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the agent meant the exit (a drained parent, a shutdown).
    #[serde(default)]
    pub expected: bool,
    /// A human-readable account (the exit and Envoy's last log lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Restarts after a failure so far (cumulative).
    pub restarts: u64,
    /// The delay before the next start, for `restarting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    /// When, in milliseconds since the Unix epoch (the agent's clock).
    pub time_ms: u64,
}

impl ProxyEvent {
    /// An event of `kind` for `node` now.
    pub fn new(node: &str, kind: EventKind, epoch: u32, restarts: u64) -> Self {
        ProxyEvent {
            node: node.to_string(),
            kind,
            epoch,
            pid: None,
            exit_code: None,
            signal: None,
            expected: false,
            message: None,
            restarts,
            backoff_ms: None,
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_round_trip() {
        for text in [
            "sidecar~10.1.1.3~reviews-v2-7f9d.default~default.svc.cluster.local",
            "router~::1~gw~svc.cluster.local",
            "ingress~192.168.0.1~edge.istio-system~",
        ] {
            let node: NodeId = text.parse().unwrap();
            assert_eq!(node.to_string(), text);
            let built = NodeId::new(node.proxy_type, node.ip, node.id.clone(), node.domain.clone()).unwrap();
            assert_eq!(built, node);
        }
        let node = NodeId::new(ProxyType::Router, "::1".parse().unwrap(), "gw", "d").unwrap();
        assert_eq!(node.to_string().parse::<NodeId>().unwrap(), node);
    }

    #[test]
    fn bad_node_ids_name_the_part() {
        for (text, part, says) in [
            ("", NodeIdPart::Layout, "found 1"),
            ("sidecar~1.2.3.4~x", NodeIdPart::Layout, "found 3"),
            ("a~b~c~d~e", NodeIdPart::Layout, "found 5"),
            (
                "gateway~1.2.3.4~x~d",
                NodeIdPart::Type,
                "\"gateway\" is not sidecar",
            ),
            ("Sidecar~1.2.3.4~x~d", NodeIdPart::Type, "\"Sidecar\""),
            (
                "sidecar~not-an-ip~x~d",
                NodeIdPart::Ip,
                "\"not-an-ip\" is not an IP address",
            ),
            ("sidecar~1.2.3.4~~d", NodeIdPart::Id, "empty"),
        ] {
            let err = text.parse::<NodeId>().unwrap_err();
            assert_eq!(err.part, part, "{text}: {err}");
            assert_eq!(err.node_id, text);
            let message = err.to_string();
            assert!(message.contains("node id") && message.contains(says), "{message}");
            assert!(message.contains(&format!("{part}: ")), "{message}");
        }
    }

    #[test]
    fn building_refuses_what_would_not_parse() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let err = NodeId::new(ProxyType::Sidecar, ip, "", "d").unwrap_err();
        assert_eq!(err.part, NodeIdPart::Id);
        let err = NodeId::new(ProxyType::Sidecar, ip, "a~b", "d").unwrap_err();
        assert_eq!(err.part, NodeIdPart::Id);
        assert!(err.reason.contains("separator"), "{err}");
        let err = NodeId::new(ProxyType::Sidecar, ip, "a", "x~y").unwrap_err();
        assert_eq!(err.part, NodeIdPart::Domain);
        assert_eq!(err.detail(), format!("domain: {}", err.reason));
    }

    #[test]
    fn interception_modes_keep_their_metadata_spelling() {
        for mode in InterceptionMode::ALL {
            assert_eq!(mode.to_string().parse::<InterceptionMode>().unwrap(), mode);
            assert_eq!(mode.to_string(), mode.to_string().to_ascii_uppercase());
        }
        assert_eq!(
            "none".parse::<InterceptionMode>().unwrap(),
            InterceptionMode::None
        );
        assert_eq!(
            "Tproxy".parse::<InterceptionMode>().unwrap(),
            InterceptionMode::Tproxy
        );
        assert!(!InterceptionMode::None.captures());
        assert!(InterceptionMode::Redirect.captures() && InterceptionMode::Tproxy.captures());
        let err = "MAGIC".parse::<InterceptionMode>().unwrap_err();
        assert!(err.to_string().contains("\"MAGIC\""), "{err}");
        assert_eq!(InterceptionMode::default(), InterceptionMode::Redirect);
    }

    #[test]
    fn proxy_types_round_trip() {
        for t in [ProxyType::Sidecar, ProxyType::Ingress, ProxyType::Router] {
            assert_eq!(t.to_string().parse::<ProxyType>().unwrap(), t);
        }
    }

    #[test]
    fn events_keep_their_wire_format() {
        let mut event = ProxyEvent::new("sidecar~10.0.0.1~a~b", EventKind::BudgetExhausted, 2, 5);
        event.time_ms = 7;
        event.exit_code = Some(1);
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "node": "sidecar~10.0.0.1~a~b", "kind": "budget_exhausted", "epoch": 2,
                "exit_code": 1, "expected": false, "restarts": 5, "time_ms": 7,
            })
        );
        for kind in [
            EventKind::Started,
            EventKind::Exited,
            EventKind::Restarting,
            EventKind::BudgetExhausted,
            EventKind::Stopped,
        ] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
        // What the server accepts: optional fields may be absent or null;
        // unknown fields are refused.
        let minimal: ProxyEvent = serde_json::from_value(serde_json::json!({
            "node": "n", "kind": "started", "epoch": 0, "restarts": 0, "time_ms": 1, "pid": null,
        }))
        .unwrap();
        assert!(!minimal.expected && minimal.pid.is_none());
        let err = serde_json::from_value::<ProxyEvent>(serde_json::json!({
            "node": "n", "kind": "started", "epoch": 0, "restarts": 0, "time_ms": 1, "extra": 1,
        }))
        .unwrap_err();
        assert!(err.to_string().contains("extra"), "{err}");
    }
}
