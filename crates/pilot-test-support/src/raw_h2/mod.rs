//! A raw HTTP/2 client for attacking a server (feature `raw-h2`): it sends
//! the connection preface and then whatever frames the test builds, valid
//! or not (RFC 9113 framing in [`frame`], RFC 7541 header blocks without
//! Huffman coding in [`HeaderBlock`]), and reports what the server did:
//! its GOAWAY with the error code, how many streams it reset, whether it
//! closed the connection, and whether its process still holds the socket.
//!
//! Nothing here checks the protocol (that is the server's job) but one
//! duty of the encoder: when the server's SETTINGS shrink the HPACK
//! dynamic table, the next header block sent starts with the table size
//! update RFC 7541 requires, added by [`Connection::send`]. A
//! [`Connection`] may read in a thread of its own ([`Connection::open`],
//! answering the server's SETTINGS as a client must) or never read at all
//! ([`Connection::silent`]), for attacks by clients that let the server's
//! replies pile up.
//!
//! ```no_run
//! use pilot_test_support::raw_h2::{Connection, frame, hpack};
//! # fn example(server: std::net::SocketAddr) -> std::io::Result<()> {
//! let mut attacker = Connection::open(server, &[])?;
//! let block = hpack::ads_request(&server.to_string(), None);
//! for stream in (1..2000).step_by(2) {
//!     attacker.send(&frame::headers(stream, &block, false, true))?;
//!     attacker.send(&frame::rst_stream(stream, frame::CANCEL))?;
//! }
//! let report = attacker.wait_closed(std::time::Duration::from_secs(60));
//! assert!(report.closed || report.goaway.is_some());
//! # Ok(())
//! # }
//! ```

pub mod frame;
pub mod hpack;
mod proc_net;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use hpack::HeaderBlock;

/// How long one write may wait for the server to take bytes before
/// [`Connection::send`] reports `TimedOut`: a server that stops reading
/// shows as a write that does not progress, not as a hung test.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(5);

/// The initial flow-control window of a connection and of its streams
/// (RFC 9113 section 6.9.2).
pub const DEFAULT_WINDOW: u64 = 65_535;

