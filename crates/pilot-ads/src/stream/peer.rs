//! The connections the ADS port serves, after admission (`admission.rs`):
//! plain, or TLS terminated here with tokio-rustls (handshakes run side by
//! side, so a slow client does not hold up the accept loop). Each carries a
//! [`Peer`], which every request on it finds in its extensions: the peer's
//! address and, over TLS, the client certificate chain rustls verified.

use std::net::SocketAddr;
use std::pin::Pin;
#[cfg(feature = "tls")]
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
#[cfg(feature = "tls")]
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::admission::{Limited, Watch};

/// The connection a request came on, in the request's
/// [`http::Extensions`] (as [`Authenticate`](crate::Authenticate) and the
/// other services on the port see them).
#[derive(Clone, Debug, Default)]
pub struct Peer {
    address: Option<SocketAddr>,
    #[cfg(feature = "tls")]
    certificates: Option<Arc<[rustls::pki_types::CertificateDer<'static>]>>,
}

impl Peer {
    /// The client's address (`None` if the socket had already failed).
    pub fn address(&self) -> Option<SocketAddr> {
        self.address
    }

    /// The client's certificate chain, leaf first, as rustls verified it
    /// against the port's client CA; `None` over plain TCP or when the
    /// client presented none. Feature `tls`.
    #[cfg(feature = "tls")]
    pub fn certificates(&self) -> Option<&[rustls::pki_types::CertificateDer<'static>]> {
        self.certificates.as_deref()
    }

    /// A peer at `address` without a certificate.
    pub(crate) fn plain(address: Option<SocketAddr>) -> Self {
        Peer {
            address,
            ..Peer::default()
        }
    }
}

/// An admitted connection, plain or TLS, with its [`Peer`].
pub(crate) struct Io {
    peer: Peer,
    watch: Watch,
    stream: IoStream,
}

enum IoStream {
    Plain(Limited),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::server::TlsStream<Limited>>),
}

/// The connections to serve from the admitted ones: as they are, or (with
/// `tls`) once their TLS handshakes succeed, in the order they finish.
/// A failed handshake drops its connection (and is logged); accept errors
/// pass through.
pub(crate) fn connections(
    admitted: impl Stream<Item = std::io::Result<Limited>> + Send + 'static,
    #[cfg(feature = "tls")] tls: Option<Arc<rustls::ServerConfig>>,
) -> Pin<Box<dyn Stream<Item = std::io::Result<Io>> + Send>> {
    #[cfg(feature = "tls")]
    if let Some(config) = tls {
        return Box::pin(Handshakes {
            admitted: Some(Box::pin(admitted)),
            acceptor: tokio_rustls::TlsAcceptor::from(with_h2(config)),
            pending: futures::stream::FuturesUnordered::new(),
        });
    }
    Box::pin(futures::StreamExt::map(admitted, |accepted| {
        accepted.map(|limited| Io {
            peer: Peer::plain(limited.peer_addr()),
            watch: limited.watch(),
            stream: IoStream::Plain(limited),
        })
    }))
}

/// `config` offering HTTP/2 by ALPN (what gRPC clients ask for), unless it
/// already does.
#[cfg(feature = "tls")]
fn with_h2(config: Arc<rustls::ServerConfig>) -> Arc<rustls::ServerConfig> {
    if config.alpn_protocols.iter().any(|p| p == b"h2") {
        return config;
    }
    let mut config = Arc::unwrap_or_clone(config);
    config.alpn_protocols.push(b"h2".to_vec());
    Arc::new(config)
}

#[cfg(feature = "tls")]
type Handshake = Pin<Box<dyn std::future::Future<Output = std::io::Result<Io>> + Send>>;

/// TLS handshakes of admitted connections, run side by side.
#[cfg(feature = "tls")]
struct Handshakes {
    /// `None` once the listener is done.
    admitted: Option<Pin<Box<dyn Stream<Item = std::io::Result<Limited>> + Send>>>,
    acceptor: tokio_rustls::TlsAcceptor,
    pending: futures::stream::FuturesUnordered<Handshake>,
}

#[cfg(feature = "tls")]
impl Stream for Handshakes {
    type Item = std::io::Result<Io>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        while let Some(admitted) = &mut this.admitted {
            match admitted.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(limited))) => this.pending.push(handshake(&this.acceptor, limited)),
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(None) => this.admitted = None,
                Poll::Pending => break,
            }
        }
        loop {
            match this.pending.poll_next_unpin(cx) {
                Poll::Ready(Some(Ok(io))) => return Poll::Ready(Some(Ok(io))),
                Poll::Ready(Some(Err(error))) => {
                    tracing::debug!(%error, "ADS TLS handshake failed");
                }
                Poll::Ready(None) if this.admitted.is_none() => return Poll::Ready(None),
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(feature = "tls")]
fn handshake(acceptor: &tokio_rustls::TlsAcceptor, limited: Limited) -> Handshake {
    let address = limited.peer_addr();
    let watch = limited.watch();
    let accept = acceptor.accept(limited);
    Box::pin(async move {
        // The handshake deadline and eviction hold during the TLS
        // handshake too: dropping it drops the connection.
        let stream = tokio::select! {
            stream = accept => stream?,
            closed = watch.closed() => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("ADS connection closed in its TLS handshake: {closed:?}"),
                ));
            }
        };
        let certificates = stream.get_ref().1.peer_certificates().map(Arc::from);
        Ok(Io {
            peer: Peer {
                address,
                certificates,
            },
            watch,
            stream: IoStream::Tls(Box::new(stream)),
        })
    })
}

impl Io {
    /// The connection's peer.
    pub(crate) fn peer(&self) -> &Peer {
        &self.peer
    }

    /// What its task watches to drop it (`admission.rs`).
    pub(crate) fn watch(&self) -> &Watch {
        &self.watch
    }
}

impl AsyncRead for Io {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match &mut self.stream {
            IoStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.stream {
            IoStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.stream {
            IoStream::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match &mut self.stream {
            IoStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match &mut self.stream {
            IoStream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            IoStream::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            IoStream::Tls(s) => s.is_write_vectored(),
        }
    }
}
