//! Which connections and streams the ADS listener keeps, so clients
//! without a credential cannot take the slots of proxies with one:
//!
//! - **Connection slots** (`max_connections`): each accepted connection
//!   holds one until it closes. The slot is given back when the server
//!   begins to close the connection (before its FIN or TLS `close_notify`
//!   is sent) or when the connection is dropped, whichever is first.
//! - **Handshake deadline** (`handshake_timeout`): a connection must open
//!   an admitted stream (authenticated, when the server authenticates)
//!   within this long of being accepted: the TLS handshake, the HTTP/2
//!   preface and the stream's headers all fall within it. A silent socket,
//!   or one whose streams are all refused, is closed at the deadline.
//!   Bytes waiting on the socket are still read after it: the deadline
//!   is the client's, not the server's, so a server that falls behind in
//!   a connect storm does not close the connections it has not yet read.
//! - **Pending connections per source address**
//!   (`max_pending_per_address`): connections accepted but not yet
//!   admitted, from one IP address, at once; more are closed as soon as
//!   they are accepted. A proxy from another address always finds its
//!   slot while one address floods the port.
//! - **Streams per credential** (`max_streams_per_caller`): ADS streams
//!   open at once under one credential (a token, a certificate identity);
//!   one more is refused with `RESOURCE_EXHAUSTED`. Streams per connection
//!   are HTTP/2's `SETTINGS_MAX_CONCURRENT_STREAMS`, set by `serve.rs`.
//!
//! The connections are found again from a stream by the peer address
//! in the request's extensions (a [`Peer`]).

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use super::peer::Peer;

/// The ADS listener's bookkeeping of connections and streams.
pub(crate) struct Admission {
    slots: Option<Arc<Semaphore>>,
    handshake_timeout: Option<Duration>,
    max_pending_per_address: Option<usize>,
    max_streams_per_caller: Option<usize>,
    table: Mutex<Table>,
}

/// Why a connection was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every connection slot is taken.
    Full,
    /// Its address has as many connections pending as it may.
    AddressPending,
}

#[derive(Default)]
struct Table {
    /// Open connections by peer address.
    connections: HashMap<SocketAddr, Arc<Connection>>,
    /// Connections not admitted yet, by peer IP.
    pending: HashMap<IpAddr, usize>,
    /// Streams open, by credential name.
    streams: HashMap<String, usize>,
}

/// One connection's state: pending until a stream on it is admitted.
struct Connection {
    state: AtomicU8,
}

const PENDING: u8 = 0;
const ADMITTED: u8 = 1;
const CLOSED: u8 = 2;

impl Admission {
    /// The bookkeeping for these limits (`None`: no limit).
    pub(crate) fn new(
        max_connections: Option<usize>,
        handshake_timeout: Option<Duration>,
        max_pending_per_address: Option<usize>,
        max_streams_per_caller: Option<usize>,
    ) -> Self {
        Admission {
            slots: max_connections.map(|max| Arc::new(Semaphore::new(max.max(1)))),
            handshake_timeout,
            max_pending_per_address: max_pending_per_address.map(|max| max.max(1)),
            max_streams_per_caller: max_streams_per_caller.map(|max| max.max(1)),
            table: Mutex::new(Table::default()),
        }
    }

    /// Takes a slot for a connection just accepted, or says why not (the
    /// caller closes it).
    pub(crate) fn accept(self: &Arc<Self>, stream: TcpStream) -> Result<Limited, (TcpStream, Refusal)> {
        let Ok(peer) = stream.peer_addr() else {
            // Already gone: let the transport find out.
            return Ok(Limited::untracked(stream));
        };
        let slot = match &self.slots {
            None => None,
            Some(slots) => match Arc::clone(slots).try_acquire_owned() {
                Ok(slot) => Some(slot),
                Err(_) => return Err((stream, Refusal::Full)),
            },
        };
        let connection = Arc::new(Connection {
            state: AtomicU8::new(PENDING),
        });
        {
            let mut table = self.lock();
            let pending = table.pending.entry(peer.ip()).or_insert(0);
            if self.max_pending_per_address.is_some_and(|max| *pending >= max) {
                if *pending == 0 {
                    table.pending.remove(&peer.ip());
                }
                return Err((stream, Refusal::AddressPending));
            }
            *pending += 1;
            table.connections.insert(peer, Arc::clone(&connection));
        }
        Ok(Limited {
            stream,
            slot,
            tracked: Some(Tracked {
                admission: Arc::clone(self),
                peer,
                connection,
            }),
            deadline: self
                .handshake_timeout
                .map(|timeout| Box::pin(tokio::time::sleep(timeout))),
        })
    }

