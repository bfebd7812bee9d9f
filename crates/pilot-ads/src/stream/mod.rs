//! One ADS stream, from connection to end. Layers, each importing only
//! those below it:
//!
//! - `transport.rs`: a stream's request/response plumbing on hyper's
//!   HTTP/2 request and response, no protocol knowledge: the gRPC
//!   deframer (partial messages charged to the connection's budget,
//!   `budget.rs`) and the response body, whose progress `stall.rs`
//!   watches (a response nobody takes drops its connection at the write
//!   timeout); `sotw_request.rs` decodes a
//!   state-of-the-world request without copying its names.
//! - `session/`: one task per stream, either protocol: identity,
//!   snapshot, nonces, ACK/NACK, push order CDS, EDS, LDS, RDS with EDS
//!   and RDS re-sent after CDS and LDS changes, maximum age, why the
//!   stream ended; `withheld.rs`: removals held back until the proxy
//!   ACKed the routes and listeners without them (make before break).
//! - `sotw.rs` and `delta.rs`: subscription bookkeeping only, what a
//!   response carries; `secrets.rs`: SDS `Secret`s on the same stream,
//!   either protocol, from the server's credential source, to the proxies
//!   that may read them.
//! - `auth.rs`: who a caller is and which node ids it may claim;
//!   `service.rs`: the gRPC service (authentication, protocol by method);
//!   `routes.rs`: the port's other gRPC services (tonic's) on the same
//!   connections; `serve.rs`: [`ServeOptions`] (TLS, keepalives, every h2
//!   limit, maximum age), the listening socket and one hyper HTTP/2
//!   connection task per connection; `admission.rs`: which connections
//!   and streams are kept (slots and eviction, handshake deadline, write
//!   progress, per address, per credential); `peer.rs`: the admitted
//!   connections, plain or TLS, and the [`Peer`] their requests carry.
//!
//! Responses go through a bounded queue: a one-message channel to the
//! stream's response body, then h2's send buffer for the stream
//! ([`XdsOptions::send_buffer`](crate::XdsOptions::send_buffer) bytes, and
//! no more than the proxy's flow-control window): a slow proxy holds up
//! only its own task, which waits. When the stream ends, the task, its
//! queue and its status go away, and the reason is counted.

mod admission;
mod ambient;
mod auth;
mod budget;
mod delta;
mod peer;
mod routes;
mod secrets;
mod serve;
mod service;
mod session;
mod sotw;
mod sotw_request;
mod stall;
mod transport;
mod withheld;

pub use auth::{Authenticate, Authenticating, Caller, NodeScope};
pub use peer::Peer;
pub(crate) use secrets::credential_secret;
pub use serve::{ServeOptions, listen};
pub(crate) use serve::{serve_address, serve_listener};
#[cfg(feature = "fuzzing")]
pub(crate) use {
    budget::RequestBudget,
    sotw_request::SotwRequest,
    transport::{Deframer, Request},
};
/// A delta request, as the port decodes it.
#[cfg(feature = "fuzzing")]
pub(crate) type DeltaRequest = envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest;
