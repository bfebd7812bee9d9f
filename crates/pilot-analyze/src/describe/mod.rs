//! What applies to one service, workload or connected proxy, and what of
//! it lost, as `pilotctl describe` shows it (istioctl's `x describe`): a
//! pure function of the objects, the service registry and, against a
//! server, the proxies' records.
//!
//! - per host of a service: its VirtualServices' (and RouteRules') routes
//!   in the order pilot compiles them (the order that decides, taken from
//!   pilot-routing's model: RouteRules by precedence, then VirtualServices
//!   by namespace and name, each in its order), each with its matches,
//!   what it wins for, or why it never wins (shadowed: analyze's
//!   `PLT0104`/`PLT0211` findings; after a catch-all of an earlier
//!   VirtualService of the same host; bound only to gateways), and its
//!   destinations with the DestinationRule and subset each uses;
//! - per workload: the Sidecar that scopes it and the hosts out of its
//!   scope, its inbound mutual TLS mode and the PeerAuthentication that
//!   sets it (mesh, namespace, workload, port), the AuthorizationPolicies
//!   that apply, and its connected proxies with their sync state and the
//!   objects withheld from them after a rejection;
//! - the analyze findings (and the `validationMessages` of the objects'
//!   status, when the server wrote some) of every object shown.
//!
//! ```
//! use pilot_analyze::describe::{self, Registry, Target};
//! use pilot_model::document;
//! let text = "apiVersion: networking.istio.io/v1\nkind: VirtualService\n\
//!             metadata: {name: reviews, namespace: default}\n\
//!             spec: {hosts: [reviews], http: [{route: [{destination: {host: reviews, subset: v9}}]}]}\n";
//! let objects = document::parse("vs.yaml", text, &pilot_api::default_registry()).unwrap();
//! let input = describe::Input {
//!     objects: &objects,
//!     registry: None,
//!     proxies: None,
//!     domain: "svc.cluster.local",
//!     extra_findings: &[],
//! };
//! let target = Target::Service { host: "reviews".into(), namespace: "default".into() };
//! let description = describe::describe(&input, &target).unwrap();
//! let route = &description.services[0].http[0];
//! assert!(route.destinations[0].problem.as_deref().unwrap().contains("no DestinationRule"));
//! ```

mod destinations;
mod matches;
mod routes;
#[cfg(test)]
mod tests;
mod workload;

use std::collections::{BTreeMap, BTreeSet};

use pilot_model::{DynConfig, Labels};
use serde::Serialize;

use crate::{Finding, Services, Severity};

/// What to describe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A service, by hostname or short name (completed in `namespace`).
    Service {
        /// `reviews` or `reviews.default.svc.cluster.local`.
        host: String,
        /// The namespace of a short name.
        namespace: String,
    },
    /// A workload: its name (`reviews-v2`, or a pod name starting with
    /// it, from its `app` and `version` labels) or its address.
    Workload {
        /// Name or address.
        name: String,
        /// The namespace of a name.
        namespace: String,
    },
    /// A connected proxy: its node id or its id (`<pod>.<namespace>`).
    Proxy {
        /// The id.
        id: String,
    },
}

/// What describing needs.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Every object.
    pub objects: &'a [DynConfig],
    /// The service registry (none offline without `--services`).
    pub registry: Option<&'a Registry>,
    /// The connected proxies (none offline).
    pub proxies: Option<&'a [Proxy]>,
    /// The domain suffix of short names (`svc.cluster.local`).
    pub domain: &'a str,
    /// Findings computed elsewhere, shown beside analyze's (e.g.
    /// [`custom::analyze`](crate::custom::analyze)'s with a mesh config).
    pub extra_findings: &'a [Finding],
}

/// The services, their ports and their instances (pilot-discovery's
/// `--services` file or `/debug/registryz`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    /// By hostname.
    pub services: BTreeMap<String, Service>,
}

/// One service of the registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Service {
    /// Its ports: number, name, protocol.
    pub ports: Vec<(u16, String, String)>,
    /// Its instances.
    pub instances: Vec<Instance>,
}