    /// Marks the connection a stream arrived on as admitted (its deadline
    /// and pending count no longer apply), from the stream's extensions.
    pub(crate) fn admit(&self, extensions: &http::Extensions) {
        let Some(peer) = peer(extensions) else {
            return;
        };
        let mut table = self.lock();
        let Some(connection) = table.connections.get(&peer).cloned() else {
            return;
        };
        if connection
            .state
            .compare_exchange(PENDING, ADMITTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            release_pending(&mut table, peer.ip());
        }
    }

    /// Counts a stream of `caller`, or refuses it when the credential has
    /// as many streams open as it may. The stream counts until the guard
    /// is dropped.
    pub(crate) fn open_stream(self: &Arc<Self>, caller: &str) -> Result<StreamGuard, tonic::Status> {
        let Some(max) = self.max_streams_per_caller else {
            return Ok(StreamGuard(None));
        };
        let mut table = self.lock();
        let open = table.streams.entry(caller.to_string()).or_insert(0);
        if *open >= max {
            return Err(tonic::Status::resource_exhausted(format!(
                "{caller:?} has {open} ADS streams open, the most this server allows one credential"
            )));
        }
        *open += 1;
        Ok(StreamGuard(Some((Arc::clone(self), caller.to_string()))))
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets a connection that closed.
    fn forget(&self, peer: SocketAddr, connection: &Arc<Connection>) {
        let mut table = self.lock();
        if table
            .connections
            .get(&peer)
            .is_some_and(|known| Arc::ptr_eq(known, connection))
        {
            table.connections.remove(&peer);
        }
        if connection.state.swap(CLOSED, Ordering::AcqRel) == PENDING {
            release_pending(&mut table, peer.ip());
        }
    }
}

fn release_pending(table: &mut Table, ip: IpAddr) {
    if let Some(count) = table.pending.get_mut(&ip) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            table.pending.remove(&ip);
        }
    }
}

/// The peer address of the connection a request came on.
fn peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions.get::<Peer>().and_then(Peer::address)
}

/// One stream counted against its credential until dropped.
pub(crate) struct StreamGuard(Option<(Arc<Admission>, String)>);

impl StreamGuard {
    /// A stream counted against nothing.
    pub(crate) fn none() -> Self {
        StreamGuard(None)
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some((admission, caller)) = self.0.take() {
            let mut table = admission.lock();
            if let Some(open) = table.streams.get_mut(&caller) {
                *open = open.saturating_sub(1);
                if *open == 0 {
                    table.streams.remove(&caller);
                }
            }
        }
    }
}

struct Tracked {
    admission: Arc<Admission>,
    peer: SocketAddr,
    connection: Arc<Connection>,
}

/// An accepted connection: holds its slot until the server begins to close
/// it, and fails its reads once its handshake deadline passes unadmitted.
pub(crate) struct Limited {
    // Before `stream`: fields drop in order, so a connection dropped
    // without a shutdown also gives its slot back before its socket closes.
    slot: Option<OwnedSemaphorePermit>,
    tracked: Option<Tracked>,
    deadline: Option<Pin<Box<Sleep>>>,
    stream: TcpStream,
}

impl Limited {
    /// A connection outside the bookkeeping.
    pub(crate) fn untracked(stream: TcpStream) -> Self {
        Limited {
            slot: None,
            tracked: None,
            deadline: None,
            stream,
        }
    }

    /// Gives the slot back and forgets the connection.
    fn release(&mut self) {
        self.slot = None;
        if let Some(tracked) = self.tracked.take() {
            tracked.admission.forget(tracked.peer, &tracked.connection);
        }
    }

    /// `Err` once the deadline has passed and no stream was admitted.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        let Some(deadline) = &mut self.deadline else {
            return Ok(());
        };
        let admitted = self
            .tracked
            .as_ref()
            .is_none_or(|t| t.connection.state.load(Ordering::Acquire) == ADMITTED);
        if admitted {
            self.deadline = None;
            return Ok(());
        }
        if deadline.as_mut().poll(cx).is_ready() {
            self.deadline = None;
            self.release();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no admitted ADS stream within the handshake timeout",
            ));
        }
        Ok(())
    }
}

