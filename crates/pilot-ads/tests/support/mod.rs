//! Shared by the ADS tests: raw clients of either protocol, real Envoy.

#![allow(dead_code, unused_imports)]

pub mod ads_client;
pub mod envoy;
pub mod mesh;
pub mod scoped;
pub mod server;
pub mod sotw;
