//! The Kubernetes adapter for pilot.
//!
//! - **Configuration as custom resources.** Every registered kind is a
//!   CustomResourceDefinition `<plural>.<group>` ([`crds`], [`install_crds`];
//!   `routerules.config.istio.io`, kind `RouteRule`, namespaced, short name
//!   `rr`), so `kubectl get routerules` shows pilot's configuration.
//!   [`KubeConfigStore`] is a [`ConfigStore`](pilot_model::ConfigStore) and
//!   [`ConfigWatch`](pilot_model::ConfigWatch) on those resources: the
//!   resource version is Kubernetes' `resourceVersion`, 409/404/422 are the
//!   conflict, not-found and invalid errors, and a 410 Gone during a watch
//!   makes the `Controller` list again and emit the deletes it missed.
//! - **Kubernetes as a service registry.** [`KubeServiceDiscovery`] is a
//!   [`ServiceDiscovery`](pilot_model::ServiceDiscovery) over Services,
//!   EndpointSlices, Pods and Nodes: `<name>.<namespace>.svc.<domain>`,
//!   port protocols from `appProtocol` or the port name, instance labels
//!   and service accounts from Pods, zones from Nodes.
//! - **Replicas.** [`KubeMembership`] is a
//!   [`Membership`](pilot_model::Membership): a `coordination.k8s.io/v1`
//!   Lease and a ConfigMap per pilot-discovery replica, and the Lease
//!   `pilot-status-writer` for the status writer's election.
//! - **A fake API server** ([`testing`], feature `testing`) that serves a
//!   real [`kube::Client`] from memory, for tests where no cluster can run.
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use pilot_model::{Config, ConfigStore, istio};
//! use pilot_store_k8s::{KubeConfigStore, install_crds, testing::FakeApiServer};
//!
//! let client = FakeApiServer::new().client(); // or kube::Client::try_default().await?
//! let registry = istio::registry();
//! install_crds(client.clone(), &registry).await.unwrap();
//! let store = KubeConfigStore::new(client, registry);
//!
//! let rule: istio::RouteRule = serde_json::from_value(serde_json::json!({
//!     "destination": {"name": "reviews"},
//!     "route": [{"labels": {"version": "v2"}}],
//! })).unwrap();
//! let stored = store.create(Config::new("default", "reviews-v2", rule).to_dyn().unwrap()).await.unwrap();
//! assert!(stored.meta.resource_version.is_some());
//! assert_eq!(store.list("RouteRule", Some("default")).await.unwrap().len(), 1);
//! # });
//! ```
//!
//! ## Resource versions and revisions
//!
//! pilot's watch contract orders changes by a numeric revision. Kubernetes
//! documents `resourceVersion` as opaque, but every etcd-backed API server
//! uses etcd's revision, a decimal number growing with every write; this
//! crate relies on that and fails with a clear error if a version does not
//! parse. `current_revision` is the highest version this store handle has
//! written (see [`KubeConfigStore`] for why).

mod convert;
mod crd;
mod error;
mod membership;
mod registry;
mod schema;
mod store;
mod watch;

#[cfg(feature = "testing")]
pub mod testing;

pub use crd::{ESTABLISH_TIMEOUT, FIELD_MANAGER, crd, crds, install_crds};
pub use error::KubeError;
pub use membership::{
    KubeMembership, MAX_RECORD_BYTES, RECORD_BYTES_PER_PROXY, RECORD_KEY, ROLE_LABEL, ROLE_REPLICA,
    WRITER_LEASE, object_name,
};
pub use registry::{DiscoveryOptions, KubeServiceDiscovery, hostname, port_protocol};
pub use store::KubeConfigStore;
