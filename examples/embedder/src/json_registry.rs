//! A service registry of your own: services and instances from a JSON
//! file, built on `pilot_store::FollowedRegistry`.
//!
//! All a registry writes is its "source -> desired state" function
//! ([`desired`]), the loop that reads its source ([`follow`]), and which
//! followed registry it holds (`RegistryAdapter`, one method); the
//! followed registry diffs each desired state into its cache (subscribers
//! see only what changed), says when it has synced, hands out immutable
//! snapshots, and answers every `ServiceDiscovery` call. (A registry with
//! no methods of its own can simply return the `FollowedRegistry`.)
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
use std::time::Duration;

use pilot_model::{Labels, Port, RegistryAdapter, Service};
use pilot_store::{DesiredState, FollowedRegistry, RegistryWriter};
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

// The one thing a registry adds: which registry serves its reads. Every
// `ServiceDiscovery` method (sync and snapshots included) is then the
// followed registry's; nothing is written by hand, so nothing can be
// forgotten.
impl RegistryAdapter for JsonFileRegistry {
    type Registry = FollowedRegistry;

    fn registry(&self) -> &FollowedRegistry {
        &self.followed
    }
}
