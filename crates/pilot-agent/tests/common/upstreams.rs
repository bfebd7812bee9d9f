//! Upstreams on loopback for the Gateway API's conformance backends:
//! each serves until the test process ends.

use std::collections::BTreeMap;
use std::io::{Read, Write};

/// An upstream answering each TCP connection with `name`, then closing
/// it; its port.
pub(crate) fn stream_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(name.as_bytes());
        }
    });
    port
}

/// An upstream that fails: a request for
/// `...?fail=N&id=X[&status=S][&delay=MS][&reset=1]` is answered `S`
/// (500 unless written) for the first N requests of id X, then 200; each
/// answer's body is `try K`, K the requests of X so far. A failing
/// request's answer waits `MS` milliseconds when `delay` is written; with
/// `reset=1` it is no answer: the connection is closed. Its port.
pub(crate) fn failing_upstream(_name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let tries = std::sync::Arc::new(std::sync::Mutex::new(BTreeMap::<String, u32>::new()));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let tries = std::sync::Arc::clone(&tries);
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    let target = head.split(' ').nth(1).unwrap_or_default();
                    let query: BTreeMap<&str, &str> = target
                        .split_once('?')
                        .map(|(_, q)| q.split('&').filter_map(|p| p.split_once('=')).collect())
                        .unwrap_or_default();
                    let fail: u32 = query.get("fail").and_then(|n| n.parse().ok()).unwrap_or(0);
                    let status: u16 = query.get("status").and_then(|n| n.parse().ok()).unwrap_or(500);
                    let id = query.get("id").copied().unwrap_or_default().to_string();
                    let count = {
                        let mut tries = tries.lock().unwrap();
                        let count = tries.entry(id).or_default();
                        *count += 1;
                        *count
                    };
                    let failing = count <= fail;
                    if failing && let Some(delay) = query.get("delay").and_then(|ms| ms.parse().ok()) {
                        std::thread::sleep(std::time::Duration::from_millis(delay));
                    }
                    if failing && query.get("reset") == Some(&"1") {
                        return;
                    }
                    let status = if failing { status } else { 200 };
                    let body = format!("try {count}");
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Every request an [`echo_upstream`] saw: its backend's name, path and
/// `x-tag` header (empty when none).
pub(crate) static SEEN: std::sync::Mutex<Vec<(String, String, String)>> = std::sync::Mutex::new(Vec::new());

/// How many requests for `path` tagged `tag` backend `name` saw.
pub(crate) fn seen(name: &str, path: &str, tag: &str) -> usize {
    SEEN.lock()
        .unwrap()
        .iter()
        .filter(|(n, p, t)| n == name && p == path && t == tag)
        .count()
}

/// An upstream answering every request 200 with what it saw, as JSON:
/// `backend` (`name`), `method`, `path`, `host` and `headers` (each by
/// its lowercased name, the values of a repeated header joined by `,`).
/// A request's `x-echo-set-header: Name:Value,Name:Value` asks it to
/// answer with those headers, its query's `delay=1s` (or `500ms`) to answer
/// that late. Each request is noted in [`SEEN`]. Its
/// port.
pub(crate) fn echo_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    while !buffer.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let end = buffer.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0) + 4;
                    let head = String::from_utf8_lossy(&buffer[..end]).to_string();
                    buffer.drain(..end);
                    let mut lines = head.lines();
                    let mut start = lines.next().unwrap_or_default().split(' ');
                    let method = start.next().unwrap_or_default().to_string();
                    let path = start.next().unwrap_or_default().to_string();
                    let mut headers = BTreeMap::<String, String>::new();
                    for (field, value) in lines.filter_map(|l| l.split_once(':')) {
                        headers
                            .entry(field.trim().to_ascii_lowercase())
                            .and_modify(|v| {
                                v.push(',');
                                v.push_str(value.trim());
                            })
                            .or_insert_with(|| value.trim().to_string());
                    }
                    SEEN.lock().unwrap().push((
                        name.to_string(),
                        path.clone(),
                        headers.get("x-tag").cloned().unwrap_or_default(),
                    ));
                    let mut extra = String::new();
                    for pair in headers
                        .get("x-echo-set-header")
                        .into_iter()
                        .flat_map(|v| v.split(','))
                    {
                        if let Some((field, value)) = pair.split_once(':') {
                            extra.push_str(&format!("{field}: {value}\r\n"));
                        }
                    }
                    // `?delay=<n>s` (or `ms`): answer that late, as the
                    // conformance's echo server does.
                    if let Some(delay) = path
                        .split_once('?')
                        .and_then(|(_, query)| query.split('&').find_map(|p| p.strip_prefix("delay=")))
                        .and_then(parse_delay)
                    {
                        std::thread::sleep(delay);
                    }
                    let body = serde_json::json!({
                        "backend": name,
                        "method": method,
                        "path": path,
                        "host": headers.get("host"),
                        "headers": headers,
                    })
                    .to_string();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A delay written `1s` or `500ms`.
fn parse_delay(text: &str) -> Option<std::time::Duration> {
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.parse().ok().map(std::time::Duration::from_millis);
    }
    text.strip_suffix('s')?
        .parse()
        .ok()
        .map(std::time::Duration::from_secs)
}

/// An upstream speaking HTTP/2 without TLS by prior knowledge only (h2c:
/// an HTTP/1.1 request fails its handshake), answering every request 200
/// with JSON: `backend` (`name`), `version` (the request's HTTP version
/// as the h2 crate decoded it) and `path`. Its port.
pub(crate) fn h2c_upstream(name: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(mut connection) = h2::server::handshake(socket).await else {
                        return;
                    };
                    while let Some(Ok((request, mut respond))) = connection.accept().await {
                        let body = serde_json::json!({
                            "backend": name,
                            "version": format!("{:?}", request.version()),
                            "path": request.uri().path(),
                        })
                        .to_string();
                        let response = http::Response::builder()
                            .status(200)
                            .header("content-type", "application/json")
                            .header("content-length", body.len())
                            .body(())
                            .unwrap();
                        if let Ok(mut stream) = respond.send_response(response, false) {
                            let _ = stream.send_data(bytes::Bytes::from(body), true);
                        }
                    }
                });
            }
        });
    });
    port
}
