//! [`EtcdServiceRegistry`]: services and lease-held instances in etcd.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, PutOptions, WatchOptions};
use pilot_model::{Labels, RegistryAdapter, Service, StoreError};
use pilot_store::{Backoff, DesiredService, DesiredState, FollowedRegistry, RegistryWriter};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::codec::prefix_end;
use crate::error::unavailable_etcd;
use crate::registered_workloads::Workloads;
use crate::{EtcdOptions, WorkloadRegistration};

/// What an instance registers: where it listens, for which service port,
/// and its labels (`version`), zone and identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstanceRegistration {
    /// The service's hostname.
    pub hostname: String,
    /// The instance's IP.
    pub address: IpAddr,
    /// The port on that IP.
    pub port: u16,
    /// The name of the service port it serves.
    pub port_name: String,
    /// Labels such as `version=v2`.
    #[serde(default)]
    pub labels: Labels,
    /// Availability zone, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability_zone: Option<String>,
    /// Service account, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// The workload it is part of, if its registrar names one: its
    /// instances then carry one shared [`Workload`](pilot_model::Workload)
    /// (`registered_workloads.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadRegistration>,
}

/// A [`ServiceDiscovery`](pilot_model::ServiceDiscovery) kept in etcd, for platforms without Kubernetes.
///
/// Services are plain keys (`<prefix>/services/<hostname>`); instances are
/// keys under a lease (`<prefix>/instances/<hostname>/<ip>:<port>`) that the
/// registering process keeps alive, so an instance whose process dies
/// disappears when its lease expires. Every process that opens the registry
/// follows the prefix with a watch into a [`FollowedRegistry`], which
/// serves the synchronous reads, the change stream and the snapshots (the
/// registry is a [`ServiceDiscovery`](pilot_model::ServiceDiscovery) through [`RegistryAdapter`]). It has
/// synced once the cache holds what etcd held at some point after the
/// registry was opened.
#[derive(Clone)]
pub struct EtcdServiceRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    prefix: String,
    followed: FollowedRegistry,
}

/// An instance's registration; keeps its lease alive until dropped or
/// deregistered.
pub struct Registration {
    client: Client,
    lease: Arc<Mutex<i64>>,
    keeper: Option<JoinHandle<()>>,
}

impl EtcdServiceRegistry {
    /// Connects and starts following `<options.prefix>/services/` and
    /// `<options.prefix>/instances/`.
    pub async fn connect(options: &EtcdOptions) -> Result<Self, StoreError> {
        let client = options.connect().await?;
        let prefix = options.prefix.trim_end_matches('/').to_string();
        let followed = FollowedRegistry::spawn({
            let (client, prefix) = (client.clone(), prefix.clone());
            move |writer| follow(client, prefix, writer)
        });
        Ok(EtcdServiceRegistry {
            inner: Arc::new(Inner {
                client,
                prefix,
                followed,
            }),
        })
    }

    /// Adds or replaces a service.
    pub async fn register_service(&self, service: &Service) -> Result<(), StoreError> {
        let body = serde_json::to_vec(service).map_err(StoreError::unavailable)?;
        let mut client = self.inner.client.clone();
        client
            .put(self.service_key(&service.hostname), body, None)
            .await
            .map_err(unavailable_etcd)?;
        Ok(())
    }

    /// Removes a service (its instances stay registered, and reappear if the
    /// service comes back).
    pub async fn deregister_service(&self, hostname: &str) -> Result<(), StoreError> {
        let mut client = self.inner.client.clone();
        client
            .delete(self.service_key(hostname), None)
            .await
            .map_err(unavailable_etcd)?;
        Ok(())
    }

