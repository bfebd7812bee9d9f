//! What pilot serves Istio's ambient data plane: ztunnel, the node proxy,
//! subscribes over delta xDS to `istio.workload.Address` (every workload
//! and service, [`workloads`]) and `istio.security.Authorization` (the L4
//! authorization policies, [`authorization`]). `proto/` defines the
//! messages from Istio's published workload API (field names and numbers
//! are the interface); this module builds them from the registry's
//! snapshot and the compiled routing model, and knows no stream.

pub mod authorization;
pub mod proto;
pub mod workloads;

pub use workloads::{AmbientOptions, addresses};
