//! The `--services` registry: a `pilot_store::FollowedRegistry` fed from a YAML (or JSON) file,
//! reloaded when the file changes:
//!
//! ```yaml
//! services:
//! - hostname: reviews.default.svc.cluster.local
//!   ports: [{name: http, port: 9080, protocol: HTTP}]
//!   instances:
//!   - {address: 127.0.0.1, port: 9081, labels: {version: v1}}
//!   - {address: 127.0.0.1, port: 9082, portName: http, labels: {version: v2}}
//!   - {address: 10.0.0.3, port: 9080, serviceAccount: reviews,
//!      labels: {version: v3, security.istio.io/tlsMode: istio}}
//! ```
//!
//! An instance's `serviceAccount` is its identity in mutual TLS (the
//! service's accounts are its instances'); the label
//! `security.istio.io/tlsMode: istio` says it runs a sidecar that accepts
//! mutual TLS.
//!
//! Workloads (`pilot_model::Workload`, what ztunnel is served and what a
//! node proxy may get certificates for): an instance that gives `name`
//! and `namespace` (and optionally `node`, `uid`, `serviceAccount`) makes
//! the workload at its address, shared by every instance of that address
//! (of any service; an address is one workload, so their workload fields
//! must agree, and its labels are the union of theirs). A top-level
//! `workloads:` list adds workloads that back no service (or that several
//! addresses share), each with its `addresses`; instances at one of those
//! addresses are that workload. Workloads are of kind `Registered`, with
//! the uid `Kubernetes/pilot.io/Registered/<namespace>/<name>` unless
//! `uid` names another.
//!
//! ```yaml
//! services:
//! - hostname: reviews.default.svc.cluster.local
//!   ports: [{name: http, port: 9080, protocol: HTTP}]
//!   instances:
//!   - {address: 10.0.0.3, port: 9080, name: reviews-v1-1, namespace: default,
//!      serviceAccount: reviews, node: node-1}
//! workloads:
//! - {name: batch-1, namespace: jobs, serviceAccount: batch, node: node-2,
//!    addresses: [10.0.0.9], labels: {istio.io/dataplane-mode: ambient}}
//! ```

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pilot_model::{Labels, Port, Service, ServiceDiscovery, Workload, WorkloadKind};
use pilot_store::{DesiredState, FollowedRegistry, RegistryWriter};
use serde::Deserialize;

/// The file's content.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicesFile {
    /// Every service with its instances.
    #[serde(default)]
    pub services: Vec<ServiceEntry>,
    /// Workloads listed by themselves: those that back no service, or
    /// that span several addresses.
    #[serde(default)]
    pub workloads: Vec<WorkloadEntry>,
}

/// A workload of the top-level `workloads:` list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WorkloadEntry {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// The service account it runs as (`default` unless given).
    #[serde(default)]
    pub service_account: Option<String>,
    /// The node it runs on: that node's ztunnel serves it.
    #[serde(default)]
    pub node: Option<String>,
    /// Its uid (default `Kubernetes/pilot.io/Registered/<namespace>/<name>`).
    #[serde(default)]
    pub uid: Option<String>,
    /// Its addresses; instances at one of them are this workload.
    #[serde(default)]
    pub addresses: Vec<IpAddr>,
    /// Its labels (`istio.io/dataplane-mode: ambient` enrolls it).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// One service and its instances.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServiceEntry {
    /// Fully qualified hostname.
    pub hostname: String,
    /// The virtual IP, if any.
    #[serde(default)]
    pub address: Option<IpAddr>,
    /// The service's ports.
    pub ports: Vec<Port>,
    /// For an alias of an external host, that host.
    #[serde(default)]
    pub external_name: Option<String>,
    /// The instances behind the service.
    #[serde(default)]
    pub instances: Vec<InstanceEntry>,
}

