//! Serving ADS on a listener with hyper's HTTP/2 server (the h2 crate; one
//! task per connection): TLS (and client certificates), an authenticator,
//! HTTP/2 and TCP keepalives, limits on connections and streams
//! (`admission.rs`: slots with eviction of the oldest unadmitted
//! connection, a handshake deadline, write progress, pending connections
//! per address, streams per connection and per credential), a request
//! budget per connection (`budget.rs`), every h2 limit set explicitly
//! ([`http2`]), and an optional maximum connection age.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::StreamExt;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::admission::{Accepted, Admission, Limits, Refusal};
use super::auth::Authenticate;
use super::budget::RequestBudget;
use super::peer::{Io, Peer};
use super::service::{AdsService, Call};
use super::stall::WriteStall;
use crate::state::ServerState;

/// How [`XdsServer::serve_with`](crate::XdsServer::serve_with) serves.
#[derive(Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// TLS for the port, terminated here with tokio-rustls (with a client
    /// certificate verifier in it, mTLS: the verified chain reaches
    /// [`auth`](Self::auth) in a [`Peer`](crate::Peer)); HTTP/2 is added
    /// to its ALPN protocols. `None`: plain HTTP/2. Feature `tls` (on by
    /// default).
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Authenticates every ADS stream: a stream it refuses ends at once
    /// with its status, and a caller may only claim the node ids its
    /// [`Caller::scope`](crate::Caller::scope) allows (`PERMISSION_DENIED`
    /// otherwise); `None`: any client.
    pub auth: Option<Arc<dyn Authenticate>>,
    /// Connections open at once. When every slot is taken, the oldest
    /// connection without an admitted stream (see
    /// [`handshake_timeout`](Self::handshake_timeout)) is closed to make
    /// room for the new one (counted,
    /// [`XdsServer::connections_evicted`](crate::XdsServer::connections_evicted));
    /// only when every open connection is admitted is the new one closed
    /// as soon as it is accepted (counted,
    /// [`XdsServer::connections_refused`](crate::XdsServer::connections_refused)).
    /// `None`: no cap.
    pub max_connections: Option<usize>,
    /// A connection must open an admitted stream (one its credential
    /// authenticates, when [`auth`](Self::auth) is set) within this long of
    /// being accepted, or it is dropped by a timer (nothing flushed): the
    /// TLS handshake, the HTTP/2 preface and the stream's headers all fall
    /// within it, so a silent socket, or one that does not read, cannot
    /// hold a slot. What the client sent is read before the deadline is
    /// looked at: a server that falls behind in a connect storm does not
    /// close the connections it has not read yet. `None`: no deadline.
    pub handshake_timeout: Option<Duration>,
    /// A connection whose writes have made no progress for this long (the
    /// client does not read what it is sent) is closed, whatever it is
    /// doing: admitted or not, mid-response or draining. Progress is
    /// counted at the socket and per stream: a response that waits this
    /// long with nothing taken, because the proxy keeps its HTTP/2
    /// flow-control window shut while it answers PINGs, also closes the
    /// connection. `None`: no deadline.
    pub write_timeout: Option<Duration>,
    /// Bytes of requests received but not yet whole (partial gRPC
    /// messages) that the streams of one connection may hold together; a
    /// stream that would take its connection over it, or whose single
    /// request is larger, ends with `RESOURCE_EXHAUSTED` naming the
    /// sizes. The default, 4 MiB, holds the largest request a proxy sends
    /// (a sidecar's EDS subscription names every cluster: 160 KB at 1,000
    /// services, growing with the mesh) 25 times over, while a thousand
    /// connections filled with partial messages hold 4 GiB at most, not
    /// the 16 MiB per stream a message may otherwise reach.
    pub request_buffer_per_connection: usize,
    /// Connections from one IP address accepted but not yet admitted (see
    /// [`handshake_timeout`](Self::handshake_timeout)), at once; one more
    /// is closed as soon as it is accepted (and counted as refused), so
    /// one address flooding the port leaves slots for proxies elsewhere.
    /// `None`: no cap.
    pub max_pending_per_address: Option<usize>,
    /// Concurrent streams on one connection (HTTP/2
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`; the client's further streams are
    /// refused by HTTP/2 itself). `None`: no limit.
    pub max_streams_per_connection: Option<u32>,
    /// Concurrent ADS streams under one credential (a
    /// [`Caller`](crate::Caller)'s name), over all its connections; one
    /// more ends at once with `RESOURCE_EXHAUSTED`. Needs
    /// [`auth`](Self::auth). `None`: no cap.
    pub max_streams_per_caller: Option<usize>,
    /// Streams older than this (give or take 10%) are ended with
    /// `UNAVAILABLE` after the response in flight, and their connections
    /// are sent an HTTP/2 GOAWAY first, so the proxy reconnects over a new
    /// connection (to any server its ADS cluster lists). `None`: streams
    /// last as long as the proxy stays.
    pub max_connection_age: Option<Duration>,
    /// HTTP/2 PING interval (a dead proxy's stream is noticed and its task
    /// ended)...
    pub http2_keepalive_interval: Duration,
    /// ...and how long a PING may go unanswered.
    pub http2_keepalive_timeout: Duration,
    /// TCP keepalive.
    pub tcp_keepalive: Duration,
    /// Other gRPC services served on the same port beside ADS (such as a
    /// certificate service); each authenticates its own calls. A call to
    /// them does not admit its connection (see
    /// [`handshake_timeout`](Self::handshake_timeout)): short unary calls
    /// fit, long-lived streams should be ADS. `None`: ADS only.
    pub routes: Option<tonic::service::Routes>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            #[cfg(feature = "tls")]
            tls: None,
            auth: None,
            max_connections: None,
            handshake_timeout: Some(Duration::from_secs(10)),
            write_timeout: Some(Duration::from_secs(30)),
            request_buffer_per_connection: 4 << 20,
            max_pending_per_address: None,
            max_streams_per_connection: Some(100),
            max_streams_per_caller: None,
            max_connection_age: None,
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
            tcp_keepalive: Duration::from_secs(60),
            routes: None,
        }
    }
}

impl ServeOptions {
    /// Whether the port is served over TLS.
    fn tls_on(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("tls", &self.tls_on())
            .field("auth", &self.auth.is_some())
            .field("max_connections", &self.max_connections)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("write_timeout", &self.write_timeout)
            .field(
                "request_buffer_per_connection",
                &self.request_buffer_per_connection,
            )
            .field("max_pending_per_address", &self.max_pending_per_address)
            .field("max_streams_per_connection", &self.max_streams_per_connection)
            .field("max_streams_per_caller", &self.max_streams_per_caller)
            .field("max_connection_age", &self.max_connection_age)
            .field("http2_keepalive_interval", &self.http2_keepalive_interval)
            .field("http2_keepalive_timeout", &self.http2_keepalive_timeout)
            .field("tcp_keepalive", &self.tcp_keepalive)
            .field("routes", &self.routes.is_some())
            .finish()
    }
}

/// Serves `state`'s streams on `address` with the default
/// [`ServeOptions`] until `shutdown` completes
/// ([`XdsServer::serve`](crate::XdsServer::serve)).
pub(crate) async fn serve_address(
    state: &Arc<ServerState>,
    address: std::net::SocketAddr,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    match listen(address) {
        Ok(listener) => serve_listener(state, listener, ServeOptions::default(), shutdown).await,
        Err(error) => {
            // tonic's own error for a failed bind (its bind fails the same
            // way), as the serving methods return.
            tracing::warn!(%address, %error, "cannot listen for ADS");
            tonic::transport::Server::builder()
                .add_routes(tonic::service::Routes::default())
                .serve_with_shutdown(address, shutdown)
                .await
        }
    }
}

/// Serves `state`'s streams on `listener` as `options` say until
/// `shutdown` completes
/// ([`XdsServer::serve_with`](crate::XdsServer::serve_with)): each admitted
/// connection (after its TLS handshake) is served by a hyper HTTP/2
/// connection task; on shutdown every stream is ended, every connection is
/// sent GOAWAY, and the call returns once they have closed.
pub(crate) async fn serve_listener(
    state: &Arc<ServerState>,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let mut accepting = match accept_on_own_thread(listener, options.tcp_keepalive) {
        Ok(accepting) => accepting,
        Err(error) => {
            tracing::error!(%error, "cannot start accepting ADS connections");
            return Ok(());
        }
    };
    let incoming =
        futures::stream::poll_fn(move |cx| accepting.poll_next(cx)).map(tokio::net::TcpStream::from_std);
    let h2 = Arc::new(http2(&options, state.options.send_buffer));
    let admission = Arc::new(Admission::new(Limits {
        max_connections: options.max_connections,
        handshake_timeout: options.handshake_timeout,
        write_timeout: options.write_timeout,
        max_pending_per_address: options.max_pending_per_address,
        max_streams_per_caller: options.max_streams_per_caller,
    }));
    let service = AdsService::new(Arc::clone(state), options.auth)
        .with_max_connection_age(options.max_connection_age)
        .with_admission(Arc::clone(&admission))
        .with_routes(options.routes);
    let server = Arc::clone(state);
    let admitted = incoming.filter_map(move |accepted| {
        let admitted = match accepted {
            Err(error) => Some(Err(error)),
            Ok(stream) => match admission.accept(stream) {
                Ok(Accepted { connection, evicted }) => {
                    if let Some(evicted) = evicted {
                        server.connections_evicted.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(
                            %evicted,
                            "every ADS connection slot taken; closed the oldest connection without an admitted stream"
                        );
                    }
                    Some(Ok(connection))
                }
                Err((stream, refusal)) => {
                    server.connections_refused.fetch_add(1, Ordering::Relaxed);
                    let peer = stream.peer_addr().ok();
                    match refusal {
                        Refusal::Full => {
                            tracing::warn!(?peer, "over the ADS connection cap, every connection admitted; closed");
                        }
                        Refusal::AddressPending => tracing::debug!(
                            ?peer,
                            "too many ADS connections pending from this address; closed"
                        ),
                    }
                    None
                }
            },
        };
        std::future::ready(admitted)
    });
    let mut connections = super::peer::connections(
        admitted,
        #[cfg(feature = "tls")]
        options.tls,
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    // The connection is told to go away before any of its streams is
    // ended (at 90% to 110% of the age), so the proxy's next stream
    // opens a new connection.
    let max_age = options.max_connection_age.map(|age| age.mul_f64(0.9));
    let budget = options.request_buffer_per_connection;
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            next = connections.next() => match next {
                None => break,
                Some(Err(error)) => {
                    // A connection that failed before it was accepted
                    // (reset, out of descriptors) must not stop the
                    // server; a pause keeps a persistent error from
                    // spinning.
                    tracing::debug!(%error, "ADS accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(Ok(io)) => {
                    let connection = Connection {
                        service: service.clone(),
                        peer: io.peer().clone(),
                        budget: RequestBudget::new(budget),
                        stall: WriteStall::new(options.write_timeout),
                    };
                    tasks.spawn(serve_connection(Arc::clone(&h2), io, connection, max_age, stopped.clone()));
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    // Every stream ends (OK: the proxies reconnect, elsewhere if this
    // server is going), then every connection is told to go away.
    // No connection is accepted from now on, and the listener is closed
    // before this returns.
    drop(connections);
    state.close();
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// hyper's HTTP/2 server as the ADS port runs it: every limit h2 has is
/// set here, none left to a default that may change under us.
fn http2(options: &ServeOptions, send_buffer: usize) -> hyper::server::conn::http2::Builder<TokioExecutor> {
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        // SETTINGS_MAX_CONCURRENT_STREAMS: an Envoy opens one ADS stream
        // per connection and a certificate call or two beside it; the cap
        // bounds the streams (and their tasks) one connection can hold.
        .max_concurrent_streams(options.max_streams_per_connection)
        // Streams the client opened and reset before the server took
        // them (rapid reset, CVE-2023-44487): past 20 queued at once, h2
        // ends the connection with GOAWAY ENHANCE_YOUR_CALM. h2's own
        // default, set here so it cannot silently change.
        .max_pending_accept_reset_streams(Some(20))
        // Streams the server reset because of the client's errors
        // (MadeYouReset, CVE-2025-8671): past this many on one
        // connection, h2 ends it with GOAWAY. tonic leaves it unset,
        // which turns the cap off; a conforming gRPC client causes none.
        .max_local_error_reset_streams(Some(256))
        // A request's headers, decoded: a gRPC call's are a path, a
        // content type and a credential (a service-account token is
        // 1-2 KB). It also bounds a header block's CONTINUATION frames
        // (h2 counts their bytes against it), and an HPACK bomb.
        .max_header_list_size(16 * 1024)
        // The HPACK dynamic table the client may make us keep (the
        // RFC's default size).
        .header_table_size(Some(4096))
        // SETTINGS_MAX_FRAME_SIZE: the RFC's minimum, so a connection's
        // read buffer stays one 16 KiB frame.
        .max_frame_size(Some(16 * 1024))
        // Response bytes h2 holds per stream while the proxy's window
        // is closed (XdsOptions::send_buffer): with the stream's
        // one-message queue (transport.rs), all a proxy that does not
        // read makes the server keep, beside the shared configuration.
        .max_send_buf_size(send_buffer)
        // What a client may send on a stream before the server reads it;
        // a request arrives in a round trip or two (ADS requests are
        // 160 KB at most in a 1,000-service mesh), and the server reads
        // as it comes: partial messages are bounded by the request
        // budget, not by this window.
        .initial_stream_window_size(Some(256 * 1024))
        // All the connection's streams together: the bytes h2 itself may
        // hold for a connection before its streams read them.
        .initial_connection_window_size(Some(1024 * 1024))
        // Fixed windows: an adaptive one grows with the bandwidth-delay
        // product, and so would what a client may make the server hold.
        .adaptive_window(false)
        // PINGs find a dead proxy (its stream's task then ends); an
        // unanswered PING closes the connection.
        .keep_alive_interval(Some(options.http2_keepalive_interval))
        .keep_alive_timeout(options.http2_keepalive_timeout);
    builder
}

/// What one connection's requests are served with.
struct Connection {
    service: AdsService,
    peer: Peer,
    budget: Arc<RequestBudget>,
    /// Fired by a stream whose response stalls (`stall.rs`): the
    /// connection is dropped.
    stall: Arc<WriteStall>,
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for Connection {
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = Call;

    fn call(&self, mut request: http::Request<hyper::body::Incoming>) -> Call {
        request.extensions_mut().insert(self.peer.clone());
        request.extensions_mut().insert(Arc::clone(&self.budget));
        request.extensions_mut().insert(Arc::clone(&self.stall));
        self.service.call(request)
    }
}

/// Serves one connection until it closes: drops it at once when its
/// handshake deadline passes unadmitted or it is evicted (nothing is
/// flushed), sends it GOAWAY at its maximum age or when the server stops
/// (its streams finish, then it closes).
async fn serve_connection(
    h2: Arc<hyper::server::conn::http2::Builder<TokioExecutor>>,
    io: Io,
    connection: Connection,
    max_age: Option<Duration>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let watch = io.watch().clone();
    let stall = Arc::clone(&connection.stall);
    let serving = h2.serve_connection(TokioIo::new(io), connection);
    drop(h2);
    tokio::pin!(serving);
    let closed = watch.closed();
    tokio::pin!(closed);
    let aged = async {
        match max_age {
            Some(age) => tokio::time::sleep(age).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(aged);
    let mut draining = false;
    loop {
        tokio::select! {
            // The connection first: what a late server finds waiting is
            // read (and may admit it) before its deadline is looked at.
            biased;
            served = serving.as_mut() => {
                if let Err(error) = served {
                    tracing::debug!(%error, "ADS connection ended");
                }
                return;
            }
            reason = &mut closed => {
                tracing::debug!(?reason, "ADS connection dropped");
                return;
            }
            () = stall.fired() => {
                tracing::info!("ADS connection dropped: a response waited for the write timeout with nothing taken (the proxy's flow-control window stayed shut)");
                return;
            }
            () = &mut aged, if !draining => {
                draining = true;
                serving.as_mut().graceful_shutdown();
            }
            _ = stopped.wait_for(|stop| *stop), if !draining => {
                draining = true;
                serving.as_mut().graceful_shutdown();
            }
        }
    }
}

/// The accept queue a listener asks for: the kernel caps it at
/// `net.core.somaxconn` (4,096 by default since Linux 5.4), as Go's
/// `net.Listen` (istiod's) gets.
pub(crate) const LISTEN_BACKLOG: u32 = 65_535;

/// A TCP listener on `address` (`SO_REUSEADDR`, as the standard library
/// sets) with a deep accept queue (65,535 asked, capped by the kernel at
/// `net.core.somaxconn`); call within a Tokio runtime.
///
/// The standard library and Tokio listen with a queue of 128. When a
/// control plane restarts, every proxy reconnects at once: with 2,000
/// proxies the `ads` bench's connect storm overflowed a 128-deep queue 79
/// times, and each dropped SYN is retried by the proxy's kernel only after
/// a second (then 3, 7, ... s).
pub fn listen(address: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Accepts `listener`'s connections on a thread of its own, with
/// `TCP_NODELAY` and TCP keepalives after `keepalive` idle, into a queue
/// of up to [`LISTEN_BACKLOG`] connections; dropping the returned
/// [`Accepting`] stops the thread and closes the listener.
///
/// Why a thread: the kernel caps a listener's accept queue at
/// `net.core.somaxconn` (4,096 by default), and when every proxy
/// reconnects at once an accept loop that is one task among the
/// connections' runs only after the connections in the run queue have
/// had their turn, while the kernel drops the SYNs that find its queue
/// full (each retried by the proxy's kernel a second later, then 3 s,
/// ...). With 10,000 proxies reconnecting at once (the `ads` bench's
/// storm) 5,000 to 7,000 SYNs were dropped per storm and the storm took
/// twice as long. A thread that does nothing else is woken as soon as a
/// connection is queued and drains the kernel's queue into this one, as
/// deep as the backlog `listen` asks for.
fn accept_on_own_thread(
    listener: tokio::net::TcpListener,
    keepalive: Duration,
) -> std::io::Result<Accepting> {
    const LISTENER: mio::Token = mio::Token(0);
    const STOP: mio::Token = mio::Token(1);
    let mut listener = mio::net::TcpListener::from_std(listener.into_std()?);
    let mut poll = mio::Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
    let stop = mio::Waker::new(poll.registry(), STOP)?;
    let (sender, receiver) = tokio::sync::mpsc::channel(LISTEN_BACKLOG as usize);
    let keepalive = socket2::TcpKeepalive::new().with_time(keepalive);
    let thread = std::thread::Builder::new()
        .name("ads-accept".into())
        .spawn(move || {
            let mut events = mio::Events::with_capacity(4);
            loop {
                if let Err(error) = poll.poll(&mut events, None)
                    && error.kind() != std::io::ErrorKind::Interrupted
                {
                    tracing::error!(%error, "cannot wait for ADS connections");
                    return;
                }
                if events.iter().any(|e| e.token() == STOP) {
                    return;
                }
                // Everything the kernel has queued, then wait again.
                loop {
                    match listener.accept() {
                        Ok((stream, _)) => {
                            let stream = std::net::TcpStream::from(stream);
                            let configured = stream
                                .set_nodelay(true)
                                .and_then(|()| socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive));
                            if let Err(error) = configured {
                                tracing::debug!(%error, "ADS connection lost before it was served");
                                continue;
                            }
                            // Waits while the queue is full; fails once the
                            // server has stopped.
                            if sender.blocking_send(stream).is_err() {
                                return;
                            }
                        }
                        Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(error)
                            if matches!(
                                error.kind(),
                                std::io::ErrorKind::ConnectionAborted | std::io::ErrorKind::Interrupted
                            ) =>
                        {
                            // Reset before it was accepted: the next one.
                            tracing::debug!(%error, "ADS accept failed");
                        }
                        Err(error) => {
                            // Out of descriptors or memory must not stop the
                            // server; a pause keeps it from spinning (the
                            // listener stays readable).
                            tracing::warn!(%error, "ADS accept failed; pausing");
                            std::thread::sleep(Duration::from_millis(50));
                            break;
                        }
                    }
                }
            }
        })?;
    Ok(Accepting {
        receiver,
        stop,
        thread: Some(thread),
    })
}

/// The connections the accept thread accepted; dropping it stops the
/// thread (which closes the listener) and waits for it.
struct Accepting {
    receiver: tokio::sync::mpsc::Receiver<std::net::TcpStream>,
    stop: mio::Waker,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Accepting {
    fn poll_next(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<std::net::TcpStream>> {
        self.receiver.poll_recv(cx)
    }
}

impl Drop for Accepting {
    fn drop(&mut self) {
        // A thread waiting for room in the queue sees it closed.
        self.receiver.close();
        let _ = self.stop.wake();
        if let Some(thread) = self.thread.take() {
            // Quick: the thread only waits in `poll` or on the queue,
            // and both end now.
            let _ = thread.join();
        }
    }
}
