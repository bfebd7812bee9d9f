//! What a connection costs while idle: the bytes allocated (and still held)
//! per connection with one open, idle stream after an exchange, counted by a
//! global allocator over real grpcio connections (the client in its own
//! process, so everything counted here is the server's).
//!
//! Run `cargo nextest run -p pilot-h2 --test memory --no-capture` to see the
//! figure; the test fails when it passes a bound well above today's.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Stdio;
use std::sync::atomic::{AtomicIsize, Ordering};

use common::{TestServer, python};
use pilot_h2::{Config, Request, Sender, Server};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Counts bytes held.
struct Counting;

static HELD: AtomicIsize = AtomicIsize::new(0);

// The one unsafe of this crate: a counting allocator around the system's.
#[allow(
    unsafe_code,
    reason = "a counting global allocator: GlobalAlloc is an unsafe trait"
)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const CONNECTIONS: usize = 50;

/// The bound the figure must stay under (tonic's server holds 57 KB).
const BOUND: isize = 16 << 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_bytes() {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let server = TestServer::start(Config::default()).await;
    // Let the runtime settle before the baseline.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let before = HELD.load(Ordering::Relaxed);
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio_idle.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args([server.port.to_string(), CONNECTIONS.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the grpcio client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ready"));
    let opened = server
        .events()
        .iter()
        .filter(|e| *e == "open /test.Test/Echo")
        .count();
    assert_eq!(opened, CONNECTIONS);
    // The last window updates and acknowledgements may still be in flight.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let per_connection = (HELD.load(Ordering::Relaxed) - before) / CONNECTIONS as isize;
    println!(
        "held per connection with one idle stream (server, the test service's task included): {per_connection} bytes"
    );
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"done\n").await.expect("write");
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    server.stop().await;
    assert!(
        per_connection < BOUND,
        "{per_connection} bytes per idle connection, over {BOUND}"
    );
}

/// The same with a service that keeps each stream's handles (its request
/// head, `Messages` and `Sender`) without a task: what the library holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connection_bytes_without_a_task() {
    let python = python().expect("the grpc virtual environment (scripts/install-deps)");
    let parked: Arc<Mutex<Vec<(Request, Sender)>>> = Arc::default();
    let keep = parked.clone();
    let server = Server::new(Config::default(), move |request: Request, sender: Sender| {
        keep.lock().expect("parked").push((request, sender));
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let _ = server
            .serve(listener, async {
                let _ = stopped.await;
            })
            .await;
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let before = HELD.load(Ordering::Relaxed);
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/grpcio_idle.py");
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .args([port.to_string(), CONNECTIONS.to_string(), "park".to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start the grpcio client");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ready"));
    while parked.lock().expect("parked").len() < CONNECTIONS {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let per_connection = (HELD.load(Ordering::Relaxed) - before) / CONNECTIONS as isize;
    println!(
        "held per connection with one idle stream (server, the stream's handles kept without a task): {per_connection} bytes"
    );
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(b"done\n").await.expect("write");
    assert_eq!(stdout.next_line().await.expect("read").as_deref(), Some("ok"));
    assert!(child.wait().await.expect("wait").success());
    parked.lock().expect("parked").clear();
    let _ = stop.send(());
    let _ = serving.await;
    assert!(
        per_connection < BOUND,
        "{per_connection} bytes per idle connection, over {BOUND}"
    );
}
