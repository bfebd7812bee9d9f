//! The HTTP/2 pieces the ADS client speaks with (RFC 9113 frames, RFC 7541
//! HPACK), written for pilot: a client of its own rather than the h2
//! crate's, because the benches drive 10,000 emulated proxies (up to
//! 30,000 streams) from one process on two cores beside the server they
//! measure. This client is a state machine its owner polls, with no task
//! per connection and no buffers kept between frames, where h2's client
//! runs a connection task with its read and write buffers (about 30 KB)
//! for every connection, and a sender and receiver per stream.
//!
//! - [`frame`]: frame heads, parsing and validating each frame type, and
//!   writing the frames a client sends;
//! - [`hpack`]: header compression, a decoder whose dynamic table is
//!   allocated only while the peer uses one, and an encoder that indexes
//!   nothing.

pub mod frame;
pub mod hpack;
