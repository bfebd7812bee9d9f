//! pilot's admission on top of HTTP/2, from the outside: a silent socket
//! and one that floods PINGs without reading are dropped at the handshake
//! deadline; a connection that does not read what it is sent is dropped
//! at the write timeout; with every slot taken, the oldest connection
//! without a credential makes room for a proxy with one; a request larger
//! than its connection's request buffer ends its stream with
//! `RESOURCE_EXHAUSTED` naming the sizes, and the connection serves on.
//!
//! Deadlines here only guard against a hang (60 s); what is asserted is
//! what a client sees: its socket closed, its stream opened or refused.

mod support;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use pilot_ads::{Authenticate, Authenticating, Caller, NodeScope, ServeOptions, XdsServer};
use pilot_test_support::ads::CDS;

/// A guard against a hang, not a figure under test.
const PATIENCE: Duration = Duration::from_secs(60);

/// The HTTP/2 client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A PING frame.
const PING: &[u8] = b"\x00\x00\x08\x06\x00\x00\x00\x00\x00pingping";

/// Admits `Bearer proxy` only.
struct Token;

impl Authenticate for Token {
    fn authenticate<'a>(
        &'a self,
        headers: &'a http::HeaderMap,
        _: &'a http::Extensions,
    ) -> Authenticating<'a> {
        let answer = match headers.get("authorization").map(http::HeaderValue::as_bytes) {
            Some(b"Bearer proxy") => Ok(Caller {
                name: "proxy".into(),
                scope: NodeScope::Any,
            }),
            // Never decides: a credential whose check hangs.
            Some(b"Bearer hanging") => return Box::pin(std::future::pending()),
            _ => Err(tonic::Status::unauthenticated("no valid token")),
        };
        Box::pin(std::future::ready(answer))
    }
}

/// A server serving `options` on a free loopback port until the returned
/// sender is dropped.
async fn serve(options: ServeOptions) -> (XdsServer, SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let server = support::server::empty();
    let listener = pilot_ads::listen(([127, 0, 0, 1], 0).into()).expect("listen");
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = server.clone();
    tokio::spawn(async move {
        serving
            .serve_with(listener, options, async {
                let _ = stopped.await;
            })
            .await
            .expect("the ADS server serves");
    });
    (server, address, stop)
}

/// Options with the token authenticator and keepalives too slow to close
/// anything during a test.
fn options() -> ServeOptions {
    let mut options = ServeOptions::default();
    options.auth = Some(Arc::new(Token));
    options.http2_keepalive_interval = Duration::from_secs(3600);
    options
}

