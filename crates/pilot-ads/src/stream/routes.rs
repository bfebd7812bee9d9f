//! The port's other gRPC services ([`ServeOptions::routes`](super::ServeOptions::routes),
//! tonic's) on pilot-h2 streams: a stream's request becomes an
//! `http::Request` whose body yields its messages (gRPC-framed again, as
//! tonic's codecs read them) and whose extensions carry the connection's
//! [`Peer`]; the response's messages are sent one by one and its
//! `grpc-status` (trailers, or a trailers-only head) ends the stream. One
//! task per call: these are short unary calls (a certificate signing).
//!
//! Messages go out uncompressed (pilot-h2 writes the prefix, with no
//! `grpc-encoding`): a service that compresses its response (a server
//! `send_compressed` of tonic's) has the call ended with `INTERNAL`
//! saying so, rather than its compressed bytes passed on as a plain
//! message.

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
    let encoding = parts.headers.get("grpc-encoding");
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
        loop {
            match next_message(&mut pending, encoding) {
                Ok(None) => break,
                Ok(Some(message)) => {
                    if sender.send(vec![message]).await.is_err() {
                        return;
                    }
                }
                Err(status) => return finish(sender, &status),
            }
        }
    }
}

/// Takes the first complete message of `pending` (gRPC-framed), without
/// its prefix; `None` while it is incomplete. A compressed one (flag set)
/// is refused: this port sends messages uncompressed.
fn next_message(
    pending: &mut BytesMut,
    encoding: Option<&http::HeaderValue>,
) -> Result<Option<Bytes>, tonic::Status> {
    if pending.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([pending[1], pending[2], pending[3], pending[4]]) as usize;
    if pending.len() < 5 + len {
        return Ok(None);
    }
    if pending[0] != 0 {
        let encoding = encoding
            .and_then(|e| e.to_str().ok())
            .unwrap_or("no grpc-encoding");
        return Err(tonic::Status::internal(format!(
            "the service's response message is compressed ({encoding}); the ADS port sends messages uncompressed only"
        )));
    }
    pending.advance(5);
    Ok(Some(pending.split_to(len).freeze()))
}

fn finish(sender: pilot_h2::Sender, status: &tonic::Status) {
    sender.finish(transport::code(status.code()), status.message());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, message: &[u8]) -> BytesMut {
        let mut framed = BytesMut::new();
        framed.put_u8(flag);
        framed.put_u32(u32::try_from(message.len()).unwrap());
        framed.put_slice(message);
        framed
    }

    #[test]
    fn messages_are_taken_whole_and_compressed_ones_refused() {
        let mut pending = framed(0, b"one");
        pending.put(framed(0, b"two"));
        pending.truncate(pending.len() - 1);
        assert_eq!(
            next_message(&mut pending, None).unwrap().as_deref(),
            Some(&b"one"[..])
        );
        assert_eq!(next_message(&mut pending, None).unwrap(), None);
        pending.put_u8(b'o');
        assert_eq!(
            next_message(&mut pending, None).unwrap().as_deref(),
            Some(&b"two"[..])
        );
        let mut compressed = framed(1, b"zipped");
        let gzip = http::HeaderValue::from_static("gzip");
        let refused = next_message(&mut compressed, Some(&gzip)).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Internal);
        assert!(refused.message().contains("compressed (gzip)"), "{refused:?}");
    }
}
