//! Serving the REST router on a bound listener, over plain HTTP or TLS,
//! with graceful shutdown: on the signal the listener closes, open
//! connections finish their in-flight requests, and watch streams end.
//!
//! Connections are bounded ([`Limits`]): a connection that does not send a
//! complete request head within `header_read_timeout` (a new one, or a
//! keep-alive one gone idle) is closed, and beyond `max_connections` a new
//! connection is answered 503 and closed at once, so idle or slow clients
//! cannot take every file descriptor and silence `/healthz`. A
//! connection counts until the server begins to close it: a client that
//! has seen its connection closed by the server is not refused for it.

use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;

/// How long shutdown waits for open connections before giving up on them.
const DRAIN: Duration = Duration::from_secs(10);

/// A TLS acceptor from PEM files.
pub(crate) fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, String> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("cannot read the certificate {}: {e}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("cannot read the private key {}: {e}", key.display()))?;
    let mut config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| format!("bad certificate or key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

// Connection limits.

/// Bounds on the REST listener's connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// A request head must arrive within this long (idle keep-alive
    /// connections included).
    pub header_read_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed.
    pub max_connections: usize,
}

/// What a connection beyond the cap is told before it is closed.
const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 133\r\n\r\n{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"ServiceUnavailable\",\"code\":503,\"message\":\"too many open connections\"}";

/// Raises the soft limit on open files to the hard limit (servers hold one
/// per connection; the usual soft default is 1,024). Returns the limit now
/// in force.
pub(crate) fn raise_fd_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(%error, "cannot raise the open-files limit");
            return limit.current;
        }
        return limit.maximum;
    }
    limit.current
}

/// Serves `router` on `listener` until `shutdown` turns true, then drains.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    tls: Option<TlsAcceptor>,
    limits: Limits,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = crate::shutdown::closed(&mut shutdown) => break,
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // The socket's send buffer is empty: this does not block.
            let _ = stream.try_write(OVER_CAPACITY);
            tracing::debug!(%peer, "over the connection cap; answered 503");
            continue;
        };
        let service = TowerToHyperService::new(router.clone());
        let watcher = graceful.watcher();
        let tls = tls.clone();
        let builder = builder.clone();
        // One task per connection; it ends with the connection.
        tokio::spawn(async move {
            match tls {
                None => {
                    let stream = Slotted::new(stream, slot);
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    if let Err(error) = watcher.watch(connection).await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                }
                Some(acceptor) => {
                    // The slot is held through the handshake.
                    let handshake =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await;
                    let stream = match handshake {
                        Ok(Ok(stream)) => Slotted::new(stream, slot),
                        Ok(Err(error)) => {
                            tracing::debug!(%peer, %error, "TLS handshake failed");
                            return;
                        }
                        Err(_) => return,
                    };
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    if let Err(error) = watcher.watch(connection).await {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                }
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN, graceful.shutdown()).await.is_err() {
        tracing::warn!("some REST connections were still open after {DRAIN:?}; closing them");
    }
}

/// A connection holding one of the capped slots. The slot is given back
/// when the server starts closing the connection (before its FIN, or its
/// TLS `close_notify`, is sent), or when the connection is dropped: so a
/// client that has seen the server close its connection can count on its
/// slot being free for the next one, however late the connection's task
/// runs again.
struct Slotted<S> {
    // Before `stream`: fields drop in order, so a connection dropped
    // without a shutdown (an error, the header timeout) also gives its
    // slot back before its socket closes.
    slot: Option<OwnedSemaphorePermit>,
    stream: S,
}

impl<S> Slotted<S> {
    fn new(stream: S, slot: OwnedSemaphorePermit) -> Self {
        Slotted {
            slot: Some(slot),
            stream,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Slotted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Slotted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
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

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Given back before the peer can see the close.
        self.slot = None;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::sync::Semaphore;

    use super::*;

    #[tokio::test]
    async fn a_connection_gives_its_slot_back_before_its_peer_sees_it_close() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let slots = Arc::new(Semaphore::new(1));
        let mut stream = Slotted::new(accepted, Arc::clone(&slots).try_acquire_owned().unwrap());
        assert_eq!(slots.available_permits(), 0);
        stream.shutdown().await.unwrap();
        // The connection's task still holds it, but the slot is free...
        assert_eq!(slots.available_permits(), 1);
        // ...before the peer reads the end of the stream.
        let mut rest = Vec::new();
        client.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty());
        drop(stream);
        assert_eq!(slots.available_permits(), 1);
        // Dropped without a shutdown, a connection gives its slot back too.
        let _client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let stream = Slotted::new(accepted, Arc::clone(&slots).try_acquire_owned().unwrap());
        assert_eq!(slots.available_permits(), 0);
        drop(stream);
        assert_eq!(slots.available_permits(), 1);
    }
}
