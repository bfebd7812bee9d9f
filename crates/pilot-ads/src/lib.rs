//! The Aggregated Discovery Service: pushes the configuration pilot-xds
//! generates to connected Envoys and proxyless gRPC clients as the routing
//! configuration and the registry change, and records what each proxy
//! ACKed or NACKed.
//!
//! - `push/`: one push pipeline per server. Controller and registry events
//!   are debounced, then one shared snapshot is published, never before the
//!   Controller and the registry have synced; each class of proxy is
//!   generated once per push and encoded once for every stream.
//! - `stream/`: one task per ADS stream, state of the world or
//!   incremental, over hyper's HTTP/2 connections (the h2 crate) with
//!   pilot's admission on top ([`ServeOptions`]: TLS by tokio-rustls,
//!   keepalives, every h2 limit, connection cap with eviction of
//!   unauthenticated connections, handshake and write deadlines, a
//!   request budget per connection, maximum age;
//!   [`Authenticate`]: who may claim which node ids, from the request's
//!   headers and its connection's [`Peer`], asynchronously and within the
//!   handshake deadline). On the same streams, the TLS credentials of a
//!   [`CredentialSource`](pilot_model::CredentialSource) as SDS `Secret`s
//!   ([`XdsServer::with_credentials`]), to the proxies that may read them.
//! - `feedback/`: each connected proxy's ACKs and NACKs ([`ProxyStatus`]),
//!   the store revisions each push carried ([`PushRevisions`]), why streams
//!   ended ([`StreamEnds`]) or were refused ([`RefusedStreams`]).
//!
//! ```
//! # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use pilot_ads::{XdsOptions, XdsServer};
//! use pilot_model::{Port, Protocol, Service};
//! use pilot_api::istio;
//! use pilot_store::Controller;
//! use pilot_store_memory::{MemoryConfigStore, MemoryServiceRegistry};
//!
//! let registry = Arc::new(MemoryServiceRegistry::new());
//! registry.add_service(Service::new("reviews.default.svc.cluster.local", vec![Port::new("http", 9080, Protocol::Http)]));
//! let controller = Arc::new(Controller::new(Arc::new(MemoryConfigStore::new(istio::registry()))));
//! let server = XdsServer::new(Arc::clone(&controller), registry, XdsOptions::default());
//! controller.run();
//! // The first push, once the Controller and the registry have synced.
//! server.wait_version(1).await;
//! assert!(server.version().is_some());
//! // No proxy is connected yet: serve it with `server.serve(address,
//! // shutdown)` or `server.serve_with(listener, options, shutdown)`.
//! assert!(server.status().is_empty());
//! # });
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod feedback;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod options;
mod push;
mod server;
mod state;
mod stream;
mod xds_type;

pub use feedback::{Audience, Nack, ProxyStatus, PushRevisions, RefusedStreams, StreamEnds, TypeStatus};
pub use options::XdsOptions;
pub use push::{DurationHistogram, PUSH_BUCKETS, PUSHED_KINDS, PushInfo, PushSubscription, PushTimings};
pub use server::XdsServer;
pub use stream::{Authenticate, Authenticating, Caller, NodeScope, Peer, ServeOptions, listen};
pub use xds_type::{TYPES, XdsType, types_of};

/// Runs CPU-bound work (a compilation, a generation, an analysis) without
/// stalling the runtime's other tasks: on a multi-threaded runtime the
/// worker hands its queued tasks (the API's requests, the HTTP/2
/// connections whose keepalive PINGs must be answered within seconds) to
/// another thread first (tokio's `block_in_place`); elsewhere it runs
/// inline. Generating one class of a 1,000-service mesh takes tens to
/// hundreds of milliseconds, compiling 3,000 routes about twenty.
pub fn cpu_bound<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// The tonic this crate is built with: the serving methods return its
/// `transport::Error` and [`ServeOptions::routes`] are its routes (served
/// on the same HTTP/2 connections beside ADS). Use it instead of a tonic of
/// your own so the versions always match.
pub use tonic;

/// The rustls this crate is built with: [`ServeOptions::tls`] is its
/// `ServerConfig`, and [`Peer::certificates`] its certificates.
#[cfg(feature = "tls")]
pub use rustls;

/// The Envoy API types (pilot-xds's `envoy_types`) the resources are made of.
pub use pilot_xds::envoy_types;
