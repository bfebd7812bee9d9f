//! One ADS stream, from connection to end. Layers, each importing only
//! those below it:
//!
//! - `transport.rs`: a stream's request/response plumbing on pilot-h2's
//!   gRPC stream, no protocol knowledge; `sotw_request.rs` decodes a
//!   state-of-the-world request without copying its names.
//! - `session.rs`: one task per stream, either protocol: identity,
//!   snapshot, nonces, ACK/NACK, push order CDS, EDS, LDS, RDS with EDS
//!   and RDS re-sent after CDS and LDS changes, maximum age, why the
//!   stream ended; `withheld.rs`: removals held back until the proxy
//!   ACKed the routes and listeners without them (make before break).
//! - `sotw.rs` and `delta.rs`: subscription bookkeeping only, what a
//!   response carries.
//! - `auth.rs`: who a caller is and which node ids it may claim;
//!   `service.rs`: the gRPC service (authentication, protocol by method);
//!   `routes.rs`: the port's other gRPC services (tonic's) on pilot-h2
//!   streams; `serve.rs`: [`ServeOptions`] (TLS, keepalives, limits,
//!   maximum age), the listening socket and pilot-h2's connections; `admission.rs`: which connections and
//!   streams are kept (slots, handshake deadline, per address, per
//!   credential); `peer.rs`: the admitted connections, plain or TLS,
//!   and the [`Peer`] their requests carry.
//!
//! Responses go through a bounded queue (pilot-h2's send buffer per
//! stream, [`XdsOptions::send_buffer`](crate::XdsOptions::send_buffer)
//! bytes): a slow proxy holds up only its own task, which waits. When the stream ends, the task, its queue and its
//! status go away, and the reason is counted.

mod admission;
mod auth;
mod budget;
mod delta;
mod peer;
mod routes;
mod serve;
mod service;
mod session;
mod sotw;
mod sotw_request;
mod transport;
mod withheld;

pub use auth::{Authenticate, Caller, NodeScope};
pub use peer::Peer;
pub use serve::{ServeOptions, listen};
pub(crate) use serve::{serve_address, serve_listener};
