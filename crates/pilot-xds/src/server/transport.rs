//! The ADS transport: gRPC framing and the request/response plumbing of
//! one stream, with no knowledge of the xDS protocols. A response goes out
//! as a small header plus slices of the configuration buffers every
//! connection shares (see `generated.rs`): a push to 2,000 proxies copies
//! nothing per proxy, and what waits in a slow proxy's queue costs only
//! reference counts.
//!
//! Requests are gRPC length-prefixed messages read from the request body
//! into a buffer that is let go after each message (a sidecar's EDS ACK
//! names every cluster, 100 KB in a 1,000-service mesh; a buffer kept at its
//! high-water mark would cost that per connection). Responses are written
//! as HTTP/2 data frames by a small [`Body`](http_body::Body), ended by
//! `grpc-status` trailers.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
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
    /// End the stream with this status.
    End(tonic::Status),
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
pub(super) fn open<T: prost::Message + Default>(
    body: Body,
    queue: usize,
) -> (Requests<T>, mpsc::Sender<Outgoing>, http::Response<Body>) {
    let (responses, receiver) = mpsc::channel(queue.max(1));
    let mut response = http::Response::new(Body::new(Responses {
        queue: receiver,
        pending: VecDeque::new(),
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
    pending: VecDeque<Bytes>,
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
            if let Some(data) = self.pending.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            let status = match std::task::ready!(self.queue.poll_recv(cx)) {
                Some(Outgoing::Message(parts)) => {
                    self.pending.extend(parts);
                    continue;
                }
                Some(Outgoing::End(status)) => status,
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
        self.ended && self.pending.is_empty()
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

/// A stream's requests, decoded one message at a time.
pub(super) struct Requests<T> {
    body: Body,
    buffer: BytesMut,
    _message: std::marker::PhantomData<fn() -> T>,
}

impl<T: prost::Message + Default> Requests<T> {
    fn new(body: Body) -> Self {
        Requests {
            body,
            buffer: BytesMut::new(),
            _message: std::marker::PhantomData,
        }
    }

    /// The next request; `None` when the proxy ended the stream.
    pub(super) async fn message(&mut self) -> Result<Option<T>, RequestError> {
        loop {
            if self.buffer.len() >= 5 {
                if self.buffer[0] != 0 {
                    return Err(RequestError::Malformed(tonic::Status::unimplemented(
                        "this server accepts uncompressed requests only",
                    )));
                }
                let len =
                    u32::from_be_bytes([self.buffer[1], self.buffer[2], self.buffer[3], self.buffer[4]]);
                let len = len as usize;
                if len > MAX_REQUEST {
                    return Err(RequestError::Malformed(tonic::Status::resource_exhausted(
                        format!("a request of {len} bytes is over the limit of {MAX_REQUEST}"),
                    )));
                }
                if self.buffer.len() >= 5 + len {
                    let _ = self.buffer.split_to(5);
                    let message = self.buffer.split_to(len).freeze();
                    if self.buffer.is_empty() {
                        // Let the allocation go with the message.
                        self.buffer = BytesMut::new();
                    }
                    return T::decode(message).map(Some).map_err(|e| {
                        RequestError::Malformed(tonic::Status::invalid_argument(format!(
                            "undecodable request: {e}"
                        )))
                    });
                }
                self.buffer.reserve(5 + len - self.buffer.len());
            }
            let frame = std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await;
            match frame {
                None if self.buffer.is_empty() => return Ok(None),
                None => {
                    return Err(RequestError::Malformed(tonic::Status::invalid_argument(
                        "the stream ended inside a message",
                    )));
                }
                Some(Err(status)) => return Err(RequestError::Transport(status)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}
