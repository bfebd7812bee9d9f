//! Which connections and streams the ADS listener keeps, so clients
//! without a credential cannot take the slots of proxies with one:
//!
//! - **Connection slots** (`max_connections`): each accepted connection
//!   holds one until it closes. The slot is given back when the server
//!   begins to close the connection (before its FIN or TLS `close_notify`
//!   is sent) or when the connection is dropped, whichever is first. When
//!   every slot is taken, the **oldest connection not yet admitted** is
//!   closed and its slot goes to the new one (counted as an eviction): a
//!   proxy with a credential is never refused because of sockets without
//!   one. Only when every open connection is admitted is the new one
//!   refused.
//! - **Handshake deadline** (`handshake_timeout`): a connection must open
//!   an admitted stream (authenticated, when the server authenticates)
//!   within this long of being accepted: the TLS handshake, the HTTP/2
//!   preface and the stream's headers all fall within it. A silent socket,
//!   one that does not read, or one whose streams are all refused, is
//!   closed at the deadline by a timer ([`Watch::closed`]): the
//!   connection is dropped, with nothing flushed. Bytes waiting on the
//!   socket are still read when the server comes to them late: the
//!   connection task looks at its connection before its deadline, so a
//!   server that falls behind in a connect storm does not close the
//!   connections it has not yet read.
//! - **Write progress** (`write_timeout`): a connection whose writes have
//!   been pending (the socket full: the client does not read) for this
//!   long fails its next write, whatever it is doing, and is dropped.
//!   A stream whose response waits that long with nothing taken (the
//!   proxy's flow-control window kept shut) drops its connection too
//!   (`stall.rs`).
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

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::time::{Instant, Sleep};

use super::peer::Peer;

/// The ADS listener's bookkeeping of connections and streams.
pub(crate) struct Admission {
    max_connections: Option<usize>,
    handshake_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
    max_pending_per_address: Option<usize>,
    max_streams_per_caller: Option<usize>,
    table: Mutex<Table>,
}

/// The limits [`Admission`] keeps (`None`: no limit).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Limits {
    pub(crate) max_connections: Option<usize>,
    pub(crate) handshake_timeout: Option<Duration>,
    pub(crate) write_timeout: Option<Duration>,
    pub(crate) max_pending_per_address: Option<usize>,
    pub(crate) max_streams_per_caller: Option<usize>,
}

/// Why a connection was not accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Every connection slot is taken by an admitted connection.
    Full,
    /// Its address has as many connections pending as it may.
    AddressPending,
}

/// A connection accepted: it, and the connection closed to make room for
/// it, if one was.
pub(crate) struct Accepted {
    pub(crate) connection: Limited,
    /// The peer of the oldest connection not yet admitted, closed because
    /// every slot was taken.
    pub(crate) evicted: Option<SocketAddr>,
}

#[derive(Default)]
struct Table {
    /// Open connections by peer address.
    connections: HashMap<SocketAddr, Arc<Connection>>,
    /// Connections not admitted yet, by peer IP.
    pending: HashMap<IpAddr, usize>,
    /// Connections not admitted yet, oldest first (by accept order).
    unadmitted: BTreeMap<u64, SocketAddr>,
    /// Connections holding a slot.
    open: usize,
    /// The next connection's accept order.
    next: u64,
    /// Streams open, by credential name.
    streams: HashMap<String, usize>,
}

/// One connection's state: pending until a stream on it is admitted.
struct Connection {
    state: AtomicU8,
    /// Its place in accept order.
    order: u64,
    /// Whether it holds a slot (an evicted connection gave its slot to
    /// the connection that evicted it).
    slot: AtomicBool,
    /// Told when the connection is evicted.
    evicted: Notify,
}

const PENDING: u8 = 0;
const ADMITTED: u8 = 1;
const CLOSED: u8 = 2;
const EVICTED: u8 = 3;

