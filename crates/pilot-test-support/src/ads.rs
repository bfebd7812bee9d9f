//! The ADS test client (feature `ads`): a gRPC client on a local server,
//! and a stream whose requests the test sends one by one.

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// The CDS type URL.
pub const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// The EDS type URL.
pub const EDS: &str = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";
/// The LDS type URL.
pub const LDS: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// The RDS type URL.
pub const RDS: &str = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";

/// An ADS client on 127.0.0.1:`port`, retrying while the server starts
/// (for up to 2 s; then it panics: the server did not start).
pub async fn ads_client(port: u16) -> AggregatedDiscoveryServiceClient<Channel> {
    for _ in 0..100 {
        if let Ok(client) =
            AggregatedDiscoveryServiceClient::connect(format!("http://127.0.0.1:{port}")).await
        {
            return client;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the ADS server on port {port} did not start");
}

/// A request for `type_url` from `node_id` (the node only on a stream's
/// first request, as Envoy sends it, when given).
pub fn request(node_id: Option<&str>, type_url: &str, version: &str, nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        node: node_id.map(|id| Node {
            id: id.into(),
            ..Default::default()
        }),
        type_url: type_url.into(),
        version_info: version.into(),
        response_nonce: nonce.into(),
        ..Default::default()
    }
}

/// Opens a state-of-the-world ADS stream on 127.0.0.1:`port` whose first
/// request is `first`; returns the sender for further requests and the
/// responses.
pub async fn open(
    port: u16,
    first: DiscoveryRequest,
) -> (
    mpsc::Sender<DiscoveryRequest>,
    tonic::Streaming<DiscoveryResponse>,
) {
    let (tx, requests) = requests(4);
    tx.send(first).await.expect("the receiver is here");
    let responses = ads_client(port)
        .await
        .stream_aggregated_resources(requests)
        .await
        .expect("the stream opens")
        .into_inner();
    (tx, responses)
}

/// A channel whose receiving side is a request stream for
/// `stream_aggregated_resources` or `delta_aggregated_resources`.
pub fn requests<T: Send + 'static>(
    buffer: usize,
) -> (mpsc::Sender<T>, impl futures::Stream<Item = T> + Send + 'static) {
    let (tx, rx) = mpsc::channel(buffer);
    let stream = futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|r| (r, rx)) });
    (tx, stream)
}
