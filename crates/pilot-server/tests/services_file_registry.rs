//! The `--services` file registry passes the registry conformance suite:
//! the file is its source; a cut is its follower stopped, so the changes
//! written meanwhile arrive with the next follower's first read.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use pilot_model::ServiceDiscovery;
use pilot_server::services_file;
use pilot_store::RegistryWriter;
use pilot_store::testing::{RegistrySource, SourceService};
use serde_json::json;
use tokio::sync::watch;
use tokio::task::JoinHandle;

struct ServicesFileSource {
    dir: tempfile::TempDir,
    registry: Option<(Arc<dyn ServiceDiscovery>, RegistryWriter)>,
    follower: Option<(watch::Sender<bool>, JoinHandle<()>)>,
}

impl ServicesFileSource {
    fn path(&self) -> PathBuf {
        self.dir.path().join("services.yaml")
    }

    fn start_follower(&mut self) {
        let (_, writer) = self.registry.as_ref().expect("started");
        let (stop, shutdown) = watch::channel(false);
        let task = tokio::spawn(services_file::follow(
            self.path(),
            writer.clone(),
            Duration::from_millis(10),
            shutdown,
        ));
        self.follower = Some((stop, task));
    }
}

#[async_trait::async_trait]
impl RegistrySource for ServicesFileSource {
    async fn write(&mut self, services: &[SourceService]) {
        let services: Vec<_> = services
            .iter()
            .map(|s| {
                json!({
                    "hostname": s.hostname,
                    "ports": s.ports,
                    "instances": s.instances.iter().flat_map(|i| s.ports.iter().map(move |p| json!({
                        "address": i.address, "port": p.port, "portName": p.name, "labels": i.labels,
                    }))).collect::<Vec<_>>(),
                })
            })
            .collect();
        // Renamed into place: the follower never reads half a file.
        let staging = self.dir.path().join("services.yaml.new");
        std::fs::write(&staging, json!({ "services": services }).to_string()).unwrap();
        std::fs::rename(&staging, self.path()).unwrap();
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        if self.registry.is_none() {
            if !self.path().exists() {
                self.write(&[]).await;
            }
            let loaded = services_file::load(&self.path()).unwrap();
            let (registry, writer) = services_file::registry(&loaded);
            self.registry = Some((Arc::new(registry), writer));
            self.start_follower();
        }
        Arc::clone(&self.registry.as_ref().expect("started above").0)
    }

    async fn disconnect(&mut self) -> bool {
        let (stop, task) = self.follower.take().expect("a follower");
        stop.send_replace(true);
        task.await.unwrap();
        true
    }

    async fn reconnect(&mut self) {
        self.start_follower();
    }
}

pilot_store::registry_conformance_suite!(|| async {
    Box::new(ServicesFileSource {
        dir: tempfile::tempdir().unwrap(),
        registry: None,
        follower: None,
    }) as Box<dyn RegistrySource>
});
