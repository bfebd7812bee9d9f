//! pilot-analyze's findings for the status writer
//! ([`pilot_distribution::Findings`]): every object of the Controller's
//! cache analyzed against the service registry and the namespaces of the
//! proxies of every live replica, so that each object's status carries its
//! `Reconciled` condition and its `validationMessages` (what `pilotctl
//! analyze` against this server prints for it).
//!
//! The same inputs give the Gateway API's status of the objects pilot
//! answers for (pilot-routing's `gateway_api_status`: GatewayClasses of
//! pilot's controller, their Gateways, the routes attached to them or to
//! Services).
//!
//! The analysis runs again only when its input changed: the objects'
//! versions, the registry's hosts and instance labels, the proxies'
//! namespaces are fingerprinted each round, and an unchanged fingerprint
//! returns the previous findings. It runs on a thread of the lowest
//! scheduling priority (`low_priority.rs`).

use pilot_routing::gateway_api_status::CredentialsHeld;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use pilot_analyze::{Services, Severity};
use pilot_distribution::{Findings, ProxyRecords};
use pilot_model::{
    ConfigKey, ConfigStore, DynConfig, GatewayApiStatus, MessageType, ServiceDiscovery, ValidationMessage,
};
use pilot_store::Controller;

/// Validation messages by object.
type ByObject = HashMap<ConfigKey, Vec<ValidationMessage>>;

/// The Gateway API's statuses by object.
type GatewayByObject = HashMap<ConfigKey, GatewayApiStatus>;

/// The server's findings: its objects, registry and proxies.
pub(crate) struct ServerFindings {
    pub(crate) controller: Arc<Controller>,
    pub(crate) discovery: Arc<dyn ServiceDiscovery>,
    pub(crate) proxies: Arc<dyn ProxyRecords>,
    /// Completes short hostnames (`svc.cluster.local`).
    pub(crate) domain: String,
    /// The credential source, and how many changes it announced (bumped
    /// by [`count_credential_changes`]).
    pub(crate) credentials: Option<(
        Arc<dyn pilot_model::CredentialSource>,
        Arc<std::sync::atomic::AtomicU64>,
    )>,
    /// The last input's fingerprint, its findings and its Gateway API
    /// statuses.
    pub(crate) last: Mutex<Option<(u64, ByObject, GatewayByObject)>>,
}

impl Findings for ServerFindings {
    fn findings(&self) -> ByObject {
        self.compute().0
    }

    fn gateway_api(&self) -> GatewayByObject {
        self.compute().1
    }

    fn status_kinds(&self) -> Vec<String> {
        pilot_routing::gateway_api_status::status_kinds()
    }
}

impl ServerFindings {
    /// The findings and statuses of the current input, computed on a
    /// thread of the lowest priority (`low_priority.rs`): the push a
    /// change starts and the proxies applying it go first.
    fn compute(&self) -> (ByObject, GatewayByObject) {
        crate::low_priority::run(|| self.compute_here())
    }

    fn compute_here(&self) -> (ByObject, GatewayByObject) {
        let mut fingerprint = DefaultHasher::new();
        let mut cached = Vec::new();
        for kind in self.controller.registry().kinds() {
            for object in self.controller.list_cached(&kind, None).unwrap_or_default() {
                (&object.meta.kind, &object.meta.namespace, &object.meta.name).hash(&mut fingerprint);
                object.meta.resource_version.hash(&mut fingerprint);
                cached.push(object);
            }
        }
        let mut services = Services::default();
        let mut addresses = BTreeMap::new();
        for service in self.discovery.services() {
            addresses.insert(service.hostname.clone(), service.address);
            let instances: Vec<_> = self
                .discovery
                .instances(&service.hostname, &[], &[])
                .into_iter()
                .map(|instance| instance.labels.0.into_iter().collect())
                .collect();
            services.hosts.insert(service.hostname.clone(), instances);
        }
        services.hosts.hash(&mut fingerprint);
        addresses.hash(&mut fingerprint);
        let namespaces: BTreeSet<String> = self
            .proxies
            .records()
            .iter()
            .filter_map(|p| pilot_analyze::node_namespace(&p.node_id))
            .collect();
        namespaces.hash(&mut fingerprint);
        // A credential come, gone or changed: the listeners' status again.
        if let Some((_, changes)) = &self.credentials {
            changes
                .load(std::sync::atomic::Ordering::Acquire)
                .hash(&mut fingerprint);
        }
        let fingerprint = fingerprint.finish();
        if let Some((last, findings, gateway)) = &*self.last.lock().unwrap_or_else(|e| e.into_inner())
            && *last == fingerprint
        {
            return (findings.clone(), gateway.clone());
        }
        let registry = Registry {
            hosts: &services.hosts,
            addresses: &addresses,
        };
        let source = self.credentials.as_ref().map(|(source, _)| source);
        let held = source.map(|s| Held(&**s));
        let gateway = pilot_routing::gateway_api_status::statuses(
            &cached,
            &registry,
            held.as_ref().map(|h| h as &dyn CredentialsHeld),
            &self.domain,
            std::time::SystemTime::now(),
        );
        services.proxy_namespaces = Some(namespaces);
        let objects: Vec<DynConfig> = cached.iter().map(|o| (**o).clone()).collect();
        let mut out = ByObject::new();
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
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((fingerprint, out.clone(), gateway.clone()));
        (out, gateway)
    }
}

/// Counts the changes `source` announces into `changes` until `shutdown`.
pub(crate) async fn count_credential_changes(
    source: Arc<dyn pilot_model::CredentialSource>,
    changes: Arc<std::sync::atomic::AtomicU64>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    use futures::StreamExt;
    let mut announced = source.changes();
    loop {
        tokio::select! {
            next = announced.next() => match next {
                Some(()) => {
                    changes.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                }
                None => return,
            },
            () = crate::shutdown::closed(&mut shutdown) => return,
        }
    }
}

/// The registry as the Gateway API's status reads it: the Services'
/// instances' labels and the Services' addresses, by hostname.
struct Registry<'a> {
    hosts: &'a BTreeMap<String, Vec<BTreeMap<String, String>>>,
    addresses: &'a BTreeMap<String, Option<std::net::IpAddr>>,
}

impl pilot_routing::gateway_api_status::RegistryView for Registry<'_> {
    fn exists(&self, host: &str) -> bool {
        self.hosts.contains_key(host)
    }

    fn labelled(&self, key: &str, value: &str) -> Vec<(String, Option<std::net::IpAddr>)> {
        self.hosts
            .iter()
            .filter(|(_, instances)| {
                instances
                    .iter()
                    .any(|labels| labels.get(key).is_some_and(|v| v == value))
            })
            .map(|(host, _)| (host.clone(), self.addresses.get(host).copied().flatten()))
            .collect()
    }
}

/// A credential source as the Gateway API's status asks of it.
struct Held<'a>(&'a dyn pilot_model::CredentialSource);

impl CredentialsHeld for Held<'_> {
    fn holds_secret(&self, namespace: &str, name: &str) -> bool {
        self.0.get(namespace, name).is_some()
    }

    fn holds_ca_bundle(&self, namespace: &str, name: &str) -> bool {
        self.0.ca_bundle(namespace, name).is_some()
    }
}
