//! Clients without a credential cannot exhaust ADS: silent sockets are
//! closed at the handshake deadline, one address cannot hold every slot
//! with connections that never open a stream, a connection may carry only
//! so many streams (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`) and a
//! credential only so many streams in all. Each time a proxy with a valid
//! token still gets its configuration.

mod common;

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use common::TestServer;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
const PROXY_TOKEN: &str = "proxy-token-default-0123456789";

/// A token file with one xds token; the directory holding it.
fn tokens() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, format!("{PROXY_TOKEN} xds proxies\n")).unwrap();
    let path = path.display().to_string();
    (dir, path)
}

fn node(n: usize) -> String {
    format!("sidecar~10.0.0.{n}~reviews-v{n}.default~default.svc.cluster.local")
}

/// An open ADS stream of proxy `n` with the token, and its first response
/// (or the status it was refused with).
async fn open_stream(
    xds: SocketAddr,
    n: usize,
) -> (
    futures::channel::mpsc::UnboundedSender<DiscoveryRequest>,
    Result<DiscoveryResponse, tonic::Status>,
) {
    let (requests, outgoing) = futures::channel::mpsc::unbounded();
    requests
        .unbounded_send(DiscoveryRequest {
            node: Some(Node {
                id: node(n),
                ..Default::default()
            }),
            type_url: CDS.into(),
            ..Default::default()
        })
        .unwrap();
    let mut request = tonic::Request::new(outgoing);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {PROXY_TOKEN}").parse().unwrap());
    let answer = async {
        let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{xds}"))
            .await
            .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
        let mut responses = client.stream_aggregated_resources(request).await?.into_inner();
        match responses.message().await? {
            Some(response) => Ok(response),
            None => Err(tonic::Status::ok("ended without a response")),
        }
    };
    // A guard against a hang, not a figure under test.
    let first = tokio::time::timeout(Duration::from_secs(60), answer)
        .await
        .expect("no answer from the ADS server");
    (requests, first)
}

/// Whether the server closes `stream` (a guard of 60 s against a hang).
fn closed_by_server(mut stream: std::net::TcpStream) -> bool {
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut buf = [0u8; 64];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_sockets_are_closed_at_the_handshake_deadline_and_a_proxy_gets_in() {
    let (_dir, tokens) = tokens();
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--xds-max-connections",
        "20",
        "--xds-handshake-timeout",
        "300ms",
    ])
    .await;
    let xds = server.xds;
    // Every slot taken by a socket that sends nothing: no TLS ClientHello,
    // no HTTP/2 preface.
    let silent: Vec<std::net::TcpStream> = (0..20)
        .map(|_| std::net::TcpStream::connect(xds).unwrap())
        .collect();
    let closed = tokio::task::spawn_blocking(move || {
        silent
            .into_iter()
            .filter(|s| closed_by_server(s.try_clone().unwrap()))
            .count()
    })
    .await
    .unwrap();
    assert_eq!(closed, 20, "every silent socket is closed by the server");
    // A socket that sent the preface but never opened a stream is closed too.
    let mut preface = tokio::net::TcpStream::connect(xds).await.unwrap();
    preface
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut drained = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(60), preface.read_to_end(&mut drained)).await;
    assert!(
        matches!(read, Ok(Ok(_)) | Ok(Err(_))),
        "a connection without a stream is closed"
    );
    let (_stream, first) = open_stream(xds, 1).await;
    assert!(first.is_ok(), "the proxy with a token is served: {first:?}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_cannot_hold_every_slot_with_pending_connections() {
    let (_dir, tokens) = tokens();
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--xds-max-connections",
        "20",
        "--xds-max-pending-per-address",
        "5",
        // Long: the deadline does not free the slots during the test.
        "--xds-handshake-timeout",
        "10m",
    ])
    .await;
    let xds = server.xds;
    // 40 silent sockets from 127.0.0.2: at most 5 are kept.
    let mut flood = Vec::new();
    for _ in 0..40 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        flood.push(socket.connect(xds).await.unwrap());
    }
    // The server accepts connections in the order they were made: the
    // flood's before the proxy's.
    // A proxy from 127.0.0.1 is served while the flood holds its sockets.
    let (_stream, first) = open_stream(xds, 1).await;
    assert!(first.is_ok(), "the proxy with a token is served: {first:?}");
    drop(flood);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streams_are_capped_per_connection_and_per_credential() {
    let (_dir, tokens) = tokens();
    let server = TestServer::start(&[
        "--token-file",
        &tokens,
        "--xds-max-streams-per-connection",
        "2",
        "--xds-max-streams-per-credential",
        "2",
    ])
    .await;
    let xds = server.xds;
    // The server's HTTP/2 SETTINGS announce the per-connection cap.
    let mut raw = tokio::net::TcpStream::connect(xds).await.unwrap();
    raw.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let mut header = [0u8; 9];
    raw.read_exact(&mut header).await.unwrap();
    assert_eq!(header[3], 4, "the server's first frame is SETTINGS");
    let length = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    let mut payload = vec![0u8; length];
    raw.read_exact(&mut payload).await.unwrap();
    let max_streams = payload
        .chunks(6)
        .find(|setting| setting[..2] == [0, 3])
        .map(|setting| u32::from_be_bytes([setting[2], setting[3], setting[4], setting[5]]));
    assert_eq!(max_streams, Some(2), "SETTINGS_MAX_CONCURRENT_STREAMS");
    drop(raw);
    // Two streams of the token are served; a third (on its own
    // connection) is refused while they are open...
    let (one, first) = open_stream(xds, 1).await;
    assert!(first.is_ok(), "{first:?}");
    let (_two, second) = open_stream(xds, 2).await;
    assert!(second.is_ok(), "{second:?}");
    let (_three, third) = open_stream(xds, 3).await;
    let refused = third.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("token proxies"),
        "{}",
        refused.message()
    );
    // ...and served once one of them ends.
    drop(one);
    let mut served = None;
    for _ in 0..600 {
        let (_four, fourth) = open_stream(xds, 4).await;
        if fourth.is_ok() {
            served = Some(());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        served.is_some(),
        "a stream is served once the credential has room"
    );
    server.stop().await;
}
