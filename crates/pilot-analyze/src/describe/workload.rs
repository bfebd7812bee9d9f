//! One workload's side of describing: which workload a name, an address
//! or a proxy means; the Sidecar that scopes it and what is out of its
//! scope; its inbound mutual TLS mode and the PeerAuthentication that
//! sets it; the AuthorizationPolicies that apply; its connected proxies.

use std::collections::{BTreeMap, BTreeSet};

use pilot_api::networking::{EgressHost, ServiceEntry, in_scope};
use pilot_api::security::{MtlsMode, PeerAuthentication, WorkloadSelector};
use pilot_model::Config;
use pilot_routing::ScopeOrigin;
use pilot_routing::authorization::Action;
use serde::Serialize;

use super::routes::ServiceView;
use super::{Context, ObjectRef, Proxy, labels};

/// A workload and what applies to it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadView {
    /// Its name (its `app` and `version` labels, or its proxy's pod).
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// Its address (empty: unknown).
    pub address: String,
    /// Its labels (empty: unknown, e.g. a proxy the registry does not
    /// list).
    pub labels: BTreeMap<String, String>,
    /// The services it backs.
    pub services: Vec<String>,
    /// The Sidecar that scopes it.
    pub sidecar: SidecarView,
    /// Its inbound mutual TLS.
    pub mtls: MtlsView,
    /// The AuthorizationPolicies that apply to it.
    pub authorization: Vec<AuthorizationView>,
    /// Its connected proxies (against a server): its sidecar, or the
    /// ztunnel of its node.
    pub proxies: Vec<Proxy>,
}

impl WorkloadView {
    /// The objects it shows.
    pub(super) fn objects(&self) -> Vec<ObjectRef> {
        let mut out: Vec<ObjectRef> = self.sidecar.object.iter().cloned().collect();
        out.extend(self.mtls.policies());
        out.extend(self.authorization.iter().map(|a| a.object.clone()));
        out.extend(
            self.proxies
                .iter()
                .flat_map(|p| p.withheld.iter().map(|w| w.object.clone())),
        );
        out
    }
}

/// The Sidecar that scopes a workload.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SidecarView {
    /// The Sidecar (none: no Sidecar applies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object: Option<ObjectRef>,
    /// Why it applies: `workload selector`, `namespace default`, `mesh
    /// default` or `none`.
    pub origin: String,
    /// Its egress hosts as written.
    pub imports: Vec<String>,
    /// The hosts the services and routes name that it does not import:
    /// the workload's proxy has no route or cluster for them.
    pub out_of_scope: Vec<String>,
}

/// A workload's inbound mutual TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MtlsView {
    /// The mode of its ports (but those below).
    pub mode: MtlsMode,
    /// What sets it: `workload`, `namespace`, `mesh` or `default` (no
    /// policy: PERMISSIVE).
    pub source: String,
    /// The PeerAuthentication that sets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy: Option<ObjectRef>,
    /// The policies of the levels below that it overrides, with their
    /// modes (`namespace PeerAuthentication default/strict: STRICT`).
    pub overrides: Vec<String>,
    /// Ports with their own mode (`portLevelMtls`).
    pub ports: Vec<PortMtls>,
    #[serde(skip)]
    involved: Vec<ObjectRef>,
}

impl MtlsView {
    fn policies(&self) -> Vec<ObjectRef> {
        self.involved.clone()
    }
}

/// A port's own mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PortMtls {
    /// The workload's port.
    pub port: u32,
    /// Its mode.
    pub mode: MtlsMode,
    /// The PeerAuthentication that sets it.
    pub policy: ObjectRef,
}

/// An AuthorizationPolicy that applies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuthorizationView {
    /// The policy.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// ALLOW, DENY, AUDIT or CUSTOM.
    pub action: String,
    /// Why it applies: `workload selector`, `namespace` or `mesh (root
    /// namespace)`.
    pub scope: String,
    /// How many rules it has (none: an ALLOW denies everything, a DENY
    /// denies nothing).
    pub rules: usize,
    /// A CUSTOM policy's provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
}

/// A workload as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Workload {
    pub(super) name: String,
    pub(super) namespace: String,
    pub(super) address: String,
    pub(super) ports: BTreeSet<u16>,
    pub(super) labels: BTreeMap<String, String>,
    pub(super) services: Vec<String>,
    /// The nodes its instances run on, when the registry knows.
    pub(super) nodes: BTreeSet<String>,
}

