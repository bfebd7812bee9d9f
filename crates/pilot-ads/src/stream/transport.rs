//! The ADS transport: gRPC framing and the request/response plumbing of
//! one stream, with no knowledge of the xDS protocols. A response goes out
//! as a small header plus slices of the configuration buffers every
//! connection shares (see `generated.rs`): a push to 2,000 proxies copies
//! nothing per proxy, and what waits in a slow proxy's queue costs only
//! reference counts.
//!
//! Requests are gRPC length-prefixed messages decoded from the request
//! body's data frames as they came ([`Frames`]), without copying them into
//! one buffer: a sidecar's EDS ACK names every cluster, 160 KB in a
//! 1,000-service mesh, and 2,000 of them copied into fresh buffers made
//! page faults a tenth of the server's CPU in an endpoint push. Nothing is
//! kept between messages (a buffer kept at its high-water mark would cost
//! that per connection). Responses are written
//! as HTTP/2 data frames by a small [`Body`](http_body::Body), ended by
//! `grpc-status` trailers.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, HeaderValue};
use http_body::{Body as _, Frame};
use tokio::sync::mpsc;
use tonic::body::Body;

/// The largest request accepted (an EDS subscription to 10,000 clusters is
/// well under 1 MiB).
const MAX_REQUEST: usize = 16 * 1024 * 1024;

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

/// A new stream's plumbing: its decoded requests, the bounded queue its
/// task sends responses into (`queue` long), and the HTTP response whose
/// body drains that queue.
pub(super) fn open<T: Request>(
    body: Body,
    queue: usize,
) -> (Requests<T>, mpsc::Sender<Outgoing>, http::Response<Body>) {
    let (responses, receiver) = mpsc::channel(queue.max(1));
    let mut response = http::Response::new(Body::new(Responses {
        queue: receiver,
        pending: Vec::new().into_iter(),
        ended: false,
    }));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    (Requests::new(body), responses, response)
}

/// A stream's response body: the messages its task queues, then trailers.
struct Responses {
    queue: mpsc::Receiver<Outgoing>,
    /// The parts of the message being written (its allocation is given
    /// back once they are all out, not kept at the largest message's).
    pending: std::vec::IntoIter<Bytes>,
    ended: bool,
}

impl http_body::Body for Responses {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        loop {
            if let Some(data) = self.pending.next() {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            // Out of parts: their allocation goes now, not when the next
            // message comes.
            self.pending = Vec::new().into_iter();
            if self.ended {
                return Poll::Ready(None);
            }
            let status = match std::task::ready!(self.queue.poll_recv(cx)) {
                Some(Outgoing::Message(parts)) => {
                    self.pending = parts.into_iter();
                    continue;
                }
                Some(Outgoing::End(status)) => *status,
                // The task is done (the proxy left or the server closes).
                None => tonic::Status::ok(""),
            };
            self.ended = true;
            self.queue.close();
            let mut trailers = http::HeaderMap::new();
            if status.add_header(&mut trailers).is_err() {
                trailers.insert("grpc-status", HeaderValue::from_static("13"));
            }
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.as_slice().is_empty()
    }
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
pub(super) trait Request: Sized + Send + 'static {
    /// Decodes one message (its bytes, without the gRPC prefix).
    fn decode(message: Frames) -> Result<Self, prost::DecodeError>;
}

impl Request for envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
    fn decode(message: Frames) -> Result<Self, prost::DecodeError> {
        <Self as prost::Message>::decode(message)
    }
}

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
    body: Body,
    /// Frames received and not yet decoded.
    pending: Frames,
    _message: std::marker::PhantomData<fn() -> T>,
}

impl<T: Request> Requests<T> {
    fn new(body: Body) -> Self {
        Requests {
            body,
            pending: Frames::default(),
            _message: std::marker::PhantomData,
        }
    }

    /// The next request; `None` when the proxy ended the stream.
    pub(super) async fn message(&mut self) -> Result<Option<T>, RequestError> {
        loop {
            if self.pending.remaining() >= 5 {
                let [compressed, l0, l1, l2, l3] = self.pending.peek::<5>();
                if compressed != 0 {
                    return Err(RequestError::Malformed(tonic::Status::unimplemented(
                        "this server accepts uncompressed requests only",
                    )));
                }
                let len = u32::from_be_bytes([l0, l1, l2, l3]) as usize;
                if len > MAX_REQUEST {
                    return Err(RequestError::Malformed(tonic::Status::resource_exhausted(
                        format!("a request of {len} bytes is over the limit of {MAX_REQUEST}"),
                    )));
                }
                if self.pending.remaining() >= 5 + len {
                    self.pending.advance(5);
                    let message = self.pending.take_front(len);
                    return T::decode(message).map(Some).map_err(|e| {
                        RequestError::Malformed(tonic::Status::invalid_argument(format!(
                            "undecodable request: {e}"
                        )))
                    });
                }
            }
            let frame = std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await;
            match frame {
                None if self.pending.remaining() == 0 => return Ok(None),
                None => {
                    return Err(RequestError::Malformed(tonic::Status::invalid_argument(
                        "the stream ended inside a message",
                    )));
                }
                Some(Err(status)) => return Err(RequestError::Transport(status)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending.push(data);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