    /// Registers an instance under a lease of `ttl` and keeps the lease
    /// alive from a background task until the [`Registration`] is dropped or
    /// deregistered. If the lease is lost (etcd unreachable for longer than
    /// `ttl`), the keeper registers the instance again under a new lease.
    pub async fn register_instance(
        &self,
        instance: InstanceRegistration,
        ttl: Duration,
    ) -> Result<Registration, StoreError> {
        let key = format!(
            "{}/instances/{}/{}",
            self.inner.prefix,
            instance.hostname,
            std::net::SocketAddr::new(instance.address, instance.port)
        );
        let body = serde_json::to_vec(&instance).map_err(StoreError::unavailable)?;
        let ttl_secs = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let client = self.inner.client.clone();
        let lease_id = put_with_lease(client.clone(), &key, &body, ttl_secs).await?;
        let lease = Arc::new(Mutex::new(lease_id));
        let keeper = tokio::spawn(keep_alive(
            client.clone(),
            key,
            body,
            ttl_secs,
            Arc::clone(&lease),
        ));
        Ok(Registration {
            client,
            lease,
            keeper: Some(keeper),
        })
    }

    fn service_key(&self, hostname: &str) -> String {
        format!("{}/services/{hostname}", self.inner.prefix)
    }
}

impl Registration {
    /// The lease currently holding the instance.
    pub fn lease_id(&self) -> i64 {
        *self.lease.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops renewing the lease, as a crashed process would: the instance
    /// disappears when the lease's TTL runs out.
    pub fn stop_keepalive(&mut self) {
        if let Some(keeper) = self.keeper.take() {
            keeper.abort();
        }
    }

    /// Removes the instance now, by revoking its lease.
    pub async fn deregister(mut self) -> Result<(), StoreError> {
        self.stop_keepalive();
        let lease = self.lease_id();
        self.client.lease_revoke(lease).await.map_err(unavailable_etcd)?;
        Ok(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop_keepalive();
    }
}

async fn put_with_lease(mut client: Client, key: &str, body: &[u8], ttl: i64) -> Result<i64, StoreError> {
    let lease = client
        .lease_grant(ttl, None)
        .await
        .map_err(unavailable_etcd)?
        .id();
    client
        .put(key, body.to_vec(), Some(PutOptions::new().with_lease(lease)))
        .await
        .map_err(unavailable_etcd)?;
    Ok(lease)
}

/// Renews the lease every third of its TTL; re-registers under a new lease
/// if the old one expired.
async fn keep_alive(mut client: Client, key: String, body: Vec<u8>, ttl: i64, lease: Arc<Mutex<i64>>) {
    let period =
        Duration::from_millis(u64::try_from(ttl).unwrap_or(1) * 1000 / 3).max(Duration::from_millis(100));
    loop {
        tokio::time::sleep(period).await;
        let id = *lease.lock().unwrap_or_else(|p| p.into_inner());
        let alive = match client.lease_keep_alive(id).await {
            Ok((mut keeper, mut responses)) => match keeper.keep_alive().await {
                Ok(()) => match responses.message().await {
                    Ok(Some(response)) => Some(response.ttl() > 0),
                    _ => None,
                },
                Err(_) => None,
            },
            Err(_) => None,
        };
        match alive {
            Some(true) => {}
            Some(false) => match put_with_lease(client.clone(), &key, &body, ttl).await {
                Ok(new) => {
                    tracing::info!(key, "instance lease had expired; registered again");
                    *lease.lock().unwrap_or_else(|p| p.into_inner()) = new;
                }
                Err(error) => tracing::warn!(key, %error, "could not register the instance again; retrying"),
            },
            None => tracing::warn!(key, "could not renew the instance lease; retrying"),
        }
    }
}

/// What etcd holds under the registry's prefix.
#[derive(Default)]
struct Desired {
    services: BTreeMap<String, Service>,
    /// By etcd key.
    instances: BTreeMap<String, InstanceRegistration>,
    /// The workloads the instances name.
    workloads: Workloads,
}

impl Desired {
    fn apply(&mut self, prefix: &str, key: &[u8], value: Option<&[u8]>) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        if let Some(hostname) = key.strip_prefix(&format!("{prefix}/services/")) {
            match value.map(serde_json::from_slice::<Service>) {
                Some(Ok(service)) => {
                    self.services.insert(hostname.to_string(), service);
                }
                Some(Err(error)) => {
                    tracing::warn!(key, %error, "skipping a bad service in etcd");
                    return None;
                }
                None => {
                    self.services.remove(hostname);
                }
            }
            return Some(hostname.to_string());
        }
        if key.starts_with(&format!("{prefix}/instances/")) {
            let hostname = match value.map(serde_json::from_slice::<InstanceRegistration>) {
                Some(Ok(instance)) => {
                    let hostname = instance.hostname.clone();
                    self.workloads.touch(&instance);
                    if let Some(old) = self.instances.insert(key.to_string(), instance) {
                        self.workloads.touch(&old);
                    }
                    hostname
                }
                Some(Err(error)) => {
                    tracing::warn!(key, %error, "skipping a bad instance in etcd");
                    return None;
                }
                None => {
                    let old = self.instances.remove(key)?;
                    self.workloads.touch(&old);
                    old.hostname
                }
            };
            return Some(hostname);
        }
        None
    }

    /// Rebuilds the workloads whose registrations changed; returns the
    /// hostnames whose instances carry one of them.
    fn refresh_workloads(&mut self) -> BTreeSet<String> {
        self.workloads.refresh(&self.instances)
    }

    /// What the registry should hold: every service with the instances
    /// whose service port it has.
    fn state(&self) -> DesiredState {
        DesiredState {
            services: self
                .services
                .keys()
                .filter_map(|host| Some((host.clone(), self.service(host)?)))
                .collect(),
            ..DesiredState::default()
        }
    }

    /// What the registry should hold for `hostname` (`None`: no service).
    fn service(&self, hostname: &str) -> Option<DesiredService> {
        let mut service = self.services.get(hostname)?.clone();
        // The key names the service, whatever its body says.
        service.hostname = hostname.to_string();
        let mut desired = DesiredService::new(service);
        for i in self.instances.values().filter(|i| i.hostname == hostname) {
            // An instance appears only while its service has its port.
            if let Ok(instance) = desired.add_instance(i.address, i.port, &i.port_name, i.labels.clone()) {
                instance.availability_zone = i.availability_zone.clone();
                instance.service_account = i.service_account.clone();
                instance.workload = self.workloads.of(i);
            }
        }
        Some(desired)
    }
}

/// Lists the prefix and applies it whole, then watches it and applies the
/// hostnames each response touched; relists after any break (a compacted
/// watch included). Runs until the registry is dropped (its task aborted).
async fn follow(mut client: Client, prefix: String, writer: RegistryWriter) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let listed_prefix = format!("{prefix}/");
    loop {
        let listed = client
            .get(
                listed_prefix.clone(),
                Some(GetOptions::new().with_range(prefix_end(&listed_prefix))),
            )
            .await;
        let response = match listed {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(%error, "service registry list failed; retrying");
                backoff.wait().await;
                continue;
            }
        };
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        let mut desired = Desired::default();
        for kv in response.kvs() {
            desired.apply(&prefix, kv.key(), Some(kv.value()));
        }
        desired.refresh_workloads();
        writer.apply(desired.state());
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let mut stream = match client.watch(listed_prefix.clone(), Some(options)).await {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%error, "service registry watch failed; relisting");
                backoff.wait().await;
                continue;
            }
        };
        backoff.reset();
        while let Ok(Some(response)) = stream.message().await {
            if response.canceled() {
                break;
            }
            let mut touched = BTreeSet::new();
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let value = (event.event_type() == EventType::Put).then(|| kv.value());
                touched.extend(desired.apply(&prefix, kv.key(), value));
            }
            // A workload's change reaches every service it backs.
            touched.extend(desired.refresh_workloads());
            for host in touched {
                writer.apply_service(&host, desired.service(&host));
            }
        }
        backoff.wait().await;
    }
}

// Every read (and sync, and snapshot) is the followed registry's.
impl RegistryAdapter for EtcdServiceRegistry {
    type Registry = FollowedRegistry;

    fn registry(&self) -> &FollowedRegistry {
        &self.inner.followed
    }
}
