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
//!
//! Against the cluster of the current kubeconfig (tests run the same code
//! on `pilot-kube-fake`, an in-process fake of the API server, whose
//! `FakeApiServer::client()` stands in for `kube::Client::try_default()`;
//! the test `the_crate_example_runs_on_the_fake` in `tests/k8s_store.rs`
//! is this example):
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use pilot_model::{Config, ConfigStore};
//! use pilot_api::istio;
//! use pilot_store_k8s::{KubeConfigStore, install_crds};
//!
//! let client = kube::Client::try_default().await?;
//! let registry = istio::registry();
//! install_crds(client.clone(), &registry).await?;
//! let store = KubeConfigStore::new(client, registry);
//!
//! let rule: istio::RouteRule = serde_json::from_value(serde_json::json!({
//!     "destination": {"name": "reviews"},
//!     "route": [{"labels": {"version": "v2"}}],
//! }))?;
//! let stored = store.create(Config::new("default", "reviews-v2", rule).to_dyn()?).await?;
//! assert!(stored.meta.resource_version.is_some());
//! assert_eq!(store.list("RouteRule", Some("default")).await?.len(), 1);
//! # Ok(())
//! # }
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
#![cfg_attr(docsrs, feature(doc_cfg))]

mod convert;
mod crd;
mod credentials;
mod error;
mod membership;
mod registry;
mod schema;
mod store;
mod watch;

pub use crd::{ESTABLISH_TIMEOUT, FIELD_MANAGER, crd, crds, crds_defined_elsewhere, install_crds};
pub use credentials::{KubeCredentials, TLS_SECRET_TYPE};
pub use error::KubeError;
pub use membership::{
    KubeMembership, MAX_RECORD_BYTES, RECORD_BYTES_PER_PROXY, RECORD_KEY, ROLE_LABEL, ROLE_REPLICA,
    WRITER_LEASE, object_name,
};
pub use registry::{DiscoveryOptions, KubeServiceDiscovery, hostname, port_protocol};
pub use store::KubeConfigStore;
