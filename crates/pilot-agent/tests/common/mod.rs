//! The real parts of the agent's tests: `pilot-discovery` and `pilotctl`
//! (found or built by pilot-test-support), the real Envoy from
//! `.tools/envoy`, the agent binary, a backend HTTP server, and HTTP
//! clients over plain TCP.

#![allow(
    dead_code,
    unused_imports,
    reason = "each test binary uses its own part of the shared support module"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub(crate) mod conformance;
// gRPC for Python's client and server, as pilot-ads's tests drive them.
#[path = "../../../pilot-ads/tests/support/grpc.rs"]
pub(crate) mod grpc;
pub(crate) mod http_case;
pub(crate) mod netns;
pub(crate) mod tls;
pub(crate) mod upstreams;

pub(crate) use pilot_test_support::{PATIENCE, envoy_binary, eventually, free_port, workspace};

/// `pilot-agent`: cargo's, or the one in `PILOT_TEST_BIN_DIR` when set
/// (a copy of the binaries taken right after building them, for a target
/// directory that other checkouts also build into).
pub(crate) fn agent_binary() -> PathBuf {
    match std::env::var_os("PILOT_TEST_BIN_DIR") {
        Some(dir) => PathBuf::from(dir).join("pilot-agent"),
        None => PathBuf::from(env!("CARGO_BIN_EXE_pilot-agent")),
    }
}

/// One HTTP/1.1 request on a new connection (`connection: close`): status
/// and body, or the transport error.
pub(crate) fn http(
    method: &str,
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String), String> {
    let mut all = vec![("host", "backend.default.svc.cluster.local")];
    all.extend_from_slice(headers);
    let answer = pilot_test_support::http::request(
        ([127, 0, 0, 1], port).into(),
        method,
        path,
        &all,
        body.as_bytes(),
    )?;
    Ok((answer.code, answer.text()))
}

pub(crate) fn get(port: u16, path: &str) -> (u16, String) {
    http("GET", port, path, &[], "").unwrap_or((0, String::new()))
}

/// A GET of `path` with `host` on 127.0.0.1:`port`, its answer read by
/// its `content-length` (Envoy holds a connection it answered itself, a
/// 404, open a while after): the status and the body, `(0, "")` when
/// nothing answered.
pub(crate) fn get_by_length(port: u16, host: &str, path: &str) -> (u16, String) {
    request_by_length(port, "GET", host, path, &[])
}

/// [`get_by_length`] with another method and more headers.
pub(crate) fn request_by_length(
    port: u16,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let answer = exchange(port, method, host, path, headers);
    (answer.status, answer.body)
}

/// An answer read by [`exchange`].
#[derive(Debug, Default)]
pub(crate) struct Answer {
    /// 0 when nothing answered.
    pub status: u16,
    /// Each header by its lowercased name; the values of a header sent
    /// more than once joined by `,` in their order.
    pub headers: std::collections::BTreeMap<String, String>,
    pub body: String,
}

/// [`exchange`] over TLS with curl (HTTP/1.1): SNI `sni` resolved to
/// 127.0.0.1:`port`, the server's certificate verified against `ca`.
/// Nothing answered (status 0) when the handshake or its verification
/// fails.
pub(crate) fn exchange_tls(
    port: u16,
    sni: &str,
    ca: &Path,
    method: &str,
    host: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut command = Command::new("curl");
    command
        .args(["-sS", "-i", "--http1.1", "--max-time", "10", "--resolve"])
        .arg(format!("{sni}:{port}:127.0.0.1"))
        .arg("--cacert")
        .arg(ca)
        .args(["-X", method, "-H"])
        .arg(format!("host: {host}"));
    for (name, value) in headers {
        command.arg("-H").arg(format!("{name}: {value}"));
    }
    let Ok(out) = command.arg(format!("https://{sni}:{port}{path}")).output() else {
        return Answer::default();
    };
    if !out.status.success() {
        return Answer::default();
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Answer::default();
    };
    let mut answer = Answer {
        status: head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0),
        body: body.to_string(),
        ..Default::default()
    };
    for line in head.lines().skip(1) {
        if let Some((name, value)) = line.split_once(':') {
            answer
                .headers
                .entry(name.trim().to_ascii_lowercase())
                .and_modify(|v| {
                    v.push(',');
                    v.push_str(value.trim());
                })
                .or_insert_with(|| value.trim().to_string());
        }
    }
    answer
}

