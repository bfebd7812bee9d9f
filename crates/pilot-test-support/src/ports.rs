//! Free loopback ports.

use std::net::TcpListener;

/// A port that was free on 127.0.0.1 a moment ago (for a server in another
/// process, which must be told its port before it binds).
///
/// Servers in this process should bind `127.0.0.1:0` instead and read the
/// port back.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("no free port on 127.0.0.1")
}