impl Workload {
    /// `reviews-v2.default`.
    pub(super) fn display_name(&self) -> String {
        format!("{}.{}", self.name, self.namespace)
    }

    /// Whether `pod` (a pod name) is one of this workload's.
    fn has_pod(&self, pod: &str) -> bool {
        pod == self.name
            || pod
                .strip_prefix(&self.name)
                .is_some_and(|rest| rest.starts_with('-'))
    }
}

/// Every workload of the registry: its instances grouped by namespace
/// (the host's) and name (`app`-`version` labels).
pub(super) fn all(context: &Context<'_>) -> Vec<Workload> {
    let mut out: BTreeMap<(String, String), Workload> = BTreeMap::new();
    let Some(registry) = context.input.registry else {
        return Vec::new();
    };
    for (host, service) in &registry.services {
        let namespace = host_namespace(host, context.input.domain).unwrap_or("default");
        for instance in &service.instances {
            let name = match (instance.labels.get("app"), instance.labels.get("version")) {
                (Some(app), Some(version)) => format!("{app}-{version}"),
                (Some(app), None) => app.clone(),
                _ => instance.address.clone(),
            };
            let workload = out
                .entry((namespace.to_string(), name.clone()))
                .or_insert_with(|| Workload {
                    name,
                    namespace: namespace.to_string(),
                    address: instance.address.clone(),
                    labels: instance.labels.clone(),
                    ..Default::default()
                });
            workload.ports.insert(instance.port);
            workload.nodes.extend(instance.node.clone());
            if !workload.services.contains(host) {
                workload.services.push(host.clone());
            }
        }
    }
    out.into_values().collect()
}

/// The workloads backing `host`.
pub(super) fn instances_of(context: &Context<'_>, host: &str) -> Vec<Workload> {
    all(context)
        .into_iter()
        .filter(|w| w.services.iter().any(|s| s == host))
        .collect()
}

/// The workload `name` (in `namespace`), `name.namespace`, an address or
/// `address:port`, or a connected proxy's pod.
pub(super) fn find(context: &Context<'_>, name: &str, namespace: &str) -> Option<Workload> {
    let workloads = all(context);
    let (address, port) = match name.rsplit_once(':') {
        Some((address, port)) if port.parse::<u16>().is_ok() => (address, port.parse::<u16>().ok()),
        _ => (name, None),
    };
    if address.parse::<std::net::IpAddr>().is_ok() {
        if let Some(found) = workloads
            .iter()
            .find(|w| w.address == address && port.is_none_or(|p| w.ports.contains(&p)))
        {
            return Some(found.clone());
        }
        let proxy = context
            .input
            .proxies
            .unwrap_or_default()
            .iter()
            .find(|p| p.address_and_id().0 == address)?;
        return Some(of_proxy(context, proxy));
    }
    let (name, namespace) = match name.split_once('.') {
        Some((name, namespace)) => (name, namespace),
        None => (name, namespace),
    };
    if let Some(found) = workloads
        .iter()
        .find(|w| w.namespace == namespace && w.has_pod(name))
    {
        return Some(found.clone());
    }
    let proxy = context
        .input
        .proxies
        .unwrap_or_default()
        .iter()
        .find(|p| p.address_and_id().1 == format!("{name}.{namespace}"))?;
    Some(of_proxy(context, proxy))
}

/// The workload of a connected proxy: the registry's workload its pod
/// belongs to, or the one at its address, or one known only by the proxy.
pub(super) fn of_proxy(context: &Context<'_>, proxy: &Proxy) -> Workload {
    let (address, id) = proxy.address_and_id();
    let (pod, namespace) = id.split_once('.').unwrap_or((id, "default"));
    let workloads = all(context);
    let at_address: Vec<&Workload> = workloads.iter().filter(|w| w.address == address).collect();
    workloads
        .iter()
        .find(|w| w.namespace == namespace && w.has_pod(pod))
        .or(if at_address.len() == 1 {
            Some(at_address[0])
        } else {
            None
        })
        .cloned()
        .unwrap_or_else(|| Workload {
            name: pod.to_string(),
            namespace: namespace.to_string(),
            address: address.to_string(),
            ..Default::default()
        })
}

