//! An HTTP/2 (RFC 9113) server connection with HPACK (RFC 7541), made for
//! the long-lived gRPC streams of a control plane: tens of thousands of
//! mostly idle connections, each holding only what is in flight.
//!
//! - [`hpack`]: header compression, a decoder whose dynamic table is
//!   allocated only while the peer uses one, and an encoder that indexes
//!   nothing (a server's response headers and trailers are few and fixed).
//! - [`frame`]: the frames, parsed and validated, and written.
//! - [`Server`] serves connections (one task each), calling a [`Service`]
//!   per request stream with a [`Request`] (head and [`Messages`]) and a
//!   [`Sender`] of response messages and the final [`Status`].
//!
//! Memory: an idle connection holds its small state, its HPACK decoder's
//! table only while the client uses one, and its open streams' state. A
//! read buffer exists only while a frame's payload is partly read, sized by
//! the frame; responses go to the socket with `write_vectored` from the
//! application's shared buffers, behind 9-byte frame heads.
//!
//! ```no_run
//! use pilot_h2::{Code, Config, Request, Sender, Server};
//!
//! # async fn run(listener: tokio::net::TcpListener) -> std::io::Result<()> {
//! // An echo service: every request message comes back, then status OK.
//! let server = Server::new(Config::default(), |mut request: Request, mut sender: Sender| {
//!     tokio::spawn(async move {
//!         while let Some(Ok(message)) = request.messages.next().await {
//!             if sender.send(vec![message.into_bytes()]).await.is_err() {
//!                 return;
//!             }
//!         }
//!         sender.finish(Code::Ok, "");
//!     });
//! });
//! server.serve(listener, std::future::pending()).await
//! # }
//! ```

#![forbid(unsafe_code)]

mod conn;
mod conn_headers;
mod conn_recv;
mod conn_send;
mod conn_stream;
mod conn_write;
pub mod frame;
pub mod grpc;
pub mod hpack;
mod server;

pub use grpc::{Code, ConnectionInfo, Message, Messages, Request, RequestHead, Sender, Status};
pub use server::{Config, Error, Server, Service};
