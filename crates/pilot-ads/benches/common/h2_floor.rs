//! h2's own floor for the server's memory per proxy: as many idle
//! connections as the bench's clients, each with one open gRPC stream on
//! ADS's method (one request sent, the response's head received), held by
//! a bare hyper HTTP/2 server that does nothing else (hyper's defaults, no
//! admission, no session, no configuration). What the server holds per
//! connection here is what h2 and hyper themselves cost; the bench's
//! figure per connected proxy less this one is pilot's overhead above
//! them. The clients run in a child process (this same binary,
//! `--h2-floor-clients N --port P`, on pilot-test-support's ADS client as
//! the bench's proxies are), which prints `ready` once every stream is
//! open and holds them until its stdin closes.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pilot_test_support::measure::rss_mb;
use tokio::io::AsyncBufReadExt;

const STREAM_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// What the bare server held per connection with its stream open, in KB:
/// RSS, and (on jemalloc) allocated, active and resident heap.
pub(crate) struct H2Floor {
    pub rss_kb: f64,
    pub heap_kb: Option<[f64; 3]>,
}

/// Holds `clients` idle streams of a child process on a bare hyper server
/// in this process; measures this process's memory per connection. With
/// `sent` bytes, each stream is first sent one gRPC message of that size
/// (in four DATA frames, as a push's four responses), which its client
/// reads: the floor of connections that carried what the proxies were
/// sent, h2's write and read buffers used as pilot's are.
pub(crate) async fn run(clients: usize, sent: usize) -> H2Floor {
    let listener = pilot_ads::listen(([127, 0, 0, 1], 0).into()).expect("listen");
    let port = listener.local_addr().unwrap().port();
    let opened = Arc::new(AtomicUsize::new(0));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = rss_mb();
    let heap_before = crate::heap_stats();
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("own path"))
        .args([
            "--h2-floor-clients",
            &clients.to_string(),
            "--port",
            &port.to_string(),
            "--h2-floor-read",
            &usize::from(sent > 0).to_string(),
        ])
        .env("_RJEM_MALLOC_CONF", pilot_test_support::ads::proxies::MALLOC_CONF)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start h2's floor's clients");
    // Accepting goes on until every stream has reached the service: the
    // clients are ready once their requests are written, which may be
    // before the last connections are accepted.
    let accepting = {
        let opened = Arc::clone(&opened);
        tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            loop {
                let (socket, _) = listener.accept().await.expect("accept");
                let opened = Arc::clone(&opened);
                connections.spawn(async move {
                    let service =
                        hyper::service::service_fn(move |_: http::Request<hyper::body::Incoming>| {
                            opened.fetch_add(1, Ordering::Relaxed);
                            let mut response = http::Response::new(Idle::sending(sent));
                            response
                                .headers_mut()
                                .insert("content-type", http::HeaderValue::from_static("application/grpc"));
                            std::future::ready(Ok::<_, Infallible>(response))
                        });
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .timer(TokioTimer::new())
                        .serve_connection(TokioIo::new(socket), service)
                        .await;
                });
            }
        })
    };
    let stdout = child.stdout.take().expect("piped");
    let mut ready = tokio::io::BufReader::new(stdout).lines();
    assert_eq!(
        ready.next_line().await.expect("the clients' output").as_deref(),
        Some("ready")
    );
    // Every stream reached the service (a guard against a hang, not a
    // figure).
    let deadline = Instant::now() + Duration::from_secs(120);
    while opened.load(Ordering::Relaxed) < clients {
        assert!(
            Instant::now() < deadline,
            "{} of {clients} streams opened",
            opened.load(Ordering::Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let per_client = |mb: f64| mb * 1024.0 / clients as f64;
    let floor = H2Floor {
        rss_kb: per_client(rss_mb() - rss_before),
        heap_kb: crate::heap_stats().zip(heap_before).map(|(after, before)| {
            std::array::from_fn(|i| (after[i] as f64 - before[i] as f64) / 1024.0 / clients as f64)
        }),
    };
    drop(child.stdin.take());
    let _ = child.wait().await;
    // Its connections go with it.
    accepting.abort();
    let _ = accepting.await;
    floor
}

/// A response body that sends its parts (if any), then never ends: an
/// idle stream.
struct Idle {
    parts: Vec<Bytes>,
}

impl Idle {
    /// One gRPC message of `bytes` bytes (none: nothing), in four parts.
    fn sending(bytes: usize) -> Self {
        if bytes == 0 {
            return Idle { parts: Vec::new() };
        }
        let mut message = vec![0u8; 5 + bytes];
        message[1..5].copy_from_slice(&u32::try_from(bytes).unwrap_or(u32::MAX).to_be_bytes());
        let message = Bytes::from(message);
        let quarter = message.len().div_ceil(4);
        let mut parts: Vec<Bytes> = (0..message.len())
            .step_by(quarter)
            .map(|at| message.slice(at..(at + quarter).min(message.len())))
            .collect();
        parts.reverse();
        Idle { parts }
    }
}

impl http_body::Body for Idle {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        match self.parts.pop() {
            Some(part) => Poll::Ready(Some(Ok(http_body::Frame::data(part)))),
            None => Poll::Pending,
        }
    }
}

/// The child process's arguments, if this process is h2's floor's
/// clients: how many, the port, whether each reads one message.
pub(crate) fn child_args(args: &[String]) -> Option<(usize, u16, bool)> {
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1)?.parse::<usize>().ok()
    };
    Some((
        value("--h2-floor-clients")?,
        u16::try_from(value("--port")?).ok()?,
        value("--h2-floor-read").unwrap_or(0) == 1,
    ))
}

/// The child: opens `clients` streams, one connection each, sends each
/// one request (and, with `read`, reads one message back), prints
/// `ready`, and holds them until stdin closes.
pub(crate) fn clients_main(clients: usize, port: u16, read: bool) {
    pilot_test_support::measure::raise_open_files(clients as u64 + 1024);
    use futures::StreamExt;
    use prost::Message;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let headers = pilot_test_support::ads::request_headers(port, STREAM_PATH);
        let streams: Vec<_> = futures::stream::iter(0..clients)
            .map(|i| {
                let headers = headers.clone();
                async move {
                    let mut stream = pilot_test_support::ads::GrpcStream::open_from(
                        pilot_test_support::ads::proxies::source_ip(i),
                        port,
                        &headers,
                    )
                    .await
                    .expect("open a stream");
                    let node = pilot_test_support::ads::sidecar_id("floor", "default", crate::proxy_ip(i));
                    let request =
                        pilot_test_support::ads::request(Some(&node), pilot_test_support::ads::CDS, "", "");
                    stream.send(&[Bytes::from(request.encode_to_vec())]);
                    stream.flush().await.expect("send the request");
                    if read {
                        stream
                            .message()
                            .await
                            .expect("read the message")
                            .expect("a message");
                    }
                    stream
                }
            })
            .buffer_unordered(64)
            .collect()
            .await;
        println!("ready");
        let _ =
            tokio::task::spawn_blocking(|| std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1])).await;
        drop(streams);
    });
}
