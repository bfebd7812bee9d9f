//! The ADS client's transport: a lean HTTP/2 client connection carrying
//! one gRPC stream. The benches' emulated proxies run 10,000 of them in
//! one process, so what each costs is what a bench can measure the server
//! against; the tests' streams use the same one.
//!
//! At the protocol level it behaves as Envoy's gRPC client does: the
//! preface, SETTINGS (no push, Envoy's 256 MiB stream window unless the
//! stream is opened with another) and a
//! connection WINDOW_UPDATE to the same size, then one request stream
//! (HEADERS with `:method POST`, `:path`, `content-type: application/grpc`,
//! `te: trailers`), its messages in DATA frames within the server's flow
//! control windows and frame size; the server's SETTINGS and PINGs are
//! acknowledged, and the windows given back once half of them is used.
//! What makes it cheap: the request's field block is encoded once per
//! process and reused ([`request_headers`]); a request's shared encoded
//! parts go to the socket as they are (a vectored write, small parts
//! copied behind the frame heads); frames are parsed in place from the read
//! buffer ([`Frame`]) and a message within one DATA frame is
//! handed on as a slice of it; everything queued is written at once before
//! the next read, so the ACKs of responses that arrived together share one
//! write.
//!
//! Nothing runs in the background: frames are read, and the server's
//! SETTINGS and PINGs answered, only while [`GrpcStream::message`] waits,
//! and the receive windows are given back only as messages are read, so a
//! stream nobody reads holds up the server as a stalled proxy does.

use std::collections::VecDeque;
use std::io::IoSlice;

use super::h2::frame::{self, Frame, HEAD_LEN, Head};
use super::h2::hpack::{Decoder, Encoder};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::net::TcpStream;
use tonic::Code;

use super::error::{Error, transport};

/// Envoy's default stream and connection receive windows
/// (`initial_stream_window_size`, `initial_connection_window_size`).
pub const WINDOW: u32 = 256 * 1024 * 1024;

/// The one stream's identifier.
const STREAM: u32 = 1;

/// Parts shorter than this are copied behind the frame heads rather than
/// written as slices of their own.
const COPY_BELOW: usize = 512;

/// The largest response message accepted (as the tonic client allowed).
const MAX_MESSAGE: usize = 64 * 1024 * 1024;

/// The field block of a request on `path` to `127.0.0.1:port`, encoded
/// once and sent on every stream.
pub fn request_headers(port: u16, path: &str) -> Bytes {
    let authority = format!("127.0.0.1:{port}");
    Encoder::encode_to_bytes([
        (&b":method"[..], &b"POST"[..]),
        (b":scheme", b"http"),
        (b":path", path.as_bytes()),
        (b":authority", authority.as_bytes()),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ])
}

/// One connection with its one gRPC stream.
pub struct GrpcStream {
    socket: TcpStream,
    /// Bytes read and not yet parsed into frames.
    read: BytesMut,
    /// What is to be written, in order.
    out: Outbox,
    /// Request bytes waiting for the server's flow control windows.
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// The server's windows for what we send, and its frame size.
    send_connection: i64,
    send_stream: i64,
    peer_initial_window: u32,
    peer_max_frame: u32,
    /// The stream's receive window (the connection's is [`WINDOW`]).
    stream_window: u32,
    /// Received DATA not yet given back by WINDOW_UPDATE.
    unreleased_connection: u32,
    unreleased_stream: u32,
    decoder: Decoder,
    /// A field block whose CONTINUATIONs are still to come, and whether its
    /// HEADERS ended the stream.
    block: Option<(BytesMut, bool)>,
    /// Message bytes spanning DATA frames.
    partial: BytesMut,
    /// Whole messages received, in order.
    messages: VecDeque<Bytes>,
    /// How the stream ended: `Ok` for status OK, else why (boxed: kept in
    /// every connection, needed at most once).
    ended: Option<Result<(), Box<Error>>>,
    /// The server's GOAWAY, if any, for the reason of a later end.
    goaway: Option<String>,
}

