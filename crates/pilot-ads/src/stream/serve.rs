//! Serving ADS on a listener: TLS (and client certificates), an
//! authenticator, HTTP/2 and TCP keepalives, a cap on connections, and an
//! optional maximum connection age.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tonic::transport::server::{Connected, TcpConnectInfo, TcpIncoming};
use tonic::transport::{Server, ServerTlsConfig};

use super::auth::Authenticate;
use super::service::AdsService;
use crate::state::ServerState;

/// How [`XdsServer::serve_with`](crate::XdsServer::serve_with) serves.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// TLS for the port (with a client CA in it, mTLS); `None`: plain
    /// HTTP/2.
    pub tls: Option<ServerTlsConfig>,
    /// Authenticates every stream
    /// ([`XdsServer::authenticated_service`](crate::XdsServer::authenticated_service));
    /// `None`: any client.
    pub auth: Option<Arc<dyn Authenticate>>,
    /// Connections open at once; one more is closed as soon as it is
    /// accepted (and counted,
    /// [`XdsServer::connections_refused`](crate::XdsServer::connections_refused)).
    /// `None`: no cap.
    pub max_connections: Option<usize>,
    /// Streams older than this (give or take 10%) are ended with
    /// `UNAVAILABLE` after the response in flight, and their connections
    /// are sent an HTTP/2 GOAWAY first, so the proxy reconnects over a new
    /// connection (to any server its ADS cluster lists). `None`: streams
    /// last as long as the proxy stays.
    pub max_connection_age: Option<Duration>,
    /// HTTP/2 PING interval (a dead proxy's stream is noticed and its task
    /// ended)...
    pub http2_keepalive_interval: Duration,
    /// ...and how long a PING may go unanswered.
    pub http2_keepalive_timeout: Duration,
    /// TCP keepalive.
    pub tcp_keepalive: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            tls: None,
            auth: None,
            max_connections: None,
            max_connection_age: None,
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
            tcp_keepalive: Duration::from_secs(60),
        }
    }
}

impl ServeOptions {
    /// Checks what can be checked before serving (the TLS identity and
    /// client CA), so a bad configuration stops a server at start.
    pub fn check(&self) -> Result<(), tonic::transport::Error> {
        if let Some(tls) = &self.tls {
            Server::builder().tls_config(tls.clone())?;
        }
        Ok(())
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("tls", &self.tls.is_some())
            .field("auth", &self.auth.is_some())
            .field("max_connections", &self.max_connections)
            .field("max_connection_age", &self.max_connection_age)
            .field("http2_keepalive_interval", &self.http2_keepalive_interval)
            .field("http2_keepalive_timeout", &self.http2_keepalive_timeout)
            .field("tcp_keepalive", &self.tcp_keepalive)
            .finish()
    }
}

/// Serves `state`'s streams on `address` with the default
/// [`ServeOptions`] until `shutdown` completes
/// ([`XdsServer::serve`](crate::XdsServer::serve)).
pub(crate) async fn serve_address(
    state: &Arc<ServerState>,
    address: std::net::SocketAddr,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = match listen(address) {
        Ok(listener) => TcpIncoming::from(listener),
        Err(error) => {
            // tonic's own error for a failed bind.
            tracing::warn!(%address, %error, "cannot listen for ADS");
            return Server::builder()
                .add_service(AdsService::new(Arc::clone(state), None))
                .serve_with_shutdown(address, shutdown)
                .await;
        }
    };
    serve_incoming(state, incoming, ServeOptions::default(), shutdown).await
}

/// Serves `state`'s streams on `listener` as `options` say until
/// `shutdown` completes
/// ([`XdsServer::serve_with`](crate::XdsServer::serve_with)).
pub(crate) async fn serve_listener(
    state: &Arc<ServerState>,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    serve_incoming(state, TcpIncoming::from(listener), options, shutdown).await
}

async fn serve_incoming(
    state: &Arc<ServerState>,
    incoming: TcpIncoming,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = incoming
        .with_nodelay(Some(true))
        .with_keepalive(Some(options.tcp_keepalive));
    let mut builder = Server::builder()
        .http2_keepalive_interval(Some(options.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(options.http2_keepalive_timeout));
    if let Some(age) = options.max_connection_age {
        // The connection is told to go away before any of its streams
        // is ended (at 90% to 110% of the age), so the proxy's next
        // stream opens a new connection.
        builder = builder.max_connection_age(age.mul_f64(0.9));
    }
    if let Some(tls) = options.tls {
        builder = builder.tls_config(tls)?;
    }
    let service =
        AdsService::new(Arc::clone(state), options.auth).with_max_connection_age(options.max_connection_age);
    let slots = options
        .max_connections
        .map(|max| Arc::new(tokio::sync::Semaphore::new(max.max(1))));
    let server = Arc::clone(state);
    let incoming = incoming.filter_map(move |accepted| {
        let admitted = match accepted {
            Err(error) => Some(Err(error)),
            Ok(stream) => match &slots {
                None => Some(Ok(Limited { stream, _slot: None })),
                Some(slots) => match Arc::clone(slots).try_acquire_owned() {
                    Ok(slot) => Some(Ok(Limited {
                        stream,
                        _slot: Some(slot),
                    })),
                    Err(_) => {
                        server.connections_refused.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(peer = ?stream.peer_addr().ok(), "over the ADS connection cap; closed");
                        None
                    }
                },
            },
        };
        std::future::ready(admitted)
    });
    let closing = Arc::clone(state);
    builder
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, async move {
            shutdown.await;
            closing.close();
        })
        .await
}

/// The accept queue a listener asks for: the kernel caps it at
/// `net.core.somaxconn` (4,096 by default since Linux 5.4), as Go's
/// `net.Listen` (istiod's) gets.
pub(crate) const LISTEN_BACKLOG: u32 = 65_535;

/// A TCP listener on `address` (`SO_REUSEADDR`, as the standard library
/// sets) with a deep accept queue (65,535 asked, capped by the kernel at
/// `net.core.somaxconn`); call within a Tokio runtime.
///
/// The standard library and Tokio listen with a queue of 128. When a
/// control plane restarts, every proxy reconnects at once: with 2,000
/// proxies the `ads` bench's connect storm overflowed a 128-deep queue 79
/// times, and each dropped SYN is retried by the proxy's kernel only after
/// a second (then 3, 7, ... s).
pub fn listen(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// A connection holding one of the capped slots until it closes.
struct Limited {
    stream: TcpStream,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Connected for Limited {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
