//! `Sidecar`: what a sidecar proxy sees of the mesh. Its egress listeners
//! import hosts as `namespace/host` (`./*` its own namespace, `*/host` a
//! host in any namespace, `ns/*` every host of a namespace; `~ns/host`
//! excludes what it names from what the listener's other entries import,
//! and a bare `~` is any namespace, so `~/*` leaves nothing), its outbound traffic policy says what becomes of traffic to
//! a host it does not import (`REGISTRY_ONLY`: refused; `ALLOW_ANY`:
//! passed through), its ingress listeners describe the ports it accepts.
//!
//! A Sidecar without a workload selector is its namespace's default; one
//! in the root namespace (pilot-discovery's `--root-namespace`, Istio's
//! `meshConfig.rootNamespace`) without a selector is the mesh's default.
//!
//! ```
//! use pilot_api::networking::{EgressHost, Sidecar};
//! let sidecar: Sidecar = serde_json::from_value(serde_json::json!({
//!     "egress": [{"hosts": ["./*", "istio-system/*", "*/api.example.com"]}],
//!     "outboundTrafficPolicy": {"mode": "REGISTRY_ONLY"}
//! }))
//! .unwrap();
//! let hosts: Vec<EgressHost> = sidecar.egress[0].hosts.iter().map(|h| EgressHost::parse(h).unwrap()).collect();
//! assert!(hosts[0].imports("prod", "prod", "reviews.prod.svc.cluster.local"));
//! assert!(!hosts[0].imports("prod", "test", "reviews.test.svc.cluster.local"));
//! assert!(hosts[2].imports("prod", "web", "api.example.com"));
//! ```

use serde::{Deserialize, Serialize};

use super::common::{Destination, LabelSelector};
use super::gateway::ServerTlsSettings;
use super::traffic_policy::ConnectionPoolSettings;

/// The configuration of the sidecar proxies it applies to.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Sidecar {
    /// The workloads it applies to; none: every workload of its namespace
    /// without a Sidecar of its own.
    #[serde(default, alias = "workload_selector", skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<LabelSelector>,
    /// The ports inbound traffic is accepted on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress: Vec<IngressListener>,
    /// The hosts the proxies may reach, per listener.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<EgressListener>,
    /// Inbound connection pool settings.
    #[serde(
        default,
        alias = "inbound_connection_pool",
        skip_serializing_if = "Option::is_none"
    )]
    pub inbound_connection_pool: Option<ConnectionPoolSettings>,
    /// What becomes of traffic to a host not imported.
    #[serde(
        default,
        alias = "outbound_traffic_policy",
        skip_serializing_if = "Option::is_none"
    )]
    pub outbound_traffic_policy: Option<OutboundTrafficPolicy>,
}

/// An outbound listener and the hosts it imports.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EgressListener {
    /// The port (none: every port of the imported hosts; only the last
    /// listener may omit it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<SidecarPort>,
    /// The address (or `unix://` socket) the listener binds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// How traffic reaches the listener.
    #[serde(default, alias = "capture_mode", skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<CaptureMode>,
    /// The hosts imported, as `namespace/dnsName`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// An inbound listener.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngressListener {
    /// The port traffic arrives on (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<SidecarPort>,
    /// The address the listener binds.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub bind: String,
    /// How traffic reaches the listener.
    #[serde(default, alias = "capture_mode", skip_serializing_if = "Option::is_none")]
    pub capture_mode: Option<CaptureMode>,
    /// Where traffic is forwarded: `127.0.0.1:port`, `0.0.0.0:port`,
    /// `[::1]:port`, `[::]:port` or `unix://path`.
    #[serde(default, alias = "default_endpoint", skip_serializing_if = "String::is_empty")]
    pub default_endpoint: String,
    /// TLS the listener terminates with its own certificate (`SIMPLE`,
    /// `MUTUAL`, `OPTIONAL_MUTUAL`), in place of the mesh's mutual TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ServerTlsSettings>,
    /// Connection pool settings for this port, in place of the Sidecar's
    /// `inboundConnectionPool`.
    #[serde(default, alias = "connection_pool", skip_serializing_if = "Option::is_none")]
    pub connection_pool: Option<ConnectionPoolSettings>,
}

/// A listener's port.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SidecarPort {
    /// The port number (0: a Unix domain socket listener).
    #[serde(default)]
    pub number: u32,
    /// The protocol (`HTTP`, `TCP`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub protocol: String,
    /// The port's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The port on the workload, when it differs.
    #[serde(default, alias = "target_port", skip_serializing_if = "Option::is_none")]
    pub target_port: Option<u32>,
}

/// How traffic reaches a listener.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CaptureMode {
    /// The environment's default.
    Default,
    /// Redirected by iptables.
    Iptables,
    /// Not captured: the application calls the listener.
    None,
}

