//! Serving the REST router on a bound listener, over plain HTTP or TLS,
//! with graceful shutdown: on the signal the listener closes, open
//! connections finish their in-flight requests, and watch streams end.
//!
//! Connections are bounded ([`Limits`]): a connection that does not send a
//! complete request head within `header_read_timeout` (a new one, or a
//! keep-alive one gone idle), or a request's whole body within
//! `body_read_timeout` (`body.rs`), is closed, and beyond `max_connections`
//! a new connection is answered 503 and closed, but for the probes:
//! `/healthz` and `/readyz` are answered in a small reserve beyond the cap
//! (`reserve.rs`). So idle or slow clients cannot take every file
//! descriptor and silence `/healthz`; `fds.rs` fits the caps in the
//! open-files limit. A connection counts until the server begins to close
//! it (`slotted.rs`): a client that has seen its connection closed by the
//! server is not refused for it.

pub(crate) mod body;
pub(crate) mod fds;
mod reserve;
mod slotted;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub(crate) use reserve::RESERVE as PROBE_RESERVE;
use slotted::Slotted;

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
    /// A request's whole body must arrive within this long of its head.
    pub body_read_timeout: Duration,
    /// Connections open at once; more are answered 503 and closed (but
    /// for the probes' reserve).
    pub max_connections: usize,
}

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
    let router = router.layer(axum::middleware::map_request_with_state(
        limits.body_read_timeout,
        body::with_deadline,
    ));
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections.max(1)));
    let reserve = Arc::new(tokio::sync::Semaphore::new(reserve::RESERVE));
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
            if let Ok(reserved) = Arc::clone(&reserve).try_acquire_owned() {
                tracing::debug!(%peer, "over the connection cap; probes only");
                tokio::spawn(reserve::answer(
                    stream,
                    tls.clone(),
                    router.clone(),
                    limits.header_read_timeout,
                    reserved,
                ));
                continue;
            }
            // The socket's send buffer is empty: this does not block.
            let _ = stream.try_write(reserve::OVER_CAPACITY);
            tracing::debug!(%peer, "over the connection cap and its reserve; answered 503");
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
