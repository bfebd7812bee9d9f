//! The ADS transport: the request/response plumbing of one stream on
//! hyper's HTTP/2 request and response, with no knowledge of the xDS
//! protocols. A response goes out as a small header plus slices of the
//! configuration buffers every connection shares (see `generated.rs`),
//! one HTTP/2 DATA frame per shared part: a push to 2,000 proxies copies
//! nothing per proxy, and what waits in a slow proxy's queue costs only
//! reference counts.
//!
//! Requests are gRPC length-prefixed messages decoded from the request
//! body's data frames as they came ([`Deframer`] over [`Frames`]),
//! without copying them into one buffer: a sidecar's EDS ACK names every
//! cluster, 160 KB in a 1,000-service mesh, and 2,000 of them copied into
//! fresh buffers made page faults a tenth of the server's CPU in an
//! endpoint push. Nothing is kept between messages (a buffer kept at its
//! high-water mark would cost that per connection), and what a partial
//! message holds is charged to its connection's [`RequestBudget`].
//!
//! Backpressure: a stream's task hands messages to its response body
//! through a channel of [`QUEUE`] messages; hyper asks the body for the
//! next frame only while h2's send buffer for the stream has room
//! (`max_send_buf_size`, [`XdsOptions::send_buffer`](crate::XdsOptions::send_buffer)),
//! so a proxy that does not read holds up only its own task, which waits.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, HeaderValue};
use http_body::{Body as _, Frame};
use tokio::sync::mpsc;

use super::budget::{OverBudget, RequestBudget};
use super::stall::{self, Progress, Stalled, WriteStall};

/// Messages a stream's task may have queued for its response body beyond
/// the one being written: one, so a new push waits for the previous one
/// to be taken (h2's send buffer bounds the bytes behind it).
pub(super) const QUEUE: usize = 1;

/// What a stream's task hands to its response body.
pub(super) enum Outgoing {
    /// One gRPC message, framed, as buffers to write in order.
    Message(Vec<Bytes>),
    /// End the stream with this status (boxed: a queue's slots are the
    /// size of its largest item, and a status is seven times a message's).
    End(Box<tonic::Status>),
}

/// Frames one response message: the gRPC prefix and `head` (the message's
/// own fields), then `resources` (already-encoded repeated fields of the
/// same message, shared with other connections).
pub(super) fn frame(head: &impl prost::Message, resources: Vec<Bytes>) -> Outgoing {
    let head_len = head.encoded_len();
    let len = head_len + resources.iter().map(Bytes::len).sum::<usize>();
    let mut buffer = BytesMut::with_capacity(5 + head_len);
    buffer.put_u8(0);
    buffer.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    head.encode_raw(&mut buffer);
    let mut parts = Vec::with_capacity(1 + resources.len());
    parts.push(buffer.freeze());
    parts.extend(resources);
    Outgoing::Message(parts)
}

/// A new stream's plumbing: its decoded requests (their partial messages
/// charged to `budget`), the sending side its task answers with (a
/// response that stalls fires `stall`), and the HTTP response whose body
/// drains what it sends.
pub(super) fn open<T: Request>(
    body: hyper::body::Incoming,
    budget: Option<Arc<RequestBudget>>,
    stall: Option<Arc<WriteStall>>,
) -> (Requests<T>, Responses, http::Response<tonic::body::Body>) {
    let (sender, receiver) = mpsc::channel(QUEUE);
    let progress = Arc::new(Progress::default());
    let mut response = http::Response::new(tonic::body::Body::new(ResponseBody {
        queue: receiver,
        pending: Vec::new().into_iter(),
        ended: false,
        progress: Arc::clone(&progress),
    }));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    let requests = Requests {
        body: Some(body),
        deframer: Deframer::new(budget),
        _message: std::marker::PhantomData,
    };
    let responses = Responses {
        sender: Some(sender),
        progress,
        stall,
    };
    (requests, responses, response)
}