/// One request on a new connection (`connection: close`) to
/// 127.0.0.1:`port`, its answer read by its `content-length`: the
/// status, the headers and the body.
pub(crate) fn exchange(port: u16, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return Answer::default();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut request = format!("{method} {path} HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return Answer::default();
    }
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_string();
            let mut fields = std::collections::BTreeMap::<String, String>::new();
            for line in head.lines().skip(1) {
                if let Some((name, value)) = line.split_once(':') {
                    fields
                        .entry(name.trim().to_ascii_lowercase())
                        .and_modify(|v| {
                            v.push(',');
                            v.push_str(value.trim());
                        })
                        .or_insert_with(|| value.trim().to_string());
                }
            }
            // The answer to a HEAD has no body, whatever its length says.
            let length: usize = match method {
                "HEAD" => 0,
                _ => fields
                    .get("content-length")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
            };
            if raw.len() >= end + 4 + length {
                let status = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                return Answer {
                    status,
                    headers: fields,
                    body: String::from_utf8_lossy(&raw[end + 4..end + 4 + length]).to_string(),
                };
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return Answer::default(),
            Ok(n) => raw.extend_from_slice(&chunk[..n]),
        }
    }
}

/// An upstream on loopback answering every HTTP/1.1 request 200 with
/// `name` (keeping connections open); its port. Serves until the process
/// ends.
pub(crate) fn named_upstream(name: &'static str) -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
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
                    buffer.drain(..end);
                    let response = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{name}", name.len());
                    if stream.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// A backend: `/slow` answers after 3 s, anything else at once; each
/// request counted. Serves until the test process ends.
pub(crate) struct Backend {
    pub port: u16,
    pub slow_started: std::sync::mpsc::Receiver<()>,
}

impl Backend {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (slow_tx, slow_started) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let slow_tx = slow_tx.clone();
                std::thread::spawn(move || serve(stream, slow_tx));
            }
        });
        Backend { port, slow_started }
    }
}

