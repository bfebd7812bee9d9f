//! The etcd service registry passes the registry conformance suite against
//! a real etcd: the registry reads through a TCP proxy, and a cut of that
//! proxy is the gap (its watch breaks; it relists when the proxy is back).
//! The suite's writes go straight to etcd with a client of their own.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use etcd_client::{Client, GetOptions};
use pilot_model::ServiceDiscovery;
use pilot_store::testing::{RegistrySource, SourceService};
use pilot_store_etcd::{EtcdOptions, EtcdServiceRegistry, InstanceRegistration};
use pilot_test_support::EtcdServer;
use support::Proxy;

const PREFIX: &str = "/registry-conformance";

struct EtcdSource {
    // Dropped last: the registry and proxy go first.
    registry: Option<EtcdServiceRegistry>,
    proxy: Proxy,
    client: Client,
    _server: EtcdServer,
}

impl EtcdSource {
    async fn start() -> EtcdSource {
        let server = EtcdServer::start().expect("a real etcd (scripts/install-deps installs it)");
        let client = EtcdOptions::new([server.endpoint()]).connect().await.unwrap();
        let proxy = Proxy::start(server.endpoint().trim_start_matches("http://").to_string()).await;
        EtcdSource {
            registry: None,
            proxy,
            client,
            _server: server,
        }
    }
}

/// The keys and values `services` are stored as.
fn keys(services: &[SourceService]) -> BTreeMap<String, Vec<u8>> {
    let mut keys = BTreeMap::new();
    for source in services {
        keys.insert(
            format!("{PREFIX}/services/{}", source.hostname),
            serde_json::to_vec(&source.service()).unwrap(),
        );
        for instance in &source.instances {
            for port in &source.ports {
                let registration = InstanceRegistration {
                    hostname: source.hostname.clone(),
                    address: instance.address,
                    port: port.port,
                    port_name: port.name.clone(),
                    labels: instance.labels.clone(),
                    availability_zone: None,
                    service_account: None,
                    workload: None,
                };
                keys.insert(
                    format!(
                        "{PREFIX}/instances/{}/{}",
                        source.hostname,
                        std::net::SocketAddr::new(instance.address, port.port)
                    ),
                    serde_json::to_vec(&registration).unwrap(),
                );
            }
        }
    }
    keys
}

#[async_trait::async_trait]
impl RegistrySource for EtcdSource {
    async fn write(&mut self, services: &[SourceService]) {
        let wanted = keys(services);
        let prefix = format!("{PREFIX}/");
        let present = self
            .client
            .get(prefix.as_str(), Some(GetOptions::new().with_prefix()))
            .await
            .unwrap();
        let mut present: BTreeMap<String, Vec<u8>> = present
            .kvs()
            .iter()
            .map(|kv| (kv.key_str().unwrap().to_string(), kv.value().to_vec()))
            .collect();
        // Instances go before their service, and come after it.
        let mut gone: Vec<String> = present
            .keys()
            .filter(|k| !wanted.contains_key(*k))
            .cloned()
            .collect();
        gone.sort_by_key(|k| !k.contains("/instances/"));
        for key in gone {
            self.client.delete(key.as_str(), None).await.unwrap();
            present.remove(&key);
        }
        let mut changed: Vec<(&String, &Vec<u8>)> = wanted
            .iter()
            .filter(|(k, v)| present.get(*k) != Some(*v))
            .collect();
        changed.sort_by_key(|(k, _)| k.contains("/instances/"));
        for (key, value) in changed {
            self.client.put(key.as_str(), value.clone(), None).await.unwrap();
        }
    }

    async fn registry(&mut self) -> Arc<dyn ServiceDiscovery> {
        if self.registry.is_none() {
            let options = EtcdOptions::new([self.proxy.endpoint()]).with_prefix(PREFIX);
            self.registry = Some(EtcdServiceRegistry::connect(&options).await.unwrap());
        }
        Arc::new(self.registry.clone().expect("connected above"))
    }

    async fn disconnect(&mut self) -> bool {
        self.proxy.cut();
        true
    }

    async fn reconnect(&mut self) {
        // The gap's history is compacted away too: the registry cannot
        // resume its watch, only list again.
        let revision = self
            .client
            .get("/", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
        self.client.compact(revision, None).await.unwrap();
        self.proxy.restore();
    }
}

pilot_store::registry_conformance_suite!(|| async {
    Box::new(EtcdSource::start().await) as Box<dyn RegistrySource>
});