/// One instance: where it listens and its labels.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InstanceEntry {
    /// Its IP.
    pub address: IpAddr,
    /// The port it listens on.
    pub port: u16,
    /// The service port it serves (default: the service's first port).
    #[serde(default)]
    pub port_name: Option<String>,
    /// Its labels, such as `version: v1`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its availability zone.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// The service account it runs as: its identity in mutual TLS.
    #[serde(default)]
    pub service_account: Option<String>,
    /// The name of the workload at this address (with `namespace`).
    #[serde(default)]
    pub name: Option<String>,
    /// The namespace of the workload at this address (with `name`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// The node the workload at this address runs on.
    #[serde(default)]
    pub node: Option<String>,
    /// The uid of the workload at this address.
    #[serde(default)]
    pub uid: Option<String>,
}

/// Reads and checks the file; errors name the file and, for YAML problems,
/// the line and column.
pub fn load(path: &Path) -> Result<ServicesFile, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let source = path.display().to_string();
    let values = pilot_model::document::parse_values(&source, &text).map_err(|e| e.to_string())?;
    let value = values.into_iter().next().unwrap_or_else(|| serde_json::json!({}));
    let file: ServicesFile = serde_json::from_value(value).map_err(|e| format!("{source}: {e}"))?;
    for (i, service) in file.services.iter().enumerate() {
        if service.ports.is_empty() {
            return Err(format!(
                "{source}: services[{i}] ({}) has no ports",
                service.hostname
            ));
        }
        for (j, instance) in service.instances.iter().enumerate() {
            if let Some(name) = &instance.port_name
                && service.ports.iter().all(|p| &p.name != name)
            {
                return Err(format!(
                    "{source}: services[{i}].instances[{j}].portName: {} has no port named {name:?}",
                    service.hostname
                ));
            }
        }
    }
    resolve_workloads(&file).map_err(|e| format!("{source}: {e}"))?;
    Ok(file)
}

/// The workloads a file describes: by address (what its instances are),
/// and the ones its `workloads:` list names.
#[derive(Debug, Default)]
pub(crate) struct Workloads {
    /// The workload at each address.
    pub(crate) by_address: HashMap<IpAddr, Arc<Workload>>,
    /// The `workloads:` list's.
    pub(crate) listed: Vec<Arc<Workload>>,
}

/// A workload being gathered from the file: where it was first named and
/// the labels its instances give.
struct Gathered {
    place: String,
    workload: Workload,
    /// Each label's value and where it was given.
    labels: BTreeMap<String, (String, String)>,
}

