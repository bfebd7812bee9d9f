//! Plain HTTP/1.1 over TCP for tests: one request per connection
//! (`connection: close`), the answer read to the end, chunked bodies
//! decoded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub code: u16,
    /// The head (status line and headers).
    pub head: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

impl Answer {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).to_string()
    }
}

/// One request to `address` with `connection: close` and a
/// `content-length`; the answer, or what failed.
pub fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Answer, String> {
    let mut stream = TcpStream::connect(address).map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("host")) {
        head.push_str("host: test\r\n");
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .map_err(|e| format!("write: {e}"))?;
    // A server may answer (413) before reading the whole body.
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    parse(&raw).ok_or_else(|| format!("no HTTP answer: {:?}", String::from_utf8_lossy(&raw)))
}

/// A GET on 127.0.0.1:`port`: status and body text, or `(0, "")` if
/// nothing answered.
pub fn get(port: u16, path: &str) -> (u16, String) {
    match request(([127, 0, 0, 1], port).into(), "GET", path, &[], &[]) {
        Ok(answer) => (answer.code, answer.text()),
        Err(_) => (0, String::new()),
    }
}

/// A whole HTTP/1.1 response: its code, head and (de-chunked) body.
pub fn parse(raw: &[u8]) -> Option<Answer> {
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    let rest = &raw[end + 4..];
    let chunked = head
        .to_ascii_lowercase()
        .lines()
        .any(|line| line.starts_with("transfer-encoding:") && line.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    Some(Answer { code, head, body })
}

/// Undoes HTTP/1.1 chunked transfer encoding: the chunks' data, up to the
/// last chunk (or the first malformed or incomplete one).
pub fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = bytes.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&bytes[..end]);
        // Chunk extensions (`;name=value`) are allowed after the size.
        let size = size.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size, 16) else {
            break;
        };
        let rest = &bytes[end + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        out.extend_from_slice(&rest[..size]);
        bytes = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_and_plain_bodies() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\n\r\n";
        let answer = parse(raw).unwrap();
        assert_eq!(answer.code, 200);
        assert_eq!(answer.text(), "hello world");
        let plain = parse(b"HTTP/1.1 404 Not Found\r\ncontent-length: 2\r\n\r\nno").unwrap();
        assert_eq!((plain.code, plain.text().as_str()), (404, "no"));
        assert_eq!(dechunk(b"3\r\nab"), b"");
        assert!(parse(b"garbage").is_none());
    }
}
