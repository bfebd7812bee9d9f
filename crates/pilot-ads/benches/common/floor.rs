//! The connect storm's floor: the bytes the ADS clients received in their
//! initial sync, sent to as many raw TCP connections over loopback, with
//! no HTTP/2, gRPC, protobuf or xDS on either side (and no requests or
//! ACKs going the other way). The clients run in a child process (this
//! same binary, `--floor-clients N --port P --bytes B`), as the ADS
//! clients do, so the two processes share the machine's cores the same
//! way. What the storm takes beyond this is the protocols' and the two
//! sides' own work.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the floor took: wall time from starting the clients to the last
/// one having all its bytes, this process's CPU, the clients' CPU.
pub(crate) struct Floor {
    pub wall: Duration,
    pub server_cpu: Duration,
    pub clients_cpu: Duration,
}

/// The largest write: what hyper's HTTP/2 server buffers for a stream
/// before it waits for the socket (400 KiB).
const WRITE: usize = 400 * 1024;

/// Sends `bytes` to each of `clients` connections of a child process;
/// `cpu_time` is this process's CPU clock.
pub(crate) async fn run(clients: usize, bytes: usize, cpu_time: fn() -> Duration) -> Floor {
    let listener = pilot_ads::listen(([127, 0, 0, 1], 0).into()).expect("listen");
    let port = listener.local_addr().unwrap().port();
    let cpu = cpu_time();
    let started = Instant::now();
    let child = tokio::process::Command::new(std::env::current_exe().expect("own path"))
        .args([
            "--floor-clients",
            &clients.to_string(),
            "--port",
            &port.to_string(),
            "--bytes",
            &bytes.to_string(),
        ])
        .env("_RJEM_MALLOC_CONF", pilot_test_support::ads::proxies::MALLOC_CONF)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start the floor's clients");
    let payload: std::sync::Arc<[u8]> = vec![0x5a; WRITE.min(bytes)].into();
    let mut senders = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (mut socket, _) = listener.accept().await.expect("accept");
        socket.set_nodelay(true).expect("nodelay");
        let payload = std::sync::Arc::clone(&payload);
        senders.spawn(async move {
            let mut left = bytes;
            while left > 0 {
                let n = left.min(payload.len());
                socket.write_all(&payload[..n]).await.expect("send");
                left -= n;
            }
            // The client closes once it has everything.
            let _ = socket.read(&mut [0u8; 1]).await;
        });
    }
    while let Some(sent) = senders.join_next().await {
        sent.expect("sender");
    }
    let wall = started.elapsed();
    let server_cpu = cpu_time().saturating_sub(cpu);
    let output = child.wait_with_output().await.expect("floor clients");
    assert!(output.status.success(), "the floor's clients failed");
    let clients_cpu = String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map(Duration::from_millis)
        .expect("the clients' CPU in ms");
    Floor {
        wall,
        server_cpu,
        clients_cpu,
    }
}

/// The child process's arguments, if this process is one of the floor's.
pub(crate) fn child_args(args: &[String]) -> Option<(usize, u16, usize)> {
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1)?.parse().ok()
    };
    Some((
        value("--floor-clients")?,
        value("--port")? as u16,
        value("--bytes")?,
    ))
}

/// The child: `clients` connections each read `bytes` and close; prints
/// the process's CPU time (ms) at the end.
pub(crate) fn clients_main(clients: usize, port: u16, bytes: usize) {
    pilot_test_support::measure::raise_open_files(clients as u64 + 1024);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut readers = tokio::task::JoinSet::new();
        for i in 0..clients {
            readers.spawn(async move {
                // From the address the same proxy would use.
                let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
                socket
                    .bind((pilot_test_support::ads::proxies::source_ip(i), 0).into())
                    .expect("bind a loopback source");
                let mut socket = socket
                    .connect(([127, 0, 0, 1], port).into())
                    .await
                    .expect("connect");
                let mut buffer = vec![0u8; 64 * 1024];
                let mut got = 0;
                while got < bytes {
                    let n = socket.read(&mut buffer).await.expect("read");
                    assert!(n > 0, "the server closed after {got} of {bytes} bytes");
                    got += n;
                }
            });
        }
        while let Some(read) = readers.join_next().await {
            read.expect("reader");
        }
    });
    println!("{}", pilot_test_support::measure::cpu_time().as_millis());
}
