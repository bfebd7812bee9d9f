//! [`EtcdServiceRegistry`]: services and lease-held instances in etcd.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, PutOptions, WatchOptions};
use futures::stream::BoxStream;
use pilot_model::{
    Labels, NetworkEndpoint, Service, ServiceDiscovery, ServiceEvent, ServiceInstance, StoreError,
};
use pilot_store::{Backoff, ServiceCache};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::EtcdOptions;
use crate::codec::prefix_end;
use crate::store::unavailable;

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
}

/// A [`ServiceDiscovery`] kept in etcd, for platforms without Kubernetes.
///
/// Services are plain keys (`<prefix>/services/<hostname>`); instances are
/// keys under a lease (`<prefix>/instances/<hostname>/<ip>:<port>`) that the
/// registering process keeps alive, so an instance whose process dies
/// disappears when its lease expires. Every process that opens the registry
/// follows the prefix with a watch into a local cache, which serves the
/// synchronous reads and the change stream.
#[derive(Clone)]
pub struct EtcdServiceRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    prefix: String,
    cache: ServiceCache,
    synced: watch::Sender<bool>,
    follower: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.follower.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
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
        let registry = EtcdServiceRegistry {
            inner: Arc::new(Inner {
                client: client.clone(),
                prefix: options.prefix.trim_end_matches('/').to_string(),
                cache: ServiceCache::new(),
                synced: watch::channel(false).0,
                follower: Mutex::new(None),
            }),
        };
        let follower = tokio::spawn(follow(Arc::downgrade(&registry.inner), client));
        *registry.inner.follower.lock().unwrap_or_else(|p| p.into_inner()) = Some(follower);
        Ok(registry)
    }

    /// Waits until the cache holds what etcd held at some point after this
    /// registry was opened.
    pub async fn wait_synced(&self) {
        let mut synced = self.inner.synced.subscribe();
        let _ = synced.wait_for(|s| *s).await;
    }

    /// True once the first list has been read.
    pub fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Adds or replaces a service.
    pub async fn register_service(&self, service: &Service) -> Result<(), StoreError> {
        let body = serde_json::to_vec(service).map_err(StoreError::unavailable)?;
        let mut client = self.inner.client.clone();
        client
            .put(self.service_key(&service.hostname), body, None)
            .await
            .map_err(unavailable)?;
        Ok(())
    }

    /// Removes a service (its instances stay registered, and reappear if the
    /// service comes back).
    pub async fn deregister_service(&self, hostname: &str) -> Result<(), StoreError> {
        let mut client = self.inner.client.clone();
        client
            .delete(self.service_key(hostname), None)
            .await
            .map_err(unavailable)?;
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
        self.client.lease_revoke(lease).await.map_err(unavailable)?;
        Ok(())
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop_keepalive();
    }
}

async fn put_with_lease(mut client: Client, key: &str, body: &[u8], ttl: i64) -> Result<i64, StoreError> {
    let lease = client.lease_grant(ttl, None).await.map_err(unavailable)?.id();
    client
        .put(key, body.to_vec(), Some(PutOptions::new().with_lease(lease)))
        .await
        .map_err(unavailable)?;
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
                    self.instances.insert(key.to_string(), instance);
                    hostname
                }
                Some(Err(error)) => {
                    tracing::warn!(key, %error, "skipping a bad instance in etcd");
                    return None;
                }
                None => self.instances.remove(key)?.hostname,
            };
            return Some(hostname);
        }
        None
    }

    /// Makes the cache's view of `hostname` equal what etcd holds.
    fn sync_host(&self, cache: &ServiceCache, hostname: &str) {
        let Some(service) = self.services.get(hostname) else {
            cache.remove_service(hostname);
            return;
        };
        let current = cache.get_service(hostname);
        let service = match current {
            Some(current) if *current == *service => current,
            _ => cache.add_service(service.clone()),
        };
        let wanted: Vec<ServiceInstance> = self
            .instances
            .values()
            .filter(|i| i.hostname == hostname)
            .filter_map(|i| {
                let port = service.port(&i.port_name)?.clone();
                Some(ServiceInstance {
                    endpoint: NetworkEndpoint {
                        address: i.address,
                        port: i.port,
                        service_port: port,
                    },
                    service: Arc::clone(&service),
                    labels: i.labels.clone(),
                    availability_zone: i.availability_zone.clone(),
                    service_account: i.service_account.clone(),
                })
            })
            .collect();
        for existing in cache.instances(hostname, &[], &[]) {
            if !wanted.contains(&existing) {
                cache.remove_instances(hostname, existing.endpoint.address, Some(existing.endpoint.port));
            }
        }
        let present = cache.instances(hostname, &[], &[]);
        for instance in wanted {
            if !present.contains(&instance) {
                // The service and port were checked above.
                let _ = cache.add_instance(instance);
            }
        }
    }
}

/// Lists the prefix, then watches it, relisting on compaction; runs until
/// the registry is dropped.
async fn follow(registry: std::sync::Weak<Inner>, mut client: Client) {
    let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(5));
    let mut desired = Desired::default();
    loop {
        let Some(inner) = registry.upgrade() else { return };
        let prefix = format!("{}/", inner.prefix);
        let listed = client
            .get(
                prefix.clone(),
                Some(GetOptions::new().with_range(prefix_end(&prefix))),
            )
            .await;
        let response = match listed {
            Ok(response) => response,
            Err(error) => {
                tracing::warn!(%error, "service registry list failed; retrying");
                drop(inner);
                backoff.wait().await;
                continue;
            }
        };
        let revision = response.header().map(|h| h.revision()).unwrap_or_default();
        let mut fresh = Desired::default();
        for kv in response.kvs() {
            fresh.apply(&inner.prefix, kv.key(), Some(kv.value()));
        }
        let hosts: BTreeSet<String> = desired
            .services
            .keys()
            .chain(fresh.services.keys())
            .cloned()
            .chain(inner.cache.services().iter().map(|s| s.hostname.clone()))
            .collect();
        desired = fresh;
        for host in &hosts {
            desired.sync_host(&inner.cache, host);
        }
        inner.synced.send_replace(true);
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let watched = client.watch(prefix.clone(), Some(options)).await;
        drop(inner);
        let mut stream = match watched {
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
            let Some(inner) = registry.upgrade() else { return };
            let mut touched = BTreeSet::new();
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let value = (event.event_type() == EventType::Put).then(|| kv.value());
                touched.extend(desired.apply(&inner.prefix, kv.key(), value));
            }
            for host in touched {
                desired.sync_host(&inner.cache, &host);
            }
        }
        backoff.wait().await;
    }
}

impl ServiceDiscovery for EtcdServiceRegistry {
    fn services(&self) -> Vec<Arc<Service>> {
        self.inner.cache.services()
    }

    fn get_service(&self, hostname: &str) -> Option<Arc<Service>> {
        self.inner.cache.get_service(hostname)
    }

    fn instances(&self, hostname: &str, port_names: &[&str], labels: &[Labels]) -> Vec<ServiceInstance> {
        self.inner.cache.instances(hostname, port_names, labels)
    }

    fn host_instances(&self, addresses: &[IpAddr]) -> Vec<ServiceInstance> {
        self.inner.cache.host_instances(addresses)
    }

    fn subscribe(&self) -> BoxStream<'static, ServiceEvent> {
        self.inner.cache.subscribe()
    }

    fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }
}
