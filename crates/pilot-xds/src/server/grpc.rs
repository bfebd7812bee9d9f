//! The ADS gRPC service, written against tonic's building blocks instead of
//! its generated server so that a response goes out as a small header plus
//! slices of the configuration buffers every connection shares (see
//! `generated.rs`): a push to 2,000 proxies copies nothing per proxy, and
//! what waits in a slow proxy's queue costs only reference counts.
//!
//! Requests are gRPC length-prefixed messages read from the request body
//! into a buffer that is let go after each message (a sidecar's EDS ACK
//! names every cluster, 100 KB in a 1,000-service mesh; a buffer kept at its
//! high-water mark would cost that per connection). Responses are written
//! as HTTP/2 data frames by a small [`Body`](http_body::Body), ended by
//! `grpc-status` trailers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{CONTENT_TYPE, HeaderValue};
use http_body::{Body as _, Frame};
use tokio::sync::mpsc;
use tonic::body::Body;
use tonic::server::NamedService;

use super::{XdsServer, connection, delta, stream};

const SERVICE: &str = "envoy.service.discovery.v3.AggregatedDiscoveryService";
const STREAM_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
const DELTA_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
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

/// The ADS service to add to a `tonic::transport::Server` (see
/// [`XdsServer::service`]).
#[derive(Clone)]
pub struct AdsService {
    pub(super) server: XdsServer,
    pub(super) auth: Option<Arc<dyn super::Authenticate>>,
}

impl NamedService for AdsService {
    const NAME: &'static str = SERVICE;
}

impl tower_service::Service<http::Request<Body>> for AdsService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let compressed = request
            .headers()
            .get("grpc-encoding")
            .is_some_and(|e| e.as_bytes() != b"identity");
        let caller = match &self.auth {
            None => None,
            Some(auth) => match auth.authenticate(request.headers(), request.extensions()) {
                Ok(caller) => Some(caller),
                Err(status) => {
                    tracing::warn!(code = ?status.code(), reason = status.message(), "ADS stream refused");
                    self.server.inner.refused.count(&status);
                    return std::future::ready(Ok(status.into_http()));
                }
            },
        };
        let response = if compressed {
            tonic::Status::unimplemented("this server accepts uncompressed requests only").into_http()
        } else {
            match request.uri().path() {
                STREAM_PATH => self.open::<connection::Connection>(request.into_body(), caller),
                DELTA_PATH => self.open::<delta::DeltaConnection>(request.into_body(), caller),
                path => tonic::Status::unimplemented(format!("no method {path}")).into_http(),
            }
        };
        std::future::ready(Ok(response))
    }
}

impl AdsService {
    /// Starts the task of a new stream of protocol `P`; its responses flow
    /// through a bounded queue into the response body.
    fn open<P: stream::Protocol + 'static>(
        &self,
        body: Body,
        caller: Option<super::Caller>,
    ) -> http::Response<Body> {
        let inner = &self.server.inner;
        let requests = Requests::new(body);
        let (responses, queue) = mpsc::channel(inner.options.send_queue.max(1));
        let id = inner.next_connection.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(stream::drive::<P>(
            Arc::clone(inner),
            id,
            caller,
            requests,
            responses,
        ));
        let mut response = http::Response::new(Body::new(Responses {
            queue,
            pending: VecDeque::new(),
            ended: false,
        }));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        response
    }
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
    pub(super) async fn message(&mut self) -> Result<Option<T>, tonic::Status> {
        loop {
            if self.buffer.len() >= 5 {
                if self.buffer[0] != 0 {
                    return Err(tonic::Status::unimplemented(
                        "this server accepts uncompressed requests only",
                    ));
                }
                let len =
                    u32::from_be_bytes([self.buffer[1], self.buffer[2], self.buffer[3], self.buffer[4]]);
                let len = len as usize;
                if len > MAX_REQUEST {
                    return Err(tonic::Status::resource_exhausted(format!(
                        "a request of {len} bytes is over the limit of {MAX_REQUEST}"
                    )));
                }
                if self.buffer.len() >= 5 + len {
                    let _ = self.buffer.split_to(5);
                    let message = self.buffer.split_to(len).freeze();
                    if self.buffer.is_empty() {
                        // Let the allocation go with the message.
                        self.buffer = BytesMut::new();
                    }
                    return T::decode(message)
                        .map(Some)
                        .map_err(|e| tonic::Status::invalid_argument(format!("undecodable request: {e}")));
                }
                self.buffer.reserve(5 + len - self.buffer.len());
            }
            let frame = std::future::poll_fn(|cx| Pin::new(&mut self.body).poll_frame(cx)).await;
            match frame {
                None if self.buffer.is_empty() => return Ok(None),
                None => {
                    return Err(tonic::Status::invalid_argument(
                        "the stream ended inside a message",
                    ));
                }
                Some(Err(status)) => return Err(status),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}
