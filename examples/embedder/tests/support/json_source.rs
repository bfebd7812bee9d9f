//! The registry conformance suite's hold on a [`JsonFileRegistry`]: the
//! suite's services written as the JSON file.

use std::sync::Arc;
use std::time::Duration;

use pilot_model::ServiceDiscovery;
use pilot_store::testing::{RegistrySource, SourceService};
use serde_json::json;

use pilot_embedder_example::JsonFileRegistry;

/// A temporary file and the registry following it.
pub(crate) struct JsonFileSource {
    dir: tempfile::TempDir,
    registry: Option<JsonFileRegistry>,
}

impl Default for JsonFileSource {
    fn default() -> Self {
        Self::new()
    }
}

impl JsonFileSource {
    /// An empty directory; the registry starts on the first `registry()`.
    pub(crate) fn new() -> Self {
        JsonFileSource {
            dir: tempfile::tempdir().expect("a temporary directory"),
            registry: None,
        }
    }
}

#[pilot_model::async_trait]
impl RegistrySource for JsonFileSource {
    async fn write(&mut self, services: &[SourceService]) {
        let services: Vec<_> = services
            .iter()
            .map(|s| {
                let instances: Vec<_> = s
                    .instances
                    .iter()
                    .flat_map(|i| {
                        s.ports.iter().map(move |p| {
                            json!({"address": i.address, "port": p.port, "portName": p.name, "labels": i.labels})
                        })
                    })
                    .collect();
                json!({"hostname": s.hostname, "ports": s.ports, "instances": instances})
            })
            .collect();
        // Renamed into place, so the registry never reads half a file.
        let staging = self.dir.path().join("services.json.new");
        std::fs::write(&staging, json!({ "services": services }).to_string()).expect("written");
        std::fs::rename(&staging, self.dir.path().join("services.json")).expect("renamed");
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        if self.registry.is_none() {
            if !self.dir.path().join("services.json").exists() {
                self.write(&[]).await;
            }
            let path = self.dir.path().join("services.json");
            self.registry = Some(JsonFileRegistry::open(path, Duration::from_millis(10)));
        }
        Arc::new(self.registry.clone().expect("opened above"))
    }

    /// The file is read whole every time: a registry that reads it cannot
    /// miss a change, only see several at once.
    async fn disconnect(&mut self) -> bool {
        false
    }

    async fn reconnect(&mut self) {}
}