impl Admission {
    /// The bookkeeping for these limits.
    pub(crate) fn new(limits: Limits) -> Self {
        Admission {
            max_connections: limits.max_connections.map(|max| max.max(1)),
            handshake_timeout: limits.handshake_timeout,
            write_timeout: limits.write_timeout,
            max_pending_per_address: limits.max_pending_per_address.map(|max| max.max(1)),
            max_streams_per_caller: limits.max_streams_per_caller.map(|max| max.max(1)),
            table: Mutex::new(Table::default()),
        }
    }

    /// Takes a slot for a connection just accepted (evicting the oldest
    /// connection not yet admitted when every slot is taken), or says why
    /// not (the caller closes it).
    pub(crate) fn accept(self: &Arc<Self>, stream: TcpStream) -> Result<Accepted, (TcpStream, Refusal)> {
        let Ok(peer) = stream.peer_addr() else {
            // Already gone: let the transport find out.
            return Ok(Accepted {
                connection: Limited::untracked(stream, self.write_timeout),
                evicted: None,
            });
        };
        let mut evicted = None;
        let connection = {
            let mut table = self.lock();
            let pending = table.pending.get(&peer.ip()).copied().unwrap_or(0);
            if self.max_pending_per_address.is_some_and(|max| pending >= max) {
                return Err((stream, Refusal::AddressPending));
            }
            if self.max_connections.is_some_and(|max| table.open >= max) {
                match evict_oldest(&mut table) {
                    Some(victim) => evicted = Some(victim),
                    None => return Err((stream, Refusal::Full)),
                }
            } else {
                table.open += 1;
            }
            let order = table.next;
            table.next += 1;
            let connection = Arc::new(Connection {
                state: AtomicU8::new(PENDING),
                order,
                slot: AtomicBool::new(true),
                evicted: Notify::new(),
            });
            *table.pending.entry(peer.ip()).or_insert(0) += 1;
            table.unadmitted.insert(order, peer);
            if let Some(replaced) = table.connections.insert(peer, Arc::clone(&connection)) {
                // A peer address reused while its old connection is still
                // being closed: the old one no longer counts.
                forget_in(&mut table, peer, &replaced);
            }
            connection
        };
        let deadline = self.handshake_timeout.map(|timeout| Instant::now() + timeout);
        Ok(Accepted {
            connection: Limited {
                tracked: Some(Tracked {
                    admission: Arc::clone(self),
                    peer,
                    connection,
                }),
                deadline,
                read_deadline: deadline.map(|at| Box::pin(tokio::time::sleep_until(at))),
                write_timeout: self.write_timeout,
                write_stalled: None,
                stream,
            },
            evicted,
        })
    }

    /// Marks the connection a stream arrived on as admitted (its deadline
    /// and pending count no longer apply, and it is not evicted), from the
    /// stream's extensions.
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
            release_pending(&mut table, peer.ip(), connection.order);
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
        forget_in(&mut self.lock(), peer, connection);
    }
}

/// Forgets a connection that closed (or whose peer address a new
/// connection took), giving back its slot and pending count.
fn forget_in(table: &mut Table, peer: SocketAddr, connection: &Arc<Connection>) {
    if table
        .connections
        .get(&peer)
        .is_some_and(|known| Arc::ptr_eq(known, connection))
    {
        table.connections.remove(&peer);
    }
    if connection.state.swap(CLOSED, Ordering::AcqRel) == PENDING {
        release_pending(table, peer.ip(), connection.order);
    }
    if connection.slot.swap(false, Ordering::AcqRel) {
        table.open = table.open.saturating_sub(1);
    }
}

