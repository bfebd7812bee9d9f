//! The state a connection shares with its streams' application handles: one
//! lock per connection over every open stream's queues and windows, so the
//! connection task and the handles meet without channels (an idle stream
//! holds its small state and nothing else).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;

use bytes::Bytes;

use crate::conn_write::Chunk;
use crate::frame::Reason;
use crate::grpc::Status;

/// A connection's shared state.
#[derive(Default)]
pub(crate) struct Shared {
    /// Open streams by id (boxed: the table keeps room for several
    /// entries, and a connection usually has one stream).
    pub streams: HashMap<u32, Box<Stream>>,
    /// Streams with something for the connection task to do, in order.
    pub ready: Vec<u32>,
    /// Bytes the application consumed and the connection window has not had back.
    pub conn_unacked: u32,
    /// Wakes the connection task.
    pub conn_waker: Option<Waker>,
    /// Set when the connection has ended: every handle reports it.
    pub closed: bool,
    /// Consumed bytes that make a stream's WINDOW_UPDATE worth sending.
    pub update_threshold: u32,
    /// The largest request message accepted.
    pub max_message: usize,
}

/// One stream's shared state.
#[derive(Default)]
pub(crate) struct Stream {
    /// Received data not yet taken by the application.
    pub recv: VecDeque<Bytes>,
    /// The bytes in `recv`.
    pub recv_len: usize,
    /// The peer ended its side (END_STREAM).
    pub recv_eof: bool,
    /// The application dropped its receiving handle: data is discarded.
    pub recv_dropped: bool,
    /// Bytes taken by the application and not yet returned to the stream window.
    pub recv_unacked: u32,
    /// Bytes at the front of `recv` already returned to the windows (a
    /// message larger than a window is credited as it arrives).
    pub recv_credited: usize,
    /// What our stream window may still take.
    pub recv_window: i64,
    /// Wakes the receiving handle.
    pub recv_waker: Option<Waker>,
    /// Response data queued and not yet written (whole frames of gRPC messages).
    pub send: VecDeque<Chunk>,
    /// The bytes in `send`.
    pub send_len: usize,
    /// What the peer's stream window may still take.
    pub send_window: i64,
    /// Wakes the sending handle (waiting for room or the end).
    pub send_waker: Option<Waker>,
    /// The response's HEADERS were written.
    pub headers_sent: bool,
    /// The application asked for the response's HEADERS before its first
    /// message ([`Sender::send_headers`](crate::Sender::send_headers)).
    pub headers_wanted: bool,
    /// The status to end with, once `send` is written.
    pub trailers: Option<Status>,
    /// The trailers were queued for writing: the stream's send side is done.
    pub send_done: bool,
    /// The stream ended abnormally (reset by either side).
    pub reset: Option<Reason>,
    /// A RST_STREAM to write.
    pub reset_to_send: Option<Reason>,
    /// Listed in `Shared::ready`.
    pub queued: bool,
}

impl Stream {
    /// A new open stream with these windows.
    pub(crate) fn new(recv_window: i64, send_window: i64) -> Stream {
        Stream {
            recv_window,
            send_window,
            ..Stream::default()
        }
    }

    /// Whether the connection task can drop the stream: its response is
    /// written and the peer's side ended, or it was reset.
    pub(crate) fn finished(&self) -> bool {
        (self.reset.is_some() && self.reset_to_send.is_none()) || (self.send_done && self.recv_eof)
    }

    /// Wakes both handles.
    pub(crate) fn wake_all(&mut self) {
        if let Some(waker) = self.recv_waker.take() {
            waker.wake();
        }
        if let Some(waker) = self.send_waker.take() {
            waker.wake();
        }
    }
}

impl Shared {
    /// Lists `id` for the connection task and wakes it.
    pub(crate) fn mark_ready(&mut self, id: u32) {
        if let Some(stream) = self.streams.get_mut(&id)
            && !stream.queued
        {
            stream.queued = true;
            self.ready.push(id);
        }
        self.wake_conn();
    }

    /// Removes a stream, giving the map's storage back when it empties (an
    /// idle connection holds no table).
    pub(crate) fn remove(&mut self, id: u32) -> Option<Box<Stream>> {
        let stream = self.streams.remove(&id);
        if self.streams.is_empty() {
            self.streams = HashMap::new();
        }
        stream
    }

    /// Wakes the connection task.
    pub(crate) fn wake_conn(&mut self) {
        if let Some(waker) = self.conn_waker.take() {
            waker.wake();
        }
    }
}

/// A handle's way to its stream: the connection's shared state and the id.
#[derive(Clone)]
pub(crate) struct StreamRef {
    pub shared: Arc<Mutex<Shared>>,
    pub id: u32,
}

impl StreamRef {
    /// Locks the connection's shared state (a poisoned lock is still usable:
    /// every update leaves the state consistent).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        lock(&self.shared)
    }
}

/// Locks a connection's shared state.
pub(crate) fn lock(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
