//! Connections are taken off the kernel's accept queue while every worker
//! of the server's runtime is busy. The kernel caps that queue at
//! `net.core.somaxconn` (4,096 by default) whatever backlog is asked, and
//! drops the SYNs that find it full; each is retried by the proxy's kernel
//! only a second later (then 3 s, ...). When every proxy reconnects at
//! once, the workers are busy serving the connections already in: an
//! accept loop that waited its turn among them left the queue full.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use pilot_ads::ServeOptions;

/// How many connections arrive while the workers are busy.
const CLIENTS: usize = 64;

/// How long the test waits for what it expects before failing.
const PATIENCE: Duration = Duration::from_secs(60);

/// The HTTP/2 client preface and an empty SETTINGS frame.
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// The number of connections waiting in the accept queue of the loopback
/// listener on `port` (`rx_queue` of a listening socket in
/// `/proc/net/tcp`).
fn accept_queue(port: u16) -> usize {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp is readable");
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .find(|fields| fields.len() > 4 && fields[1] == local && fields[3] == "0A")
        .map(|fields| {
            let rx = fields[4].split(':').nth(1).expect("tx_queue:rx_queue");
            usize::from_str_radix(rx, 16).expect("a hexadecimal queue length")
        })
        .unwrap_or_else(|| panic!("no listener on 127.0.0.1:{port} in /proc/net/tcp"))
}

/// Opens an HTTP/2 connection to `port` and reads the server's first frame
/// head (its SETTINGS): the connection is being served.
fn open(port: u16) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    stream.write_all(PREFACE).expect("send the preface");
    stream
}

fn served(stream: &mut TcpStream) {
    let mut head = [0u8; 9];
    stream.read_exact(&mut head).expect("the server's first frame");
    assert_eq!(head[3], 0x4, "the server's first frame is SETTINGS");
}

#[test]
fn connections_are_accepted_while_every_worker_is_busy() {
    // The server's runtime has one worker; the test keeps it busy.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (port, stop) = runtime.block_on(async {
        let server = support::server::empty();
        let listener = pilot_ads::listen(([127, 0, 0, 1], 0).into()).expect("listen");
        let port = listener.local_addr().unwrap().port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            server
                .serve_with(listener, ServeOptions::default(), async {
                    let _ = stopped.await;
                })
                .await
                .expect("the ADS server serves");
        });
        (port, stop)
    });
    // Serving: a first connection is answered.
    let mut first = open(port);
    served(&mut first);

    // The worker is taken by a task that waits, blocking, for the test.
    let (busy, is_busy) = std::sync::mpsc::channel::<()>();
    let (release, released) = std::sync::mpsc::channel::<()>();
    runtime.spawn(async move {
        busy.send(()).unwrap();
        let _ = released.recv();
    });
    is_busy.recv().expect("the worker is busy");

    let mut clients: Vec<TcpStream> = (0..CLIENTS).map(|_| open(port)).collect();
    // The kernel completed every handshake; the connections leave its
    // queue although no worker can run the server's tasks.
    let started = Instant::now();
    let mut waiting = accept_queue(port);
    while waiting > 0 && started.elapsed() < PATIENCE {
        std::thread::sleep(Duration::from_millis(10));
        waiting = accept_queue(port);
    }
    assert_eq!(
        waiting, 0,
        "{waiting} of {CLIENTS} connections still in the kernel's accept queue after {PATIENCE:?} with the workers busy"
    );

    // Once the worker is free, every one of them is served.
    release.send(()).unwrap();
    for client in &mut clients {
        served(client);
    }
    let _ = stop.send(());
    runtime.shutdown_timeout(Duration::from_secs(5));
}
