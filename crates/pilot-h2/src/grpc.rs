//! gRPC over a stream (the gRPC HTTP/2 protocol): a request's head, its
//! messages (5-byte prefix, no compression, a size limit) handed over as
//! the received chunks, and a sender that frames response messages from
//! shared buffers and ends the stream with `grpc-status` trailers.
//!
//! An application's stream task reads [`Messages::next`] (a [`Message`] is
//! a [`Buf`], so `prost::Message::decode(message)` reads the received
//! chunks in place), answers with [`Sender::send`] (a message's encoded
//! parts, shared with other streams; the prefix is added here) and ends
//! with [`Sender::finish`]. `send` waits while the stream already has
//! [`Config::send_buffer`](crate::Config::send_buffer) bytes queued, which
//! is the bounded queue between a task and its connection.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};

use crate::conn_stream::{Shared, StreamRef};
use crate::conn_write::Chunk;
use crate::frame::Reason;

/// gRPC status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    missing_docs,
    reason = "the variants are gRPC's status codes, named as its specification names them"
)]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

/// A gRPC status: a code and a message for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// The message (sent percent-encoded as `grpc-message`).
    pub message: String,
}

impl Status {
    /// A status with this code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for Status {}

/// What the caller of `serve_connection` knows about the connection, shared
/// by every request on it.
#[derive(Debug, Default)]
pub struct ConnectionInfo {
    /// The peer's address.
    pub peer: Option<SocketAddr>,
    /// The local address.
    pub local: Option<SocketAddr>,
    /// Anything else (a TLS identity, a listener's name).
    pub extensions: http::Extensions,
}

/// A request's head.
#[derive(Debug)]
pub struct RequestHead {
    /// The stream's id.
    pub stream_id: u32,
    /// `:path`, e.g. `/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources`.
    pub path: String,
    /// `:authority`, when sent.
    pub authority: Option<String>,
    /// The regular headers (pseudo-headers removed).
    pub headers: http::HeaderMap,
    /// The connection's information.
    pub connection: Arc<ConnectionInfo>,
}

/// A new request stream: its head and its messages.
pub struct Request {
    /// The head.
    pub head: RequestHead,
    /// The request messages.
    pub messages: Messages,
}

/// One received gRPC message (without its prefix): the received chunks,
/// read as a [`Buf`] without copying.
#[derive(Debug, Clone, Default)]
pub struct Message {
    head: Bytes,
    rest: VecDeque<Bytes>,
    remaining: usize,
}

impl Message {
    /// The message as one buffer (copied only when it arrived in pieces).
    pub fn into_bytes(mut self) -> Bytes {
        if self.rest.is_empty() {
            return self.head;
        }
        let len = self.remaining;
        self.copy_to_bytes(len)
    }
}

impl Buf for Message {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        &self.head
    }

