//! An HTTP/2 (RFC 9113) server connection with HPACK (RFC 7541), made for
//! the long-lived gRPC streams of a control plane: tens of thousands of
//! mostly idle connections, each holding only what is in flight.
//!
//! - [`hpack`]: header compression, a decoder whose dynamic table is
//!   allocated only while the peer uses one, and an encoder that indexes
//!   nothing (a server's response headers and trailers are few and fixed).

pub mod hpack;
