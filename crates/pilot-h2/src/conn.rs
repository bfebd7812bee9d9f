//! One HTTP/2 server connection, driven by one task: reading frames (a
//! buffer taken only while a frame's payload is partly read, sized by it),
//! timers (keepalive, maximum age, shutdown grace), and writing what the
//! streams queued. Frame handling is in `conn_recv`, writing in `conn_send`.

use std::future::{Future, poll_fn};
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::conn_stream::{Shared, lock};
use crate::conn_write::WriteQueue;
use crate::frame::{self, HEAD_LEN, Head, PREFACE, Reason};
use crate::grpc::ConnectionInfo;
use crate::hpack;
use crate::server::{Config, Error, Service};

/// Queued outgoing bytes beyond which the connection stops reading and
/// stops taking streams' data until the socket drains.
pub(crate) const HIGH_WATER: usize = 256 << 10;

/// The most bytes of field blocks buffered for one HEADERS + CONTINUATION.
pub(crate) fn max_block(config: &Config) -> usize {
    (config.max_header_list_size as usize)
        .saturating_mul(2)
        .max(64 << 10)
}

/// Where reading stands.
struct Read {
    /// Bytes read and not yet taken as frames: none between reads (no
    /// storage either), at most the part of a frame read so far after
    /// one (kept in storage about that frame's size).
    input: BytesMut,
    /// Whether the client preface was read.
    preface: bool,
}

/// The most bytes one read takes: several frames of a connection's flight
/// (its preface, SETTINGS, HEADERS and first messages) in one read
/// instead of two per frame (head, then payload); on the stack, copied
/// into the connection's input only for what is read.
const READ_CHUNK: usize = 16 * 1024;

/// A header block being received (HEADERS then CONTINUATIONs).
pub(crate) struct Block {
    pub stream: u32,
    pub end_stream: bool,
    pub bytes: BytesMut,
}

/// A server connection.
pub(crate) struct Connection<T, S, F> {
    pub io: T,
    pub config: Arc<Config>,
    pub service: Arc<S>,
    pub info: Arc<ConnectionInfo>,
    pub shared: Arc<Mutex<Shared>>,
    pub decoder: hpack::Decoder,
    read: Read,
    pub out: WriteQueue,
    /// Small frames (control, HEADERS) gathered before they join `out`.
    pub control: BytesMut,
    pub block: Option<Block>,
    /// The highest stream id the client opened.
    pub last_stream: u32,
    pub got_settings: bool,
    pub settings_acked: bool,
    pub goaway_sent: bool,
    pub peer_goaway: bool,
    pub peer_max_frame: u32,
    pub peer_initial_window: i64,
    pub conn_send_window: i64,
    pub conn_recv_window: i64,
    /// Streams with data waiting for a window.
    pub blocked: Vec<u32>,
    /// The open streams (counted for MAX_CONCURRENT_STREAMS).
    keepalive: Option<Pin<Box<Sleep>>>,
    pub ping_outstanding: bool,
    /// Streams the client reset while open, and streams that ended with
    /// their response: many more of the first than of the second is the
    /// rapid-reset attack (CVE-2023-44487), each reset stream having cost
    /// a call to the service.
    pub client_resets: u32,
    pub completed: u32,
    age: Option<Pin<Box<Sleep>>>,
    grace: Option<Pin<Box<Sleep>>>,
    shutdown: Option<Pin<Box<F>>>,
    /// A connection error being reported: GOAWAY queued, then close.
    pub closing: Option<Error>,
}

/// How long a closing connection reads on, waiting for the client to close.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Client resets tolerated before their ratio to completed streams counts.
pub(crate) const RESET_ALLOWANCE: u32 = 1024;

/// The PING payload of our keepalives.
pub(crate) const KEEPALIVE_PING: [u8; 8] = *b"pilot-ka";

