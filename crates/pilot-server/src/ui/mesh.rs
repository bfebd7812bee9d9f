//! What the console shows, gathered once per page view from the server's
//! own parts ([`MeshView::gather`]): every object the Controller holds,
//! the registries' services and instances, every live replica's proxies
//! (the records `/debug/proxy-status` reads), the analyze findings over
//! them (`pilot_analyze::analyze`), and the routing model pilot-routing
//! compiles from the objects. Nothing here writes.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use pilot_ads::{Audience, ProxyStatus};
use pilot_analyze::{Finding, Services, Severity};
use pilot_model::{
    ConfigStore, ConnectedProxy, DynConfig, ProxyDistribution, Service, ServiceInstance, distribution_status,
};
use pilot_routing::{RoutingConfigs, RoutingModel};
use serde_json::Value;

use super::UiState;
use crate::debug::proxy_status::state;

/// The whole mesh as this replica sees it now.
pub(crate) struct MeshView {
    /// This replica's name.
    pub(crate) replica: String,
    /// Every object of every kind, by kind, namespace and name.
    pub(crate) objects: Vec<Arc<DynConfig>>,
    /// Kinds that could not be listed, with the error.
    pub(crate) list_errors: Vec<String>,
    /// The registries' services, by hostname.
    pub(crate) services: Vec<Arc<Service>>,
    /// Each service's instances.
    pub(crate) instances: BTreeMap<String, Vec<ServiceInstance>>,
    /// Every live replica's proxies: (replica, record).
    pub(crate) proxies: Vec<(String, ConnectedProxy)>,
    /// `pilot_analyze::analyze` over the objects and services.
    pub(crate) findings: Vec<Finding>,
    /// What pilot-routing compiles from the objects this server serves (or
    /// why it could not).
    pub(crate) model: Result<RoutingModel, String>,
    /// Which proxies each object concerns, at the latest push.
    audience: Audience,
}

/// What one proxy did with one object's current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It has it.
    Acked,
    /// It rejected a push that brought it: the xDS type and its message.
    Nacked(String, String),
    /// It rejected it and is served without it.
    Withheld(String, String),
    /// Not answered yet.
    Pending,
}

impl Verdict {
    /// The word shown.
    pub(crate) fn word(&self) -> &'static str {
        match self {
            Verdict::Acked => "ACKED",
            Verdict::Nacked(..) => "NACKED",
            Verdict::Withheld(..) => "WITHHELD",
            Verdict::Pending => "PENDING",
        }
    }

    /// Whether the proxy rejected the object.
    pub(crate) fn rejected(&self) -> bool {
        matches!(self, Verdict::Nacked(..) | Verdict::Withheld(..))
    }
}

/// How an object ranks on the overview: problems first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// Some proxy NACKed or withholds it.
    Rejected,
    /// An analyze error concerns it.
    Error,
    /// An analyze warning concerns it.
    Warning,
    /// Nothing known against it.
    Fine,
}

impl Rank {
    /// The word shown.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Rank::Rejected => "NACKED",
            Rank::Error => "error",
            Rank::Warning => "warning",
            Rank::Fine => "ok",
        }
    }
}

impl MeshView {
    /// Reads everything once.
    pub(crate) async fn gather(state: &UiState) -> MeshView {
        let mut objects = Vec::new();
        let mut list_errors = Vec::new();
        let mut kinds = state.controller.registry().kinds();
        kinds.sort();
        for kind in kinds {
            match state.controller.list(&kind, None).await {
                Ok(list) => objects.extend(list),
                Err(error) => list_errors.push(format!("{kind}: {error}")),
            }
        }
        objects.sort_by(|a, b| {
            (&a.meta.kind, &a.meta.namespace, &a.meta.name).cmp(&(
                &b.meta.kind,
                &b.meta.namespace,
                &b.meta.name,
            ))
        });
        let mut services = state.discovery.services();
        services.sort_by(|a, b| a.hostname.cmp(&b.hostname));
        let mut instances = BTreeMap::new();
        let mut labels = Services::default();
        for service in &services {
            let of = state.discovery.instances(&service.hostname, &[], &[]);
            labels.hosts.insert(
                service.hostname.clone(),
                of.iter().map(|i| i.labels.0.clone()).collect(),
            );
            instances.insert(service.hostname.clone(), of);
        }
        let owned: Vec<DynConfig> = objects.iter().map(|o| (**o).clone()).collect();
        let domain = pilot_routing::DEFAULT_DOMAIN_SUFFIX;
        let findings = pilot_analyze::analyze(&owned, Some(&labels), domain);
        // Compiled as the ADS server compiles it: the objects of its
        // revision, its root namespace and default exportTo.
        let served = owned
            .iter()
            .filter(|o| pilot_model::in_revision(&o.meta.labels, &state.settings.revision));
        let model = RoutingConfigs::from_configs(served)
            .map(|mut configs| {
                configs.root_namespace = state.settings.root_namespace.clone();
                configs.default_export_to = state.settings.default_export_to.clone();
                configs.compile()
            })
            .map_err(|e| e.to_string());
        MeshView {
            replica: state.replicas.name().to_string(),
            objects,
            list_errors,
            services,
            instances,
            proxies: state.replicas.all_proxies(),
            findings,
            model,
            audience: state.xds.audience(),
        }
    }

    /// The object `kind/namespace/name`.
    pub(crate) fn object(&self, kind: &str, namespace: &str, name: &str) -> Option<&Arc<DynConfig>> {
        self.objects
            .iter()
            .find(|o| o.meta.kind == kind && o.meta.namespace == namespace && o.meta.name == name)
    }

