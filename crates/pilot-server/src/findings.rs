//! pilot-analyze's findings for the status writer
//! ([`pilot_distribution::Findings`]): every object of the Controller's
//! cache analyzed against the service registry and the namespaces of the
//! proxies of every live replica, so that each object's status carries its
//! `Reconciled` condition and its `validationMessages` (what `pilotctl
//! analyze` against this server prints for it).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use pilot_analyze::{Services, Severity};
use pilot_distribution::{Findings, ProxyRecords};
use pilot_model::{ConfigKey, ConfigStore, DynConfig, MessageType, ServiceDiscovery, ValidationMessage};
use pilot_store::Controller;

/// The server's findings: its objects, registry and proxies.
pub(crate) struct ServerFindings {
    pub(crate) controller: Arc<Controller>,
    pub(crate) discovery: Arc<dyn ServiceDiscovery>,
    pub(crate) proxies: Arc<dyn ProxyRecords>,
    /// Completes short hostnames (`svc.cluster.local`).
    pub(crate) domain: String,
}

impl Findings for ServerFindings {
    fn findings(&self) -> HashMap<ConfigKey, Vec<ValidationMessage>> {
        let mut objects: Vec<DynConfig> = Vec::new();
        for kind in self.controller.registry().kinds() {
            for object in self.controller.list_cached(&kind, None).unwrap_or_default() {
                objects.push((*object).clone());
            }
        }
        let mut services = Services::default();
        for service in self.discovery.services() {
            let instances = self
                .discovery
                .instances(&service.hostname, &[], &[])
                .into_iter()
                .map(|instance| instance.labels.0.into_iter().collect())
                .collect();
            services.hosts.insert(service.hostname.clone(), instances);
        }
        let namespaces: BTreeSet<String> = self
            .proxies
            .records()
            .iter()
            .filter_map(|p| pilot_analyze::node_namespace(&p.node_id))
            .collect();
        services.proxy_namespaces = Some(namespaces);
        let mut out: HashMap<ConfigKey, Vec<ValidationMessage>> = HashMap::new();
        for finding in pilot_analyze::analyze(&objects, Some(&services), &self.domain) {
            out.entry(ConfigKey::new(&finding.kind, &finding.namespace, &finding.name))
                .or_default()
                .push(ValidationMessage {
                    type_: MessageType {
                        code: finding.code.to_string(),
                        name: pilot_analyze::code_name(finding.code).to_string(),
                    },
                    level: match finding.severity {
                        Severity::Error => "ERROR",
                        Severity::Warning => "WARNING",
                    }
                    .to_string(),
                    description: format!("{}: {}", finding.path, finding.message),
                });
        }
        out
    }
}
