//! pilot: a service-mesh control plane in the lineage of Istio Pilot, as a
//! library with pluggable backends.
//!
//! This is the workspace's root package (not published): it holds the
//! workspace-wide examples, tests and benches. An embedder depends on the
//! published crates it needs (`docs/guide/embedding.md`), as the examples
//! do. For the workspace's own use it re-exports them:
//! - [`model`] (`pilot-model`): configuration objects, kinds and validation,
//!   the `ConfigStore`/`ConfigWatch` contracts, the service model and the
//!   `ServiceDiscovery` contract;
//! - [`api`] (`pilot-api`): the API kinds and their validation (Istio's
//!   networking and security v1, the v1alpha2 routing kinds) and
//!   `default_registry()`;
//! - [`routing`] (`pilot-routing`): the routing model the kinds compile
//!   into, and conversion between API families;
//! - [`store`] (`pilot-store`): the cached `Controller`, typed stores, the
//!   building blocks for backends, and (feature `testing`) the conformance
//!   suite;
//! - [`memory`] (`pilot-store-memory`): the in-memory store and service
//!   registry;
//! - `etcd` (`pilot-store-etcd`, feature `etcd`): the etcd store and
//!   lease-based service registry;
//! - `k8s` (`pilot-store-k8s`, feature `k8s`): configuration as Kubernetes
//!   custom resources, and Kubernetes as a service registry;
//! - `xds` (`pilot-xds`, feature `xds`): Envoy configuration generated from
//!   services and routing rules;
//! - `ads` (`pilot-ads`, feature `ads`): the Aggregated Discovery Service
//!   that pushes it to connected proxies and records their ACKs and NACKs.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use pilot::memory::MemoryConfigStore;
//! use pilot::model::{ConfigMeta, ConfigStore, DynConfig, KindRegistry, KindSchema};
//! use pilot::store::Controller;
//!
//! let registry = KindRegistry::new();
//! registry.register_schema(KindSchema::new("Note", "notes", "example.com", "v1", |_, _| {})).unwrap();
//! let controller = Controller::new(Arc::new(MemoryConfigStore::new(registry)));
//! controller.run();
//! controller.wait_synced().await;
//! let note = DynConfig { meta: ConfigMeta::new("Note", "default", "hello"), spec: serde_json::json!({}) };
//! controller.create(note).await.unwrap();
//! assert_eq!(controller.list_cached("Note", Some("default")).unwrap().len(), 1);
//! # });
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "ads")]
pub use pilot_ads as ads;
pub use pilot_api as api;
pub use pilot_model as model;
pub use pilot_routing as routing;
pub use pilot_store as store;
#[cfg(feature = "etcd")]
pub use pilot_store_etcd as etcd;
#[cfg(feature = "k8s")]
pub use pilot_store_k8s as k8s;
pub use pilot_store_memory as memory;
#[cfg(feature = "xds")]
pub use pilot_xds as xds;
