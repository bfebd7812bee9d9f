//! The port's other gRPC services ([`ServeOptions::routes`](super::ServeOptions::routes),
//! tonic's) on pilot-h2 streams: a stream's request becomes an
//! `http::Request` whose body yields its messages (gRPC-framed again, as
//! tonic's codecs read them) and whose extensions carry the connection's
//! [`Peer`]; the response's messages are sent one by one and its
//! `grpc-status` (trailers, or a trailers-only head) ends the stream. One
//! task per call: these are short unary calls (a certificate signing).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use http_body::{Body as _, Frame};
use tower_service::Service as _;

use super::peer::Peer;
use super::transport;

/// Tonic's routes, called per stream.
#[derive(Clone)]
pub(super) struct Routes {
    routes: tonic::service::Routes,
}

impl Routes {
    /// Serves calls with `routes`.
    pub(super) fn new(routes: tonic::service::Routes) -> Self {
        Routes { routes }
    }

    /// Serves one call (in a task of its own).
    pub(super) fn call(
        &self,
        head: pilot_h2::RequestHead,
        messages: pilot_h2::Messages,
        sender: pilot_h2::Sender,
    ) {
        let mut request = http::Request::new(tonic::body::Body::new(RequestBody { messages }));
        *request.method_mut() = http::Method::POST;
        *request.version_mut() = http::Version::HTTP_2;
        match http::Uri::try_from(head.path.as_str()) {
            Ok(uri) => *request.uri_mut() = uri,
            Err(_) => {
                let status = tonic::Status::unimplemented(format!("no method {}", head.path));
                return sender.finish(transport::code(status.code()), status.message());
            }
        }
        if let Some(peer) = head.connection.extensions.get::<Peer>() {
            request.extensions_mut().insert(peer.clone());
        }
        *request.headers_mut() = head.headers;
        let call = self.routes.clone().call(request);
        tokio::spawn(async move {
            match call.await {
                Ok(response) => respond(response, sender).await,
                Err(never) => match never {},
            }
        });
    }
}

/// A call's request body: its messages, each behind its gRPC prefix.
struct RequestBody {
    messages: pilot_h2::Messages,
}

impl http_body::Body for RequestBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        match std::task::ready!(self.messages.poll_next(cx)) {
            None => Poll::Ready(None),
            Some(Err(status)) => Poll::Ready(Some(Err(tonic::Status::new(
                tonic::Code::from_i32(status.code as i32),
                status.message,
            )))),
            Some(Ok(mut message)) => {
                let len = message.remaining();
                let mut framed = BytesMut::with_capacity(5 + len);
                framed.put_u8(0);
                framed.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
                while message.has_remaining() {
                    let n = message.chunk().len();
                    framed.put_slice(message.chunk());
                    message.advance(n);
                }
                Poll::Ready(Some(Ok(Frame::data(framed.freeze()))))
            }
        }
    }
}

/// Sends a call's response messages and ends the stream with its status.
async fn respond(response: http::Response<tonic::body::Body>, mut sender: pilot_h2::Sender) {
    let (parts, mut body) = response.into_parts();
    // A trailers-only response: its status is in the head.
    if let Some(status) = tonic::Status::from_header_map(&parts.headers) {
        return finish(sender, &status);
    }
    let mut pending = BytesMut::new();
    loop {
        let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
        let frame = match frame {
            None => {
                let status = tonic::Status::internal("the response ended without a status");
                return finish(sender, &status);
            }
            Some(Err(status)) => return finish(sender, &status),
            Some(Ok(frame)) => frame,
        };
        let data = match frame.into_data() {
            Ok(data) => data,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    let status = tonic::Status::from_header_map(&trailers).unwrap_or_else(|| {
                        tonic::Status::internal("the response's trailers carry no grpc-status")
                    });
                    return finish(sender, &status);
                }
                continue;
            }
        };
        pending.put(data);
        // Every complete message, without its prefix (pilot-h2 adds it).
        while pending.len() >= 5 {
            let len = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
            if pending.len() < 5 + len {
                break;
            }
            pending.advance(5);
            let message = pending.split_to(len).freeze();
            if sender.send(vec![message]).await.is_err() {
                return;
            }
        }
    }
}

fn finish(sender: pilot_h2::Sender, status: &tonic::Status) {
    sender.finish(transport::code(status.code()), status.message());
}
