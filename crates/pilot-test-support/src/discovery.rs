//! A real `pilot-discovery` process on free loopback ports.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::binaries::{PILOT_DISCOVERY, binary};
use crate::process::ProcessGuard;
use crate::{PATIENCE, eventually, http};

/// A running `pilot-discovery`, killed when dropped (or when the test
/// process dies).
pub struct Discovery {
    process: ProcessGuard,
    /// `http://127.0.0.1:PORT` (`https://` with `--tls-cert`).
    pub url: String,
    /// The REST port.
    pub port: u16,
    /// The ADS port.
    pub xds_port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Discovery {
    /// Starts the server with `args` on free ports and waits until it is
    /// ready (every cache synced; over plain HTTP only).
    pub fn start(args: &[&str]) -> Self {
        Self::start_with_env(args, &[])
    }

    /// [`start`](Self::start) with more environment variables.
    pub fn start_with_env(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let ready = dir.path().join("ready.json");
        let log = dir.path().join("pilot-discovery.log");
        let mut process = ProcessGuard::spawn(
            Command::new(binary(PILOT_DISCOVERY))
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
                .stderr(std::fs::File::create(&log).expect("the log file")),
        )
        .expect("cannot run pilot-discovery");
        let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
        let started = Instant::now();
        let addresses: serde_json::Value = loop {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && let Ok(value) = serde_json::from_str(&text)
            {
                break value;
            }
            if let Some(status) = process.child().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("pilot-discovery exited with {status}:\n{}", read_log());
            }
            assert!(
                started.elapsed() < PATIENCE,
                "pilot-discovery did not start:\n{}",
                read_log()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let port_of = |address: &str| -> u16 {
            address
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .expect("an address with a port")
        };
        let url = addresses["rest"].as_str().expect("the REST address").to_string();
        let server = Discovery {
            port: port_of(&url),
            xds_port: port_of(addresses["xds"].as_str().expect("the ADS address")),
            url,
            process,
            log,
            _dir: dir,
        };
        if server.url.starts_with("http://") {
            eventually("pilot-discovery to be ready", || server.get("/readyz").0 == 200);
        }
        server
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A GET on the REST port: status and body, or `(0, "")` if nothing
    /// answered.
    pub fn get(&self, path: &str) -> (u16, String) {
        http::get(self.port, path)
    }

    /// A GET with `authorization: Bearer TOKEN`.
    pub fn get_as(&self, path: &str, token: &str) -> (u16, String) {
        let authorization = format!("Bearer {token}");
        match http::request(
            ([127, 0, 0, 1], self.port).into(),
            "GET",
            path,
            &[("authorization", &authorization)],
            &[],
        ) {
            Ok(answer) => (answer.code, answer.text()),
            Err(_) => (0, String::new()),
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.id().expect("the server runs")
    }

    /// Sends SIGTERM and waits: the server must shut down cleanly (exit 0,
    /// "stopped" logged).
    pub fn terminate(mut self) {
        let mut child = self.process.take().expect("the server runs");
        crate::process::signal(child.id(), "TERM");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
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