/// Closes the oldest connection not yet admitted, its slot kept for the
/// connection that takes its place; `None` when every one is admitted.
fn evict_oldest(table: &mut Table) -> Option<SocketAddr> {
    while let Some((_, peer)) = table.unadmitted.pop_first() {
        let Some(victim) = table.connections.get(&peer).cloned() else {
            continue;
        };
        if victim
            .state
            .compare_exchange(PENDING, EVICTED, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            continue;
        }
        if let Some(count) = table.pending.get_mut(&peer.ip()) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                table.pending.remove(&peer.ip());
            }
        }
        table.connections.remove(&peer);
        if !victim.slot.swap(false, Ordering::AcqRel) {
            // It held none (already given back): the new connection
            // takes a slot of its own.
            table.open += 1;
        }
        victim.evicted.notify_one();
        return Some(peer);
    }
    None
}

fn release_pending(table: &mut Table, ip: IpAddr, order: u64) {
    table.unadmitted.remove(&order);
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

/// Why a connection was closed by [`Watch::closed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Closed {
    /// No stream on it was admitted by its handshake deadline.
    HandshakeTimeout,
    /// Every slot was taken and it was the oldest not admitted.
    Evicted,
}

/// What the task serving a connection watches to drop it: its handshake
/// deadline (while it is not admitted) and its eviction.
#[derive(Clone)]
pub(crate) struct Watch {
    connection: Option<Arc<Connection>>,
    deadline: Option<Instant>,
}

impl Watch {
    /// Completes when the connection is to be dropped: its handshake
    /// deadline passed with no stream admitted, or it was evicted. Never
    /// completes for a connection outside the bookkeeping.
    pub(crate) async fn closed(&self) -> Closed {
        let Some(connection) = &self.connection else {
            return std::future::pending().await;
        };
        let evicted = connection.evicted.notified();
        let deadline = async {
            match self.deadline {
                Some(at) if connection.state.load(Ordering::Acquire) != ADMITTED => {
                    tokio::time::sleep_until(at).await;
                    if connection.state.load(Ordering::Acquire) == PENDING {
                        return Closed::HandshakeTimeout;
                    }
                    std::future::pending().await
                }
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            () = evicted => Closed::Evicted,
            closed = deadline => closed,
        }
    }
}

/// An accepted connection: holds its slot until the server begins to close
/// it; fails its reads once its handshake deadline passes unadmitted (when
/// they find nothing to read), and its writes once they have made no
/// progress for the write timeout.
pub(crate) struct Limited {
    tracked: Option<Tracked>,
    deadline: Option<Instant>,
    /// The handshake deadline as the reads see it (dropped once admitted).
    read_deadline: Option<Pin<Box<Sleep>>>,
    write_timeout: Option<Duration>,
    /// Set while a write is pending: when it fails the connection.
    write_stalled: Option<Pin<Box<Sleep>>>,
    stream: TcpStream,
}

impl Limited {
    /// A connection outside the bookkeeping (its writes still timed).
    pub(crate) fn untracked(stream: TcpStream, write_timeout: Option<Duration>) -> Self {
        Limited {
            tracked: None,
            deadline: None,
            read_deadline: None,
            write_timeout,
            write_stalled: None,
            stream,
        }
    }

    /// What the connection's task watches to drop it.
    pub(crate) fn watch(&self) -> Watch {
        Watch {
            connection: self.tracked.as_ref().map(|t| Arc::clone(&t.connection)),
            deadline: self.deadline,
        }
    }

    /// Gives the slot back and forgets the connection.
    fn release(&mut self) {
        if let Some(tracked) = self.tracked.take() {
            tracked.admission.forget(tracked.peer, &tracked.connection);
        }
    }

