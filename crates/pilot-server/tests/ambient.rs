//! Ambient mode, as ztunnel sees pilot-discovery: its delta xDS stream
//! (`ambient/ztunnel.rs`) and the CA's shared mode (`ambient/ca_impersonation.rs`).
//! One test binary for both: each binary of this crate links the whole
//! server.

mod common;

#[path = "ambient/ca_impersonation.rs"]
mod ca_impersonation;
#[path = "ambient/ztunnel.rs"]
mod ztunnel;
