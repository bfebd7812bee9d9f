//! The in-memory service registry fed from a YAML (or JSON) file, reloaded
//! when the file changes:
//!
//! ```yaml
//! services:
//! - hostname: reviews.default.svc.cluster.local
//!   ports: [{name: http, port: 9080, protocol: HTTP}]
//!   instances:
//!   - {address: 127.0.0.1, port: 9081, labels: {version: v1}}
//!   - {address: 127.0.0.1, port: 9082, portName: http, labels: {version: v2}}
//! ```

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pilot_model::{Labels, NetworkEndpoint, Port, Service, ServiceDiscovery, ServiceInstance};
use pilot_store_memory::MemoryServiceRegistry;
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

/// Makes `registry` hold exactly what `file` says, touching only the
/// services whose entry changed since `previous`.
pub fn apply(registry: &MemoryServiceRegistry, previous: &ServicesFile, file: &ServicesFile) {
    let old: HashMap<&str, &ServiceEntry> = previous
        .services
        .iter()
        .map(|s| (s.hostname.as_str(), s))
        .collect();
    let new: HashMap<&str, &ServiceEntry> = file.services.iter().map(|s| (s.hostname.as_str(), s)).collect();
    for hostname in old.keys().filter(|h| !new.contains_key(*h)) {
        registry.remove_service(hostname);
    }
    for entry in &file.services {
        if old.get(entry.hostname.as_str()) == Some(&entry) {
            continue;
        }
        registry.remove_service(&entry.hostname);
        let service = registry.add_service(Service {
            address: entry.address,
            external_name: entry.external_name.clone(),
            ..Service::new(&entry.hostname, entry.ports.clone())
        });
        for instance in &entry.instances {
            let port = instance
                .port_name
                .as_deref()
                .and_then(|name| service.port(name))
                .unwrap_or(&service.ports[0])
                .clone();
            let added = registry.add_instance(ServiceInstance {
                endpoint: NetworkEndpoint {
                    address: instance.address,
                    port: instance.port,
                    service_port: port,
                },
                service: Arc::clone(&service),
                labels: Labels(instance.labels.clone()),
                availability_zone: instance.availability_zone.clone(),
                service_account: None,
            });
            if let Err(error) = added {
                tracing::warn!(%error, hostname = %entry.hostname, "instance not added");
            }
        }
    }
}

/// Follows `path`, applying it to `registry` whenever its content changes
/// (checked every `every`), until `shutdown`. A file that fails to load is
/// logged and the registry keeps what it had.
pub async fn follow(
    path: PathBuf,
    registry: MemoryServiceRegistry,
    mut current: ServicesFile,
    every: Duration,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Compared from the first check on, so a change made between the first
    // load and this task's start is not missed.
    let mut last_text = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = crate::closed(&mut shutdown) => return,
        }
        let text = std::fs::read(&path).ok();
        if text == last_text {
            continue;
        }
        last_text = text;
        match load(&path) {
            Ok(file) => {
                apply(&registry, &current, &file);
                tracing::info!(path = %path.display(), services = registry.services().len(), "services reloaded");
                current = file;
            }
            Err(error) => tracing::warn!(%error, "services file not reloaded; keeping the previous services"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = "services:\n- hostname: reviews.default.svc.cluster.local\n  ports: [{name: http, port: 9080, protocol: HTTP}]\n  instances:\n  - {address: 10.0.0.1, port: 9080, labels: {version: v1}}\n";

    #[tokio::test]
    async fn the_registry_follows_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("services.yaml");
        std::fs::write(&path, ONE).unwrap();
        let registry = MemoryServiceRegistry::new();
        let loaded = load(&path).unwrap();
        apply(&registry, &ServicesFile { services: vec![] }, &loaded);
        let host = "reviews.default.svc.cluster.local";
        assert_eq!(registry.instances(host, &[], &[]).len(), 1);
        let (closing, shutdown) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(follow(
            path.clone(),
            registry.clone(),
            loaded,
            Duration::from_millis(10),
            shutdown,
        ));

        // A second version appears; a bad file is ignored; a removed service goes.
        let two = format!("{ONE}  - {{address: 10.0.0.2, port: 9080, labels: {{version: v2}}}}\n");
        std::fs::write(&path, &two).unwrap();
        let v2 = [Labels::from_pairs([("version", "v2")])];
        let patience = Duration::from_secs(60);
        let appeared = tokio::time::timeout(patience, async {
            while registry.instances(host, &[], &v2).is_empty() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        appeared.await.expect("the v2 instance never appeared");
        std::fs::write(&path, "services: [{hostname: x}]\n").unwrap();
        std::fs::write(&path, "services: []\n").unwrap();
        let removed = tokio::time::timeout(patience, async {
            while registry.get_service(host).is_some() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        removed.await.expect("the service was never removed");
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
