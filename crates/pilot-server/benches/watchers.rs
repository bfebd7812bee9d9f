//! REST watchers against the write rate: creates per second through the
//! REST API of one pilot-discovery while N clients watch the kind, beside
//! the rate with no watcher, same run, four ways: the watch cache (one
//! store watch per kind, each event checked and encoded once) as
//! configured by default, whose watchers write at most once per 100 ms
//! (`--watch-write-interval`); the same at 10 ms; the cache writing each
//! event as soon as a watcher sees it (`--watch-write-interval 0s`); and
//! no cache
//! (`--watch-cache-events 0`: a store watch, a validation and an encoding
//! per watcher).
//!
//!     cargo bench -p pilot-server --bench watchers -- [--writes W] [N ...]
//!
//! (default: 2,000 creates, N = 100 and 500.) Each case is a fresh
//! pilot-discovery process (the release binary, memory store, status
//! writer off); its CPU and resident memory are read from /proc. The
//! watchers are real HTTP/1.1 clients in a child process (this bench
//! binary run again), each counting the events it receives; the creates
//! are made one after another by one writer over fresh connections.
//! Reported per case: creates/s and its ratio to the no-watcher rate,
//! the server's CPU per create, its memory per watcher (idle, after the
//! watches opened; and at the end of the writes), and whether every
//! watcher saw every create (fewest seen, watches ended by `410 Expired`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pilot_test_support::Discovery;
use pilot_test_support::measure::{cpu_time_of, rss_mb_of};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PATH: &str = "/apis/networking.istio.io/v1/namespaces/default/virtualservices";
const CLIENT: &str = "PILOT_BENCH_WATCH_CLIENTS";

fn main() {
    if let Ok(spec) = std::env::var(CLIENT) {
        return client(&spec);
    }
    let mut args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let mut writes = 2_000;
    if let Some(at) = args.iter().position(|a| a == "--writes") {
        writes = args[at + 1].parse().expect("--writes W");
        args.drain(at..at + 2);
    }
    let counts: Vec<usize> = if args.is_empty() {
        vec![100, 500]
    } else {
        args.iter()
            .map(|a| a.parse().expect("a number of watchers"))
            .collect()
    };
    println!("watchers bench: {writes} creates per case");
    println!(
        "{:>9} {:>8} {:>10} {:>7} {:>14} {:>14} {:>14} {:>12} {:>8}",
        "cache",
        "watchers",
        "creates/s",
        "ratio",
        "CPU/create",
        "idle/watcher",
        "end/watcher",
        "fewest seen",
        "expired"
    );
    let modes: [(&str, &[&str]); 4] = [
        ("on", &[]),
        ("on, 10ms", &["--watch-write-interval", "10ms"]),
        ("on, 0s", &["--watch-write-interval", "0s"]),
        ("off", &["--watch-cache-events", "0"]),
    ];
    for (mode, flags) in modes {
        let baseline = case(flags, 0, writes);
        baseline.print(mode, None);
        for &watchers in &counts {
            case(flags, watchers, writes).print(mode, Some(baseline.rate));
        }
    }
}

struct Case {
    watchers: usize,
    rate: f64,
    cpu_per_create: Duration,
    idle_per_watcher_kb: f64,
    end_per_watcher_kb: f64,
    fewest: usize,
    expired: usize,
}

impl Case {
    fn print(&self, mode: &str, baseline: Option<f64>) {
        let per = |kb: f64| {
            if self.watchers == 0 {
                "-".to_string()
            } else {
                format!("{kb:.1} KB")
            }
        };
        println!(
            "{:>9} {:>8} {:>10.0} {:>7} {:>12.0}µs {:>14} {:>14} {:>12} {:>8}",
            mode,
            self.watchers,
            self.rate,
            baseline.map_or("1.00".to_string(), |b| format!("{:.2}", self.rate / b)),
            self.cpu_per_create.as_secs_f64() * 1e6,
            per(self.idle_per_watcher_kb),
            per(self.end_per_watcher_kb),
            if self.watchers == 0 {
                "-".to_string()
            } else {
                self.fewest.to_string()
            },
            self.expired,
        );
    }
}