/// What applies to `workload`; `services` are the services shown (their
/// routes name the hosts the Sidecar should import).
pub(super) fn view(context: &Context<'_>, workload: &Workload, services: &[ServiceView]) -> WorkloadView {
    let proxies: Vec<Proxy> = context
        .input
        .proxies
        .unwrap_or_default()
        .iter()
        .filter(|p| {
            let (address, id) = p.address_and_id();
            let (pod, namespace) = id.split_once('.').unwrap_or((id, ""));
            (namespace == workload.namespace && workload.has_pod(pod))
                || (!workload.address.is_empty() && address == workload.address && workload.labels.is_empty())
                // The ztunnel of a node the workload runs on serves it.
                || (p.node.starts_with("ztunnel~")
                    && p.node_name.as_ref().is_some_and(|n| workload.nodes.contains(n)))
        })
        .cloned()
        .collect();
    WorkloadView {
        name: workload.name.clone(),
        namespace: workload.namespace.clone(),
        address: workload.address.clone(),
        labels: workload.labels.clone(),
        services: workload.services.clone(),
        sidecar: sidecar(context, workload, services),
        mtls: mtls(context, workload),
        authorization: authorization(context, workload),
        proxies,
    }
}

/// The Sidecar of `workload` and the hosts out of its scope.
fn sidecar(context: &Context<'_>, workload: &Workload, services: &[ServiceView]) -> SidecarView {
    let Some((scope, origin)) = context
        .model
        .sidecar_for(&workload.namespace, &labels(&workload.labels))
    else {
        return SidecarView {
            origin: "none".into(),
            ..Default::default()
        };
    };
    let (namespace, name, why) = match &origin {
        ScopeOrigin::Workload { namespace, name } => (namespace, name, "workload selector"),
        ScopeOrigin::NamespaceDefault { namespace, name } => (namespace, name, "namespace default"),
        ScopeOrigin::MeshDefault { namespace, name } => (namespace, name, "mesh default"),
        ScopeOrigin::NoSidecar => {
            return SidecarView {
                origin: "none".into(),
                ..Default::default()
            };
        }
    };
    // The hosts named: the registry's, the VirtualServices' and their
    // routes' destinations, the services shown.
    let domain = context.input.domain;
    let mut hosts: BTreeSet<String> = context
        .input
        .registry
        .map(|r| r.services.keys().cloned().collect())
        .unwrap_or_default();
    for service in services {
        hosts.insert(service.host.clone());
        hosts.extend(
            service
                .http
                .iter()
                .chain(&service.tcp)
                .chain(&service.tls)
                .flat_map(|r| &r.destinations)
                .map(|d| d.host.clone()),
        );
    }
    for (host, routes) in context.model.hosts() {
        hosts.insert(host.to_string());
        for route in &routes.http {
            if let pilot_routing::HttpAction::Route(targets) = &route.action {
                hosts.extend(targets.iter().map(|t| t.destination.host.clone()));
            }
        }
    }
    let entries: Vec<Config<ServiceEntry>> = context
        .input
        .objects
        .iter()
        .filter(|o| o.meta.kind == "ServiceEntry")
        .filter_map(|o| Config::<ServiceEntry>::from_dyn(o).ok())
        .collect();
    let mut listeners: BTreeMap<usize, Vec<EgressHost>> = BTreeMap::new();
    for import in &scope.imports {
        listeners
            .entry(import.listener)
            .or_default()
            .push(import.host.clone());
    }
    let out_of_scope = hosts
        .into_iter()
        .filter(|host| !host.contains('*'))
        .filter(|host| {
            let host_namespace = host_namespace(host, domain)
                .map(str::to_string)
                .or_else(|| {
                    entries
                        .iter()
                        .find(|e| e.spec.hosts.iter().any(|h| h == host))
                        .map(|e| e.meta.namespace.clone())
                })
                .unwrap_or_else(|| scope.namespace.clone());
            !listeners
                .values()
                .any(|entries| in_scope(entries, |e| e.names(&scope.namespace, &host_namespace, host)))
        })
        .collect();
    SidecarView {
        object: Some(ObjectRef {
            kind: "Sidecar".into(),
            namespace: namespace.clone(),
            name: name.clone(),
        }),
        origin: why.into(),
        imports: scope.imports.iter().map(|i| i.text.clone()).collect(),
        out_of_scope,
    }
}