/// What becomes of traffic to hosts not imported.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutboundTrafficPolicy {
    /// `REGISTRY_ONLY` or `ALLOW_ANY` (the default).
    #[serde(default)]
    pub mode: OutboundMode,
    /// Where `ALLOW_ANY` traffic goes instead of its original destination.
    #[serde(default, alias = "egress_proxy", skip_serializing_if = "Option::is_none")]
    pub egress_proxy: Option<Destination>,
}

/// The outbound traffic policy's mode.
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OutboundMode {
    /// Only hosts in the proxy's scope are reachable; other traffic is
    /// refused (the passthrough is a black hole).
    RegistryOnly,
    /// Traffic to other hosts is passed through to its original
    /// destination.
    #[default]
    AllowAny,
}

impl Sidecar {
    /// The policy's mode (`ALLOW_ANY` when none is given).
    pub fn outbound_mode(&self) -> OutboundMode {
        self.outbound_traffic_policy
            .as_ref()
            .map(|p| p.mode)
            .unwrap_or_default()
    }

    /// Every host the egress listeners import, parsed (the unparsable
    /// left out: validation refuses them).
    pub fn egress_hosts(&self) -> Vec<EgressHost> {
        self.egress
            .iter()
            .flat_map(|l| &l.hosts)
            .filter_map(|h| EgressHost::parse(h).ok())
            .collect()
    }
}

/// One entry of an egress listener's hosts: `namespace/dnsName` imports,
/// `~namespace/dnsName` excludes (Istio's exclusion entries: a host is in
/// a listener's scope when one of its entries imports it and none
/// excludes it; a bare `~` is any namespace, so `~/*` excludes all).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EgressHost {
    /// Which namespaces' hosts.
    pub namespace: NamespaceSelector,
    /// The DNS name: `*`, `*.suffix` or a name.
    pub host: String,
    /// An exclusion (`~` before the namespace).
    pub exclude: bool,
}

/// The namespace part of an imported host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NamespaceSelector {
    /// `*`: any namespace.
    Any,
    /// `.`: the Sidecar's own namespace.
    Own,
    /// A namespace by name.
    Named(String),
}

impl EgressHost {
    /// Parses `namespace/dnsName`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let Some((namespace, host)) = text.split_once('/') else {
            return Err(format!("host {text:?} must be of form namespace/dnsName"));
        };
        if namespace.is_empty() || host.is_empty() {
            return Err(format!(
                "config namespace and dnsName in host entry {text:?} cannot be empty"
            ));
        }
        let (exclude, namespace) = match namespace.strip_prefix('~') {
            Some("") => (true, "*"),
            Some(rest) => (true, rest),
            None => (false, namespace),
        };
        let namespace = match namespace {
            "*" => NamespaceSelector::Any,
            "." => NamespaceSelector::Own,
            other => NamespaceSelector::Named(other.to_string()),
        };
        Ok(EgressHost {
            namespace,
            host: host.to_string(),
            exclude,
        })
    }

    /// True when it names `host`, published by `host_namespace`, for a
    /// Sidecar of `sidecar_namespace`, whether it imports or excludes it.
    pub fn names(&self, sidecar_namespace: &str, host_namespace: &str, host: &str) -> bool {
        let namespace_ok = match &self.namespace {
            NamespaceSelector::Any => true,
            NamespaceSelector::Own => host_namespace == sidecar_namespace,
            NamespaceSelector::Named(ns) => ns == host_namespace,
        };
        namespace_ok && host_matches(&self.host, host)
    }

    /// True when this entry imports `host` (an exclusion never does).
    pub fn imports(&self, sidecar_namespace: &str, host_namespace: &str, host: &str) -> bool {
        !self.exclude && self.names(sidecar_namespace, host_namespace, host)
    }
}

/// True when a listener with these `entries` has a host in scope: one
/// entry imports it and none excludes it; `names(entry)` says whether an
/// entry names the host.
///
/// ```
/// use pilot_api::networking::{EgressHost, in_scope};
/// let entries: Vec<EgressHost> = ["*/*", "~prod-us2/*", "~/bar.example.com"]
///     .iter()
///     .map(|h| EgressHost::parse(h).unwrap())
///     .collect();
/// let scoped = |ns: &str, host: &str| in_scope(&entries, |e| e.names("prod-us1", ns, host));
/// assert!(scoped("prod-us1", "reviews.prod-us1.svc.cluster.local"));
/// assert!(!scoped("prod-us2", "reviews.prod-us2.svc.cluster.local"));
/// assert!(!scoped("web", "bar.example.com"));
/// ```
pub fn in_scope(entries: &[EgressHost], names: impl Fn(&EgressHost) -> bool) -> bool {
    entries.iter().any(|e| !e.exclude && names(e)) && !entries.iter().any(|e| e.exclude && names(e))
}

/// True when the pattern (`*`, `*.suffix`, `*suffix` or a name) matches
/// `host`.
pub fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(suffix) => host.ends_with(suffix),
        None => pattern == host,
    }
}