impl GrpcStream {
    /// Connects to `127.0.0.1:port` and opens the stream with `headers`
    /// (from [`request_headers`]), with Envoy's receive windows
    /// ([`WINDOW`]); nothing is written before the first
    /// [`message`](Self::message) or [`flush`](Self::flush).
    pub async fn open(port: u16, headers: &Bytes) -> Result<GrpcStream, Error> {
        Self::open_with_window(port, headers, WINDOW).await
    }

    /// [`open`](Self::open) with a receive window of `stream_window` bytes
    /// for the stream (the connection's stays [`WINDOW`]): a small one
    /// makes the server wait for the client to read.
    pub async fn open_with_window(
        port: u16,
        headers: &Bytes,
        stream_window: u32,
    ) -> Result<GrpcStream, Error> {
        let socket = TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|error| transport(format!("connect: {error}")))?;
        Self::start(socket, headers, stream_window)
    }

    /// [`open`](Self::open) from the loopback address `source` (any of
    /// 127.0.0.0/8): a process of tens of thousands of clients spreads them
    /// over several, since one source address has only the ephemeral ports
    /// (about 28,000) for connections to one server address.
    pub async fn open_from(
        source: std::net::Ipv4Addr,
        port: u16,
        headers: &Bytes,
    ) -> Result<GrpcStream, Error> {
        let connect = async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind((source, 0).into())?;
            socket.connect(([127, 0, 0, 1], port).into()).await
        };
        let socket = connect
            .await
            .map_err(|error| transport(format!("connect from {source}: {error}")))?;
        Self::start(socket, headers, WINDOW)
    }

    /// The preface, settings and request stream on a connected socket.
    fn start(socket: TcpStream, headers: &Bytes, stream_window: u32) -> Result<GrpcStream, Error> {
        socket
            .set_nodelay(true)
            .map_err(|error| transport(format!("connect: {error}")))?;
        let mut out = Outbox::default();
        out.scratch.put_slice(frame::PREFACE);
        frame::write_settings(
            &[
                (frame::setting::ENABLE_PUSH, 0),
                (frame::setting::INITIAL_WINDOW_SIZE, stream_window),
            ],
            &mut out.scratch,
        );
        frame::write_window_update(0, WINDOW - frame::DEFAULT_WINDOW, &mut out.scratch);
        frame::write_headers(
            STREAM,
            headers,
            false,
            frame::DEFAULT_MAX_FRAME_SIZE,
            &mut out.scratch,
        );
        Ok(GrpcStream {
            socket,
            read: BytesMut::new(),
            out,
            pending: VecDeque::new(),
            pending_len: 0,
            send_connection: i64::from(frame::DEFAULT_WINDOW),
            send_stream: i64::from(frame::DEFAULT_WINDOW),
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::DEFAULT_MAX_FRAME_SIZE,
            stream_window,
            unreleased_connection: 0,
            unreleased_stream: 0,
            decoder: Decoder::new(4096),
            block: None,
            partial: BytesMut::new(),
            messages: VecDeque::new(),
            ended: None,
            goaway: None,
        })
    }

    /// Queues a request message made of `parts` (its encoded fields in
    /// order); it is written by the next [`message`](Self::message) or
    /// [`flush`](Self::flush).
    pub fn send(&mut self, parts: &[Bytes]) {
        let len: usize = parts.iter().map(Bytes::len).sum();
        let mut small = BytesMut::with_capacity(
            5 + parts
                .iter()
                .map(Bytes::len)
                .filter(|l| *l < COPY_BELOW)
                .sum::<usize>(),
        );
        small.put_u8(0);
        small.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
        for part in parts {
            if part.len() < COPY_BELOW {
                small.put_slice(part);
            } else {
                if !small.is_empty() {
                    self.pending.push_back(small.split().freeze());
                }
                self.pending.push_back(part.clone());
            }
        }
        if !small.is_empty() {
            self.pending.push_back(small.freeze());
        }
        self.pending_len += 5 + len;
        self.release_data();
    }

    /// Writes what is queued, as far as the server's flow control windows
    /// allow, waiting while the socket is full.
    pub async fn flush(&mut self) -> Result<(), Error> {
        loop {
            self.write_now()?;
            if self.out.is_empty() {
                return Ok(());
            }
            self.socket
                .writable()
                .await
                .map_err(|error| transport(format!("write: {error}")))?;
        }
    }

    /// The next response message; `None` when the stream ended with status
    /// OK; `Err` with why it failed or ended otherwise. Writes what was
    /// queued while it waits.
    pub async fn message(&mut self) -> Result<Option<Bytes>, Error> {
        loop {
            if let Some(message) = self.messages.pop_front() {
                return Ok(Some(message));
            }
            if let Some(ended) = self.ended.take() {
                return ended.map(|()| None).map_err(|error| *error);
            }
            self.write_now()?;
            if self.out.is_empty() {
                self.socket
                    .readable()
                    .await
                    .map_err(|error| transport(format!("read: {error}")))?;
            } else {
                tokio::select! {
                    ready = self.socket.readable() => ready.map_err(|error| transport(format!("read: {error}")))?,
                    ready = self.socket.writable() => {
                        ready.map_err(|error| transport(format!("write: {error}")))?;
                        continue;
                    }
                }
            }
            let want = self
                .frame_len()
                .map_or(16 * 1024, |len| (len + HEAD_LEN).max(16 * 1024));
            self.read.reserve(want);
            match self.socket.try_read_buf(&mut self.read) {
                Ok(0) => {
                    return Err(transport(match self.goaway.take() {
                        Some(goaway) => format!("connection closed after {goaway}"),
                        None => "connection closed by the server".to_string(),
                    }));
                }
                Ok(_) => self.frames()?,
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(error) => return Err(transport(format!("read: {error}"))),
            }
        }
    }

    /// The length of the frame at the start of the read buffer, if its
    /// head is there.
    fn frame_len(&self) -> Option<usize> {
        let head: &[u8; HEAD_LEN] = self.read.get(..HEAD_LEN)?.try_into().ok()?;
        Some(Head::parse(head).len as usize)
    }

    /// Handles every whole frame in the read buffer.
    fn frames(&mut self) -> Result<(), Error> {
        while let Some(len) = self.frame_len() {
            if self.read.len() < HEAD_LEN + len {
                break;
            }
            let head = Head::parse(self.read[..HEAD_LEN].try_into().unwrap_or(&[0; HEAD_LEN]));
            self.read.advance(HEAD_LEN);
            let payload = self.read.split_to(len).freeze();
            let frame = Frame::parse(head, payload).map_err(|error| transport(format!("frame: {error}")))?;
            self.frame(frame)?;
        }
        Ok(())
    }

    fn frame(&mut self, frame: Frame) -> Result<(), Error> {
        match frame {
            Frame::Data {
                stream,
                data,
                flow_len,
                end_stream,
            } => {
                self.received(flow_len);
                if stream != STREAM {
                    return Ok(());
                }
                self.data(data)?;
                if end_stream && self.ended.is_none() {
                    self.ended = Some(Err(Box::new(transport(
                        "stream ended by the server without trailers",
                    ))));
                }
            }
            Frame::Headers {
                stream,
                block,
                end_stream,
                end_headers,
            } => {
                if end_headers {
                    self.field_block(stream, &block, end_stream)?;
                } else {
                    self.block = Some((BytesMut::from(&block[..]), end_stream));
                }
            }
            Frame::Continuation {
                stream,
                block,
                end_headers,
            } => {
                let Some((mut joined, end_stream)) = self.block.take() else {
                    return Err(transport("CONTINUATION without HEADERS"));
                };
                joined.put_slice(&block);
                if end_headers {
                    self.field_block(stream, &joined, end_stream)?;
                } else {
                    self.block = Some((joined, end_stream));
                }
            }
            Frame::Settings { ack: false, params } => {
                for (id, value) in params {
                    match id {
                        frame::setting::INITIAL_WINDOW_SIZE => {
                            self.send_stream += i64::from(value) - i64::from(self.peer_initial_window);
                            self.peer_initial_window = value;
                        }
                        frame::setting::MAX_FRAME_SIZE => self.peer_max_frame = value,
                        _ => {}
                    }
                }
                frame::write_settings_ack(&mut self.out.scratch);
                self.release_data();
            }
            Frame::Settings { ack: true, .. } => {}
            Frame::Ping { ack: false, data } => frame::write_ping(data, true, &mut self.out.scratch),
            Frame::Ping { ack: true, .. } => {}
            Frame::WindowUpdate { stream, increment } => {
                if stream == 0 {
                    self.send_connection += i64::from(increment);
                } else if stream == STREAM {
                    self.send_stream += i64::from(increment);
                }
                self.release_data();
            }
            Frame::Reset { stream, reason } if stream == STREAM => {
                if self.ended.is_none() {
                    self.ended = Some(Err(Box::new(transport(format!(
                        "stream reset by the server: {reason:?}"
                    )))));
                }
            }
            Frame::GoAway { last_stream, reason } => {
                let goaway = format!("GOAWAY {reason:?} (last stream {last_stream})");
                if last_stream < STREAM && self.ended.is_none() {
                    self.ended = Some(Err(Box::new(transport(goaway.clone()))));
                }
                self.goaway = Some(goaway);
            }
            Frame::Reset { .. } | Frame::Priority { .. } | Frame::Unknown => {}
        }
        Ok(())
    }

    /// Counts received DATA against the windows and gives them back once
    /// half is used (one WINDOW_UPDATE for many frames).
    fn received(&mut self, flow_len: u32) {
        self.unreleased_connection += flow_len;
        self.unreleased_stream += flow_len;
        if self.unreleased_connection >= WINDOW / 2 {
            frame::write_window_update(0, self.unreleased_connection, &mut self.out.scratch);
            self.unreleased_connection = 0;
        }
        if self.unreleased_stream >= self.stream_window / 2 {
            frame::write_window_update(STREAM, self.unreleased_stream, &mut self.out.scratch);
            self.unreleased_stream = 0;
        }
    }

    /// Splits a DATA payload into messages: those wholly within it as
    /// slices of it, the rest joined across frames.
    fn data(&mut self, mut data: Bytes) -> Result<(), Error> {
        loop {
            if self.partial.is_empty() {
                let Some(len) = message_len(&data)? else {
                    break;
                };
                if data.len() < 5 + len {
                    break;
                }
                data.advance(5);
                self.messages.push_back(data.split_to(len));
            } else {
                self.partial.put_slice(&data);
                data.clear();
                while let Some(len) = message_len(&self.partial)? {
                    if self.partial.len() < 5 + len {
                        break;
                    }
                    self.partial.advance(5);
                    self.messages.push_back(self.partial.split_to(len).freeze());
                }
                break;
            }
        }
        if !data.is_empty() {
            self.partial.put_slice(&data);
        }
        Ok(())
    }

    /// A whole field block: the response's headers, or its trailers.
    fn field_block(&mut self, stream: u32, block: &[u8], end_stream: bool) -> Result<(), Error> {
        let (mut status, mut grpc_status, mut grpc_message) = (None, None, String::new());
        self.decoder
            .decode(block, 64 * 1024, |name, value| match name {
                b":status" => status = Some(String::from_utf8_lossy(value).into_owned()),
                b"grpc-status" => {
                    grpc_status = std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<u32>().ok())
                }
                b"grpc-message" => grpc_message = percent_decode(value),
                _ => {}
            })
            .map_err(|error| transport(format!("HPACK: {error}")))?;
        if stream != STREAM || self.ended.is_some() {
            return Ok(());
        }
        if let Some(status) = status.filter(|s| s != "200") {
            self.ended = Some(Err(Box::new(transport(format!("HTTP status {status}")))));
        } else if end_stream {
            self.ended = Some(match grpc_status {
                Some(0) => Ok(()),
                Some(code) => Err(Box::new(Error::Status {
                    code: Code::from(i32::try_from(code).unwrap_or(i32::MAX)),
                    message: grpc_message,
                })),
                None => Err(Box::new(transport("trailers without grpc-status"))),
            });
        }
        Ok(())
    }

    /// Moves as much pending request data into DATA frames as the server's
    /// windows and frame size allow.
    fn release_data(&mut self) {
        while self.pending_len > 0 {
            let window = self.send_connection.min(self.send_stream);
            let n = (self.pending_len as i64)
                .min(window)
                .min(i64::from(self.peer_max_frame));
            if n <= 0 {
                return;
            }
            let n = n as usize;
            self.out
                .scratch
                .put_slice(&frame::data_head(STREAM, n as u32, false));
            let mut left = n;
            while left > 0 {
                let Some(chunk) = self.pending.front_mut() else {
                    break;
                };
                let part = if chunk.len() <= left {
                    self.pending.pop_front().unwrap_or_default()
                } else {
                    chunk.split_to(left)
                };
                left -= part.len();
                self.out.put(part);
            }
            self.pending_len -= n;
            self.send_connection -= n as i64;
            self.send_stream -= n as i64;
        }
    }

    /// Writes what is queued until done or the socket is full.
    fn write_now(&mut self) -> Result<(), Error> {
        self.out.seal();
        while !self.out.is_empty() {
            let slices: Vec<IoSlice<'_>> = self.out.chunks.iter().take(64).map(|c| IoSlice::new(c)).collect();
            match self.socket.try_write_vectored(&slices) {
                Ok(n) => self.out.advance(n),
                Err(error) if error.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
                Err(error) => return Err(transport(format!("write: {error}"))),
            }
        }
        Ok(())
    }
}