fn serve(stream: TcpStream, slow_tx: std::sync::mpsc::Sender<()>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut stream = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header == "\r\n" {
                break;
            }
            if let Some(v) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        let _ = reader.read_exact(&mut body);
        let answer = if path.starts_with("/slow") {
            let _ = slow_tx.send(());
            std::thread::sleep(Duration::from_secs(3));
            "slow done"
        } else {
            "ok"
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// A services file with one HTTP service whose instance is `backend_port`
/// on 127.0.0.1; sidecars without capture listen on 127.0.0.1:`service_port`.
pub(crate) fn services_file(dir: &Path, service_port: u16, backend_port: u16) -> PathBuf {
    let path = dir.join("services.yaml");
    std::fs::write(
        &path,
        format!(
            "services:\n- hostname: backend.default.svc.cluster.local\n  ports: [{{name: http, port: {service_port}, protocol: HTTP}}]\n  instances:\n  - {{address: 127.0.0.1, port: {backend_port}, labels: {{app: backend}}}}\n"
        ),
    )
    .unwrap();
    path
}

/// A running `pilot-discovery` (pilot-test-support's), with requests and
/// `pilotctl` runs as a token's holder.
pub(crate) struct Discovery(pilot_test_support::Discovery);

impl std::ops::Deref for Discovery {
    type Target = pilot_test_support::Discovery;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Discovery {
    pub(crate) fn start(args: &[&str]) -> Self {
        Discovery(pilot_test_support::Discovery::start(args))
    }

    /// [`start`](Self::start) with more environment variables.
    pub(crate) fn start_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Self {
        Discovery(pilot_test_support::Discovery::start_with_env(args, env))
    }

    /// GET with a bearer token.
    pub(crate) fn get(&self, path: &str, token: &str) -> (u16, String) {
        self.0.get_as(path, token)
    }

    /// `pilotctl --server URL --token TOKEN ARGS`: exit code, and stdout
    /// followed by stderr.
    pub(crate) fn pilotctl(&self, token: &str, args: &[&str]) -> (i32, String) {
        let args = [&["--token", token][..], args].concat();
        let run = pilot_test_support::pilotctl(Some(&self.url), &args, &[], None);
        (run.code, format!("{}{}", run.stdout, run.stderr))
    }
}

/// A running `pilot-agent proxy ROLE` with its own config directory, admin
/// port, status port and base id.
pub(crate) struct Agent {
    pub child: Option<Child>,
    pub admin_port: u16,
    pub status_port: u16,
    pub config_dir: PathBuf,
    log: PathBuf,
    pub dir: tempfile::TempDir,
}

impl Agent {
    /// Starts the agent; `args` come after the defaults and win.
    pub(crate) fn start(role: &str, args: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().join("proxy");
        let log = dir.path().join("agent.log");
        let admin_port = free_port();
        let status_port = free_port();
        // In an IPC namespace of its own, as in a pod: Envoy's hot-restart
        // shared memory is named by the base id and lives there. The base
        // id is still the admin port, which this Envoy holds: the
        // hot-restart sockets are abstract, so per network namespace, and
        // every such agent shares the host's.
        let child = Command::new("unshare")
            .args(["--ipc", "--"])
            .arg(agent_binary())
            .args(["proxy", role, "--envoy-binary"])
            .arg(envoy_binary())
            .arg("--config-dir")
            .arg(&config_dir)
            .args([
                "--admin-port",
                &admin_port.to_string(),
                "--status-addr",
                &format!("127.0.0.1:{status_port}"),
                "--base-id",
                &admin_port.to_string(),
                "--concurrency",
                "1",
            ])
            .args(args)
            .env_remove("INSTANCE_IP")
            .env_remove("POD_NAME")
            .env_remove("POD_NAMESPACE")
            .env_remove("PILOT_DISCOVERY_URL")
            .env_remove("PILOT_TOKEN_FILE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot run pilot-agent");
        // SIGTERM (then SIGKILL) if the test process dies first.
        let _ = pilot_test_support::watchdog(child.id(), "TERM");
        Agent {
            child: Some(child),
            admin_port,
            status_port,
            config_dir,
            log,
            dir,
        }
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the agent to exit; its exit code.
    pub(crate) fn wait_exit(&mut self) -> i32 {
        let child = self.child.as_mut().unwrap();
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            assert!(
                started.elapsed() < PATIENCE * 3,
                "pilot-agent did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The Envoy processes this agent started (their command line names
    /// its config directory).
    pub(crate) fn envoy_pids(&self) -> Vec<u32> {
        envoy_pids(&self.config_dir)
    }

    pub(crate) fn ready(&self) -> bool {
        get(self.status_port, "/healthz/ready").0 == 200
    }

    /// The agent's own metric `name` from /stats/prometheus.
    pub(crate) fn metric(&self, name: &str) -> Option<u64> {
        let (_, body) = get(self.status_port, "/stats/prometheus");
        body.lines().find_map(|l| {
            l.strip_prefix(&format!("{name} "))
                .and_then(|v| v.trim().parse().ok())
        })
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut()
            && child.try_wait().ok().flatten().is_none()
        {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let started = Instant::now();
            while child.try_wait().ok().flatten().is_none() && started.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        for pid in envoy_pids(&self.config_dir) {
            let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        }
    }
}

/// Processes whose command line has `config_dir` in an argument (the
/// Envoys an agent started with it).
pub(crate) fn envoy_pids(config_dir: &Path) -> Vec<u32> {
    let needle = config_dir.to_string_lossy().to_string();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).to_string())
            .collect();
        if args.first().is_some_and(|a| a.ends_with("envoy")) && args.iter().any(|a| a.contains(&needle)) {
            // A zombie (exited, not reaped yet) is not running.
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z'))
            {
                continue;
            }
            pids.push(pid);
        }
    }
    pids
}

/// Certificates made by `openssl` in `dir`: `ca.pem`; `server.pem` /
/// `server-key.pem` for `localhost` and 127.0.0.1 (pilot-discovery's ADS
/// port); `proxy.pem` / `proxy-key.pem` with the SPIFFE identity
/// `spiffe://cluster.local/ns/default/sa/app` (a proxy's client
/// certificate).
pub(crate) fn certificates(dir: &Path) {
    use pilot_test_support::certs;
    let pki = certs::Pki::new(dir);
    pki.ca("ca").unwrap();
    pki.leaf("server", "ca", certs::SERVER).unwrap();
    pki.leaf(
        "proxy",
        "ca",
        &certs::client_with_uri("spiffe://cluster.local/ns/default/sa/app"),
    )
    .unwrap();
}