/// What the server sent on a connection, so far.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Frames read.
    pub frames: u64,
    /// Bytes read (frame headers included).
    pub bytes: u64,
    /// `SETTINGS` frames that were not acknowledgements.
    pub settings: u64,
    /// `PING` acknowledgements.
    pub ping_acks: u64,
    /// `HEADERS` frames (responses and trailers).
    pub headers: u64,
    /// `DATA` frames.
    pub data: u64,
    /// `RST_STREAM` frames.
    pub resets: u64,
    /// The code of the last `RST_STREAM`.
    pub last_reset_code: Option<u32>,
    /// The server's first `GOAWAY`.
    pub goaway: Option<GoAway>,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS`, if it sent one.
    pub max_concurrent_streams: Option<u32>,
    /// The server's `SETTINGS_HEADER_TABLE_SIZE`, if it sent one (the
    /// dynamic table its HPACK decoder keeps; 4,096 otherwise).
    pub header_table_size: Option<u32>,
    /// The server's `SETTINGS_INITIAL_WINDOW_SIZE`, if it sent one (the
    /// initial send window of each stream; 65,535 otherwise).
    pub initial_window: Option<u32>,
    /// The sum of the server's `WINDOW_UPDATE` increments by stream (0:
    /// the connection): with the initial windows, how much the client may
    /// send.
    pub window_updates: std::collections::BTreeMap<u32, u64>,
    /// The connection ended: end of file, or an error such as a reset.
    pub closed: bool,
    /// Why reading stopped, when it did with an error.
    pub error: Option<String>,
}

impl Report {
    /// How many bytes of DATA the server allowed on `stream_id` so far (0:
    /// the connection): the initial window plus its updates.
    pub fn allowed(&self, stream_id: u32) -> u64 {
        let initial = match stream_id {
            0 => DEFAULT_WINDOW,
            _ => self.initial_window.unwrap_or(DEFAULT_WINDOW as u32).into(),
        };
        initial + self.window_updates.get(&stream_id).copied().unwrap_or(0)
    }

    /// The server ended the connection, or said it would (GOAWAY).
    pub fn ended(&self) -> bool {
        self.closed || self.goaway.is_some()
    }
}

/// A `GOAWAY` frame's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoAway {
    /// The last stream the server says it processed.
    pub last_stream_id: u32,
    /// The error code ([`frame::ENHANCE_YOUR_CALM`], ...).
    pub code: u32,
    /// The debug data, as text.
    pub debug: String,
}

/// One attacking connection.
#[derive(Debug)]
pub struct Connection {
    writer: TcpStream,
    reader_socket: TcpStream,
    local: SocketAddr,
    server: SocketAddr,
    report: Arc<Mutex<Report>>,
    pending_acks: Arc<AtomicU32>,
    answer_pings: Arc<AtomicBool>,
    /// The HPACK table size our next header block must announce (after
    /// acknowledging a smaller `SETTINGS_HEADER_TABLE_SIZE`).
    table_update: Option<u32>,
    /// The table size the server's decoder uses for our blocks.
    table_size: u32,
    reader: Option<JoinHandle<()>>,
}

impl Connection {
    /// Connects to `server`, sends the preface and a SETTINGS frame with
    /// `settings`, waits for the server's SETTINGS (at most a minute) and
    /// acknowledges them, and reads in a thread of its own from then on
    /// (acknowledging later SETTINGS at the next [`send`](Self::send);
    /// never answering PINGs).
    pub fn open(server: SocketAddr, settings: &[(u16, u32)]) -> io::Result<Self> {
        let mut connection = Self::silent(server, settings)?;
        connection
            .reader_socket
            .set_read_timeout(Some(Duration::from_secs(60)))?;
        let (mut header, mut payload) = ([0u8; 9], Vec::new());
        loop {
            read_frame(&mut connection.reader_socket, &mut header, &mut payload)?;
            if record(&mut lock(&connection.report), &header, &payload) {
                connection.writer.write_all(&frame::settings_ack())?;
                connection.acknowledged();
                break;
            }
        }
        connection.start_reading()?;
        Ok(connection)
    }

    /// [`open`](Self::open) without the reading thread: the server's
    /// frames stay in the socket until [`drain`](Self::drain).
    pub fn silent(server: SocketAddr, settings: &[(u16, u32)]) -> io::Result<Self> {
        let mut socket = TcpStream::connect(server)?;
        socket.set_nodelay(true)?;
        socket.set_write_timeout(Some(WRITE_PATIENCE))?;
        let mut hello = frame::PREFACE.to_vec();
        hello.extend_from_slice(&frame::settings(settings));
        socket.write_all(&hello)?;
        Ok(Connection {
            reader_socket: socket.try_clone()?,
            local: socket.local_addr()?,
            writer: socket,
            server,
            report: Arc::default(),
            pending_acks: Arc::default(),
            answer_pings: Arc::default(),
            table_update: None,
            table_size: hpack::DEFAULT_TABLE_SIZE,
            reader: None,
        })
    }

    /// The client's address of the connection.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Sends `bytes` (one frame or many, as built by [`frame`]) after the
    /// acknowledgements of SETTINGS the reader received since the last
    /// send (between two sends: a server that sends SETTINGS again while
    /// the test is inside a header block would see the acknowledgement
    /// there); `TimedOut` or
    /// `WouldBlock` when the server took nothing for [`WRITE_PATIENCE`],
    /// another error when the connection is gone.
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        while self.pending_acks.load(Ordering::Relaxed) > 0 {
            self.writer.write_all(&frame::settings_ack())?;
            self.pending_acks.fetch_sub(1, Ordering::Relaxed);
            self.acknowledged();
        }
        match self.table_update {
            Some(size) => {
                let (bytes, updated) = announce_table_size(bytes, size);
                if updated {
                    self.table_update = None;
                }
                self.writer.write_all(&bytes)
            }
            None => self.writer.write_all(bytes),
        }
    }

    /// Whether the reading thread answers the server's PINGs (off by
    /// default), as a live client does, so that a keepalive timeout is not
    /// what ends the connection. The answer is written from that thread:
    /// turn it on only while the test is not inside a header block.
    pub fn answer_pings(&self, on: bool) {
        self.answer_pings.store(on, Ordering::Relaxed);
    }

    /// The size of the dynamic table the server's HPACK decoder keeps for
    /// this client's header blocks (after acknowledged SETTINGS).
    pub fn header_table_size(&self) -> u32 {
        self.table_size
    }

    /// The server's SETTINGS were just acknowledged: a smaller header
    /// table must be announced at the start of the next header block
    /// (RFC 7541 section 4.2).
    fn acknowledged(&mut self) {
        let announced = lock(&self.report).header_table_size;
        if let Some(size) = announced
            && size != self.table_size
        {
            if size < self.table_size {
                self.table_update = Some(size);
            }
            self.table_size = size;
        }
    }

    /// What the reader saw so far.
    pub fn report(&self) -> Report {
        lock(&self.report).clone()
    }

    /// Waits until the server closed the connection or sent GOAWAY, or
    /// `patience` passed; what the reader saw. On a silent connection,
    /// reads from now on.
    pub fn wait_closed(&mut self, patience: Duration) -> Report {
        if self.reader.is_none() {
            // The error (if any) shows as a report that never ends.
            let _ = self.start_reading();
        }
        let started = Instant::now();
        loop {
            let report = self.report();
            if report.ended() || started.elapsed() > patience {
                return report;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Reads everything the server sends until it closes the connection
    /// or `patience` passes; what it sent.
    pub fn drain(&mut self, patience: Duration) -> Report {
        if self.reader.is_none() {
            let _ = self.start_reading();
        }
        let started = Instant::now();
        while !self.report().closed && started.elapsed() < patience {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.report()
    }

    /// Whether the server process still holds its end of the connection
    /// (an open socket in `/proc/net/tcp`, not an orphan the kernel is
    /// finishing), seen without reading from it.
    pub fn held_by_server(&self) -> bool {
        proc_net::held(self.server, self.local)
    }

    /// Waits until the server no longer holds the connection or
    /// `patience` passed; whether it let go.
    pub fn wait_released(&self, patience: Duration) -> bool {
        let started = Instant::now();
        while self.held_by_server() {
            if started.elapsed() > patience {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    /// Reads and discards up to `limit` bytes the server sent (a slow
    /// reader on a silent connection), waiting at most a second: how many
    /// (0 at the end of the connection); `WouldBlock` or `TimedOut` when
    /// nothing came.
    pub fn read_some(&mut self, limit: usize) -> io::Result<usize> {
        let mut buffer = vec![0u8; limit];
        self.reader_socket
            .set_read_timeout(Some(Duration::from_secs(1)))?;
        self.reader_socket.read(&mut buffer)
    }

    fn start_reading(&mut self) -> io::Result<()> {
        let socket = self.reader_socket.try_clone()?;
        socket.set_read_timeout(None)?;
        let pong = self.writer.try_clone()?;
        let report = self.report.clone();
        let pending = self.pending_acks.clone();
        let answer_pings = self.answer_pings.clone();
        self.reader = Some(
            std::thread::Builder::new()
                .name("raw-h2-reader".into())
                .spawn(move || read_frames(socket, pong, &report, &pending, &answer_pings))?,
        );
        Ok(())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        let _ = self.reader_socket.shutdown(std::net::Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// `bytes` with a dynamic table size update to `size` at the start of the
/// block of its first HEADERS frame (whose length grows to match); whether
/// there was one.
fn announce_table_size(bytes: &[u8], size: u32) -> (Vec<u8>, bool) {
    let update = HeaderBlock::new().table_size(size.into()).build();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length =
            usize::from(bytes[at]) << 16 | usize::from(bytes[at + 1]) << 8 | usize::from(bytes[at + 2]);
        // Without padding or priority fields, the block starts the payload.
        if bytes[at + 3] == frame::HEADERS && bytes[at + 4] & 0x28 == 0 {
            let grown = ((length + update.len()) as u32).to_be_bytes();
            let mut out = Vec::with_capacity(bytes.len() + update.len());
            out.extend_from_slice(&bytes[..at]);
            out.extend_from_slice(&grown[1..]);
            out.extend_from_slice(&bytes[at + 3..at + 9]);
            out.extend_from_slice(&update);
            out.extend_from_slice(&bytes[at + 9..]);
            return (out, true);
        }
        at += 9 + length;
    }
    (bytes.to_vec(), false)
}

/// Reads frames until the connection ends, recording them in `report`.
/// The acknowledgement of a SETTINGS frame is left to the next
/// [`Connection::send`], between two of the test's writes: written from
/// here it could fall between a HEADERS frame and its CONTINUATION.
fn read_frames(
    mut socket: TcpStream,
    mut pong: TcpStream,
    report: &Mutex<Report>,
    pending_acks: &AtomicU32,
    answer_pings: &AtomicBool,
) {
    let mut header = [0u8; 9];
    let mut payload = Vec::new();
    let error = loop {
        if let Err(error) = read_frame(&mut socket, &mut header, &mut payload) {
            break error;
        }
        if record(&mut lock(report), &header, &payload) {
            pending_acks.fetch_add(1, Ordering::Relaxed);
        }
        if header[3] == frame::PING
            && header[4] & frame::ACK == 0
            && payload.len() == 8
            && answer_pings.load(Ordering::Relaxed)
        {
            let _ = pong.write_all(&frame::frame(frame::PING, frame::ACK, 0, &payload));
        }
    };
    let mut seen = lock(report);
    seen.closed = true;
    if error.kind() != io::ErrorKind::UnexpectedEof {
        seen.error = Some(error.to_string());
    }
}

/// Reads one frame: its header and its payload.
fn read_frame(socket: &mut TcpStream, header: &mut [u8; 9], payload: &mut Vec<u8>) -> io::Result<()> {
    socket.read_exact(header)?;
    let length = usize::from(header[0]) << 16 | usize::from(header[1]) << 8 | usize::from(header[2]);
    payload.resize(length, 0);
    socket.read_exact(payload)
}

/// Records a frame in `seen`; whether it is a SETTINGS frame to
/// acknowledge.
fn record(seen: &mut Report, header: &[u8; 9], payload: &[u8]) -> bool {
    let (kind, flags) = (header[3], header[4]);
    seen.frames += 1;
    seen.bytes += 9 + payload.len() as u64;
    match kind {
        frame::SETTINGS if flags & frame::ACK == 0 => {
            seen.settings += 1;
            for setting in payload.chunks_exact(6) {
                if setting[..2] == frame::SETTINGS_MAX_CONCURRENT_STREAMS.to_be_bytes() {
                    seen.max_concurrent_streams = Some(be32(&setting[2..]));
                }
                if setting[..2] == frame::SETTINGS_HEADER_TABLE_SIZE.to_be_bytes() {
                    seen.header_table_size = Some(be32(&setting[2..]));
                }
                if setting[..2] == frame::SETTINGS_INITIAL_WINDOW_SIZE.to_be_bytes() {
                    seen.initial_window = Some(be32(&setting[2..]));
                }
            }
            return true;
        }
        frame::PING if flags & frame::ACK != 0 => seen.ping_acks += 1,
        frame::HEADERS => seen.headers += 1,
        frame::WINDOW_UPDATE if payload.len() >= 4 => {
            let stream_id = be32(&header[5..]) & 0x7fff_ffff;
            *seen.window_updates.entry(stream_id).or_default() += u64::from(be32(payload) & 0x7fff_ffff);
        }
        frame::DATA => seen.data += 1,
        frame::RST_STREAM if payload.len() >= 4 => {
            seen.resets += 1;
            seen.last_reset_code = Some(be32(payload));
        }
        frame::GOAWAY if payload.len() >= 8 && seen.goaway.is_none() => {
            seen.goaway = Some(GoAway {
                last_stream_id: be32(payload) & 0x7fff_ffff,
                code: be32(&payload[4..]),
                debug: String::from_utf8_lossy(&payload[8..]).into_owned(),
            });
        }
        _ => {}
    }
    false
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An h2 server on a loopback port that answers every request 200,
    /// counting those whose path is the ADS method's and that carry
    /// `authorization: Bearer t` and, after the first, `x-bomb` as the
    /// dynamic table holds it.
    fn h2_server() -> (SocketAddr, Arc<std::sync::atomic::AtomicU64>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let good = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = good.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let (socket, _) = listener.accept().await.unwrap();
                let mut connection = h2::server::handshake(socket).await.unwrap();
                while let Some(Ok((request, mut respond))) = connection.accept().await {
                    let headers = request.headers();
                    let right = request.uri().path() == hpack::ADS_PATH
                        && headers.get("authorization").is_some_and(|v| v == "Bearer t")
                        && headers.get("x-bomb").is_none_or(|v| v == "boom");
                    if right {
                        counted.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = respond.send_response(http::Response::new(()), true);
                }
            });
        });
        (address, good)
    }

    #[test]
    fn a_smaller_table_is_announced_in_the_first_headers_block() {
        let bytes = [frame::ping(*b"12345678"), frame::headers(1, &[0x82], true, true)].concat();
        let (sent, updated) = announce_table_size(&bytes, 0);
        assert!(updated);
        assert_eq!(sent[..17], bytes[..17], "the PING is untouched");
        // The HEADERS frame grew by one byte: 0x20 (size 0), then 0x82.
        assert_eq!(sent[17..], [0, 0, 2, 1, 5, 0, 0, 0, 1, 0x20, 0x82]);
        let (same, updated) = announce_table_size(&frame::ping([0; 8]), 0);
        assert!(!updated);
        assert_eq!(same, frame::ping([0; 8]));
    }

    #[test]
    fn what_it_sends_is_read_by_the_h2_crate() {
        let (server, good) = h2_server();
        let mut client = Connection::open(server, &[]).unwrap();
        let request = hpack::ads_request(&server.to_string(), Some("t"));
        let first = [
            request.clone(),
            HeaderBlock::new().literal_indexed("x-bomb", b"boom").build(),
        ]
        .concat();
        client.send(&frame::headers(1, &first, true, true)).unwrap();
        let again = [
            request,
            HeaderBlock::new().indexed(hpack::FIRST_DYNAMIC_INDEX).build(),
        ]
        .concat();
        // Half the blocks split over a HEADERS and a CONTINUATION frame.
        for i in 1..200u32 {
            let id = 1 + 2 * i;
            let bytes = if i % 2 == 0 {
                frame::headers(id, &again, true, true)
            } else {
                let (head, tail) = again.split_at(10);
                [
                    frame::headers(id, head, true, false),
                    frame::continuation(id, tail, true),
                ]
                .concat()
            };
            client.send(&bytes).unwrap();
        }
        client.send(&frame::ping(*b"12345678")).unwrap();
        let started = Instant::now();
        while client.report().headers < 200 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "responses: {:?}",
                client.report()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(good.load(Ordering::Relaxed), 200, "requests read as sent");
        let report = client.report();
        assert!(report.goaway.is_none(), "{report:?}");
        assert_eq!(report.settings, 1, "{report:?}");
    }
}