/// One instance of a service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Instance {
    /// Its address.
    pub address: String,
    /// The node it runs on, when the registry knows (the ztunnel of that
    /// node serves it in ambient mode).
    pub node: Option<String>,
    /// Its port.
    pub port: u16,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

impl Registry {
    /// The label sets of each service's instances, as analyze takes them.
    pub fn services(&self) -> Services {
        // Field by field: the analysis may know more than the labels.
        let mut services = Services::default();
        services.hosts = self
            .services
            .iter()
            .map(|(host, s)| {
                (
                    host.clone(),
                    s.instances.iter().map(|i| i.labels.clone()).collect(),
                )
            })
            .collect();
        services
    }
}

/// A connected proxy, as `/debug/proxy-status` lists it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Proxy {
    /// Its node id (`sidecar~10.0.0.5~reviews-v2-1.default~default.svc.cluster.local`).
    pub node: String,
    /// The node it runs on, when it said (a ztunnel's `NODE_NAME`).
    #[serde(rename = "nodeName", skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The pilot-discovery replica serving it.
    pub replica: String,
    /// Whether it is connected now.
    pub connected: bool,
    /// Per xDS type: SYNCED, STALE, NACKED or NOT SENT.
    pub types: BTreeMap<String, String>,
    /// Per xDS type, the message of its current rejection.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub nacks: BTreeMap<String, String>,
    /// The objects left out of its configuration because it rejected them.
    pub withheld: Vec<Withheld>,
}

impl Proxy {
    /// Its address and its id (`<pod>.<namespace>`), from its node id.
    pub fn address_and_id(&self) -> (&str, &str) {
        let mut parts = self.node.split('~');
        let _kind = parts.next();
        (parts.next().unwrap_or(""), parts.next().unwrap_or(&self.node))
    }
}

/// An object withheld from a proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Withheld {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The version rejected.
    pub resource_version: String,
    /// The xDS type rejected.
    #[serde(rename = "type")]
    pub type_: String,
    /// The proxy's message.
    pub message: String,
}

/// An object, by kind, namespace and name.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ObjectRef {
    /// Its kind.
    pub kind: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

impl ObjectRef {
    fn of(object: &DynConfig) -> Self {
        ObjectRef {
            kind: object.meta.kind.clone(),
            namespace: object.meta.namespace.clone(),
            name: object.meta.name.clone(),
        }
    }
}

/// What describing found.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Description {
    /// What was described: `service`, `workload` or `proxy`, and its name.
    pub target: DescribedTarget,
    /// The workloads: the one described, the instances of a service, the
    /// workload of a proxy.
    pub workloads: Vec<workload::WorkloadView>,
    /// The services: the one described, or those the workload backs.
    pub services: Vec<routes::ServiceView>,
    /// The analyze findings of every object shown.
    pub findings: Vec<FindingView>,
    /// The `status.validationMessages` the server wrote on the objects
    /// shown.
    #[serde(rename = "validationMessages", skip_serializing_if = "Vec::is_empty")]
    pub validation_messages: Vec<serde_json::Value>,
    /// Whether some finding is an error, a destination names a missing
    /// subset or a proxy withholds an object: something does not work.
    pub problems: bool,
}

/// What was described.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DescribedTarget {
    /// `service`, `workload` or `proxy`.
    pub kind: String,
    /// Its full name (hostname, `name.namespace`, node id).
    pub name: String,
}

/// A finding, as shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FindingView {
    /// Its code.
    pub code: String,
    /// `error` or `warning`.
    pub severity: String,
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// The field path.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl From<&Finding> for FindingView {
    fn from(f: &Finding) -> Self {
        FindingView {
            code: f.code.to_string(),
            severity: f.severity.to_string(),
            object: ObjectRef {
                kind: f.kind.clone(),
                namespace: f.namespace.clone(),
                name: f.name.clone(),
            },
            path: f.path.clone(),
            message: f.message.clone(),
        }
    }
}