impl<T, S, F> Connection<T, S, F>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
    S: Service,
    F: Future<Output = ()> + Send,
{
    pub(crate) fn new(
        io: T,
        config: Arc<Config>,
        service: Arc<S>,
        info: Arc<ConnectionInfo>,
        shutdown: F,
    ) -> Self {
        let shared = Shared {
            // A quarter of the smaller window: neither window can run dry
            // while its consumed bytes wait under the threshold.
            update_threshold: (config
                .initial_window_size
                .min(config.connection_window_size.max(frame::DEFAULT_WINDOW))
                / 4)
            .max(1),
            max_message: config.max_message_size,
            ..Shared::default()
        };
        let keepalive = config.keepalive_interval.map(|d| Box::pin(tokio::time::sleep(d)));
        let age = config.max_connection_age.map(|d| Box::pin(tokio::time::sleep(d)));
        Connection {
            io,
            service,
            info,
            shared: Arc::new(Mutex::new(shared)),
            // 4,096 until the client acknowledges our HEADER_TABLE_SIZE 0.
            decoder: hpack::Decoder::new(4096),
            read: Read {
                input: BytesMut::new(),
                preface: false,
            },
            out: WriteQueue::default(),
            control: BytesMut::new(),
            block: None,
            last_stream: 0,
            got_settings: false,
            settings_acked: false,
            goaway_sent: false,
            peer_goaway: false,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            peer_initial_window: i64::from(frame::DEFAULT_WINDOW),
            conn_send_window: i64::from(frame::DEFAULT_WINDOW),
            conn_recv_window: i64::from(frame::DEFAULT_WINDOW),
            blocked: Vec::new(),
            keepalive,
            ping_outstanding: false,
            client_resets: 0,
            completed: 0,
            age,
            grace: None,
            shutdown: Some(Box::pin(shutdown)),
            closing: None,
            config,
        }
    }

    /// Runs the connection to its end.
    pub(crate) async fn run(mut self) -> Result<(), Error> {
        self.send_preface();
        let result = poll_fn(|cx| self.poll_run(cx)).await;
        let _ = poll_fn(|cx| Pin::new(&mut self.io).poll_shutdown(cx)).await;
        if !matches!(result, Err(Error::Io(_) | Error::Preface)) {
            // Closing with unread input makes the kernel reset the
            // connection, which can destroy what the client has not read
            // yet (the last responses, a GOAWAY's reason): read what is
            // still coming until the client closes, for a moment at most.
            let mut sink = [0u8; 256];
            let drain = async {
                while let Ok(n) = tokio::io::AsyncReadExt::read(&mut self.io, &mut sink).await {
                    if n == 0 {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(LINGER, drain).await;
        }
        result
    }

    /// Our SETTINGS and the connection window's first update.
    fn send_preface(&mut self) {
        let c = &self.config;
        frame::write_settings(
            &[
                (frame::setting::HEADER_TABLE_SIZE, 0),
                (frame::setting::ENABLE_PUSH, 0),
                (frame::setting::MAX_CONCURRENT_STREAMS, c.max_concurrent_streams),
                (
                    frame::setting::INITIAL_WINDOW_SIZE,
                    c.initial_window_size.min(frame::MAX_WINDOW),
                ),
                (frame::setting::MAX_HEADER_LIST_SIZE, c.max_header_list_size),
            ],
            &mut self.control,
        );
        let window = i64::from(c.connection_window_size.min(frame::MAX_WINDOW));
        if window > self.conn_recv_window {
            let increment = (window - self.conn_recv_window) as u32;
            frame::write_window_update(0, increment, &mut self.control);
            self.conn_recv_window = window;
        }
    }

    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        loop {
            if let Some(error) = self.poll_timers(cx) {
                self.closing = Some(error);
            }
            if self.closing.is_some() {
                self.flush_control();
                return match self.out.poll_flush(&mut self.io, cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(_) => Poll::Ready(match self.closing.take() {
                        Some(Error::Protocol {
                            reason: Reason::NoError,
                            ..
                        })
                        | None => Ok(()),
                        Some(error) => Err(error),
                    }),
                };
            }
            let mut progress = false;
            // Read while the socket has frames and our writes keep up;
            // once they stopped the reading, writing everything lets it
            // go on (frames may be waiting, read or not, with no wake-up
            // to come for them).
            let mut held_back = false;
            while self.closing.is_none() {
                if self.out.len() + self.control.len() >= HIGH_WATER {
                    held_back = true;
                    break;
                }
                match self.poll_frame(cx) {
                    Poll::Ready(Ok(Some((head, payload)))) => {
                        progress = true;
                        self.on_frame(head, payload);
                    }
                    Poll::Ready(Ok(None)) => {
                        // The client closed its side: nothing more can arrive.
                        self.closing = Some(Error::Protocol {
                            reason: Reason::NoError,
                            what: "closed",
                        });
                    }
                    Poll::Ready(Err(error)) => return Poll::Ready(Err(error)),
                    Poll::Pending => break,
                }
            }
            if self.closing.is_some() {
                continue;
            }
            let more = self.gather(cx);
            self.flush_control();
            match self.out.poll_flush(&mut self.io, cx) {
                Poll::Ready(Ok(())) => progress |= more || held_back,
                Poll::Ready(Err(error)) => return Poll::Ready(Err(error.into())),
                Poll::Pending => {}
            }
            if self.done() {
                return Poll::Ready(Ok(()));
            }
            if !progress {
                return Poll::Pending;
            }
        }
    }

    /// Whether the connection may close: after GOAWAY either way, no stream
    /// left and nothing left to write.
    fn done(&self) -> bool {
        (self.goaway_sent || self.peer_goaway)
            && self.out.is_empty()
            && self.control.is_empty()
            && lock(&self.shared).streams.is_empty()
    }

    /// Moves the gathered small frames behind what `out` holds.
    pub(crate) fn flush_control(&mut self) {
        if !self.control.is_empty() {
            self.out.push_bytes(self.control.split().freeze());
            // Give the storage back: an idle connection holds no buffer.
            self.control = BytesMut::new();
        }
    }

    /// Starts a graceful shutdown: GOAWAY naming the last stream processed;
    /// streams in flight finish (within the grace, when configured).
    pub(crate) fn start_shutdown(&mut self) {
        if self.goaway_sent {
            return;
        }
        self.goaway_sent = true;
        frame::write_goaway(self.last_stream, Reason::NoError, &mut self.control);
        if let Some(grace) = self.config.shutdown_grace {
            self.grace = Some(Box::pin(tokio::time::sleep(grace)));
        }
    }

    /// A connection error: GOAWAY with `reason`, then close.
    pub(crate) fn go_away(&mut self, reason: Reason, what: &'static str) {
        if self.closing.is_some() {
            return;
        }
        frame::write_goaway(self.last_stream, reason, &mut self.control);
        self.goaway_sent = true;
        self.closing = Some(Error::Protocol { reason, what });
    }

    fn poll_timers(&mut self, cx: &mut Context<'_>) -> Option<Error> {
        if let Some(shutdown) = &mut self.shutdown
            && shutdown.as_mut().poll(cx).is_ready()
        {
            self.shutdown = None;
            self.start_shutdown();
        }
        if let Some(age) = &mut self.age
            && age.as_mut().poll(cx).is_ready()
        {
            self.age = None;
            self.start_shutdown();
        }
        if let Some(grace) = &mut self.grace
            && grace.as_mut().poll(cx).is_ready()
        {
            self.grace = None;
            return Some(Error::GraceExpired);
        }
        if let Some(keepalive) = &mut self.keepalive
            && keepalive.as_mut().poll(cx).is_ready()
        {
            if self.ping_outstanding {
                return Some(Error::KeepaliveTimeout(self.config.keepalive_timeout));
            }
            self.ping_outstanding = true;
            keepalive
                .as_mut()
                .reset(Instant::now() + self.config.keepalive_timeout);
            frame::write_ping(KEEPALIVE_PING, false, &mut self.control);
            // Register the timer's new deadline.
            let _ = keepalive.as_mut().poll(cx);
        }
        None
    }

    /// Our keepalive PING was answered: the next one after the interval.
    pub(crate) fn keepalive_answered(&mut self) {
        self.ping_outstanding = false;
        if let (Some(keepalive), Some(interval)) = (&mut self.keepalive, self.config.keepalive_interval) {
            keepalive.as_mut().reset(Instant::now() + interval);
        }
    }

    /// Reads the next frame; `None` at the end of the input. Each payload
    /// is a buffer of exactly its length; what is read beyond the frames
    /// taken is kept only while a frame is partly read.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<(Head, Bytes)>, Error>> {
        loop {
            match self.take_frame() {
                Ok(Some(frame)) => return Poll::Ready(Ok(Some(frame))),
                Ok(None) => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
            let mut chunk = [std::mem::MaybeUninit::<u8>::uninit(); READ_CHUNK];
            let mut read = ReadBuf::uninit(&mut chunk);
            match Pin::new(&mut self.io).poll_read(cx, &mut read) {
                Poll::Ready(Ok(())) if read.filled().is_empty() => {
                    // The end of the input: between frames it is the
                    // client closing; within one, the connection failing.
                    return Poll::Ready(match (self.read.preface, self.read.input.is_empty()) {
                        (_, true) => Ok(None),
                        (false, false) => Err(Error::Preface),
                        (true, false) => Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
                    });
                }
                Poll::Ready(Ok(())) => self.read.input.extend_from_slice(read.filled()),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// The next frame among the bytes read, if it is all there (after the
    /// client preface, checked first).
    fn take_frame(&mut self) -> Result<Option<(Head, Bytes)>, Error> {
        let input = &mut self.read.input;
        if !self.read.preface {
            if input.len() < PREFACE.len() {
                return Ok(None);
            }
            if input[..PREFACE.len()] != PREFACE[..] {
                return Err(Error::Preface);
            }
            input.advance(PREFACE.len());
            self.read.preface = true;
        }
        if input.len() < HEAD_LEN {
            self.read.keep_only(HEAD_LEN);
            return Ok(None);
        }
        let head = Head::parse(input[..HEAD_LEN].try_into().expect("a head's length"));
        if let Err(frame::FrameError::Connection { reason, what }) =
            head.check_size(frame::DEFAULT_MAX_FRAME_SIZE)
        {
            input.advance(HEAD_LEN);
            self.go_away(reason, what);
            return Ok(Some((head, Bytes::new())));
        }
        let end = HEAD_LEN + head.len as usize;
        if input.len() < end {
            self.read.keep_only(end);
            return Ok(None);
        }
        let payload = Bytes::copy_from_slice(&input[HEAD_LEN..end]);
        input.advance(end);
        self.read.keep_only(0);
        Ok(Some((head, payload)))
    }
}

impl Read {
    /// Gives back storage beyond what the frame being read needs
    /// (`needed` bytes in all): none once everything read was taken.
    fn keep_only(&mut self, needed: usize) {
        if self.input.is_empty() {
            if self.input.capacity() > 0 {
                self.input = BytesMut::new();
            }
        } else if self.input.capacity() > 2 * needed.max(self.input.len()) {
            let mut kept = BytesMut::with_capacity(needed.max(self.input.len()));
            kept.extend_from_slice(&self.input);
            self.input = kept;
        }
    }
}

impl<T, S, F> Drop for Connection<T, S, F> {
    fn drop(&mut self) {
        let mut shared = lock(&self.shared);
        shared.closed = true;
        for stream in shared.streams.values_mut() {
            stream.wake_all();
        }
        shared.streams.clear();
        shared.ready.clear();
    }
}
