//! Sidecars compiled: for each Sidecar, the workloads it applies to, the
//! hosts its egress listeners import, its listeners and its outbound
//! traffic policy ([`SidecarScope`]); and which one applies to a proxy
//! ([`RoutingModel::sidecar_for`](crate::RoutingModel::sidecar_for)).
//!
//! Which Sidecar applies to a proxy of namespace `ns` with labels `l`, as
//! Istio decides: the first (by name) Sidecar of `ns` whose workload
//! selector matches `l`; else the selector-less Sidecar of `ns` (the
//! namespace default); else the selector-less Sidecar of the root
//! namespace (the mesh default); else none.
//!
//! Its egress listeners, as Istio reads them:
//! - A listener with a port listens on that port only, for the hosts it
//!   imports (the service port of that number). The port-less listener
//!   (last, at most one) carries the hosts it imports on all their ports.
//! - `captureMode: NONE` (or a proxy without traffic capture): the
//!   listener binds its address (`bind`, else 127.0.0.1) and port.
//!   `IPTABLES` or `DEFAULT` on a capturing proxy: it does not bind.
//! - A listener bound to a Unix domain socket (`bind: unix:///path`,
//!   port 0) listens at that path for the hosts it imports.
//!
//! Its ingress listeners are `sidecar_ingress.rs`'s.

use std::sync::Arc;

use pilot_api::networking::{CaptureMode, EgressHost, OutboundMode, Sidecar, SidecarPort};
use pilot_model::{Config, Labels, Protocol};

use super::{DefaultEndpoint, InboundLimits, IngressPort, IngressTls, RoutingConfigs};

/// One Sidecar, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct SidecarScope {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The labels a workload must carry for it to apply (its
    /// `workloadSelector`); none: the default of its namespace (of the
    /// mesh, in the root namespace).
    pub selector: Option<Labels>,
    /// Every host entry of its egress listeners, in order (those that do
    /// not parse left out: validation refuses them).
    pub imports: Vec<EgressImport>,
    /// Its egress listeners, in order (but those with a port no listener
    /// can have).
    pub egress: Vec<EgressListener>,
    /// What becomes of traffic to hosts it does not import.
    pub outbound: OutboundMode,
    /// Its inbound clusters' limits (`inboundConnectionPool`).
    pub inbound_limits: Option<InboundLimits>,
    /// Its ingress listeners (but those without a usable port or default
    /// endpoint).
    pub ingress: Vec<IngressPort>,
}

/// One host entry of an egress listener, as written and parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EgressImport {
    /// As written (`./*`): what a scope says imported a host.
    pub text: String,
    /// Parsed.
    pub host: EgressHost,
    /// The index of its egress listener: an exclusion (`~ns/host`) takes
    /// away only from what the entries of its own listener import.
    pub listener: usize,
}

/// An egress listener.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EgressListener {
    /// The hosts it imports.
    pub hosts: Vec<EgressHost>,
    /// Where it listens.
    pub kind: EgressKind,
}

/// Where an egress listener listens.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EgressKind {
    /// No port: the catch-all, carrying its hosts on all their ports.
    CatchAll,
    /// A port.
    Port {
        /// The port it listens on, and the service port of its hosts.
        port: u16,
        /// Its protocol (none given: HTTP when the hosts' port is HTTP).
        protocol: Option<Protocol>,
        /// The address it listens on (empty: the default for its capture).
        bind: String,
        /// `captureMode: NONE`: it binds its address whatever the proxy's
        /// capture.
        uncaptured: bool,
    },
    /// A Unix domain socket.
    Socket {
        /// The socket's path (after `unix://`; `@name`: an abstract
        /// socket).
        path: String,
        /// Its protocol (none given: HTTP when one of its hosts' ports is).
        protocol: Option<Protocol>,
    },
}

/// What decided a proxy's scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeOrigin {
    /// No Sidecar applies: every host visible in the namespace.
    NoSidecar,
    /// A Sidecar whose workload selector matched the proxy.
    Workload {
        /// The Sidecar's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The proxy's namespace's default Sidecar (no selector).
    NamespaceDefault {
        /// The Sidecar's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The root namespace's default Sidecar (no selector).
    MeshDefault {
        /// The root namespace.
        namespace: String,
        /// The Sidecar's name.
        name: String,
    },
}

impl std::fmt::Display for ScopeOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScopeOrigin::NoSidecar => f.write_str("no Sidecar: every host visible in the namespace"),
            ScopeOrigin::Workload { namespace, name } => {
                write!(f, "Sidecar {namespace}/{name} (workload selector)")
            }
            ScopeOrigin::NamespaceDefault { namespace, name } => {
                write!(f, "Sidecar {namespace}/{name} (namespace default)")
            }
            ScopeOrigin::MeshDefault { namespace, name } => {
                write!(f, "Sidecar {namespace}/{name} (mesh default, root namespace)")
            }
        }
    }
}

impl SidecarScope {
    /// Whether it asks for listeners beyond the hosts it imports: an
    /// egress listener with a port or on a socket, an ingress listener,
    /// inbound limits.
    pub fn has_listeners(&self) -> bool {
        self.egress.iter().any(|l| l.kind != EgressKind::CatchAll)
            || !self.ingress.is_empty()
            || self.inbound_limits.is_some()
    }