/// Whether the server closes `stream`: reads (what the server sent is
/// drained) until the end, a reset, or [`PATIENCE`].
fn closed_by_server(mut stream: std::net::TcpStream) -> bool {
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

/// Opens a state-of-the-world stream with `token` over a connection of its
/// own and sends `request`: the stream's response head (the stream was
/// admitted), or the status it was refused with.
async fn open_stream(
    address: SocketAddr,
    token: &str,
    request: DiscoveryRequest,
) -> Result<
    (
        futures::channel::mpsc::UnboundedSender<DiscoveryRequest>,
        tonic::Streaming<envoy_types::pb::envoy::service::discovery::v3::DiscoveryResponse>,
    ),
    tonic::Status,
> {
    let mut client = tokio::time::timeout(
        PATIENCE,
        AggregatedDiscoveryServiceClient::connect(format!("http://{address}")),
    )
    .await
    .expect("connected or refused in time")
    .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    client = client.max_encoding_message_size(64 << 20);
    let (requests, outgoing) = futures::channel::mpsc::unbounded();
    requests.unbounded_send(request).unwrap();
    let mut call = tonic::Request::new(outgoing);
    call.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    let responses = tokio::time::timeout(PATIENCE, client.stream_aggregated_resources(call))
        .await
        .expect("the stream opened or refused in time")?
        .into_inner();
    Ok((requests, responses))
}

fn request(n: usize) -> DiscoveryRequest {
    DiscoveryRequest {
        node: Some(Node {
            id: format!("sidecar~10.0.0.{n}~reviews-v{n}.default~default.svc.cluster.local"),
            ..Default::default()
        }),
        type_url: CDS.into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_non_reading_sockets_are_dropped_at_the_handshake_deadline() {
    let mut options = options();
    options.handshake_timeout = Some(Duration::from_millis(300));
    let (_server, address, _stop) = serve(options).await;
    let silent = std::net::TcpStream::connect(address).unwrap();
    // The preface, then PINGs, never reading their ACKs: the server's
    // writes back up and it stops reading, yet the deadline holds.
    let mut flood = std::net::TcpStream::connect(address).unwrap();
    flood.write_all(PREFACE).unwrap();
    let writer = {
        let mut flood = flood.try_clone().unwrap();
        std::thread::spawn(move || {
            let pings = PING.repeat(1024);
            while flood.write_all(&pings).is_ok() {}
        })
    };
    let closed = tokio::task::spawn_blocking(move || [silent, flood].into_iter().all(closed_by_server))
        .await
        .unwrap();
    assert!(closed, "both sockets are closed by the server");
    writer.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_whose_credential_check_hangs_loses_its_connection_at_the_handshake_deadline() {
    let mut options = options();
    options.handshake_timeout = Some(Duration::from_millis(300));
    let (_server, address, _stop) = serve(options).await;
    // The check never ends: the connection is closed at the deadline, and
    // the client's call fails instead of waiting forever.
    let hanging = open_stream(address, "hanging", request(1)).await.unwrap_err();
    assert_ne!(hanging.code(), tonic::Code::Ok, "{hanging:?}");
    assert!(
        !hanging.message().contains("no valid token"),
        "closed, not refused: {hanging:?}"
    );
    // A proxy whose check ends is admitted, and its stream outlives the
    // deadline.
    let (_requests, mut responses) = open_stream(address, "proxy", request(2)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let first = tokio::time::timeout(PATIENCE, responses.message())
        .await
        .expect("a response in time");
    assert!(first.unwrap().is_some(), "the admitted stream is served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_does_not_read_is_dropped_at_the_write_timeout() {
    let mut options = options();
    options.handshake_timeout = None;
    options.write_timeout = Some(Duration::from_millis(300));
    let (_server, address, _stop) = serve(options).await;
    // A small receive buffer: the server's writes back up sooner.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let client = socket.connect(address).await.unwrap().into_std().unwrap();
    client.set_nonblocking(false).unwrap();
    let mut writing = client.try_clone().unwrap();
    // PINGs until the server closes the connection (the write fails).
    let writer = std::thread::spawn(move || {
        writing.write_all(PREFACE).unwrap();
        let pings = PING.repeat(1024);
        while writing.write_all(&pings).is_ok() {}
    });
    let finished = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + PATIENCE;
        while !writer.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        writer.is_finished()
    })
    .await
    .unwrap();
    assert!(
        finished,
        "the server closed the connection whose writes made no progress"
    );
    drop(client);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_slot_taken_the_oldest_unauthenticated_connection_makes_room() {
    let mut options = options();
    options.max_connections = Some(4);
    // Long: only eviction frees a slot during the test.
    options.handshake_timeout = Some(Duration::from_secs(600));
    let (server, address, _stop) = serve(options).await;
    let silent: Vec<std::net::TcpStream> = (0..4)
        .map(|_| std::net::TcpStream::connect(address).unwrap())
        .collect();
    // A socket without a credential is refused too, once it asks.
    let refused = open_stream(address, "stolen", request(9)).await;
    assert_eq!(
        refused.err().map(|s| s.code()),
        Some(tonic::Code::Unauthenticated)
    );
    // Four proxies with the token: each gets in, each closing the oldest
    // connection without one.
    let mut proxies = Vec::new();
    for n in 0..4 {
        let opened = open_stream(address, "proxy", request(n)).await;
        proxies.push(opened.unwrap_or_else(|status| panic!("proxy {n} is refused: {status:?}")));
    }
    assert!(
        server.connections_evicted() >= 4,
        "{}",
        server.connections_evicted()
    );
    let closed = tokio::task::spawn_blocking(move || silent.into_iter().all(closed_by_server))
        .await
        .unwrap();
    assert!(closed, "every silent socket was closed to make room");
    // Every slot now holds a proxy: one more is refused.
    let refused_before = server.connections_refused();
    let fifth = open_stream(address, "proxy", request(5)).await;
    assert!(
        fifth.is_err(),
        "a fifth connection is refused when every slot has a proxy"
    );
    assert!(server.connections_refused() > refused_before);
    assert_eq!(proxies.len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_connection_budget_ends_its_stream_naming_the_sizes() {
    let mut options = options();
    options.request_buffer_per_connection = 64 << 10;
    let (_server, address, _stop) = serve(options).await;
    let mut large = request(1);
    large.resource_names = (0..2000)
        .map(|i| format!("outbound|80||service-{i}.default.svc.cluster.local"))
        .collect();
    let (_requests, mut responses) = open_stream(address, "proxy", large)
        .await
        .expect("the stream opens");
    let status = tokio::time::timeout(PATIENCE, responses.message())
        .await
        .expect("the stream ends in time")
        .expect_err("the stream ends with a status");
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("65536 bytes"), "{status:?}");
    // A request within the budget, on a new stream, is served.
    let (_requests, _responses) = open_stream(address, "proxy", request(2))
        .await
        .expect("the stream opens");
}
