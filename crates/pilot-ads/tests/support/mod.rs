//! Shared by the ADS tests that drive a real Envoy.

#![allow(dead_code, unused_imports)]

pub mod ads_client;
pub mod envoy;
