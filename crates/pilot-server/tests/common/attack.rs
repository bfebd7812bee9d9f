//! What the HTTP/2 attack tests share: the pilot-discovery binary with
//! tokens, its resident memory, a proxy with a credential that follows its
//! configuration, and [`under_attack`], which runs an attack while that
//! proxy must keep seeing every change made through the REST API.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::DiscoveryRequest;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use pilot_test_support::raw_h2::{Connection, Report, frame, hpack};
use pilot_test_support::{Discovery, PATIENCE};
use prost::Message;

/// The REST token allowed to write.
pub(crate) const ADMIN: &str = "admin-token-0123456789abcdef";
/// The ADS token of proxies in namespace `default` (the credentialed
/// proxy's, and an authenticated attacker's).
pub(crate) const PROXY: &str = "proxy-token-default-0123456789";
/// The node id that goes with [`PROXY`].
pub(crate) const NODE: &str = "sidecar~10.0.0.1~reviews-v1.default~default.svc.cluster.local";
const CDS: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";

/// How long the server has to end an attacking connection: it catches a
/// connection that is never closed, not a slow close.
pub(crate) const CLOSE_PATIENCE: Duration = Duration::from_secs(60);

/// The binary under attack, with a token file (an admin and a proxy
/// token), logging warnings only.
pub(crate) struct Target {
    /// The server process.
    pub server: Discovery,
    /// The ADS address.
    pub xds: SocketAddr,
    /// The REST address.
    pub rest: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Target {
    /// Starts the server with `extra` flags, and each of `optional`'s
    /// flags (with its value) only if this build of the server has it.
    pub(crate) fn start(extra: &[&str], optional: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens");
        std::fs::write(
            &tokens,
            format!("{ADMIN} rw admin\n{PROXY} xds reviews namespace=default\n"),
        )
        .unwrap();
        let mut args: Vec<String> = vec![
            "--token-file".into(),
            tokens.display().to_string(),
            "--log-level".into(),
            "warn".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        for (flag, value) in optional {
            if supported(flag) {
                args.extend([flag.to_string(), value.to_string()]);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let server = Discovery::start(&args);
        Target {
            xds: ([127, 0, 0, 1], server.xds_port).into(),
            rest: ([127, 0, 0, 1], server.port).into(),
            server,
            _dir: dir,
        }
    }

    /// The server's resident memory (VmRSS), in KiB.
    pub(crate) fn rss_kib(&self) -> u64 {
        rss_kib(self.server.pid())
    }

    /// Creates ServiceEntry `probe-N` in `default` (a new cluster
    /// `outbound|80||probe-N.example.com` for the proxy).
    pub(crate) fn create_probe(&self, n: u64) {
        let body = serde_json::json!({
            "apiVersion": "networking.istio.io/v1",
            "kind": "ServiceEntry",
            "metadata": {"name": format!("probe-{n}"), "namespace": "default"},
            "spec": {
                "hosts": [probe_host(n)],
                "ports": [{"number": 80, "name": "http", "protocol": "HTTP"}],
                "resolution": "DNS",
            },
        });
        let authorization = format!("Bearer {ADMIN}");
        let answer = pilot_test_support::http::request(
            self.rest,
            "POST",
            "/apis/networking.istio.io/v1/namespaces/default/serviceentries",
            &[
                ("authorization", &authorization),
                ("content-type", "application/json"),
            ],
            &serde_json::to_vec(&body).unwrap(),
        )
        .unwrap_or_else(|error| panic!("the REST API did not answer a write: {error}"));
        assert!(
            answer.code == 200 || answer.code == 201,
            "creating ServiceEntry probe-{n}: {} {}",
            answer.code,
            answer.text()
        );
    }
}

/// The host of ServiceEntry `probe-N`.
pub(crate) fn probe_host(n: u64) -> String {
    format!("probe-{n}.example.com")
}

/// Whether the server binary has `flag` (flags of a newer transport).
pub(crate) fn supported(flag: &str) -> bool {
    static HELP: OnceLock<String> = OnceLock::new();
    HELP.get_or_init(|| {
        let output =
            std::process::Command::new(pilot_test_support::binary(pilot_test_support::PILOT_DISCOVERY))
                .arg("--help")
                .output()
                .expect("pilot-discovery --help");
        String::from_utf8_lossy(&output.stdout).into_owned()
    })
    .contains(flag)
}

/// A process's resident memory (VmRSS of `/proc/PID/status`), in KiB.
pub(crate) fn rss_kib(pid: u32) -> u64 {
    try_rss_kib(pid).unwrap_or_else(|| panic!("no VmRSS for process {pid} (has it died?)"))
}

fn try_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
}

/// A proxy with the token: it keeps an ADS stream of clusters open (and
/// opens another if the server ends it, as Envoy does), ACKs every
/// response and remembers the clusters of the last one.
pub(crate) struct Proxy {
    clusters: Arc<Mutex<BTreeSet<String>>>,
    /// Streams the proxy opened (1 while the first one lasts).
    pub streams: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts the proxy against `xds`.
    pub(crate) fn start(xds: SocketAddr) -> Self {
        let clusters: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let streams: Arc<AtomicU64> = Arc::default();
        let task = tokio::spawn(follow(xds, clusters.clone(), streams.clone()));
        Proxy {
            clusters,
            streams,
            task,
        }
    }

    /// Whether the proxy's clusters include `probe-N`'s.
    pub(crate) fn has(&self, n: u64) -> bool {
        let host = probe_host(n);
        self.clusters
            .lock()
            .unwrap()
            .iter()
            .any(|name| name.contains(&host))
    }

    /// Whether the proxy got any configuration yet.
    pub(crate) fn configured(&self) -> bool {
        !self.clusters.lock().unwrap().is_empty()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn follow(xds: SocketAddr, clusters: Arc<Mutex<BTreeSet<String>>>, streams: Arc<AtomicU64>) {
    loop {
        streams.fetch_add(1, Ordering::Relaxed);
        // An error ends this stream; the proxy opens another.
        let _ = stream_once(xds, &clusters).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn stream_once(
    xds: SocketAddr,
    clusters: &Mutex<BTreeSet<String>>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut client = AggregatedDiscoveryServiceClient::connect(format!("http://{xds}")).await?;
    let (requests, outgoing) = futures::channel::mpsc::unbounded();
    requests.unbounded_send(DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: CDS.into(),
        ..Default::default()
    })?;
    let mut request = tonic::Request::new(outgoing);
    request
        .metadata_mut()
        .insert("authorization", format!("Bearer {PROXY}").parse()?);
    let mut responses = client.stream_aggregated_resources(request).await?.into_inner();
    while let Some(response) = responses.message().await? {
        let names: BTreeSet<String> = response
            .resources
            .iter()
            .filter_map(|any| Cluster::decode(any.value.as_slice()).ok())
            .map(|cluster| cluster.name)
            .collect();
        *clusters.lock().unwrap() = names;
        requests.unbounded_send(DiscoveryRequest {
            type_url: CDS.into(),
            version_info: response.version_info.clone(),
            response_nonce: response.nonce.clone(),
            ..Default::default()
        })?;
    }
    Ok(())
}

/// What [`under_attack`] saw.
#[derive(Debug)]
pub(crate) struct Outcome<R> {
    /// What the attack returned.
    pub attack: R,
    /// The server's resident memory when the attack started, in KiB.
    pub rss_before_kib: u64,
    /// The highest resident memory sampled during the attack, in KiB.
    pub rss_peak_kib: u64,
    /// Changes the proxy saw arrive during the attack (each within
    /// [`PATIENCE`]).
    pub pushes_seen: u64,
}

impl<R> Outcome<R> {
    /// How much the server's memory grew during the attack, in MiB.
    pub(crate) fn growth_mib(&self) -> u64 {
        self.rss_peak_kib.saturating_sub(self.rss_before_kib) / 1024
    }
}

/// Runs `attack` (blocking, in a thread of its own) against `target`
/// while a proxy with the token must see each change made through the
/// REST API arrive, one after another, until the attack ends and once
/// more after it. Panics, naming the change, if one does not arrive within
/// [`PATIENCE`] (a lock-out, not a latency).
pub(crate) async fn under_attack<R: Send + 'static>(
    target: &Target,
    attack: impl FnOnce() -> R + Send + 'static,
) -> Outcome<R> {
    let proxy = Proxy::start(target.xds);
    wait_for("the proxy's first configuration", || proxy.configured()).await;
    let pid = target.server.pid();
    let rss_before_kib = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(rss_before_kib));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                // A server that died shows as a change the proxy never sees.
                let Some(rss) = try_rss_kib(pid) else { break };
                peak.fetch_max(rss, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let attack = tokio::task::spawn_blocking(attack);
    let mut n = 0;
    let mut pushes_seen = 0;
    loop {
        let finished = attack.is_finished();
        n += 1;
        tokio::task::block_in_place(|| target.create_probe(n));
        let asked = Instant::now();
        while !proxy.has(n) {
            if asked.elapsed() > PATIENCE {
                let log = target.server.log();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                panic!(
                    "timed out waiting for the proxy to see ServiceEntry probe-{n} under attack \
                     (it opened {} streams; the server's last log lines, newest first:\n{})",
                    proxy.streams.load(Ordering::Relaxed),
                    tail.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        pushes_seen += 1;
        if finished {
            break;
        }
        // One change a second: configuration grows with the attack's
        // length, and the server must keep up with it on a loaded machine.
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    done.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let attack = attack.await.expect("the attack panicked");
    Outcome {
        attack,
        rss_before_kib,
        rss_peak_kib: peak.load(Ordering::Relaxed).max(rss_kib(pid)),
        pushes_seen,
    }
}

/// The first ADS request of the credentialed node, as a gRPC message.
pub(crate) fn first_request() -> Vec<u8> {
    let request = DiscoveryRequest {
        node: Some(Node {
            id: NODE.into(),
            ..Default::default()
        }),
        type_url: CDS.into(),
        ..Default::default()
    }
    .encode_to_vec();
    frame::grpc_message(request.len() as u32, &request)
}

/// Opens ADS stream `stream_id` on `connection` with the proxy token and
/// sends its first request, as a proxy does: the connection is then an
/// authenticated one, past the handshake deadline's reach.
pub(crate) fn authenticate(connection: &mut Connection, xds: SocketAddr, stream_id: u32) {
    let block = hpack::ads_request(&xds.to_string(), Some(PROXY));
    let mut bytes = frame::headers(stream_id, &block, false, true);
    bytes.extend_from_slice(&frame::data(stream_id, &first_request(), false));
    connection.send(&bytes).expect("the attacker's first stream");
}

/// Waits until `check` holds, panicking with `what` after [`PATIENCE`].
pub(crate) async fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < PATIENCE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How an attacking connection ended, as the attack saw it.
#[derive(Debug)]
pub(crate) struct Ended {
    /// What the server sent.
    pub report: Report,
    /// Units of the attack (frames, streams) sent before the server
    /// stopped taking them.
    pub sent: u64,
    /// The server no longer holds the connection.
    pub released: bool,
}

impl Ended {
    /// The server ended the connection: a GOAWAY, a close, or the socket
    /// let go.
    pub(crate) fn by_server(&self) -> bool {
        self.report.ended() || self.released
    }
}

/// Sends `unit(i)` for i = 0.. up to `limit` times (in batches of
/// `batch`) on `connection` until a write fails or stalls, or the server
/// ends the connection; then waits up to [`CLOSE_PATIENCE`] for the server
/// to end it or let it go.
pub(crate) fn hammer(
    mut connection: Connection,
    limit: u64,
    batch: u64,
    mut unit: impl FnMut(u64) -> Vec<u8>,
) -> Ended {
    let mut sent = 0;
    let mut bytes = Vec::new();
    while sent < limit {
        bytes.clear();
        let end = (sent + batch).min(limit);
        for i in sent..end {
            bytes.extend_from_slice(&unit(i));
        }
        if connection.send(&bytes).is_err() {
            break;
        }
        sent = end;
        if connection.report().ended() {
            break;
        }
    }
    finish(connection, sent)
}

/// Waits up to [`CLOSE_PATIENCE`] for the server to end `connection` (a
/// GOAWAY, a close) or let it go, reading from it only if it is a reading
/// connection.
pub(crate) fn finish(connection: Connection, sent: u64) -> Ended {
    let started = Instant::now();
    loop {
        let report = connection.report();
        let released = !connection.held_by_server();
        if report.ended() || released || started.elapsed() > CLOSE_PATIENCE {
            return Ended {
                report,
                sent,
                released,
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asserts what a user of the server notices after `attack`: the
/// attacking connection was ended by the server, and its memory grew by
/// at most `bound_mib` (the proxy saw every change: [`under_attack`]
/// checked it).
pub(crate) fn assert_held(attack: &str, outcome: &Outcome<Ended>, bound_mib: u64) {
    // Shown with the test's output (`--no-capture`, or on failure).
    println!("{attack}: {outcome:?}");
    assert!(
        outcome.attack.by_server(),
        "{attack}: the server never ended the attacking connection ({} units sent): {outcome:?}",
        outcome.attack.sent
    );
    assert!(
        outcome.growth_mib() <= bound_mib,
        "{attack}: the server's memory grew by {} MiB (bound {bound_mib} MiB): {outcome:?}",
        outcome.growth_mib()
    );
}

/// The header blocks of these attacks are valid: a server that ends the
/// connection with COMPRESSION_ERROR misread them (and ended the attack by
/// accident, not by design).
pub(crate) fn assert_read_right(attack: &str, ended: &Ended) {
    let misread = ended
        .report
        .goaway
        .as_ref()
        .is_some_and(|goaway| goaway.code == frame::COMPRESSION_ERROR);
    assert!(
        !misread,
        "{attack}: the server answered valid header blocks with COMPRESSION_ERROR: {ended:?}"
    );
}