impl Drop for Limited {
    fn drop(&mut self) {
        self.release();
    }
}

impl Limited {
    /// The client's address.
    pub(crate) fn peer_addr(&self) -> Option<SocketAddr> {
        self.tracked
            .as_ref()
            .map(|tracked| tracked.peer)
            .or_else(|| self.stream.peer_addr().ok())
    }
}

impl AsyncRead for Limited {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        // What the client sent is read even past the deadline: a server
        // too busy to read a connection in time (a connect storm on a
        // loaded machine) does not charge its own lateness to the client.
        // A read that finds nothing fails once the deadline has passed,
        // so a silent client, or one trickling bytes slower than the
        // server reads them, is held to it.
        let read = Pin::new(&mut this.stream).poll_read(cx, buf);
        if read.is_pending()
            && let Err(error) = this.check_deadline(cx)
        {
            return Poll::Ready(Err(error));
        }
        read
    }
}

impl AsyncWrite for Limited {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Given back before the peer can see the close.
        self.release();
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::*;

    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        (client, accepted)
    }

    #[tokio::test]
    async fn slots_and_pending_counts_are_given_back_on_close_and_on_admission() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admission = Arc::new(Admission::new(Some(2), None, Some(1), None));
        let (_c1, s1) = pair(&listener).await;
        let mut first = admission.accept(s1).ok().unwrap();
        // One pending connection from 127.0.0.1 at a time.
        let (_c2, s2) = pair(&listener).await;
        let (s2, refusal) = admission.accept(s2).err().unwrap();
        assert_eq!(refusal, Refusal::AddressPending);
        // Admitted, the first no longer counts as pending.
        let peer = first.stream.peer_addr().unwrap();
        let mut extensions = http::Extensions::new();
        extensions.insert(Peer::plain(Some(peer)));
        admission.admit(&extensions);
        let second = admission.accept(s2).ok().unwrap();
        // Both slots taken.
        let (_c3, s3) = pair(&listener).await;
        assert_eq!(admission.accept(s3).err().unwrap().1, Refusal::Full);
        // A shutdown gives the slot back before the socket closes.
        first.shutdown().await.unwrap();
        assert_eq!(admission.slots.as_ref().unwrap().available_permits(), 1);
        assert!(!admission.lock().connections.contains_key(&peer));
        drop(first);
        drop(second);
        assert_eq!(admission.slots.as_ref().unwrap().available_permits(), 2);
        assert!(admission.lock().pending.is_empty());
        assert!(admission.lock().connections.is_empty());
    }

    /// Bytes a client sent before its handshake deadline are read even
    /// when the server gets to them after it (a server behind in a
    /// connect storm); a read that then finds nothing fails.
    #[tokio::test]
    async fn a_late_server_still_reads_what_the_client_sent_then_holds_the_deadline() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let deadline = Duration::from_millis(200);
        let admission = Arc::new(Admission::new(None, Some(deadline), None, None));
        let (mut client, accepted) = pair(&listener).await;
        let mut limited = admission.accept(accepted).ok().unwrap();
        client.write_all(b"PRI * HTTP/2.0").await.unwrap();
        limited.stream.readable().await.unwrap();
        // The server comes to the connection after its deadline.
        tokio::time::sleep(deadline * 2).await;
        let mut read = [0; 14];
        limited.read_exact(&mut read).await.unwrap();
        assert_eq!(&read, b"PRI * HTTP/2.0");
        // Nothing more came: the deadline has passed.
        let error = limited.read(&mut read).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(admission.lock().connections.is_empty());
    }

    #[tokio::test]
    async fn streams_per_caller_are_capped_until_one_ends() {
        let admission = Arc::new(Admission::new(None, None, None, Some(2)));
        let a = admission.open_stream("token a").unwrap();
        let _b = admission.open_stream("token a").unwrap();
        let refused = admission.open_stream("token a").err().unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        let _other = admission.open_stream("token b").unwrap();
        drop(a);
        let _c = admission.open_stream("token a").unwrap();
    }
}
