//! Real HTTP traffic through an Envoy listener while configuration
//! changes: keep-alive clients that count every request answered 200 and
//! every one that failed (another status, or no answer).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// Requests answered and failed, over every client.
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) ok: AtomicU64,
    /// Answers other than 200, and requests that got no answer.
    pub(crate) failed: AtomicU64,
    /// The first few failures, for the report.
    pub(crate) samples: std::sync::Mutex<Vec<String>>,
}

impl Tally {
    pub(crate) fn fail(&self, what: String) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        let mut samples = self.samples.lock().unwrap();
        if samples.len() < 5 {
            samples.push(what);
        }
    }
}

/// Requests for `reviews` through Envoy's listener on `port`: one
/// keep-alive connection at a time, a new one when Envoy closes it, until
/// `stop`.
pub(crate) fn http_client(port: u16, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut connection: Option<BufReader<TcpStream>> = None;
    while !stop.load(Ordering::Relaxed) {
        let reader = match &mut connection {
            Some(reader) => reader,
            None => match TcpStream::connect(("127.0.0.1", port)) {
                Ok(stream) => {
                    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    connection.insert(BufReader::new(stream))
                }
                Err(e) => {
                    tally.fail(format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        match exchange(reader) {
            Ok((200, close)) => {
                tally.ok.fetch_add(1, Ordering::Relaxed);
                if close {
                    connection = None;
                }
            }
            Ok((status, _)) => {
                tally.fail(format!("status {status}"));
                connection = None;
            }
            Err(e) => {
                tally.fail(format!("no answer: {e}"));
                connection = None;
            }
        }
    }
}

/// What the clients saw.
/// One request and its answer on a keep-alive connection: the status, and
/// whether Envoy said it closes the connection.
fn exchange(reader: &mut BufReader<TcpStream>) -> std::io::Result<(u16, bool)> {
    reader
        .get_mut()
        .write_all(b"GET / HTTP/1.1\r\nhost: reviews\r\n\r\n")?;
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(std::io::Error::other("connection closed"));
    }
    let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (mut length, mut close) = (0usize, false);
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let header = line.trim_end().to_ascii_lowercase();
        if header.is_empty() {
            break;
        }
        if let Some(value) = header.strip_prefix("content-length:") {
            length = value.trim().parse().unwrap_or(0);
        }
        if header == "connection: close" {
            close = true;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, close))
}
