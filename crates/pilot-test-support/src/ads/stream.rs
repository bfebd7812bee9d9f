//! A typed ADS stream whose every request the test writes: requests go
//! out as the test sends them, responses are decoded whole.

use std::marker::PhantomData;
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use prost::Message;

use super::error::Error;
use super::transport::{GrpcStream, WINDOW, request_headers};
use crate::PATIENCE;

/// A request message of one of ADS's two methods: its response type and
/// its method's path.
pub trait AdsRequest: Message + Default + Send + 'static {
    /// What the server answers with.
    type Response: Message + Default + Send + 'static;
    /// The method's HTTP/2 `:path`.
    const PATH: &'static str;
}

impl AdsRequest for DiscoveryRequest {
    type Response = DiscoveryResponse;
    const PATH: &'static str =
        "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";
}

impl AdsRequest for DeltaDiscoveryRequest {
    type Response = DeltaDiscoveryResponse;
    const PATH: &'static str =
        "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources";
}

/// A state-of-the-world stream (`StreamAggregatedResources`).
pub type SotwStream = AdsStream<DiscoveryRequest>;

/// A delta (incremental) stream (`DeltaAggregatedResources`).
pub type DeltaStream = AdsStream<DeltaDiscoveryRequest>;

/// One ADS stream on its own connection to a local server, on the lean
/// transport ([`GrpcStream`]): nothing runs in the background, so the
/// server's responses are read (and its PINGs answered) only while the
/// test waits for one.
pub struct AdsStream<R: AdsRequest> {
    grpc: GrpcStream,
    types: PhantomData<fn(R) -> R::Response>,
}

impl<R: AdsRequest> AdsStream<R> {
    /// Connects to the ADS server on 127.0.0.1:`port`, retrying while the
    /// server starts (for up to 2 s; then it panics: the server did not
    /// start). The stream opens with its first [`send`](Self::send).
    pub async fn connect(port: u16) -> Self {
        Self::connect_with_window(port, WINDOW).await
    }

    /// [`connect`](Self::connect) with a receive window of `stream_window`
    /// bytes for the stream: with a small one, a stream the test does not
    /// read holds the server's responses up.
    pub async fn connect_with_window(port: u16, stream_window: u32) -> Self {
        let headers = request_headers(port, R::PATH);
        for _ in 0..100 {
            if let Ok(grpc) = GrpcStream::open_with_window(port, &headers, stream_window).await {
                return AdsStream {
                    grpc,
                    types: PhantomData,
                };
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the ADS server on port {port} did not start");
    }

    /// [`connect`](Self::connect)s and opens the stream with `first`.
    pub async fn open(port: u16, first: &R) -> Self {
        let mut stream = Self::connect(port).await;
        stream.send(first).await.expect("the stream opens");
        stream
    }

    /// Sends `request` (written before this returns, within the server's
    /// flow control windows).
    pub async fn send(&mut self, request: &R) -> Result<(), Error> {
        self.grpc.send(&[request.encode_to_vec().into()]);
        self.grpc.flush().await
    }

    /// The next response; `None` when the server ended the stream with
    /// status OK; `Err` with the status it ended with otherwise, or what
    /// failed.
    pub async fn message(&mut self) -> Result<Option<R::Response>, Error> {
        let Some(message) = self.grpc.message().await? else {
            return Ok(None);
        };
        R::Response::decode(message)
            .map(Some)
            .map_err(|error| Error::Transport(format!("decode: {error}")))
    }

    /// The next response; a hang (for [`PATIENCE`]), an error or the end
    /// of the stream fails the test.
    pub async fn next(&mut self) -> R::Response {
        tokio::time::timeout(PATIENCE, self.message())
            .await
            .expect("a response in time")
            .expect("the stream is healthy")
            .expect("the stream is open")
    }
}