    /// The Sidecar compiled.
    fn of(config: &Config<Sidecar>) -> Self {
        let spec = &config.spec;
        let imports = spec
            .egress
            .iter()
            .enumerate()
            .flat_map(|(listener, l)| l.hosts.iter().map(move |text| (listener, text)))
            .filter_map(|(listener, text)| {
                Some(EgressImport {
                    text: text.clone(),
                    host: EgressHost::parse(text).ok()?,
                    listener,
                })
            })
            .collect();
        let egress = spec
            .egress
            .iter()
            .filter_map(|listener| {
                let kind = match &listener.port {
                    None => EgressKind::CatchAll,
                    Some(port) => {
                        let number = u16::try_from(port.number).ok()?;
                        if number == 0 {
                            let path = listener.bind.strip_prefix("unix://")?;
                            EgressKind::Socket {
                                path: path.to_string(),
                                protocol: protocol_of(port),
                            }
                        } else {
                            EgressKind::Port {
                                port: number,
                                protocol: protocol_of(port),
                                bind: listener.bind.clone(),
                                uncaptured: listener.capture_mode == Some(CaptureMode::None),
                            }
                        }
                    }
                };
                let hosts = listener
                    .hosts
                    .iter()
                    .filter_map(|h| EgressHost::parse(h).ok())
                    .collect();
                Some(EgressListener { hosts, kind })
            })
            .collect();
        let inbound_limits = spec.inbound_connection_pool.as_ref().map(InboundLimits::of);
        let ingress = spec
            .ingress
            .iter()
            .filter_map(|listener| {
                let number = u16::try_from(listener.port.as_ref()?.number).ok()?;
                let port = listener.port.as_ref()?;
                Some(IngressPort {
                    port: number,
                    protocol: protocol_of(port).unwrap_or(Protocol::Tcp),
                    bind: listener.bind.clone(),
                    uncaptured: listener.capture_mode == Some(CaptureMode::None),
                    endpoint: DefaultEndpoint::parse(&listener.default_endpoint, number)?,
                    tls: listener.tls.as_ref().map(IngressTls::of),
                    limits: listener
                        .connection_pool
                        .as_ref()
                        .map(InboundLimits::of)
                        .or(inbound_limits),
                })
            })
            .collect();
        SidecarScope {
            namespace: config.meta.namespace.clone(),
            name: config.meta.name.clone(),
            selector: spec.workload_selector.as_ref().map(|s| Labels(s.labels.clone())),
            imports,
            egress,
            outbound: spec.outbound_mode(),
            inbound_limits,
            ingress,
        }
    }
}

/// The Sidecars of a model, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Sidecars(Vec<Arc<SidecarScope>>);

impl Sidecars {
    /// The Sidecars of `configs`, compiled.
    pub(crate) fn compile(configs: &RoutingConfigs) -> Self {
        let mut sidecars: Vec<Arc<SidecarScope>> = configs
            .sidecars
            .iter()
            .map(|c| Arc::new(SidecarScope::of(c)))
            .collect();
        sidecars.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        Sidecars(sidecars)
    }

    /// Every Sidecar, by namespace and name.
    pub(crate) fn all(&self) -> &[Arc<SidecarScope>] {
        &self.0
    }

    /// The Sidecar that applies to a proxy of `namespace` whose workload
    /// has `labels`, with what made it apply (the module says how), the
    /// mesh's default being `root_namespace`'s.
    pub(crate) fn applying(
        &self,
        root_namespace: &str,
        namespace: &str,
        labels: &Labels,
    ) -> Option<(&Arc<SidecarScope>, ScopeOrigin)> {
        fn of<'a>(all: &'a [Arc<SidecarScope>], ns: &str) -> impl Iterator<Item = &'a Arc<SidecarScope>> {
            all.iter().filter(move |s| s.namespace == ns)
        }
        let all = &self.0[..];
        let origin = |s: &SidecarScope, make: fn(String, String) -> ScopeOrigin| {
            make(s.namespace.clone(), s.name.clone())
        };
        if let Some(s) = of(all, namespace).find(|s| {
            s.selector
                .as_ref()
                .is_some_and(|selector| selector.is_subset_of(labels))
        }) {
            return Some((
                s,
                origin(s, |namespace, name| ScopeOrigin::Workload { namespace, name }),
            ));
        }
        if let Some(s) = of(all, namespace).find(|s| s.selector.is_none()) {
            return Some((
                s,
                origin(s, |namespace, name| ScopeOrigin::NamespaceDefault {
                    namespace,
                    name,
                }),
            ));
        }
        of(all, root_namespace).find(|s| s.selector.is_none()).map(|s| {
            (
                s,
                origin(s, |namespace, name| ScopeOrigin::MeshDefault { namespace, name }),
            )
        })
    }
}

/// A Sidecar port's protocol, if it names one.
fn protocol_of(port: &SidecarPort) -> Option<Protocol> {
    (!port.protocol.is_empty()).then(|| Protocol::from_port_name(&port.protocol.replace('_', "")))
}