/// A stream's response side: messages go to its response body (waiting
/// while the queue is full), and its end is the gRPC status. Dropped
/// without an end, the stream ends with `OK` (the task is done: the proxy
/// left or the server closes).
pub(super) struct Responses {
    sender: Option<mpsc::Sender<Outgoing>>,
    /// What the body has handed to h2 (`stall.rs`).
    progress: Arc<Progress>,
    /// The connection's signal, fired when a response stalls.
    stall: Option<Arc<WriteStall>>,
}

impl Responses {
    /// Responses going nowhere (a task's size, in tests).
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        Responses {
            sender: None,
            progress: Arc::default(),
            stall: None,
        }
    }

    /// Sends one message, or ends the stream; fails when the stream is
    /// gone (reset, connection closed) or already ended, or when the
    /// response before it has handed nothing to h2 for the write timeout
    /// (then the connection is dropped, `stall.rs`).
    pub(super) async fn send(&mut self, outgoing: Outgoing) -> Result<(), Gone> {
        let sender = match outgoing {
            Outgoing::Message(_) => self.sender.as_ref().ok_or(Gone)?,
            Outgoing::End(_) => {
                let sender = self.sender.take().ok_or(Gone)?;
                let permit = stall::reserve(&sender, &self.progress, self.stall.as_deref()).await;
                permit.map_err(|_| Gone)?.send(outgoing);
                return Ok(());
            }
        };
        match stall::reserve(sender, &self.progress, self.stall.as_deref()).await {
            Ok(permit) => {
                permit.send(outgoing);
                Ok(())
            }
            Err(Stalled::Gone | Stalled::Stalled) => Err(Gone),
        }
    }

    /// Completes once a response has waited for the write timeout with
    /// nothing handed to h2 (the connection's stall fired); never while
    /// nothing waits. Looked at while the stream's task waits for its next
    /// event.
    pub(super) async fn stalled(&self) {
        match (&self.sender, &self.stall) {
            (Some(sender), Some(stall)) => stall::stalled(sender, &self.progress, stall).await,
            _ => std::future::pending().await,
        }
    }
}

/// The stream is gone: nobody is left to send to.
#[derive(Debug)]
pub(super) struct Gone;

