//! The messages ztunnel consumes, written as prost messages from Istio's
//! published protocol definitions (the `istio.workload` and
//! `istio.security` packages): field names, numbers and enum values are
//! the wire interface. Fields pilot never sets (extensions, capacity) are
//! left out: a decoder keeps unknown fields, and an encoder that omits
//! them says "unset".

pub mod security;
pub mod workload;
