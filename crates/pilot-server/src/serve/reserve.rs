//! The probes' reserve: a few connections beyond the cap, kept for
//! `/healthz` and `/readyz`, so a full listener still tells its prober it
//! is alive (and whether it is ready) instead of looking dead.
//!
//! A connection over the cap takes one of [`RESERVE`] slots, if one is
//! free. Its request head must arrive within [`HEAD_TIMEOUT`] (or the
//! header read timeout, if shorter): a `GET` of a probe is answered by the
//! router; anything else, a late or missing head included, is answered 503
//! with a Status body. Then the connection is closed. Beyond the reserve, a
//! connection is answered 503 at once.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_rustls::TlsAcceptor;

/// Connections kept for probes beyond the cap (per listener).
pub(crate) const RESERVE: usize = 16;

/// How long a reserved connection waits for its request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(1);

/// The longest request head read in the reserve.
const MAX_HEAD: usize = 8 * 1024;

/// What a connection beyond the cap is told before it is closed.
pub(crate) const OVER_CAPACITY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 133\r\n\r\n{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"ServiceUnavailable\",\"code\":503,\"message\":\"too many open connections\"}";

/// Answers one connection over the cap, holding `slot` of the reserve
/// until it is closed.
pub(crate) async fn answer(
    stream: TcpStream,
    tls: Option<TlsAcceptor>,
    router: Router,
    head_timeout: Duration,
    slot: OwnedSemaphorePermit,
) {
    let deadline = tokio::time::Instant::now() + head_timeout.min(HEAD_TIMEOUT);
    match tls {
        None => probe(stream, router, deadline).await,
        Some(acceptor) => {
            if let Ok(Ok(stream)) = tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
                probe(stream, router, deadline).await;
            }
        }
    }
    drop(slot);
}

async fn probe<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    router: Router,
    deadline: tokio::time::Instant,
) {
    let path = tokio::time::timeout_at(deadline, probe_path(&mut stream))
        .await
        .ok()
        .flatten();
    let answer = match path {
        Some(path) => respond(router, path).await,
        None => OVER_CAPACITY.to_vec(),
    };
    let _ = stream.write_all(&answer).await;
    let _ = stream.shutdown().await;
}

/// The probe a request head asks for (`/healthz` or `/readyz`), if it is a
/// `GET` of one.
async fn probe_path<S: AsyncRead + Unpin>(stream: &mut S) -> Option<&'static str> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let line = head.split(|b| *b == b'\r').next()?;
    let mut parts = line.split(|b| *b == b' ');
    let (method, target) = (parts.next()?, parts.next()?);
    let path = target.split(|b| *b == b'?').next()?;
    match (method, path) {
        (b"GET", b"/healthz") => Some("/healthz"),
        (b"GET", b"/readyz") => Some("/readyz"),
        _ => None,
    }
}

/// The router's answer to `GET path`, as bytes to write.
async fn respond(router: Router, path: &'static str) -> Vec<u8> {
    use tower_service::Service;
    let Ok(request) = axum::http::Request::get(path).body(Body::empty()) else {
        return OVER_CAPACITY.to_vec();
    };
    let Ok(response) = router.clone().call(request).await;
    let (parts, body) = response.into_parts();
    let Ok(body) = axum::body::to_bytes(body, 64 * 1024).await else {
        return OVER_CAPACITY.to_vec();
    };
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\n",
        parts.status.as_u16(),
        parts.status.canonical_reason().unwrap_or("")
    )
    .into_bytes();
    if let Some(kind) = parts.headers.get(axum::http::header::CONTENT_TYPE) {
        answer.extend_from_slice(b"content-type: ");
        answer.extend_from_slice(kind.as_bytes());
        answer.extend_from_slice(b"\r\n");
    }
    answer
        .extend_from_slice(format!("connection: close\r\ncontent-length: {}\r\n\r\n", body.len()).as_bytes());
    answer.extend_from_slice(&body);
    answer
}