/// A stream's response body: the messages its task queues, one DATA
/// frame per part, then the status as trailers.
struct ResponseBody {
    queue: mpsc::Receiver<Outgoing>,
    /// The parts of the message being written (its allocation is given
    /// back once they are all out, not kept at the largest message's).
    pending: std::vec::IntoIter<Bytes>,
    ended: bool,
    /// Frames handed over, for the stream's task (`stall.rs`).
    progress: Arc<Progress>,
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        loop {
            if let Some(data) = self.pending.next() {
                self.progress.handed(!self.pending.as_slice().is_empty());
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            // Out of parts: their allocation goes now, not when the next
            // message comes.
            self.pending = Vec::new().into_iter();
            self.progress.writing(false);
            if self.ended {
                return Poll::Ready(None);
            }
            let status = match std::task::ready!(self.queue.poll_recv(cx)) {
                Some(Outgoing::Message(parts)) => {
                    self.pending = parts.into_iter();
                    self.progress.writing(true);
                    continue;
                }
                Some(Outgoing::End(status)) => *status,
                // The task is done (the proxy left or the server closes).
                None => tonic::Status::ok(""),
            };
            self.ended = true;
            self.queue.close();
            return Poll::Ready(Some(Ok(Frame::trailers(trailers(&status)))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.as_slice().is_empty()
    }
}

/// `status` as gRPC trailers: `grpc-status`, and `grpc-message`
/// percent-encoded as the gRPC spec says (bytes outside printable ASCII,
/// and `%`), so a proxy's log shows the reason as it was written.
pub(super) fn trailers(status: &tonic::Status) -> http::HeaderMap {
    let mut trailers = http::HeaderMap::with_capacity(2);
    trailers.insert("grpc-status", HeaderValue::from(status.code() as i32));
    if !status.message().is_empty()
        && let Ok(message) = HeaderValue::from_str(&grpc_message(status.message()))
    {
        trailers.insert("grpc-message", message);
    }
    trailers
}

/// A status message percent-encoded for `grpc-message`.
fn grpc_message(message: &str) -> String {
    use std::fmt::Write;
    let mut encoded = String::with_capacity(message.len());
    for byte in message.bytes() {
        if (0x20..=0x7e).contains(&byte) && byte != b'%' {
            encoded.push(char::from(byte));
        } else {
            let _ = write!(encoded, "%{byte:02X}");
        }
    }
    encoded
}

/// Why a stream's requests ended in error.
#[derive(Debug)]
pub(super) enum RequestError {
    /// The proxy sent something that is not a valid request: the stream
    /// ends with this status.
    Malformed(tonic::Status),
    /// The proxy's side failed (reset, connection closed, keepalive
    /// unanswered): nobody is left to tell.
    Transport(tonic::Status),
}

/// A request message type, decoded from its frames.
pub(crate) trait Request: Sized + Send + 'static {
    /// Decodes one message (its bytes, without the gRPC prefix).
    fn decode(message: Frames) -> Result<Self, prost::DecodeError>;
}

impl Request for envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
    fn decode(message: Frames) -> Result<Self, prost::DecodeError> {
        <Self as prost::Message>::decode(message)
    }
}

/// The gRPC deframer of one stream: takes the body's data chunks as they
/// come and gives back whole messages (their bytes, not copied), holding
/// what a partial message has received against the connection's budget.
pub(crate) struct Deframer {
    /// Chunks received and not yet given back as a message.
    pending: Frames,
    budget: Option<Arc<RequestBudget>>,
}

impl Deframer {
    /// A deframer charging `budget` (`None`: bounded by
    /// [`MAX_REQUEST`] alone).
    pub(crate) fn new(budget: Option<Arc<RequestBudget>>) -> Self {
        Deframer {
            pending: Frames::default(),
            budget,
        }
    }

    /// The largest request this stream may receive.
    fn limit(&self) -> usize {
        self.budget
            .as_ref()
            .map_or(MAX_REQUEST, |b| b.limit().min(MAX_REQUEST))
    }

    /// Adds a chunk of the body; fails when its partial message would
    /// take the connection over its budget.
    pub(crate) fn push(&mut self, chunk: Bytes) -> Result<(), tonic::Status> {
        if let Some(budget) = &self.budget
            && let Err(OverBudget { limit, used }) = budget.charge(chunk.len())
        {
            let held = self.pending.remaining();
            return Err(tonic::Status::resource_exhausted(format!(
                "a request of more than {} bytes received so far does not fit: this connection's streams                  hold {used} bytes of partial requests, of a request buffer of {limit} bytes",
                held + chunk.len()
            )));
        }
        self.pending.push(chunk);
        Ok(())
    }

    /// The next whole message, if one has come; fails on a compressed or
    /// too large one.
    pub(crate) fn next(&mut self) -> Result<Option<Frames>, tonic::Status> {
        if self.pending.remaining() < 5 {
            return Ok(None);
        }
        let [compressed, l0, l1, l2, l3] = self.pending.peek::<5>();
        if compressed != 0 {
            return Err(tonic::Status::unimplemented(
                "this server accepts uncompressed requests only",
            ));
        }
        let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
        let limit = self.limit();
        if len.saturating_add(5) > limit {
            return Err(tonic::Status::resource_exhausted(format!(
                "a request of {len} bytes (and its 5-byte prefix) is over this connection's request buffer of                  {limit} bytes"
            )));
        }
        if self.pending.remaining() < 5 + len {
            return Ok(None);
        }
        self.pending.advance(5);
        let message = self.pending.take_front(len);
        self.release(5 + len);
        Ok(Some(message))
    }