/// The workloads of `file`, or the first contradiction, naming its place
/// (`services[i].instances[j]`, `workloads[k]`) and field.
pub(crate) fn resolve_workloads(file: &ServicesFile) -> Result<Workloads, String> {
    let mut gathered: Vec<Gathered> = Vec::new();
    let mut at: HashMap<IpAddr, usize> = HashMap::new();
    for (k, entry) in file.workloads.iter().enumerate() {
        let place = format!("workloads[{k}]");
        let workload = workload(
            &place,
            &entry.name,
            &entry.namespace,
            entry.service_account.as_deref(),
            entry.node.as_deref(),
            entry.uid.as_deref(),
        )?
        .with_addresses(entry.addresses.iter().copied());
        for address in &entry.addresses {
            if let Some(&other) = at.get(address) {
                return Err(format!(
                    "{place}.addresses: {address} is already {}'s ({}): an address is one workload",
                    gathered[other].workload.name, gathered[other].place
                ));
            }
            at.insert(*address, gathered.len());
        }
        let labels = entry
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), (v.clone(), place.clone())))
            .collect();
        gathered.push(Gathered {
            place,
            workload,
            labels,
        });
    }
    let listed = gathered.len();
    // The workloads the instances name, first: an instance that names none
    // is the workload of its address wherever that is named.
    for (i, service) in file.services.iter().enumerate() {
        for (j, instance) in service.instances.iter().enumerate() {
            let place = format!("services[{i}].instances[{j}]");
            let (name, namespace) = match (&instance.name, &instance.namespace) {
                (Some(name), Some(namespace)) => (name, namespace),
                (None, None) if instance.node.is_none() && instance.uid.is_none() => continue,
                _ => {
                    return Err(format!(
                        "{place}: a workload needs both `name` and `namespace` (`node` and `uid` are the workload's)"
                    ));
                }
            };
            let Some(&index) = at.get(&instance.address) else {
                let declared = workload(
                    &place,
                    name,
                    namespace,
                    instance.service_account.as_deref(),
                    instance.node.as_deref(),
                    instance.uid.as_deref(),
                )?;
                at.insert(instance.address, gathered.len());
                gathered.push(Gathered {
                    place,
                    workload: declared.with_addresses([instance.address]),
                    labels: BTreeMap::new(),
                });
                continue;
            };
            let known = &gathered[index].workload;
            let account = instance
                .service_account
                .as_deref()
                .unwrap_or(&known.service_account);
            let same = index >= listed
                && workload(
                    &place,
                    name,
                    namespace,
                    Some(account),
                    instance.node.as_deref(),
                    instance.uid.as_deref(),
                )
                .is_ok_and(|mine| mine.with_addresses(known.addresses.clone()) == *known);
            if !same {
                return Err(format!(
                    "{place}: address {} is workload {}/{} already ({}); the instances of an address are \
                     one workload: name it once, or the same way",
                    instance.address, known.namespace, known.name, gathered[index].place
                ));
            }
        }
    }
    // Every instance at a workload's address: its account agrees, and its
    // labels are the workload's.
    for (i, service) in file.services.iter().enumerate() {
        for (j, instance) in service.instances.iter().enumerate() {
            let Some(&index) = at.get(&instance.address) else {
                continue;
            };
            let place = format!("services[{i}].instances[{j}]");
            let target = &mut gathered[index];
            if let Some(account) = &instance.service_account
                && *account != target.workload.service_account
            {
                return Err(format!(
                    "{place}.serviceAccount: {account:?}, but the workload at {} ({}/{}, {}) runs as {:?}",
                    instance.address,
                    target.workload.namespace,
                    target.workload.name,
                    target.place,
                    target.workload.service_account
                ));
            }
            for (key, value) in &instance.labels {
                match target.labels.get(key) {
                    Some((known, there)) if known != value => {
                        return Err(format!(
                            "{place}.labels.{key}: {value:?}, but {there} gives the workload at {} {known:?}",
                            instance.address
                        ));
                    }
                    Some(_) => {}
                    None => {
                        target.labels.insert(key.clone(), (value.clone(), place.clone()));
                    }
                }
            }
        }
    }
    let mut uids: HashMap<String, String> = HashMap::new();
    for entry in &gathered {
        if let Some(other) = uids.insert(entry.workload.uid.clone(), entry.place.clone()) {
            return Err(format!(
                "{}: uid {:?} is {other}'s workload already (another address); give one of them its own \
                 `uid` or name, or list the workload once in `workloads:` with both addresses",
                entry.place, entry.workload.uid
            ));
        }
    }
    let mut workloads = Workloads::default();
    let finished: Vec<Arc<Workload>> = gathered
        .into_iter()
        .map(|entry| {
            let labels = entry.labels.into_iter().map(|(k, (v, _))| (k, v)).collect();
            Arc::new(entry.workload.with_labels(Labels(labels)))
        })
        .collect();
    for (address, index) in at {
        workloads.by_address.insert(address, Arc::clone(&finished[index]));
    }
    workloads.listed = finished.into_iter().take(listed).collect();
    Ok(workloads)
}

