//! ServiceEntries without addresses sharing one port, through a real Envoy
//! 1.40 with real connections: TLS entries are told apart by SNI (each
//! host reachable on the one listener, as Istio's filter chains by server
//! name make them), HTTP entries by the Host header (one route
//! configuration for the port).

mod support;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use support::envoy::{eventually, free_port, spread_to, upstream};
use support::mesh::Mesh;

/// A TCP server that reads what a connection sends first (the client's
/// hello), answers `name` and closes it (having read what came, so the
/// close is not a reset that could overtake the answer).
fn tcp_upstream(name: &'static str) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            // The TLS record's header: type, version, length.
            let mut read = [0u8; 5];
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let _ = stream.read_exact(&mut read);
            let length = usize::from(u16::from_be_bytes([read[3], read[4]]));
            let mut rest = vec![0u8; length];
            let _ = stream.read_exact(&mut rest);
            let _ = stream.write_all(name.as_bytes());
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    });
    port
}

/// A TLS 1.2 ClientHello naming `server_name` (SNI), as a client opening
/// a TLS connection to that host sends first.
fn client_hello(server_name: &str) -> Vec<u8> {
    let name = server_name.as_bytes();
    let u16_be = |n: usize| u16::try_from(n).unwrap().to_be_bytes();
    // server_name extension: a list of one host_name.
    let mut sni = vec![0u8];
    sni.extend(u16_be(name.len()));
    sni.extend(name);
    let mut list = u16_be(sni.len()).to_vec();
    list.extend(sni);
    let mut extensions = vec![0, 0];
    extensions.extend(u16_be(list.len()));
    extensions.extend(list);
    let mut body = vec![3, 3];
    body.extend([7u8; 32]); // random
    body.push(0); // no session id
    body.extend([0, 4, 0xc0, 0x2f, 0x00, 0x9c]); // two cipher suites
    body.extend([1, 0]); // no compression
    body.extend(u16_be(extensions.len()));
    body.extend(extensions);
    let mut handshake = vec![1u8];
    handshake.extend(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![0x16, 3, 1];
    record.extend(u16_be(handshake.len()));
    record.extend(handshake);
    record
}

/// What a connection to Envoy's listener at `port` that opens TLS for
/// `server_name` reads back (the upstream's name, in clear).
fn tls_answer(port: u16, server_name: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    if stream.write_all(&client_hello(server_name)).is_err() {
        return String::new();
    }
    let mut text = String::new();
    let _ = stream.read_to_string(&mut text);
    text
}

/// Connections by what they read, over `n` TLS connections for
/// `server_name`.
fn tls_spread(port: u16, server_name: &str, n: usize) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for _ in 0..n {
        *counts.entry(tls_answer(port, server_name)).or_default() += 1;
    }
    counts
}

/// Two ServiceEntries without addresses on one `port` of `protocol`:
/// `first.external.test` resolved (`DNS`, `localhost`) to the upstream on
/// `first`, `second.external.test` to the one on `second`.
fn two_entries(port: u16, protocol: &str, first: u16, second: u16) -> String {
    let name = protocol.to_lowercase();
    let entry = |host: &str, upstream: u16| {
        format!(
            "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {{name: {host}, namespace: default}}\nspec:\n  hosts: [{host}.external.test]\n  location: MESH_EXTERNAL\n  ports: [{{number: {port}, name: {name}, protocol: {protocol}}}]\n  resolution: DNS\n  endpoints: [{{address: localhost, ports: {{{name}: {upstream}}}}}]\n"
        )
    };
    format!("{}---\n{}", entry("first", first), entry("second", second))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_entries_on_one_port_are_told_apart_by_sni() {
    let (first, second) = (tcp_upstream("first"), tcp_upstream("second"));
    let port = free_port();
    let _mesh = Mesh::with(&two_entries(port, "TLS", first, second)).await;
    tokio::task::spawn_blocking(move || {
        eventually("the first host answers", || {
            tls_spread(port, "first.external.test", 1).contains_key("first")
        });
        eventually("the second host answers", || {
            tls_spread(port, "second.external.test", 1).contains_key("second")
        });
        // Every connection reaches the host it named.
        assert_eq!(
            tls_spread(port, "first.external.test", 20),
            BTreeMap::from([("first".to_string(), 20)])
        );
        assert_eq!(
            tls_spread(port, "second.external.test", 20),
            BTreeMap::from([("second".to_string(), 20)])
        );
        // A server name neither entry has reaches neither.
        let other = tls_spread(port, "other.external.test", 5);
        assert!(
            !other.contains_key("first") && !other.contains_key("second"),
            "{other:?}"
        );
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_entries_on_one_port_are_told_apart_by_host() {
    let (first, second) = (
        upstream("first", Arc::new(AtomicU64::new(0))),
        upstream("second", Arc::new(AtomicU64::new(0))),
    );
    let port = free_port();
    let _mesh = Mesh::with(&two_entries(port, "HTTP", first, second)).await;
    tokio::task::spawn_blocking(move || {
        eventually("both hosts answer", || {
            spread_to(port, "first.external.test", 1, &[]).contains_key("first")
                && spread_to(port, "second.external.test", 1, &[]).contains_key("second")
        });
        assert_eq!(
            spread_to(port, "first.external.test", 20, &[]),
            BTreeMap::from([("first".to_string(), 20)])
        );
        assert_eq!(
            spread_to(port, "second.external.test", 20, &[]),
            BTreeMap::from([("second".to_string(), 20)])
        );
    })
    .await
    .unwrap();
}
