//! `pilot-discovery`: one process that serves the REST configuration API
//! and the ADS (xDS) server over a chosen configuration store and service
//! registries. This crate is the composition root: it wires the store,
//! the Controller, the ADS server (pilot-ads), the status loop
//! (pilot-distribution) and the HTTP surfaces (pilot-apiserver's REST
//! API and its own pages) together.
//!
//! - [`Args`]: flags and the `--config` file; [`run`] starts the server
//!   from them, in the named steps of `start.rs`, and stops it.
//! - `backend/`: the store (memory, memory with `--data-dir`, etcd,
//!   Kubernetes) and the registries (a `--services` file
//!   ([`services_file`]), etcd, Kubernetes).
//! - `router.rs`: every route: the REST API (`pilot_apiserver`, configured
//!   from the flags) beside this server's pages, whose OpenAPI description
//!   is `openapi.rs`; `debug/`: `/debug/proxy-status`,
//!   `/debug/registryz`, `/debug/quarantine`; `health.rs`: `/healthz` and
//!   `/readyz`; `metrics.rs`: `/metrics`; `proxy_events.rs`: the agents'
//!   reports (`POST /v1/proxy-events`); `ui/`: the read-only console at
//!   `/ui` (off with `--no-ui`).
//! - `auth/`: bearer tokens for REST and ADS, ADS TLS and client
//!   certificates.
//! - `ca/`: the certificate authority (`--ca-dir`) and Istio's
//!   certificate service on the ADS port.
//! - `serve/`: the REST listener (TLS, connection limits, body deadline,
//!   probes beyond the cap, caps from the open-files limit, drain);
//!   `inject_webhook.rs`: the sidecar injection webhook.
//!
//! Writes go through the cached `Controller` (they return once the cache
//! that feeds xDS has them); lists and watches read the backend itself, so
//! a list's `resourceVersion` is a revision a watch can resume after.

// A `pub` item is part of this face; everything else says `pub(crate)`.
#![warn(unreachable_pub)]

mod args;
mod auth;
mod backend;
mod ca;
mod debug;
mod error;
mod findings;
mod health;
mod inject_webhook;
mod low_priority;
mod mesh_config;
mod metrics;
mod openapi;
mod proxy_events;
mod router;
mod serve;
mod shutdown;
mod start;
mod state;
mod ui;
mod validate_webhook;
mod validation_config;

pub use args::{Args, InjectFailurePolicy, RegistryKind, StoreKind};
pub use backend::services_file;
pub use error::StartError;
pub use start::{Bound, run};
