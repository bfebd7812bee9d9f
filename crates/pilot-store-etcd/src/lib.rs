//! The etcd v3 backend for pilot.
//!
//! - [`EtcdConfigStore`]: configuration objects as etcd keys, with
//!   transactions for optimistic concurrency and watches that resume after a
//!   revision (or report compaction so the Controller relists).
//! - [`EtcdServiceRegistry`]: a [`ServiceDiscovery`](pilot_model::ServiceDiscovery)
//!   for platforms without Kubernetes: instances register with a lease and
//!   keep it alive, so a crashed instance disappears when its lease expires.
//!
//! ## Key layout
//!
//! ```text
//! <prefix>/<group>/<kind>/<namespace>/<name>   the object's JSON document
//!                                              (prefix default /pilot/config)
//! <prefix>/services/<hostname>                 a Service (JSON)
//! <prefix>/instances/<hostname>/<ip>:<port>    an instance (JSON), under a lease
//! <prefix>/<group>/<kind>/<ns>/<name>/status   the object's distribution
//!                                              status, under the writer's lease
//! <prefix>/_replicas/<replica>                 a replica's record (JSON),
//!                                              under the replica's lease
//! <prefix>/_election/status-writer             the replica writing status
//! ```
//!
//! See [`EtcdMembership`] for the replicas' keys.
//!
//! The resource version of an object is its key's `mod_revision`; the value
//! is the document `pilotctl` reads, without the resource version:
//!
//! ```text
//! $ etcdctl get --prefix /pilot/config/config.istio.io/RouteRule/default/
//! /pilot/config/config.istio.io/RouteRule/default/reviews-default
//! {"apiVersion":"config.istio.io/v1alpha2","kind":"RouteRule","metadata":{...},"spec":{...}}
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

mod codec;
mod error;
mod keyspace;
mod membership;
mod options;
mod registered_workloads;
mod registry;
mod status_lease;
mod store;
mod watch;

pub use error::{Endpoints, EtcdError};
pub use membership::{EtcdMembership, INLINE_RECORD_BYTES, MAX_RECORD_BYTES, PAGE_BYTES};
pub use options::EtcdOptions;
pub use registered_workloads::WorkloadRegistration;
pub use registry::{EtcdServiceRegistry, InstanceRegistration, Registration};
pub use status_lease::STATUS_LEASE_TTL;
pub use store::EtcdConfigStore;
