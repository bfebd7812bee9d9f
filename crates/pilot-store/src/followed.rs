//! [`FollowedRegistry`]: a service registry that follows a source, in the
//! shape of kube-runtime's reflector: a [`RegistryWriter`] owned by the
//! task that reads the source, and a clone-cheap reader side that serves
//! [`ServiceDiscovery`] from a [`ServiceCache`], with a `synced` signal.
//!
//! A registry built on it keeps only its "source -> desired state"
//! function; listing, diffing, events, snapshots and sync are here.

use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use pilot_model::{Labels, RegistrySnapshot, Service, ServiceDiscovery, ServiceEvent, ServiceInstance};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::{Applied, DesiredService, DesiredState, ServiceCache};

/// The reader side of a followed registry: [`ServiceDiscovery`] over the
/// cache its [`RegistryWriter`] fills, `has_synced`/`wait_synced` without
/// polling, and the cache's immutable snapshots. Clones share everything;
/// when the last clone is dropped the follower task (if it was started
/// with [`spawn`](FollowedRegistry::spawn)) is aborted.
///
/// `has_synced` and `wait_synced` are [`ServiceDiscovery`]'s only (no
/// inherent methods of the same names to shadow them): `wait_synced`'s
/// future is `'static`, to await here or hand to a task. A type that
/// holds a `FollowedRegistry` implements [`pilot_model::RegistryAdapter`]
/// and writes none of them.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use pilot_model::{Labels, Port, Protocol, Service, ServiceDiscovery};
/// use pilot_store::{DesiredState, FollowedRegistry};
///
/// // A source that knows one service with one instance.
/// let registry = FollowedRegistry::spawn(|writer| async move {
///     let mut desired = DesiredState::new();
///     let echo = desired.insert(Service::new("echo.local", vec![Port::new("http", 80, Protocol::Http)]));
///     echo.add_instance("10.0.0.1".parse().unwrap(), 8080, "http", Labels::new()).unwrap();
///     writer.apply(desired); // diffed into the cache; marks the registry synced
/// });
/// registry.wait_synced().await;
/// assert_eq!(registry.instances("echo.local", &[], &[]).len(), 1);
/// # });
/// ```
#[derive(Clone)]
pub struct FollowedRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    cache: ServiceCache,
    synced: watch::Receiver<bool>,
    follower: Mutex<Option<AbortHandle>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.follower.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

/// The writer side of a followed registry, held by whatever reads the
/// source: it applies desired states to the cache as minimal diffs and
/// says when the registry has synced. Clones write to the same registry.
#[derive(Clone)]
pub struct RegistryWriter {
    cache: ServiceCache,
    synced: watch::Sender<bool>,
}

impl FollowedRegistry {
    /// An empty, unsynced registry and its writer.
    pub fn new() -> (FollowedRegistry, RegistryWriter) {
        let (synced, receiver) = watch::channel(false);
        let cache = ServiceCache::new();
        let registry = FollowedRegistry {
            inner: Arc::new(Inner {
                cache: cache.clone(),
                synced: receiver,
                follower: Mutex::new(None),
            }),
        };
        (registry, RegistryWriter { cache, synced })
    }

    /// A registry whose writer is handed to `follow`, spawned as a task
    /// that lives as long as the registry (aborted when the last clone is
    /// dropped). Must be called inside a Tokio runtime.
    pub fn spawn<F, Fut>(follow: F) -> FollowedRegistry
    where
        F: FnOnce(RegistryWriter) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (registry, writer) = FollowedRegistry::new();
        let task = tokio::spawn(follow(writer));
        *registry.inner.follower.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        registry
    }

    /// The cache the registry serves from.
    pub fn cache(&self) -> &ServiceCache {
        &self.inner.cache
    }
}

async fn wait(mut synced: watch::Receiver<bool>) {
    // An error means the writer is gone: nothing will ever sync it, and
    // waiting forever is what an unsynced registry asks for.
    let closed = synced.wait_for(|s| *s).await.is_err();
    if closed {
        futures::future::pending::<()>().await;
    }
}

impl RegistryWriter {
    /// Makes the registry hold exactly `desired` ([`ServiceCache::apply`]:
    /// only the differences are emitted), then marks it synced: a complete
    /// state is a complete view of the source.
    pub fn apply(&self, desired: DesiredState) -> Applied {
        let applied = self.cache.apply(desired);
        self.mark_synced();
        applied
    }

    /// Makes the registry's view of one hostname equal `desired`
    /// ([`ServiceCache::apply_service`]); does not mark it synced.
    pub fn apply_service(&self, hostname: &str, desired: Option<DesiredService>) -> Applied {
        self.cache.apply_service(hostname, desired)
    }

    /// Marks the registry synced (once; later calls change nothing).
    pub fn mark_synced(&self) {
        self.synced.send_if_modified(|s| !std::mem::replace(s, true));
    }

    /// The cache being written, to read what it holds.
    pub fn cache(&self) -> &ServiceCache {
        &self.cache
    }
}

impl ServiceDiscovery for FollowedRegistry {
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

    fn workloads(&self) -> Vec<Arc<pilot_model::Workload>> {
        self.inner.cache.workloads()
    }

    /// True once the writer has applied a complete state (or said it
    /// synced).
    fn has_synced(&self) -> bool {
        *self.inner.synced.borrow()
    }

    /// Resolves once [`has_synced`](ServiceDiscovery::has_synced). A
    /// source that cannot be read is retried by its follower, so this
    /// waits until it can; bound it with a timeout where that matters.
    fn wait_synced(&self) -> BoxFuture<'static, ()> {
        wait(self.inner.synced.clone()).boxed()
    }

    fn snapshot(&self) -> Arc<RegistrySnapshot> {
        self.inner.cache.snapshot()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn synced_is_a_signal_and_dropping_the_registry_stops_its_follower() {
        let (stopped_tx, stopped_rx) = tokio::sync::oneshot::channel::<()>();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let registry = FollowedRegistry::spawn(|writer| async move {
            let _stopped = stopped_tx;
            let _ = go_rx.await;
            writer.apply(DesiredState::new());
            futures::future::pending::<()>().await;
        });
        assert!(!registry.has_synced());
        let waiting = registry.wait_synced();
        go_tx.send(()).unwrap();
        waiting.await;
        assert!(registry.has_synced());
        drop(registry);
        // The follower's end drops its sender: the task was aborted.
        assert!(stopped_rx.await.is_err());
    }
}
