//! The server side: its configuration, the [`Service`] it calls per new
//! stream, and serving connections (one task each) from a listener or any
//! byte stream (TLS wraps the stream before it gets here).

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::conn::Connection;
use crate::grpc::{ConnectionInfo, Request, Sender};

/// A server's settings and limits.
#[derive(Debug, Clone)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams beyond it are refused
    /// (RST_STREAM REFUSED_STREAM).
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE: what a client may send on a stream
    /// before the application takes it.
    pub initial_window_size: u32,
    /// The connection's receive window (all streams together).
    pub connection_window_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: larger request heads are answered 431.
    pub max_header_list_size: u32,
    /// The largest request message (RESOURCE_EXHAUSTED beyond).
    pub max_message_size: usize,
    /// Response bytes a stream may have queued before `Sender::send` waits.
    pub send_buffer: usize,
    /// Send a PING after this long, and close the connection when its ACK
    /// does not come within `keepalive_timeout`.
    pub keepalive_interval: Option<Duration>,
    /// How long a keepalive PING's ACK may take.
    pub keepalive_timeout: Duration,
    /// Close gracefully (GOAWAY, streams finish) after this long.
    pub max_connection_age: Option<Duration>,
    /// How long streams may run on after GOAWAY before the connection closes.
    pub shutdown_grace: Option<Duration>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_concurrent_streams: 100,
            initial_window_size: 65_535,
            connection_window_size: 1 << 20,
            max_header_list_size: 16 << 10,
            max_message_size: 4 << 20,
            send_buffer: 1 << 20,
            keepalive_interval: None,
            keepalive_timeout: Duration::from_secs(20),
            max_connection_age: None,
            shutdown_grace: None,
        }
    }
}

/// What a server calls for each new request stream. It must not block: it
/// hands the stream to a task (its own, or one it spawns).
pub trait Service: Send + Sync + 'static {
    /// A new stream: its request (head and messages) and its response's sender.
    fn call(&self, request: Request, sender: Sender);
}

impl<F> Service for F
where
    F: Fn(Request, Sender) + Send + Sync + 'static,
{
    fn call(&self, request: Request, sender: Sender) {
        self(request, sender)
    }
}

/// Why a connection ended other than by a clean close.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket failed.
    #[error("connection i/o: {0}")]
    Io(#[from] io::Error),
    /// The client did not start with the HTTP/2 preface.
    #[error("the client did not send the HTTP/2 connection preface")]
    Preface,
    /// The client broke the protocol: we sent GOAWAY with this code.
    #[error("protocol violation ({reason:?}): {what}")]
    Protocol {
        /// The GOAWAY code.
        reason: crate::frame::Reason,
        /// What the client did.
        what: &'static str,
    },
    /// The client sent GOAWAY with an error.
    #[error("the client went away with {0:?}")]
    PeerGoAway(crate::frame::Reason),
    /// A keepalive PING went unanswered.
    #[error("keepalive PING not answered within {0:?}")]
    KeepaliveTimeout(Duration),
    /// The streams did not finish within the shutdown grace.
    #[error("streams still open when the shutdown grace ended")]
    GraceExpired,
}

/// An HTTP/2 gRPC server: a configuration and a service.
pub struct Server<S> {
    config: Arc<Config>,
    service: Arc<S>,
}

impl<S> Clone for Server<S> {
    fn clone(&self) -> Self {
        Server {
            config: self.config.clone(),
            service: self.service.clone(),
        }
    }
}

impl<S: Service> Server<S> {
    /// A server calling `service` per stream.
    pub fn new(config: Config, service: S) -> Server<S> {
        Server {
            config: Arc::new(config),
            service: Arc::new(service),
        }
    }

    /// Serves one connection until it closes; when `shutdown` completes,
    /// closes it gracefully (GOAWAY, streams in flight finish).
    ///
    /// The connection is made at once and the future holds it alone (not
    /// `self`): spawn the future itself, since one awaiting it from
    /// another would hold its `io` and `info` twice for as long as the
    /// connection lasts.
    pub fn serve_connection<T, F>(
        &self,
        io: T,
        info: ConnectionInfo,
        shutdown: F,
    ) -> impl Future<Output = Result<(), Error>> + Send + use<T, F, S>
    where
        T: AsyncRead + AsyncWrite + Unpin + Send,
        F: Future<Output = ()> + Send,
    {
        Connection::new(
            io,
            self.config.clone(),
            self.service.clone(),
            Arc::new(info),
            shutdown,
        )
        .run()
    }

    /// Accepts connections from `listener` (a task each) until `shutdown`
    /// completes, then shuts every connection down gracefully and returns
    /// when they have closed.
    pub async fn serve(&self, listener: TcpListener, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let (stop, stopped) = watch::channel(false);
        let mut connections = JoinSet::new();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => {
                    let (socket, peer) = match accepted {
                        Ok(accepted) => accepted,
                        // A connection that failed before accept returned
                        // (reset, out of descriptors) must not stop the
                        // server; a pause keeps a persistent error from
                        // spinning.
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    };
                    let _ = socket.set_nodelay(true);
                    let info = ConnectionInfo { peer: Some(peer), local: socket.local_addr().ok(), ..ConnectionInfo::default() };
                    let mut stopped = stopped.clone();
                    let stop = async move {
                        let _ = stopped.wait_for(|stop| *stop).await;
                    };
                    connections.spawn(self.serve_connection(socket, info, stop));
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        let _ = stop.send(true);
        while connections.join_next().await.is_some() {}
        Ok(())
    }
}