    /// The findings about one object.
    pub(crate) fn findings_of(&self, object: &DynConfig) -> Vec<&Finding> {
        self.findings
            .iter()
            .filter(|f| {
                f.kind == object.meta.kind
                    && f.namespace == object.meta.namespace
                    && f.name == object.meta.name
            })
            .collect()
    }

    /// Per proxy the object concerns: its replica, node id and what it did
    /// with the object's current version (as the status loop counts it).
    pub(crate) fn verdicts(&self, object: &DynConfig) -> Vec<(String, String, Verdict)> {
        let records: Vec<ProxyDistribution> =
            self.proxies.iter().map(|(_, p)| p.distribution.clone()).collect();
        let concerned = self.audience.of(object, &records).unwrap_or(records);
        let version = object.meta.resource_version.clone().unwrap_or_default();
        let now = SystemTime::now();
        concerned
            .into_iter()
            .map(|record| {
                let replica = self
                    .proxies
                    .iter()
                    .find(|(_, p)| p.node_id == record.node_id)
                    .map(|(r, _)| r.clone())
                    .unwrap_or_default();
                let node = record.node_id.clone();
                let status = distribution_status(&object.meta.kind, &version, &[record], now);
                let message = || {
                    status
                        .nacks
                        .first()
                        .map(|n| (n.type_.clone(), n.message.clone()))
                        .unwrap_or_default()
                };
                let verdict = if status.withheld > 0 {
                    let (type_, message) = message();
                    Verdict::Withheld(type_, message)
                } else if status.nacked > 0 {
                    let (type_, message) = message();
                    Verdict::Nacked(type_, message)
                } else if status.acked > 0 {
                    Verdict::Acked
                } else {
                    Verdict::Pending
                };
                (replica, node, verdict)
            })
            .collect()
    }

    /// How the object ranks: rejected by a proxy (now, or in its stored
    /// status), then analyze errors, then warnings.
    pub(crate) fn rank(&self, object: &DynConfig) -> Rank {
        let stored = object.meta.status.as_ref().is_some_and(|s| {
            s.nacked + s.withheld > 0 && Some(&s.observed_version) == object.meta.resource_version.as_ref()
        });
        if stored || self.verdicts(object).iter().any(|(_, _, v)| v.rejected()) {
            return Rank::Rejected;
        }
        let findings = self.findings_of(object);
        let levels = stored_messages(object);
        if findings.iter().any(|f| f.severity == Severity::Error) || levels.iter().any(|m| m.level == "ERROR")
        {
            Rank::Error
        } else if !findings.is_empty() || !levels.is_empty() {
            Rank::Warning
        } else {
            Rank::Fine
        }
    }

    /// The proxy `id` (its node id, or `pod.namespace`) and its replica.
    pub(crate) fn proxy(&self, id: &str) -> Option<&(String, ConnectedProxy)> {
        self.proxies.iter().find(|(_, p)| {
            p.node_id == id || pilot_xds::Proxy::from_node_id(&p.node_id).is_ok_and(|proxy| proxy.id == id)
        })
    }
}

/// The proxy's state per xDS type (`SYNCED`, `STALE`, `NACKED`, `NOT SENT`),
/// as `/debug/proxy-status` says it, and its overall state (the worst).
pub(crate) fn proxy_states(record: &ConnectedProxy) -> (Vec<(&'static str, &'static str)>, &'static str) {
    let status = ProxyStatus::from_record(record.clone());
    let per_type: Vec<(&'static str, &'static str)> = status
        .types_shown()
        .iter()
        .map(|name| (*name, state(&status.types.get(name).cloned().unwrap_or_default())))
        .collect();
    let overall = ["NACKED", "STALE", "SYNCED"]
        .into_iter()
        .find(|word| per_type.iter().any(|(_, s)| s == word))
        .unwrap_or("NOT SENT");
    (per_type, overall)
}

/// A condition from an object's stored status (`status.conditions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Condition {
    pub(crate) type_: String,
    pub(crate) status: String,
    pub(crate) reason: String,
    pub(crate) message: String,
    pub(crate) observed_generation: String,
    pub(crate) last_transition_time: String,
}

/// A validation message from an object's stored status
/// (`status.validationMessages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValidationMessage {
    pub(crate) code: String,
    pub(crate) name: String,
    pub(crate) level: String,
    pub(crate) description: String,
}

fn text(value: &Value, key: &str) -> String {
    match &value[key] {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The object's stored status as JSON (its shape is pilot-model's
/// `ConfigStatus`; conditions and validation messages are read by name, so
/// that a status without them reads as none).
fn status_json(object: &DynConfig) -> Value {
    object
        .meta
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or(Value::Null)
}

/// `status.conditions`, when the status loop wrote them.
pub(crate) fn stored_conditions(object: &DynConfig) -> Vec<Condition> {
    let status = status_json(object);
    status["conditions"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| Condition {
                    type_: text(c, "type"),
                    status: text(c, "status"),
                    reason: text(c, "reason"),
                    message: text(c, "message"),
                    observed_generation: text(c, "observedGeneration"),
                    last_transition_time: text(c, "lastTransitionTime"),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `status.validationMessages`, when the status loop wrote them.
pub(crate) fn stored_messages(object: &DynConfig) -> Vec<ValidationMessage> {
    let status = status_json(object);
    status["validationMessages"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|m| ValidationMessage {
                    code: text(&m["type"], "code"),
                    name: text(&m["type"], "name"),
                    level: text(m, "level"),
                    description: text(m, "description"),
                })
                .collect()
        })
        .unwrap_or_default()
}
