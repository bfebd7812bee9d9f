//! A service registry of your own: services and instances from a JSON
//! file, built on `pilot_store::FollowedRegistry`.
//!
//! All a registry writes is its "source -> desired state" function
//! ([`desired`]) and the loop that reads its source ([`follow`]); the
//! followed registry diffs each desired state into its cache (subscribers
//! see only what changed), says when it has synced, hands out immutable
//! snapshots, and answers `ServiceDiscovery`.
//!
//! ```json
//! {"services": [{"hostname": "reviews.default.svc.cluster.local",
//!                "ports": [{"name": "http", "port": 9080, "protocol": "HTTP"}],
//!                "instances": [{"address": "10.0.0.1", "port": 9080, "portName": "http",
//!                               "labels": {"version": "v1"}}]}]}
//! ```

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use pilot::model::{
    Labels, Port, RegistrySnapshot, Service, ServiceDiscovery, ServiceEvent, ServiceInstance,
};
use pilot::store::{DesiredState, FollowedRegistry, RegistryWriter};
use serde::Deserialize;

/// The file's content.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServicesJson {
    /// Every service with its instances.
    #[serde(default)]
    pub services: Vec<ServiceJson>,
}

/// One service.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceJson {
    /// Its hostname.
    pub hostname: String,
    /// Its ports.
    pub ports: Vec<Port>,
    /// Its instances.
    #[serde(default)]
    pub instances: Vec<InstanceJson>,
}

/// One instance.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstanceJson {
    /// Its IP.
    pub address: IpAddr,
    /// The port it listens on.
    pub port: u16,
    /// The service port it serves.
    pub port_name: String,
    /// Its labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// The registry: a followed registry whose follower reads the file.
#[derive(Clone)]
pub struct JsonFileRegistry {
    followed: FollowedRegistry,
}

impl JsonFileRegistry {
    /// Follows `path`, read again every `poll` (inside a Tokio runtime).
    /// The registry syncs with the first read of a valid file.
    pub fn open(path: PathBuf, poll: Duration) -> Self {
        JsonFileRegistry {
            followed: FollowedRegistry::spawn(move |writer| follow(path, poll, writer)),
        }
    }
}

/// The source -> desired state function: the whole of this registry's logic.
pub fn desired(file: &ServicesJson) -> Result<DesiredState, String> {
    let mut desired = DesiredState::new();
    for entry in &file.services {
        let service = desired.insert(Service::new(&entry.hostname, entry.ports.clone()));
        for instance in &entry.instances {
            service
                .add_instance(
                    instance.address,
                    instance.port,
                    &instance.port_name,
                    Labels(instance.labels.clone()),
                )
                .map_err(|e| format!("{}: {e}", entry.hostname))?;
        }
    }
    Ok(desired)
}

/// Reads the file whenever its content changes and applies it. A bad file
/// is reported and the registry keeps what it had.
async fn follow(path: PathBuf, poll: Duration, writer: RegistryWriter) {
    let mut last = None;
    loop {
        let text = std::fs::read(&path).ok();
        if text.is_some() && text != last {
            let parsed = serde_json::from_slice::<ServicesJson>(text.as_deref().unwrap_or_default())
                .map_err(|e| e.to_string())
                .and_then(|file| desired(&file));
            match parsed {
                Ok(state) => {
                    writer.apply(state);
                }
                Err(error) => eprintln!("{}: {error}; keeping the previous services", path.display()),
            }
            last = text;
        }
        tokio::time::sleep(poll).await;
    }
}

// Reads are the followed registry's.
impl ServiceDiscovery for JsonFileRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.followed.services()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.followed.get_service(hostname)
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        self.followed.instances(hostname, port_names, labels)
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        self.followed.host_instances(addresses)
    }

    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        self.followed.subscribe()
    }

    fn has_synced(&self) -> bool {
        self.followed.has_synced()
    }

    fn wait_synced(&self) -> BoxFuture<'static, ()> {
        ServiceDiscovery::wait_synced(&self.followed)
    }

    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        self.followed.snapshot()
    }
}
