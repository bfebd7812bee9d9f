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

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pilot_model::{Labels, Port, Service};
use pilot_store::{DesiredState, FollowedRegistry, RegistryWriter};
use serde::Deserialize;

/// The file's content.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicesFile {
    /// Every service with its instances.
    #[serde(default)]
    pub services: Vec<ServiceEntry>,
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
    Ok(file)
}

/// What `file` says the registry should hold: the registry's whole
/// "source -> desired state" function ([`pilot_store::FollowedRegistry`]
/// diffs it into the cache, so a changed entry is one update).
pub(crate) fn desired(file: &ServicesFile) -> DesiredState {
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
                .filter_map(|i| i.service_account.clone())
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
    writer.apply(desired(file));
    (registry, writer)
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
                    let applied = writer.apply(desired(&file));
                    if !applied.is_empty() {
                        tracing::info!(path = %path.display(), ?applied, "services reloaded");
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