    fn advance(&mut self, mut cnt: usize) {
        cnt = cnt.min(self.remaining);
        self.remaining -= cnt;
        while cnt > 0 {
            let n = cnt.min(self.head.len());
            self.head.advance(n);
            cnt -= n;
            if self.head.is_empty() {
                match self.rest.pop_front() {
                    Some(next) => self.head = next,
                    None => break,
                }
            }
        }
        while self.head.is_empty() {
            match self.rest.pop_front() {
                Some(next) => self.head = next,
                None => break,
            }
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        if self.head.len() >= len {
            let bytes = self.head.split_to(len);
            self.advance(0);
            self.remaining -= len;
            return bytes;
        }
        Bytes::from(self.copy_to_bytes_slow(len))
    }
}

impl Message {
    fn copy_to_bytes_slow(&mut self, len: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len && self.remaining > 0 {
            let n = (len - out.len()).min(self.head.len());
            out.extend_from_slice(&self.head[..n]);
            self.advance(n);
        }
        out
    }
}

/// A request's messages, in order.
pub struct Messages {
    pub(crate) stream: StreamRef,
}

impl Messages {
    /// The next message; `None` when the client ended its side; an error
    /// when the stream was reset or the connection closed, or the message
    /// was refused (then the stream is being ended with that status).
    pub async fn next(&mut self) -> Option<Result<Message, Status>> {
        poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next message (see [`Messages::next`]).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Message, Status>>> {
        let id = self.stream.id;
        let mut guard = self.stream.lock();
        let shared = &mut *guard;
        let max = shared.max_message;
        let Some(stream) = shared.streams.get_mut(&id) else {
            return Poll::Ready(Some(Err(gone(shared))));
        };
        if let Some(reason) = stream.reset {
            return Poll::Ready(Some(Err(reset_status(reason))));
        }
        if stream.recv_len >= 5 {
            let prefix = peek5(&stream.recv);
            let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
            let refused = if prefix[0] != 0 {
                Some(Status::new(
                    Code::Unimplemented,
                    "compressed messages are not accepted",
                ))
            } else if len > max {
                Some(Status::new(
                    Code::ResourceExhausted,
                    format!("a message of {len} bytes is over the limit of {max}"),
                ))
            } else {
                None
            };
            if let Some(status) = refused {
                stream.recv_dropped = true;
                let buffered = stream.recv_len - stream.recv_credited;
                stream.recv.clear();
                stream.recv_len = 0;
                stream.recv_credited = 0;
                credit(shared, id, buffered);
                end_with(shared, id, status.clone());
                return Poll::Ready(Some(Err(status)));
            }
            if stream.recv_len >= 5 + len {
                let message = take(&mut stream.recv, 5, len);
                stream.recv_len -= 5 + len;
                let taken = 5 + len;
                let already = stream.recv_credited.min(taken);
                stream.recv_credited -= already;
                credit(shared, id, taken - already);
                return Poll::Ready(Some(Ok(message)));
            }
            // An accepted message still arriving: return what it has so far
            // to the windows, so a message larger than a window can arrive.
            let uncredited = stream.recv_len - stream.recv_credited;
            if uncredited > 0 {
                stream.recv_credited = stream.recv_len;
                credit(shared, id, uncredited);
            }
        }
        let Some(stream) = shared.streams.get_mut(&id) else {
            return Poll::Ready(Some(Err(gone(shared))));
        };
        if stream.recv_eof {
            if stream.recv_len > 0 {
                return Poll::Ready(Some(Err(Status::new(
                    Code::Internal,
                    "the stream ended inside a message",
                ))));
            }
            return Poll::Ready(None);
        }
        stream.recv_waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Messages {
    fn drop(&mut self) {
        let id = self.stream.id;
        let mut guard = self.stream.lock();
        let shared = &mut *guard;
        if let Some(stream) = shared.streams.get_mut(&id) {
            stream.recv_dropped = true;
            let buffered = stream.recv_len - stream.recv_credited;
            stream.recv.clear();
            stream.recv_len = 0;
            stream.recv_credited = 0;
            credit(shared, id, buffered);
        }
    }
}

/// Sends a stream's response messages and ends it.
pub struct Sender {
    pub(crate) stream: StreamRef,
    /// Queued bytes beyond which `send` waits.
    pub(crate) limit: usize,
    pub(crate) finished: bool,
}

impl Sender {
    /// Queues one message (its bytes as parts, without the gRPC prefix,
    /// which is added here): waits while the stream already has `limit`
    /// bytes queued (the peer's window closed or the socket slow). Fails
    /// when the stream was reset or the connection closed.
    pub async fn send(&mut self, parts: Vec<Bytes>) -> Result<(), Status> {
        let mut parts = Some(parts);
        poll_fn(|cx| self.poll_send(cx, &mut parts)).await
    }

    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        parts: &mut Option<Vec<Bytes>>,
    ) -> Poll<Result<(), Status>> {
        let id = self.stream.id;
        let mut guard = self.stream.lock();
        let shared = &mut *guard;
        let Some(stream) = shared.streams.get_mut(&id) else {
            return Poll::Ready(Err(gone(shared)));
        };
        if let Some(reason) = stream.reset {
            return Poll::Ready(Err(reset_status(reason)));
        }
        if stream.trailers.is_some() {
            return Poll::Ready(Err(Status::new(
                Code::FailedPrecondition,
                "the stream was already ended",
            )));
        }
        if stream.send_len > 0 && stream.send_len >= self.limit {
            stream.send_waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let parts = parts.take().unwrap_or_default();
        let len = parts.iter().map(Bytes::len).sum::<usize>();
        let mut prefix = [0u8; 5];
        prefix[1..].copy_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
        stream.send.push_back(Chunk::inline(&prefix));
        stream
            .send
            .extend(parts.into_iter().filter(|p| !p.is_empty()).map(Chunk::Shared));
        stream.send_len += 5 + len;
        shared.mark_ready(id);
        Poll::Ready(Ok(()))
    }

    /// Sends the response's HEADERS now rather than with the first message
    /// (a client that waits for them before it reads on, such as tonic's,
    /// sees the stream open while nothing is sent yet). A stream ended
    /// before any message then ends with trailers, not trailers-only.
    pub fn send_headers(&mut self) {
        let id = self.stream.id;
        let mut guard = self.stream.lock();
        let shared = &mut *guard;
        if let Some(stream) = shared.streams.get_mut(&id)
            && !stream.headers_sent
            && !stream.headers_wanted
        {
            stream.headers_wanted = true;
            shared.mark_ready(id);
        }
    }

    /// Ends the stream once the queued messages are written: trailers with
    /// `grpc-status` and, when not empty, `grpc-message`.
    pub fn finish(mut self, code: Code, message: &str) {
        self.finished = true;
        let mut shared = self.stream.lock();
        end_with(&mut shared, self.stream.id, Status::new(code, message));
    }

    /// Resolves when the stream was reset or the connection closed (the
    /// client went away), with the reason. It shares its wake-up with
    /// [`Sender::send`]: await both from the one task that sends.
    pub async fn closed(&self) -> Status {
        poll_fn(|cx| {
            let mut guard = self.stream.lock();
            let shared = &mut *guard;
            match shared.streams.get_mut(&self.stream.id) {
                None => Poll::Ready(gone(shared)),
                Some(stream) => match stream.reset {
                    Some(reason) => Poll::Ready(reset_status(reason)),
                    None => {
                        stream.send_waker = Some(cx.waker().clone());
                        Poll::Pending
                    }
                },
            }
        })
        .await
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let id = self.stream.id;
        let mut shared = self.stream.lock();
        if let Some(stream) = shared.streams.get_mut(&id)
            && stream.reset.is_none()
            && stream.trailers.is_none()
        {
            stream.reset = Some(Reason::Cancel);
            stream.reset_to_send = Some(Reason::Cancel);
            stream.send.clear();
            stream.send_len = 0;
            shared.mark_ready(id);
        }
    }
}

/// Sets the status a stream ends with (first one wins) and lists it.
fn end_with(shared: &mut Shared, id: u32, status: Status) {
    if let Some(stream) = shared.streams.get_mut(&id)
        && stream.trailers.is_none()
        && stream.reset.is_none()
    {
        stream.trailers = Some(status);
        shared.mark_ready(id);
    }
}

/// Returns `n` consumed bytes to the stream's and the connection's windows,
/// listing the stream when an update is worth sending.
fn credit(shared: &mut Shared, id: u32, n: usize) {
    if n == 0 {
        return;
    }
    let n = u32::try_from(n).unwrap_or(u32::MAX);
    shared.conn_unacked = shared.conn_unacked.saturating_add(n);
    let threshold = shared.update_threshold;
    if let Some(stream) = shared.streams.get_mut(&id) {
        stream.recv_unacked = stream.recv_unacked.saturating_add(n);
        if stream.recv_unacked >= threshold || shared.conn_unacked >= threshold {
            shared.mark_ready(id);
        }
    }
}

fn gone(shared: &Shared) -> Status {
    if shared.closed {
        Status::new(Code::Unavailable, "the connection closed")
    } else {
        Status::new(Code::Cancelled, "the stream is closed")
    }
}

fn reset_status(reason: Reason) -> Status {
    Status::new(Code::Cancelled, format!("the stream was reset ({reason:?})"))
}

fn peek5(chunks: &VecDeque<Bytes>) -> [u8; 5] {
    let mut out = [0; 5];
    let mut i = 0;
    for chunk in chunks {
        for &b in chunk.iter() {
            if i == 5 {
                return out;
            }
            out[i] = b;
            i += 1;
        }
    }
    out
}

/// Takes `skip` bytes then `len` bytes (the message) off the front of `chunks`.
fn take(chunks: &mut VecDeque<Bytes>, mut skip: usize, len: usize) -> Message {
    let mut message = Message {
        remaining: len,
        ..Message::default()
    };
    let mut need = len;
    while skip > 0 || need > 0 {
        let Some(front) = chunks.front_mut() else { break };
        if skip > 0 {
            let n = skip.min(front.len());
            front.advance(n);
            skip -= n;
        } else {
            let n = need.min(front.len());
            let piece = front.split_to(n);
            need -= n;
            if message.head.is_empty() {
                message.head = piece;
            } else {
                message.rest.push_back(piece);
            }
        }
        if front.is_empty() {
            chunks.pop_front();
        }
    }
    if chunks.is_empty() {
        *chunks = VecDeque::new();
    }
    message
}

/// Percent-encodes a `grpc-message` value (gRPC's PROTOCOL-HTTP2: bytes
/// outside 0x20..=0x7E, and `%`, as `%XX`).
pub(crate) fn percent_encode(message: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    out
}

#[cfg(test)]
#[path = "grpc_tests.rs"]
mod tests;
