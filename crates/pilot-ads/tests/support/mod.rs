//! Shared by the ADS tests: the server, the meshes they run, the proxies'
//! node ids and feedback, real Envoy. The ADS client itself is
//! `pilot_test_support::ads`.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses its own part of the shared support module"
)]

pub(crate) mod bookinfo;
pub(crate) mod envoy;
pub(crate) mod gamma;
pub(crate) mod grpc;
pub(crate) mod mesh;
pub(crate) mod proxies;
pub(crate) mod scoped;
pub(crate) mod server;
pub(crate) mod traffic;
