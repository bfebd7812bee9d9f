//! A REST connection holding one of the capped slots ([`Slotted`]), and
//! the Status bodies of the refusals hyper writes itself.
//!
//! The slot is given back when the server starts closing the connection
//! (before its FIN, or its TLS `close_notify`, is sent), or when the
//! connection is dropped: so a client that has seen the server close its
//! connection can count on its slot being free for the next one, however
//! late the connection's task runs again.
//!
//! hyper answers a request head it will not read (too many or too large
//! header fields: 431; a URI too long: 414) on its own, with an empty body.
//! Those answers are replaced on their way out by the same answer with a
//! Kubernetes `Status` body, as every other error of the API has.

use std::pin::Pin;
use std::sync::LazyLock;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use pilot_apiserver::ApiError;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;

/// A connection holding one of the capped slots.
pub(crate) struct Slotted<S> {
    // Before `stream`: fields drop in order, so a connection dropped
    // without a shutdown (an error, the header timeout) also gives its
    // slot back before its socket closes.
    slot: Option<OwnedSemaphorePermit>,
    /// A replacement answer still to write, and how much of it is written.
    replacing: Option<(&'static [u8], usize)>,
    stream: S,
}

impl<S> Slotted<S> {
    /// `stream`, holding `slot` until it closes.
    pub(crate) fn new(stream: S, slot: OwnedSemaphorePermit) -> Self {
        Slotted {
            slot: Some(slot),
            replacing: None,
            stream,
        }
    }
}

/// The full answer, with a Status body, of `status` with `message`.
fn answer(status: StatusCode, reason: &'static str, message: &str) -> Vec<u8> {
    let body = ApiError::new(status, reason, message).body().to_string();
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

static HEADERS_TOO_LARGE: LazyLock<Vec<u8>> = LazyLock::new(|| {
    answer(
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "RequestHeaderFieldsTooLarge",
        "the request's header fields are too many or too large",
    )
});

static URI_TOO_LONG: LazyLock<Vec<u8>> = LazyLock::new(|| {
    answer(
        StatusCode::URI_TOO_LONG,
        "RequestURITooLong",
        "the request's URI is too long",
    )
});

/// The answer replacing `written`, when it is one of hyper's own empty
/// refusals: a whole response head of status 431 or 414 without a content
/// type (every answer of the API has one).
fn replacement(written: &[u8]) -> Option<&'static [u8]> {
    let answer: &'static [u8] =
        if written.starts_with(b"HTTP/1.1 431 ") || written.starts_with(b"HTTP/1.0 431 ") {
            &HEADERS_TOO_LARGE
        } else if written.starts_with(b"HTTP/1.1 414 ") || written.starts_with(b"HTTP/1.0 414 ") {
            &URI_TOO_LONG
        } else {
            return None;
        };
    let head_only = written.ends_with(b"\r\n\r\n");
    let typed = written
        .windows(b"content-type:".len())
        .any(|w| w.eq_ignore_ascii_case(b"content-type:"));
    (head_only && !typed).then_some(answer)
}

impl<S: AsyncWrite + Unpin> Slotted<S> {
    /// Writes what is left of a replacement answer.
    fn drive_replacement(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        while let Some((answer, written)) = &mut self.replacing {
            match Pin::new(&mut self.stream).poll_write(cx, &answer[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(std::io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => {
                    *written += n;
                    if *written == answer.len() {
                        self.replacing = None;
                    }
                }
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
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
        let this = &mut *self;
        match this.drive_replacement(cx) {
            Poll::Ready(Ok(())) => {}
            Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
            Poll::Pending => return Poll::Pending,
        }
        if let Some(answer) = replacement(buf) {
            // Taken as written; the answer goes out in its place, driven
            // by the flush and shutdown that follow.
            this.replacing = Some((answer, 0));
            if let Poll::Ready(Err(error)) = this.drive_replacement(cx) {
                return Poll::Ready(Err(error));
            }
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut this.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let first = bufs.iter().find(|b| !b.is_empty());
        if self.replacing.is_some() || first.is_some_and(|b| replacement(b).is_some()) {
            return match first {
                Some(first) => self.poll_write(cx, first),
                None => Poll::Ready(Ok(0)),
            };
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.drive_replacement(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut self.stream).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.drive_replacement(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        // Given back before the peer can see the close.
        self.slot = None;
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
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

    #[test]
    fn only_hypers_own_empty_refusals_are_replaced() {
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        assert_eq!(replacement(hyper), Some(HEADERS_TOO_LARGE.as_slice()));
        let api = b"HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n";
        assert_eq!(replacement(api), None);
        assert_eq!(replacement(b"HTTP/1.1 200 OK\r\n\r\n"), None);
        let text = String::from_utf8(URI_TOO_LONG.clone()).unwrap();
        assert!(text.starts_with("HTTP/1.1 414 URI Too Long\r\n"), "{text}");
        assert!(text.contains("\"reason\":\"RequestURITooLong\""), "{text}");
    }
}
