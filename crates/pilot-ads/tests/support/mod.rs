//! Shared by the ADS tests: the server, the meshes they run, the proxies'
//! node ids and feedback, real Envoy. The ADS client itself is
//! `pilot_test_support::ads`.

#![allow(dead_code, unused_imports)]

pub mod bookinfo;
pub mod envoy;
pub mod mesh;
pub mod proxies;
pub mod scoped;
pub mod server;