/// Why describing failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DescribeError {
    /// Nothing of that name: what was looked for, and what there is.
    NotFound {
        /// `service reviews.default.svc.cluster.local`.
        what: String,
        /// Names that exist (a few).
        known: Vec<String>,
    },
    /// An object does not decode as its kind.
    BadObject(String),
}

impl std::fmt::Display for DescribeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DescribeError::NotFound { what, known } if known.is_empty() => write!(f, "{what} not found"),
            DescribeError::NotFound { what, known } => {
                write!(f, "{what} not found; known: {}", known.join(", "))
            }
            DescribeError::BadObject(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for DescribeError {}

/// Describes `target` among `input`'s objects, registry and proxies.
pub fn describe(input: &Input<'_>, target: &Target) -> Result<Description, DescribeError> {
    // One object per kind and name, the last given (as `apply` in file
    // order leaves it).
    let mut last: BTreeMap<ObjectRef, usize> = BTreeMap::new();
    for (i, object) in input.objects.iter().enumerate() {
        last.insert(ObjectRef::of(object), i);
    }
    let mut kept: Vec<usize> = last.into_values().collect();
    kept.sort_unstable();
    let objects: Vec<DynConfig> = kept.into_iter().map(|i| input.objects[i].clone()).collect();
    let input = &Input {
        objects: &objects,
        ..*input
    };
    let mut configs = pilot_routing::RoutingConfigs::from_configs(input.objects)
        .map_err(|e| DescribeError::BadObject(e.to_string()))?;
    configs.domain_suffix = input.domain.to_string();
    let model = configs.compile();
    // Against a server, the connected proxies' namespaces too (what an
    // object exported nowhere a proxy is concerns: PLT0214).
    let services = input.registry.map(|registry| {
        let mut services = registry.services();
        if let Some(proxies) = input.proxies {
            services.proxy_namespaces = Some(
                proxies
                    .iter()
                    .filter(|p| p.connected)
                    .filter_map(|p| crate::node_namespace(&p.node))
                    .collect(),
            );
        }
        services
    });
    let mut findings = crate::analyze(input.objects, services.as_ref(), input.domain);
    findings.extend(input.extra_findings.iter().cloned());
    let context = Context {
        input,
        model: &model,
        findings: &findings,
    };
    let (described, workloads, hosts) = match target {
        Target::Service { host, namespace } => {
            let host = resolve(host, namespace, input.domain);
            if !context.known_hosts().contains(&host) {
                return Err(DescribeError::NotFound {
                    what: format!("service {host}"),
                    known: context.known_hosts().into_iter().take(20).collect(),
                });
            }
            let workloads = workload::instances_of(&context, &host);
            (
                DescribedTarget {
                    kind: "service".into(),
                    name: host.clone(),
                },
                workloads,
                vec![host],
            )
        }
        Target::Workload { name, namespace } => {
            let found = workload::find(&context, name, namespace).ok_or_else(|| DescribeError::NotFound {
                what: format!("workload {name} (namespace {namespace}, or that address)"),
                known: workload::all(&context)
                    .iter()
                    .map(|w| w.display_name())
                    .take(20)
                    .collect(),
            })?;
            let hosts = found.services.clone();
            (
                DescribedTarget {
                    kind: "workload".into(),
                    name: found.display_name(),
                },
                vec![found],
                hosts,
            )
        }
        Target::Proxy { id } => {
            let proxy = input
                .proxies
                .unwrap_or_default()
                .iter()
                .find(|p| p.node == *id || p.address_and_id().1 == id)
                .ok_or_else(|| DescribeError::NotFound {
                    what: format!("proxy {id}"),
                    known: input
                        .proxies
                        .unwrap_or_default()
                        .iter()
                        .map(|p| p.address_and_id().1.to_string())
                        .take(20)
                        .collect(),
                })?;
            let found = workload::of_proxy(&context, proxy);
            let hosts = found.services.clone();
            (
                DescribedTarget {
                    kind: "proxy".into(),
                    name: proxy.node.clone(),
                },
                vec![found],
                hosts,
            )
        }
    };
    let services: Vec<routes::ServiceView> = hosts.iter().map(|h| routes::service(&context, h)).collect();
    let workloads: Vec<workload::WorkloadView> = workloads
        .iter()
        .map(|w| workload::view(&context, w, &services))
        .collect();

    // The objects shown, and what analyze and the server say of them.
    let mut shown: BTreeSet<ObjectRef> = BTreeSet::new();
    for service in &services {
        shown.extend(service.objects());
    }
    for workload in &workloads {
        shown.extend(workload.objects());
    }
    let findings: Vec<FindingView> = findings
        .iter()
        .map(FindingView::from)
        .filter(|f| shown.contains(&f.object))
        .collect();
    let validation_messages = validation_messages(input.objects, &shown);
    let problems = findings.iter().any(|f| f.severity == Severity::Error.to_string())
        || services.iter().any(routes::ServiceView::has_problem)
        || workloads
            .iter()
            .any(|w| w.proxies.iter().any(|p| !p.withheld.is_empty()));
    Ok(Description {
        target: described,
        workloads,
        services,
        findings,
        validation_messages,
        problems,
    })
}

/// What the parts of describing share.
struct Context<'a> {
    input: &'a Input<'a>,
    model: &'a pilot_routing::RoutingModel,
    findings: &'a [Finding],
}