    /// `Err` once the deadline has passed and no stream was admitted, or
    /// the connection was evicted.
    fn check_deadline(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        let state = self
            .tracked
            .as_ref()
            .map_or(ADMITTED, |t| t.connection.state.load(Ordering::Acquire));
        if state == EVICTED {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "evicted: every ADS connection slot was taken and this connection had no admitted stream",
            ));
        }
        let Some(deadline) = &mut self.read_deadline else {
            return Ok(());
        };
        if state == ADMITTED {
            self.read_deadline = None;
            return Ok(());
        }
        if deadline.as_mut().poll(cx).is_ready() {
            self.read_deadline = None;
            self.release();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no admitted ADS stream within the handshake timeout",
            ));
        }
        Ok(())
    }

    /// Records a write's outcome: progress clears the stall, a pending
    /// write starts (or keeps) its timer, which fails the write once it
    /// fires.
    fn written<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<std::io::Result<T>>,
        progress: bool,
    ) -> Poll<std::io::Result<T>> {
        match &poll {
            Poll::Ready(Ok(_)) if progress => self.write_stalled = None,
            Poll::Pending => {
                if let Some(timeout) = self.write_timeout {
                    let stalled = self
                        .write_stalled
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                    if stalled.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            format!("no ADS write progress for {timeout:?} (the client does not read)"),
                        )));
                    }
                }
            }
            Poll::Ready(_) => {}
        }
        poll
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
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        let progress = matches!(poll, Poll::Ready(Ok(n)) if n > 0);
        self.written(cx, poll, progress)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.written(cx, poll, false)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        // Given back before the peer can see the close.
        self.release();
        let poll = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.written(cx, poll, false)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        let progress = matches!(poll, Poll::Ready(Ok(n)) if n > 0);
        self.written(cx, poll, progress)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        (client, accepted)
    }

    fn admit(admission: &Admission, limited: &Limited) {
        let mut extensions = http::Extensions::new();
        extensions.insert(Peer::plain(limited.peer_addr()));
        admission.admit(&extensions);
    }

    fn accept(admission: &Arc<Admission>, stream: TcpStream) -> Result<Accepted, Refusal> {
        admission.accept(stream).map_err(|(_, refusal)| refusal)
    }

    #[tokio::test]
    async fn slots_and_pending_counts_are_given_back_on_close_and_on_admission() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admission = Arc::new(Admission::new(Limits {
            max_connections: Some(2),
            max_pending_per_address: Some(1),
            ..Limits::default()
        }));
        let (_c1, s1) = pair(&listener).await;
        let mut first = accept(&admission, s1).ok().unwrap().connection;
        // One pending connection from 127.0.0.1 at a time.
        let (_c2, s2) = pair(&listener).await;
        let (s2, refusal) = admission.accept(s2).err().unwrap();
        assert_eq!(refusal, Refusal::AddressPending);
        // Admitted, the first no longer counts as pending.
        admit(&admission, &first);
        let second = accept(&admission, s2).ok().unwrap().connection;
        admit(&admission, &second);
        // Both slots taken by admitted connections: refused.
        let (_c3, s3) = pair(&listener).await;
        assert_eq!(accept(&admission, s3).err().unwrap(), Refusal::Full);
        // A shutdown gives the slot back before the socket closes.
        let peer = first.peer_addr().unwrap();
        first.shutdown().await.unwrap();
        assert_eq!(admission.lock().open, 1);
        assert!(!admission.lock().connections.contains_key(&peer));
        drop(first);
        drop(second);
        assert_eq!(admission.lock().open, 0);
        assert!(admission.lock().pending.is_empty());
        assert!(admission.lock().unadmitted.is_empty());
        assert!(admission.lock().connections.is_empty());
    }

    /// With every slot taken, a new connection closes the oldest one not
    /// admitted and takes its slot; admitted ones are never closed.
    #[tokio::test]
    async fn a_full_server_evicts_the_oldest_unadmitted_connection() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admission = Arc::new(Admission::new(Limits {
            max_connections: Some(3),
            ..Limits::default()
        }));
        let (_c1, s1) = pair(&listener).await;
        let admitted = accept(&admission, s1).ok().unwrap().connection;
        admit(&admission, &admitted);
        let (_c2, s2) = pair(&listener).await;
        let older = accept(&admission, s2).ok().unwrap().connection;
        let (_c3, s3) = pair(&listener).await;
        let newer = accept(&admission, s3).ok().unwrap().connection;
        // Full: the older of the two unadmitted goes.
        let (_c4, s4) = pair(&listener).await;
        let fourth = accept(&admission, s4).ok().unwrap();
        assert_eq!(fourth.evicted, older.peer_addr());
        assert_eq!(older.watch().closed().await, Closed::Evicted);
        let mut older = older;
        let error = older.read(&mut [0; 4]).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::ConnectionAborted);
        drop(older);
        // Its slot went to the fourth: still three open.
        assert_eq!(admission.lock().open, 3);
        admit(&admission, &newer);
        admit(&admission, &fourth.connection);
        let (_c5, s5) = pair(&listener).await;
        assert_eq!(accept(&admission, s5).err().unwrap(), Refusal::Full);
        drop((admitted, newer, fourth));
        assert_eq!(admission.lock().open, 0);
        assert!(admission.lock().connections.is_empty());
    }

    /// Bytes a client sent before its handshake deadline are read even
    /// when the server gets to them after it (a server behind in a
    /// connect storm); a read that then finds nothing fails.
    #[tokio::test]
    async fn a_late_server_still_reads_what_the_client_sent_then_holds_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let deadline = Duration::from_millis(200);
        let admission = Arc::new(Admission::new(Limits {
            handshake_timeout: Some(deadline),
            ..Limits::default()
        }));
        let (mut client, accepted) = pair(&listener).await;
        let mut limited = accept(&admission, accepted).ok().unwrap().connection;
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

    /// The watch of a connection never admitted completes at its
    /// deadline; once admitted, it does not.
    #[tokio::test]
    async fn the_handshake_deadline_is_a_timer_not_a_read() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admission = Arc::new(Admission::new(Limits {
            handshake_timeout: Some(Duration::from_millis(100)),
            ..Limits::default()
        }));
        let (_c1, s1) = pair(&listener).await;
        let silent = accept(&admission, s1).ok().unwrap().connection;
        // Nothing reads the connection: the timer alone closes it.
        assert_eq!(silent.watch().closed().await, Closed::HandshakeTimeout);
        let (_c2, s2) = pair(&listener).await;
        let admitted = accept(&admission, s2).ok().unwrap().connection;
        admit(&admission, &admitted);
        let watch = admitted.watch();
        let outcome = tokio::time::timeout(Duration::from_millis(400), watch.closed()).await;
        assert!(outcome.is_err(), "an admitted connection is kept: {outcome:?}");
    }

    /// A client that does not read: the connection's writes fail once
    /// they have been pending for the write timeout.
    #[tokio::test]
    async fn writes_that_make_no_progress_fail_at_the_write_timeout() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (_client, accepted) = pair(&listener).await;
        let mut limited = Limited::untracked(accepted, Some(Duration::from_millis(200)));
        let chunk = vec![0u8; 64 * 1024];
        let error = loop {
            // Generous: the socket buffers fill within a few megabytes.
            match tokio::time::timeout(Duration::from_secs(60), limited.write_all(&chunk)).await {
                Ok(Ok(())) => continue,
                Ok(Err(error)) => break error,
                Err(_) => panic!("a write that made no progress was not failed"),
            }
        };
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        assert!(error.to_string().contains("does not read"), "{error}");
    }

    #[tokio::test]
    async fn streams_per_caller_are_capped_until_one_ends() {
        let admission = Arc::new(Admission::new(Limits {
            max_streams_per_caller: Some(2),
            ..Limits::default()
        }));
        let a = admission.open_stream("token a").unwrap();
        let _b = admission.open_stream("token a").unwrap();
        let refused = admission.open_stream("token a").err().unwrap();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        let _other = admission.open_stream("token b").unwrap();
        drop(a);
        let _c = admission.open_stream("token a").unwrap();
    }
}