/// The length of the message whose 5-byte prefix starts `bytes`, if the
/// prefix is whole.
fn message_len(bytes: &[u8]) -> Result<Option<usize>, Error> {
    let Some(prefix) = bytes.get(..5) else {
        return Ok(None);
    };
    if prefix[0] != 0 {
        return Err(transport("a compressed response message"));
    }
    let len = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(transport(format!("a response message of {len} bytes")));
    }
    Ok(Some(len))
}

/// A `grpc-message` value, percent-decoded.
fn percent_decode(value: &[u8]) -> String {
    let mut out = Vec::with_capacity(value.len());
    let mut at = 0;
    while at < value.len() {
        let hex = value
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (value[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Bytes to write: frame heads and small parts copied into `scratch`,
/// larger parts as the shared slices they are.
#[derive(Default)]
struct Outbox {
    chunks: VecDeque<Bytes>,
    scratch: BytesMut,
}

impl Outbox {
    fn put(&mut self, part: Bytes) {
        if part.len() < COPY_BELOW {
            self.scratch.put_slice(&part);
        } else {
            self.seal();
            self.chunks.push_back(part);
        }
    }

    /// Ends the copied run, so what follows goes after it.
    fn seal(&mut self) {
        if !self.scratch.is_empty() {
            self.chunks.push_back(self.scratch.split().freeze());
        }
    }

    fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.scratch.is_empty()
    }

    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            let Some(chunk) = self.chunks.front_mut() else {
                return;
            };
            if chunk.len() <= n {
                n -= chunk.len();
                self.chunks.pop_front();
            } else {
                chunk.advance(n);
                n = 0;
            }
        }
    }
}
