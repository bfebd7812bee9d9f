//! The port's other gRPC services (`ServeOptions::routes`) through a real
//! tonic client: a response message reaches the client as the service
//! sent it, and a compressed one keeps its `grpc-encoding`, so the client
//! decodes it as compressed (never as a plain message).

mod support;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use http_body::Frame;
use pilot_ads::ServeOptions;
use prost::Message;

/// A unary service answering every call with one `DiscoveryResponse`
/// whose version is `answer`, its gRPC prefix's compressed flag set when
/// `compressed` (with `grpc-encoding: gzip`, as tonic's compressing
/// server sends it).
#[derive(Clone)]
struct Answer {
    compressed: bool,
}

impl tonic::server::NamedService for Answer {
    const NAME: &'static str = "test.Answer";
}

impl tower_service::Service<http::Request<tonic::body::Body>> for Answer {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        let message = DiscoveryResponse {
            version_info: "answer".into(),
            ..Default::default()
        }
        .encode_to_vec();
        let mut data = BytesMut::new();
        data.put_u8(u8::from(self.compressed));
        data.put_u32(u32::try_from(message.len()).unwrap());
        data.put_slice(&message);
        let mut response = http::Response::new(tonic::body::Body::new(OneMessage {
            data: Some(data.freeze()),
            trailers: true,
        }));
        response
            .headers_mut()
            .insert("content-type", http::HeaderValue::from_static("application/grpc"));
        if self.compressed {
            response
                .headers_mut()
                .insert("grpc-encoding", http::HeaderValue::from_static("gzip"));
        }
        std::future::ready(Ok(response))
    }
}

/// A body of one data frame, then trailers with `grpc-status: 0`.
struct OneMessage {
    data: Option<Bytes>,
    trailers: bool,
}

impl http_body::Body for OneMessage {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(data) = self.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }
}

/// Calls `/test.Answer/Call` on an ADS port serving `service` beside ADS.
async fn call(service: Answer) -> Result<DiscoveryResponse, tonic::Status> {
    let server = support::server::empty();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut options = ServeOptions::default();
    options.routes = Some(tonic::service::Routes::new(service));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        server
            .serve_with(listener, options, async {
                let _ = stopped.await;
            })
            .await
    });
    let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(20))
        .connect()
        .await
        .expect("connect to the ADS port");
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.expect("the channel is ready");
    let codec = tonic_prost::ProstCodec::<DiscoveryRequest, DiscoveryResponse>::default();
    let result = grpc
        .unary(
            tonic::Request::new(DiscoveryRequest::default()),
            http::uri::PathAndQuery::from_static("/test.Answer/Call"),
            codec,
        )
        .await
        .map(tonic::Response::into_inner);
    let _ = stop.send(());
    serving.await.unwrap().expect("the server stops cleanly");
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_service_answers_through_the_ads_port() {
    let response = call(Answer { compressed: false }).await.expect("the answer");
    assert_eq!(response.version_info, "answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compressed_response_reaches_the_client_with_its_encoding() {
    // The client accepts no compression: it refuses the message because it
    // is gzip, which it can only know from the service's header.
    let status = call(Answer { compressed: true })
        .await
        .expect_err("a compressed message is not read as a plain one");
    assert_eq!(status.code(), tonic::Code::Unimplemented, "{status:?}");
    assert!(status.message().contains("gzip"), "{status:?}");
}