/// A workload of the file, its fields checked.
fn workload(
    place: &str,
    name: &str,
    namespace: &str,
    account: Option<&str>,
    node: Option<&str>,
    uid: Option<&str>,
) -> Result<Workload, String> {
    for (field, value) in [("name", Some(name)), ("node", node), ("uid", uid)] {
        if value.is_some_and(str::is_empty) {
            return Err(format!("{place}.{field}: empty"));
        }
    }
    // The identity's segments: a node proxy gets certificates for it.
    pilot_ca::SpiffeId::check_path_segment("namespace", namespace)
        .map_err(|e| format!("{place}.namespace: {e}"))?;
    if let Some(account) = account {
        pilot_ca::SpiffeId::check_path_segment("serviceAccount", account)
            .map_err(|e| format!("{place}.serviceAccount: {e}"))?;
    }
    let mut workload = Workload::new(WorkloadKind::Registered, namespace, name);
    if let Some(account) = account {
        workload = workload.with_service_account(account);
    }
    if let Some(node) = node {
        workload = workload.with_node(node);
    }
    if let Some(uid) = uid {
        workload = workload.with_uid(uid);
    }
    Ok(workload)
}

/// What `file` says the registry should hold: the registry's whole
/// "source -> desired state" function ([`pilot_store::FollowedRegistry`]
/// diffs it into the cache, so a changed entry is one update).
pub(crate) fn desired(file: &ServicesFile, workloads: &Workloads) -> DesiredState {
    let mut desired = DesiredState::new();
    for entry in &file.services {
        let service = desired.insert({
            let mut value = Service::new(&entry.hostname, entry.ports.clone());
            value.address = entry.address;
            value.external_name = entry.external_name.clone();
            // The accounts the instances run as: the identities a client
            // expects of the service's servers.
            let mut accounts: Vec<String> = entry
                .instances
                .iter()
                .filter_map(|i| {
                    i.service_account.clone().or_else(|| {
                        workloads
                            .by_address
                            .get(&i.address)
                            .map(|w| w.service_account.clone())
                    })
                })
                .collect();
            accounts.sort();
            accounts.dedup();
            value.service_accounts = accounts;
            value
        });
        for instance in &entry.instances {
            // `load` checked the port name; an entry without one serves the
            // first port (`load` checked there is one).
            let port_name = match &instance.port_name {
                Some(name) => name.clone(),
                None => entry.ports.first().map(|p| p.name.clone()).unwrap_or_default(),
            };
            match service.add_instance(
                instance.address,
                instance.port,
                &port_name,
                Labels(instance.labels.clone()),
            ) {
                Ok(added) => {
                    added.availability_zone = instance.availability_zone.clone();
                    added.service_account = instance.service_account.clone();
                    if let Some(workload) = workloads.by_address.get(&instance.address) {
                        added.workload = Some(Arc::clone(workload));
                        // The workload's account when the instance names none.
                        added
                            .service_account
                            .get_or_insert_with(|| workload.service_account.clone());
                    }
                }
                Err(error) => tracing::warn!(%error, hostname = %entry.hostname, "instance not added"),
            }
        }
    }
    desired
}

/// The registry a loaded file feeds, synced with its content, and the
/// writer [`follow`] keeps applying the file with.
pub fn registry(file: &ServicesFile) -> (FollowedRegistry, RegistryWriter) {
    let (registry, writer) = FollowedRegistry::new();
    apply(&writer, file);
    (registry, writer)
}

/// Makes the registry hold what `file` says: its listed workloads first,
/// then its services and instances (which marks it synced). How many
/// services and instances changed, and how many listed workloads.
fn apply(writer: &RegistryWriter, file: &ServicesFile) -> (pilot_store::Applied, usize) {
    let workloads = match resolve_workloads(file) {
        Ok(workloads) => workloads,
        Err(error) => {
            // `load` checked it: not reached with a loaded file.
            tracing::warn!(%error, "the services file's workloads are left out");
            Workloads::default()
        }
    };
    // The listed workloads are part of the desired state: the writer
    // reconciles them with the services (what it held and the file no
    // longer lists goes).
    let held: std::collections::BTreeMap<String, Arc<Workload>> = writer
        .cache()
        .workloads()
        .into_iter()
        .map(|w| (w.uid.clone(), w))
        .collect();
    let mut state = desired(file, &workloads);
    state.workloads = workloads
        .listed
        .iter()
        .map(|w| (w.uid.clone(), Arc::clone(w)))
        .collect();
    let changed = state
        .workloads
        .iter()
        .filter(|(uid, w)| held.get(*uid).is_none_or(|h| h != *w))
        .count()
        + held
            .keys()
            .filter(|uid| !state.workloads.contains_key(*uid))
            .count();
    (writer.apply(state), changed)
}