fn case(flags: &[&str], watchers: usize, writes: usize) -> Case {
    let mut args = vec!["--status-interval", "0s", "--log-level", "warn"];
    args.extend_from_slice(flags);
    let server = Discovery::start(&args);
    let pid = server.pid();
    let before = rss_mb_of(pid);
    let mut child = (watchers > 0).then(|| {
        let mut child = Command::new(std::env::current_exe().expect("this bench's path"))
            .env(CLIENT, format!("{} {watchers} {writes}", server.port))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the clients' process");
        let mut ready = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .expect("the clients report");
        assert_eq!(ready.trim(), "ready", "the clients did not open their watches");
        child
    });
    // The watches' own buffers settle.
    std::thread::sleep(Duration::from_millis(500));
    let idle = rss_mb_of(pid);
    let cpu = cpu_time_of(pid);
    let started = Instant::now();
    for i in 0..writes {
        let body = serde_json::json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "VirtualService",
            "metadata": {"name": format!("vs-{i}"), "namespace": "default", "labels": {"app": "reviews"}},
            "spec": {
                "hosts": [format!("svc-{i}")],
                "http": [{"route": [{"destination": {"host": format!("svc-{i}")}}]}],
            },
        });
        let answer = pilot_test_support::http::request(
            ([127, 0, 0, 1], server.port).into(),
            "POST",
            PATH,
            &[("content-type", "application/json")],
            &serde_json::to_vec(&body).unwrap(),
        )
        .expect("the create is answered");
        assert_eq!(answer.code, 201, "{}", answer.text());
    }
    let elapsed = started.elapsed();
    let cpu = cpu_time_of(pid) - cpu;
    let end = rss_mb_of(pid);
    let (fewest, expired) = match child.as_mut() {
        Some(child) => {
            let mut report = String::new();
            BufReader::new(child.stdout.as_mut().unwrap())
                .read_line(&mut report)
                .expect("the clients report");
            let _ = child.wait();
            let mut fields = report.split_whitespace().map(|f| f.parse::<usize>().unwrap_or(0));
            (fields.next().unwrap_or(0), fields.next().unwrap_or(0))
        }
        None => (0, 0),
    };
    let per_watcher = |mb: f64| {
        if watchers == 0 {
            0.0
        } else {
            (mb - before) * 1024.0 / watchers as f64
        }
    };
    Case {
        watchers,
        rate: writes as f64 / elapsed.as_secs_f64(),
        cpu_per_create: cpu / writes as u32,
        idle_per_watcher_kb: per_watcher(idle),
        end_per_watcher_kb: per_watcher(end),
        fewest,
        expired,
    }
}

/// The watchers' process: `PORT N WRITES` opens N watches, says `ready`
/// once every one has its response headers, counts each watch's events
/// until each has seen WRITES (or ended, or 120 s passed), and says the
/// fewest any saw and how many ended with `410 Expired`.
fn client(spec: &str) {
    let fields: Vec<usize> = spec
        .split_whitespace()
        .map(|f| f.parse().expect("PORT N WRITES"))
        .collect();
    let (port, watchers, writes) = (fields[0] as u16, fields[1], fields[2]);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async move {
        let mut opened = Vec::new();
        for _ in 0..watchers {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .expect("connects");
            let request =
                format!("GET {PATH}?watch=true HTTP/1.1\r\nhost: bench\r\naccept: application/json\r\n\r\n");
            stream.write_all(request.as_bytes()).await.expect("sends");
            opened.push(stream);
        }
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(watchers);
        let tasks: Vec<_> = opened
            .into_iter()
            .map(|stream| {
                let ready = ready_tx.clone();
                tokio::spawn(count_events(stream, writes, ready))
            })
            .collect();
        drop(ready_tx);
        for _ in 0..watchers {
            ready_rx.recv().await.expect("every watch answers");
        }
        println!("ready");
        let _ = std::io::stdout().flush();
        let mut fewest = usize::MAX;
        let mut expired = 0;
        for task in tasks {
            let (seen, gone) = task.await.expect("a watcher");
            fewest = fewest.min(seen);
            expired += usize::from(gone);
        }
        println!("{fewest} {expired}");
    });
}

/// Events seen on `stream` until `writes` (or its end, or 120 s), and
/// whether it ended with an `ERROR` event; `ready` once headers came.
async fn count_events(
    mut stream: tokio::net::TcpStream,
    writes: usize,
    ready: tokio::sync::mpsc::Sender<()>,
) -> (usize, bool) {
    // Each event is one line ending in its type (the object comes first:
    // the event's keys are sorted); every event here is a create's ADDED.
    const EVENT: &[u8] = b"\"type\":\"ADDED\"}";
    const ERROR: &[u8] = b"\"type\":\"ERROR\"}";
    // Searched with memchr's SIMD finders: this process shares the
    // server's two cores and reads every event 500 times over.
    let events = memchr::memmem::Finder::new(EVENT);
    let errors = memchr::memmem::Finder::new(ERROR);
    let end_of_headers = memchr::memmem::Finder::new(b"\r\n\r\n");
    let mut buffer = vec![0u8; 64 * 1024];
    // The last bytes of the previous read (fewer than a marker's): with
    // the first ones of the next, what holds a marker straddling the two.
    let mut carry: Vec<u8> = Vec::new();
    let mut headers = false;
    let (mut seen, mut error) = (0, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while seen < writes && !error {
        let read = match tokio::time::timeout_at(deadline, stream.read(&mut buffer)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => break,
            Ok(Ok(read)) => read,
        };
        let bytes = &buffer[..read];
        let mut edge = std::mem::take(&mut carry);
        edge.extend_from_slice(&bytes[..read.min(EVENT.len() - 1)]);
        if !headers && (end_of_headers.find(&edge).is_some() || end_of_headers.find(bytes).is_some()) {
            headers = true;
            let _ = ready.send(()).await;
        }
        seen += events.find_iter(bytes).count() + events.find_iter(&edge).count();
        error |= errors.find(bytes).is_some() || errors.find(&edge).is_some();
        let kept = (EVENT.len() - 1).min(read);
        carry = match read >= EVENT.len() - 1 {
            true => bytes[read - kept..].to_vec(),
            // A short read: the edge's end is the last bytes.
            false => edge[edge.len().saturating_sub(EVENT.len() - 1)..].to_vec(),
        };
    }
    (seen, error)
}
