//! The real binaries: `pilot-discovery` (found next to `pilotctl`) on free
//! loopback ports, and `pilotctl` with a clean environment.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for something before failing with a message
/// (never an assertion on speed: it only turns a hang into a failure).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// `pilot-discovery`, next to `pilotctl`.
pub fn discovery_binary() -> PathBuf {
    let pilotctl = PathBuf::from(env!("CARGO_BIN_EXE_pilotctl"));
    let path = pilotctl.with_file_name("pilot-discovery");
    assert!(
        path.exists(),
        "pilot-discovery is not next to pilotctl at {}: build it first with `cargo build -p pilot-server` \
         (`cargo nextest run --workspace` builds every binary)",
        path.display()
    );
    path
}

/// A running `pilot-discovery`, killed (with its watchdog) when dropped.
pub struct Discovery {
    child: Option<Child>,
    watchdog: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The ADS port.
    pub xds_port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Discovery {
    /// Starts the server with `args` on free ports and waits until it is
    /// ready (every cache synced).
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`start`](Self::start) with more environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready.json");
        let log = dir.path().join("pilot-discovery.log");
        let child = Command::new(discovery_binary())
            .args([
                "--listen",
                "127.0.0.1:0",
                "--xds-listen",
                "127.0.0.1:0",
                "--ready-file",
            ])
            .arg(&ready)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot run pilot-discovery");
        let watchdog = watchdog(child.id());
        let mut server = Discovery {
            child: Some(child),
            watchdog,
            url: String::new(),
            xds_port: 0,
            log,
            _dir: dir,
        };
        let started = Instant::now();
        let addresses: serde_json::Value = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break serde_json::from_str(&text).unwrap();
            }
            if let Some(status) = server.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("pilot-discovery exited with {status}:\n{}", server.log());
            }
            assert!(
                started.elapsed() < PATIENCE,
                "pilot-discovery did not start:\n{}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        server.url = addresses["rest"].as_str().unwrap().to_string();
        server.xds_port = addresses["xds"]
            .as_str()
            .unwrap()
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if server.url.starts_with("http://") {
            eventually("pilot-discovery to be ready", || server.get("/readyz").0 == 200);
        }
        server
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A GET on the REST port: status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        use std::io::{Read, Write};
        let address = self.url.trim_start_matches("http://");
        let Ok(mut stream) = std::net::TcpStream::connect(address) else {
            return (0, String::new());
        };
        let _ = write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"
        );
        let mut response = String::new();
        let _ = stream.read_to_string(&mut response);
        let code = response
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (code, body)
    }

    /// Sends SIGTERM and waits: the server must shut down cleanly.
    pub fn terminate(mut self) {
        let mut child = self.child.take().unwrap();
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if started.elapsed() > PATIENCE {
                let _ = child.kill();
                panic!("pilot-discovery did not stop on SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(
            status.success(),
            "pilot-discovery exited with {status} on SIGTERM:\n{}",
            self.log()
        );
        assert!(self.log().contains("stopped"), "{}", self.log());
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = self.watchdog.kill();
        let _ = self.watchdog.wait();
    }
}

/// Kills `pid` if this test process dies without dropping its handle.
fn watchdog(pid: u32) -> Child {
    Command::new("sh")
        .arg("-c")
        .arg(format!(
            "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill -9 {pid} 2>/dev/null",
            parent = std::process::id()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What a `pilotctl` run did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `pilotctl` with `args` against `server` (if any), with no config
/// file and no PILOT_SERVER unless `env` sets them.
pub fn pilotctl(server: Option<&str>, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Run {
    let home = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_pilotctl"));
    if let Some(server) = server {
        command.args(["--server", server]);
    }
    command
        .args(args)
        .current_dir(workspace())
        .env("HOME", home.path())
        .env_remove("PILOT_SERVER")
        .env_remove("PILOT_CONFIG")
        .env_remove("XDG_CONFIG_HOME")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("cannot run pilotctl");
    if let Some(text) = stdin {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    let output = child.wait_with_output().unwrap();
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).to_string(),
        stderr: String::from_utf8_lossy(&output.stderr).to_string(),
    }
}

/// The workspace root (where `examples/` is).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Waits until `check` holds, failing with `what` after [`PATIENCE`].
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A services file for the bookinfo services on `port`, reviews in three
/// versions.
pub fn bookinfo_services(port: u16) -> String {
    let mut text = String::from("services:\n");
    for (name, versions) in [
        ("productpage", &["v1"][..]),
        ("details", &["v1"]),
        ("ratings", &["v1"]),
        ("reviews", &["v1", "v2", "v3"]),
    ] {
        text.push_str(&format!(
            "- hostname: {name}.default.svc.cluster.local\n  ports: [{{name: http, port: {port}, protocol: HTTP}}]\n  instances:\n"
        ));
        for (i, version) in versions.iter().enumerate() {
            text.push_str(&format!(
                "  - {{address: 127.0.0.1, port: {}, labels: {{app: {name}, version: {version}}}}}\n",
                20000 + i
            ));
        }
    }
    text
}