/// Follows `path`, applying it through `writer` whenever its content
/// changes (checked every `every`), until `shutdown`. A file that fails to
/// load is logged and the registry keeps what it had.
pub async fn follow(
    path: PathBuf,
    writer: RegistryWriter,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Compared from the first check on, so a change made between the first
    // load and this task's start is not missed (re-applying an unchanged
    // file changes nothing).
    let mut last_text = None;
    loop {
        let text = std::fs::read(&path).ok();
        if text != last_text {
            last_text = text;
            match load(&path) {
                Ok(file) => {
                    let (applied, workloads) = apply(&writer, &file);
                    if !applied.is_empty() || workloads > 0 {
                        tracing::info!(path = %path.display(), ?applied, workloads, "services reloaded");
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "services file not reloaded; keeping the previous services")
                }
            }
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = crate::shutdown::closed(&mut shutdown) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use pilot_model::{Event, ServiceDiscovery, ServiceEvent};

    use super::*;

    const ONE: &str = "services:\n- hostname: reviews.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  - {address: 10.0.0.1, port: 9080, labels: {version: v1}}\n";

    #[tokio::test]
    async fn the_registry_follows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("services.yaml");
        std::fs::write(&path, ONE).unwrap();
        let (registry, writer) = registry(&load(&path).unwrap());
        assert!(registry.has_synced());
        let host = "reviews.default.svc.cluster.local";
        assert_eq!(registry.instances(host, &[], &[]).len(), 1);
        let mut events = registry.subscribe();
        let (closing, shutdown) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(follow(path.clone(), writer, Duration::from_millis(10), shutdown));

        // A second version appears: one event, the v1 instance untouched.
        let two = format!("{ONE}  - {{address: 10.0.0.2, port: 9080, labels: {{version: v2}}}}\n");
        std::fs::write(&path, &two).unwrap();
        let patience = Duration::from_secs(60);
        let event = tokio::time::timeout(patience, events.next())
            .await
            .expect("the v2 instance never appeared")
            .unwrap();
        match event {
            ServiceEvent::Instance(Event::Added(added)) => {
                assert_eq!(added.endpoint.address.to_string(), "10.0.0.2")
            }
            other => panic!("expected the v2 instance added, got {other:?}"),
        }
        // A bad file is ignored; a removed service goes.
        std::fs::write(&path, "services: [{hostname: x}]\n").unwrap();
        std::fs::write(&path, "services: []\n").unwrap();
        let mut seen = Vec::new();
        while registry.get_service(host).is_some() {
            seen.push(
                tokio::time::timeout(patience, events.next())
                    .await
                    .expect("never removed"),
            );
        }
        assert!(
            seen.iter()
                .all(|e| matches!(e, Some(ServiceEvent::Instance(Event::Deleted(_))))),
            "only the instances' deletes before the service's: {seen:?}"
        );
        closing.send_replace(true);
        task.await.unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_place() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("services.yaml");
        std::fs::write(&path, "services:\n- hostname: a\n  ports: []\n").unwrap();
        assert!(load(&path).unwrap_err().ends_with("services[0] (a) has no ports"));
        std::fs::write(&path, "services:\n- hostname: a\n  hostname: b\n").unwrap();
        let error = load(&path).unwrap_err();
        assert!(error.contains("services.yaml:3:3"), "{error}");
        std::fs::write(&path, ONE.replace("labels", "lables")).unwrap();
        assert!(load(&path).unwrap_err().contains("unknown field `lables`"));
    }
}