impl Context<'_> {
    /// Every host the registry, a VirtualService, a DestinationRule, a
    /// RouteRule or a ServiceEntry names.
    fn known_hosts(&self) -> BTreeSet<String> {
        let mut hosts: BTreeSet<String> = self
            .input
            .registry
            .map(|r| r.services.keys().cloned().collect())
            .unwrap_or_default();
        hosts.extend(self.model.hosts().map(|(h, _)| h.to_string()));
        hosts.extend(self.model.destinations().map(|d| d.host.clone()));
        for object in self.input.objects {
            let spec = &object.spec;
            let namespace = &object.meta.namespace;
            match object.meta.kind.as_str() {
                "VirtualService" | "ServiceEntry" => hosts.extend(
                    spec.get("hosts")
                        .and_then(|h| h.as_array())
                        .into_iter()
                        .flatten()
                        .filter_map(|h| h.as_str())
                        .filter(|h| !h.contains('*'))
                        .map(|h| resolve(h, namespace, self.input.domain)),
                ),
                "DestinationRule" => hosts.extend(
                    spec.get("host")
                        .and_then(|h| h.as_str())
                        .map(|h| resolve(h, namespace, self.input.domain)),
                ),
                _ => {}
            }
        }
        hosts
    }
}

/// `status.validationMessages` of the objects in `shown`, each with its
/// object.
fn validation_messages(objects: &[DynConfig], shown: &BTreeSet<ObjectRef>) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for object in objects {
        let reference = ObjectRef::of(object);
        if !shown.contains(&reference) {
            continue;
        }
        let Some(status) = object
            .meta
            .status
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
        else {
            continue;
        };
        for message in status
            .get("validationMessages")
            .and_then(|m| m.as_array())
            .into_iter()
            .flatten()
        {
            let mut message = message.clone();
            if let Some(map) = message.as_object_mut() {
                map.insert("object".into(), serde_json::json!(reference));
            }
            out.push(message);
        }
    }
    out
}

/// A host of an object of `namespace`: a short name is the service of that
/// name in it (as pilot-routing resolves it).
fn resolve(host: &str, namespace: &str, domain: &str) -> String {
    if host.contains('.') || host.contains('*') {
        host.to_string()
    } else {
        format!("{host}.{namespace}.{domain}")
    }
}

/// `{a=1,b=2}`.
fn labels_text(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", pairs.join(","))
}

fn labels(map: &BTreeMap<String, String>) -> Labels {
    Labels(map.clone())
}

pub use routes::{DestinationView, RouteState, RouteView, ServiceView, VirtualServiceView};
pub use workload::{AuthorizationView, MtlsView, PortMtls, SidecarView, WorkloadView};
