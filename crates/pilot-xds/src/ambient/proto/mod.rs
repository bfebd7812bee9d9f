//! The messages of Istio's published workload API that ztunnel consumes,
//! defined here with prost's derives (field names and numbers are the
//! interface).

pub mod security;
