//! The ADS client of the tests and the benches (feature `ads`), in three
//! layers over one transport:
//!
//! - [`GrpcStream`]: one gRPC stream on its own HTTP/2 connection, on
//!   [`h2`]'s frames and HPACK (a client of its own, not the h2 crate's:
//!   see [`h2`]), lean enough for 10,000 in one process;
//!   messages go out and come in as encoded bytes;
//! - [`AdsStream`] ([`SotwStream`], [`DeltaStream`]): the same, typed: the
//!   test writes every request and reads every response whole;
//! - [`Client`]: a proxy's side of a stream of either protocol, scripted
//!   by the test: the names it subscribes to kept per type, each response
//!   answered (ACK or NACK) when the test says, or as Envoy does;
//! - [`proxies`]: emulated Envoys by the thousand in a child process, for
//!   the benches: each subscribes, follows and ACKs on its own, decodes
//!   only what it needs and shares its name lists with the others.
//!
//! Nothing runs in the background: a stream reads from the server (and
//! answers its PINGs) only while its owner waits for a response.
//!
//! ```no_run
//! # async fn example(port: u16) {
//! use pilot_test_support::ads::{CDS, Client, EDS, sidecar_id};
//!
//! let mut client = Client::sotw(port, &sidecar_id("app", "default", "10.0.0.1")).await;
//! let synced = client.sync().await; // clusters, their load assignments, listeners
//! assert_eq!(synced.cds.type_url, CDS);
//! let eds = client.next().await; // the next push
//! assert_eq!(eds.type_url, EDS);
//! client.ack(&eds).await;
//! # }
//! ```

mod client;
mod error;
pub mod h2;
pub mod proxies;
mod stream;
mod transport;

use std::fmt::Display;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;

pub use client::{Client, Response, Synced, clusters, eds_names};
pub use error::Error;
pub use stream::{AdsRequest, AdsStream, DeltaStream, SotwStream};
pub use transport::{GrpcStream, WINDOW, request_headers};

/// The CDS type URL.
pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// The EDS type URL.
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// The LDS type URL.
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// The RDS type URL.
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// The SDS type URL.
pub const SDS: &str = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";

/// The node id of a sidecar of `workload` in `namespace` at `ip`
/// (`sidecar~IP~WORKLOAD.NAMESPACE~NAMESPACE.svc.cluster.local`).
pub fn sidecar_id(workload: impl Display, namespace: &str, ip: impl Display) -> String {
    format!("sidecar~{ip}~{workload}.{namespace}~{namespace}.svc.cluster.local")
}

/// A state-of-the-world request for `type_url` from `node_id` (the node
/// only on a stream's first request, as Envoy sends it, when given).
pub fn request(node_id: Option<&str>, type_url: &str, version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: node_id.map(|id| Node {
            id: id.into(),
            ..Default::default()
        }),
        type_url: type_url.into(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}