/// The inbound mutual TLS of `workload` and where it comes from.
fn mtls(context: &Context<'_>, workload: &Workload) -> MtlsView {
    let root = context.model.root_namespace();
    let mut policies: Vec<Config<PeerAuthentication>> = context
        .input
        .objects
        .iter()
        .filter(|o| o.meta.kind == "PeerAuthentication")
        .filter_map(|o| Config::<PeerAuthentication>::from_dyn(o).ok())
        .collect();
    // Oldest first, then by name, as pilot-routing (and Istio) pick.
    policies.sort_by(|a, b| {
        (a.meta.creation_timestamp, &a.meta.name).cmp(&(b.meta.creation_timestamp, &b.meta.name))
    });
    let selector_less = |ns: &str| {
        policies
            .iter()
            .find(|p| p.meta.namespace == ns && WorkloadSelector::labels(p.spec.selector.as_ref()).is_none())
    };
    let selecting = policies.iter().find(|p| {
        p.meta.namespace == workload.namespace
            && WorkloadSelector::labels(p.spec.selector.as_ref())
                .is_some_and(|s| s.iter().all(|(k, v)| workload.labels.get(k) == Some(v)))
    });
    let levels = [
        ("workload", selecting),
        (
            "namespace",
            selector_less(&workload.namespace).filter(|_| workload.namespace != root),
        ),
        ("mesh", selector_less(root)),
    ];
    let mode_of = |p: &Config<PeerAuthentication>| {
        p.spec
            .mtls
            .as_ref()
            .map(|m| m.mode)
            .filter(|m| *m != MtlsMode::Unset)
    };
    let reference = |p: &Config<PeerAuthentication>| ObjectRef {
        kind: "PeerAuthentication".into(),
        namespace: p.meta.namespace.clone(),
        name: p.meta.name.clone(),
    };
    let deciding = levels
        .iter()
        .position(|(_, p)| p.is_some_and(|p| mode_of(p).is_some()));
    // The mode as generation computes it (pilot-routing), for a port with
    // no port-level setting.
    let mode =
        context
            .model
            .peer_authentication()
            .mtls_mode(&workload.namespace, &labels(&workload.labels), 0);
    let mut view = MtlsView {
        mode,
        source: "default".into(),
        ..Default::default()
    };
    if let Some(at) = deciding
        && let (level, Some(policy)) = levels[at]
    {
        view.source = level.into();
        view.policy = Some(reference(policy));
        for (lower, other) in &levels[at + 1..] {
            if let Some(other) = other
                && let Some(other_mode) = mode_of(other)
            {
                view.overrides.push(format!(
                    "{lower} PeerAuthentication {}/{}: {}",
                    other.meta.namespace,
                    other.meta.name,
                    mode_text(other_mode)
                ));
            }
        }
    }
    for (_, policy) in levels.iter() {
        if let Some(policy) = policy {
            view.involved.push(reference(policy));
        }
    }
    if let Some(policy) = selecting {
        for (port, setting) in &policy.spec.port_level_mtls {
            let mode = if setting.mode == MtlsMode::Unset {
                view.mode
            } else {
                setting.mode
            };
            view.ports.push(PortMtls {
                port: *port,
                mode,
                policy: reference(policy),
            });
        }
    }
    view
}

/// `STRICT`.
pub(crate) fn mode_text(mode: MtlsMode) -> &'static str {
    match mode {
        MtlsMode::Unset => "UNSET",
        MtlsMode::Disable => "DISABLE",
        MtlsMode::Permissive => "PERMISSIVE",
        MtlsMode::Strict => "STRICT",
    }
}

/// The AuthorizationPolicies that apply to `workload`.
fn authorization(context: &Context<'_>, workload: &Workload) -> Vec<AuthorizationView> {
    let labels = labels(&workload.labels);
    let root = context.model.root_namespace();
    context
        .model
        .authorization()
        .applying(&workload.namespace, &labels)
        .map(|policy| AuthorizationView {
            object: ObjectRef {
                kind: "AuthorizationPolicy".into(),
                namespace: policy.namespace.clone(),
                name: policy.name.clone(),
            },
            action: match policy.action {
                Action::Allow => "ALLOW",
                Action::Deny => "DENY",
                Action::Audit => "AUDIT",
                Action::Custom => "CUSTOM",
                _ => "UNKNOWN",
            }
            .into(),
            scope: match (&policy.selector, policy.namespace == root) {
                (Some(_), _) => "workload selector",
                (None, true) => "mesh (root namespace)",
                (None, false) => "namespace",
            }
            .into(),
            rules: policy.rules.len(),
            provider: policy.provider.clone(),
        })
        .collect()
}

/// The namespace of a service hostname (`reviews.default.svc.cluster.local`).
fn host_namespace<'h>(host: &'h str, domain: &str) -> Option<&'h str> {
    let rest = host.strip_suffix(domain)?.strip_suffix('.')?;
    let (_, namespace) = rest.split_once('.')?;
    (!namespace.contains('.')).then_some(namespace)
}