    /// Whether a partial message is held.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.remaining() == 0
    }

    fn release(&self, bytes: usize) {
        if let Some(budget) = &self.budget {
            budget.release(bytes);
        }
    }
}

impl Drop for Deframer {
    fn drop(&mut self) {
        self.release(self.pending.remaining());
    }
}

/// The largest request accepted whatever the budget (an EDS subscription
/// to 10,000 clusters is well under 1 MiB).
pub(super) const MAX_REQUEST: usize = 16 * 1024 * 1024;

/// Bytes as a request body's data frames brought them: a [`Buf`] over
/// shared chunks, whose `copy_to_bytes` slices a chunk instead of copying
/// when the bytes lie in one (as almost every field of a request does).
#[derive(Clone, Default, Debug)]
pub(crate) struct Frames {
    chunks: VecDeque<Bytes>,
    remaining: usize,
}

impl Frames {
    /// Appends a frame.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.remaining += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// The first `len` bytes, taken off the front (`len` at most
    /// `remaining()`).
    fn take_front(&mut self, mut len: usize) -> Frames {
        let mut taken = Frames::default();
        while len > 0 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let chunk = if front.len() <= len {
                self.chunks.pop_front().unwrap_or_default()
            } else {
                front.split_to(len)
            };
            len -= chunk.len();
            self.remaining -= chunk.len();
            taken.push(chunk);
        }
        taken
    }

    /// The first `N` bytes, left in place (`N` at most `remaining()`).
    fn peek<const N: usize>(&self) -> [u8; N] {
        let mut out = [0; N];
        let mut at = 0;
        for chunk in &self.chunks {
            let n = chunk.len().min(N - at);
            out[at..at + n].copy_from_slice(&chunk[..n]);
            at += n;
            if at == N {
                break;
            }
        }
        out
    }

    /// The bytes as one buffer (copied only when they span frames).
    pub(crate) fn contiguous(&self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks[0].clone(),
            _ => {
                let mut out = BytesMut::with_capacity(self.remaining);
                for chunk in &self.chunks {
                    out.put_slice(chunk);
                }
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for Frames {
    fn from(bytes: Bytes) -> Self {
        let mut frames = Frames::default();
        frames.push(bytes);
        frames
    }
}

impl Buf for Frames {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |c| c.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self.chunks.front_mut().expect("counted");
            if front.len() > cnt {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.chunks.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        match self.chunks.front_mut() {
            Some(front) if front.len() >= len => {
                let out = front.split_to(len);
                if front.is_empty() {
                    self.chunks.pop_front();
                }
                self.remaining -= len;
                out
            }
            _ => {
                assert!(len <= self.remaining, "copy_to_bytes past the end");
                let mut out = BytesMut::with_capacity(len);
                out.put(self.take_front(len));
                out.freeze()
            }
        }
    }
}

/// A stream's requests, decoded one message at a time.
pub(super) struct Requests<T> {
    /// `None`: a stream with no requests (a task's size, in tests).
    body: Option<hyper::body::Incoming>,
    deframer: Deframer,
    _message: std::marker::PhantomData<fn() -> T>,
}

impl<T: Request> Requests<T> {
    /// No requests (a task's size, in tests).
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        Requests {
            body: None,
            deframer: Deframer::new(None),
            _message: std::marker::PhantomData,
        }
    }

    /// The next request; `None` when the proxy ended the stream.
    pub(super) async fn message(&mut self) -> Result<Option<T>, RequestError> {
        loop {
            if let Some(message) = self.deframer.next().map_err(RequestError::Malformed)? {
                return T::decode(message).map(Some).map_err(|e| {
                    RequestError::Malformed(tonic::Status::invalid_argument(format!(
                        "undecodable request: {e}"
                    )))
                });
            }
            let Some(body) = &mut self.body else {
                return Ok(None);
            };
            let frame = std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await;
            match frame {
                None if self.deframer.is_empty() => return Ok(None),
                None => {
                    return Err(RequestError::Malformed(tonic::Status::invalid_argument(
                        "the stream ended inside a message",
                    )));
                }
                Some(Err(error)) => {
                    return Err(RequestError::Transport(tonic::Status::unavailable(format!(
                        "the request stream failed: {error}"
                    ))));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.deframer.push(data).map_err(RequestError::Malformed)?;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(message: &[u8]) -> Bytes {
        let mut framed = BytesMut::new();
        framed.put_u8(0);
        framed.put_u32(u32::try_from(message.len()).unwrap());
        framed.put_slice(message);
        framed.freeze()
    }

    /// Partial messages are charged to the connection's budget and given
    /// back whole; a message larger than the budget ends its stream with
    /// the sizes named, and so does one that finds the budget taken.
    #[test]
    fn partial_messages_are_held_against_the_connection_budget() {
        let budget = RequestBudget::new(64);
        let mut one = Deframer::new(Some(Arc::clone(&budget)));
        let mut two = Deframer::new(Some(Arc::clone(&budget)));
        let message = framed(&[7; 30]);
        one.push(message.slice(..20)).unwrap();
        assert!(one.next().unwrap().is_none());
        assert_eq!(budget.used(), 20);
        two.push(message.slice(..20)).unwrap();
        // 40 of 64 held: 30 more do not fit.
        let refused = two.push(Bytes::from(vec![0; 30])).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("40 bytes") && refused.message().contains("64 bytes"),
            "{refused:?}"
        );
        one.push(message.slice(20..)).unwrap();
        assert_eq!(one.next().unwrap().unwrap().contiguous(), &[7; 30][..]);
        assert_eq!(budget.used(), 20);
        drop(two);
        assert_eq!(budget.used(), 0);
        // Larger than the whole budget: refused from its prefix.
        let mut three = Deframer::new(Some(Arc::clone(&budget)));
        three.push(framed(&[1; 100]).slice(..5)).unwrap();
        let refused = three.next().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(
            refused.message().contains("100 bytes") && refused.message().contains("64 bytes"),
            "{refused:?}"
        );
    }

    #[test]
    fn status_messages_are_percent_encoded_as_the_grpc_spec_says() {
        let status = tonic::Status::permission_denied("\"a\" may only claim 100% of é");
        let trailers = trailers(&status);
        assert_eq!(trailers["grpc-status"], "7");
        assert_eq!(trailers["grpc-message"], "\"a\" may only claim 100%25 of %C3%A9");
        let decoded = tonic::Status::from_header_map(&trailers).unwrap();
        assert_eq!(decoded.message(), status.message());
    }

    /// A message split across frames at every point reads the same.
    #[test]
    fn frames_read_as_the_bytes_they_hold_wherever_they_are_split() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for cut in [0, 1, 7, 128, 255, 256] {
            for second in [cut, (cut + 3).min(256)] {
                let mut frames = Frames::default();
                frames.push(Bytes::copy_from_slice(&bytes[..cut]));
                frames.push(Bytes::copy_from_slice(&bytes[cut..second]));
                frames.push(Bytes::copy_from_slice(&bytes[second..]));
                assert_eq!(frames.remaining(), 256);
                assert_eq!(frames.contiguous(), &bytes[..]);
                assert_eq!(frames.peek::<5>(), [0, 1, 2, 3, 4]);
                let mut read = frames.clone();
                let head = read.copy_to_bytes(100);
                assert_eq!(head, &bytes[..100]);
                let mut middle = read.take_front(50);
                assert_eq!(middle.copy_to_bytes(50), &bytes[100..150]);
                read.advance(6);
                assert_eq!(read.remaining(), 100);
                let mut rest = Vec::new();
                while read.has_remaining() {
                    let n = read.chunk().len();
                    rest.extend_from_slice(read.chunk());
                    read.advance(n);
                }
                assert_eq!(rest, &bytes[156..]);
            }
        }
    }
}
