//! Real etcd servers for tests and benches: single members and
//! three-member clusters on free loopback ports, each with a temporary data
//! directory, killed when dropped.
//!
//! Needs the `etcd` binary (Debian package `etcd-server`) on `PATH`;
//! `scripts/install-deps` installs it.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::certs::TestCerts;
use crate::http;
use crate::ports::free_port;
use crate::process::ProcessGuard;

/// How long a member may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// One etcd member, started and owned by a test. Starting, killing and
/// restarting are synchronous (they block until etcd answers), so a server
/// can be made before any async runtime exists.
pub struct EtcdServer {
    name: String,
    client_port: u16,
    peer_port: u16,
    initial_cluster: String,
    data_dir: PathBuf,
    /// Client TLS flags, when the member serves clients over TLS.
    tls: Option<TestCerts>,
    _temp: Option<tempfile::TempDir>,
    /// The running member (killed on drop, or by its watchdog if the test
    /// process dies first).
    process: Option<ProcessGuard>,
}

impl EtcdServer {
    /// Starts a single-member etcd on free loopback ports with a fresh data
    /// directory, and waits until it serves.
    pub fn start() -> std::io::Result<Self> {
        Self::single(None)
    }

    /// Starts a single-member etcd that serves clients only over TLS and
    /// requires a client certificate signed by `certs`' CA.
    pub fn start_tls(certs: &TestCerts) -> std::io::Result<Self> {
        Self::single(Some(certs.clone()))
    }

    fn single(tls: Option<TestCerts>) -> std::io::Result<Self> {
        let temp = tempfile::Builder::new().prefix("pilot-etcd-").tempdir()?;
        let (client_port, peer_port) = (free_port(), free_port());
        let name = "member-0".to_string();
        let mut server = EtcdServer {
            initial_cluster: format!("{name}=http://127.0.0.1:{peer_port}"),
            name,
            client_port,
            peer_port,
            data_dir: temp.path().join("data"),
            tls,
            _temp: Some(temp),
            process: None,
        };
        server.spawn("new")?;
        server.wait_ready()?;
        Ok(server)
    }

    /// The client URL, e.g. `http://127.0.0.1:23790` (`https://` with TLS).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// The member's name in its cluster.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The etcd process's id while it runs (to stop it with SIGSTOP and
    /// resume it with SIGCONT, as a stalled disk or a paused VM would).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().and_then(ProcessGuard::id)
    }

    /// True while the process runs.
    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// Kills the process with SIGKILL (`kill -9`), leaving its data.
    pub fn kill(&mut self) {
        self.process = None;
    }

    /// Starts the process again on the same ports and data directory, and
    /// waits until it serves.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        self.spawn("existing")?;
        self.wait_ready()
    }

    fn spawn(&mut self, state: &str) -> std::io::Result<()> {
        let log = std::fs::File::create(self.data_dir.with_extension("log"))?;
        let mut command = Command::new("etcd");
        if let Some(certs) = &self.tls {
            command
                .arg(format!("--cert-file={}", certs.server_cert.display()))
                .arg(format!("--key-file={}", certs.server_key.display()))
                .arg(format!("--trusted-ca-file={}", certs.ca.display()))
                .arg("--client-cert-auth");
        }
        command
            .arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg(format!("--listen-client-urls={}", self.endpoint()))
            .arg(format!("--advertise-client-urls={}", self.endpoint()))
            .arg(format!("--listen-peer-urls=http://127.0.0.1:{}", self.peer_port))
            .arg(format!(
                "--initial-advertise-peer-urls=http://127.0.0.1:{}",
                self.peer_port
            ))
            .arg(format!("--initial-cluster={}", self.initial_cluster))
            .arg(format!("--initial-cluster-state={state}"))
            .arg("--initial-cluster-token=pilot-test")
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        let temp = self.data_dir.parent().unwrap_or(&self.data_dir).to_path_buf();
        let process = ProcessGuard::spawn_removing(&mut command, &temp).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot start etcd (install the etcd-server package): {e}"),
            )
        })?;
        self.process = Some(process);
        Ok(())
    }

    /// Waits until the member answers on its client port.
    fn wait_ready(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.process.as_mut().and_then(ProcessGuard::child)
                && let Ok(Some(status)) = child.try_wait()
            {
                return Err(std::io::Error::other(format!(
                    "etcd exited with {status}; see {}",
                    self.data_dir.with_extension("log").display()
                )));
            }
            // Over TLS only the port is checked; the client retries its
            // first request.
            let ready = if self.tls.is_some() {
                TcpStream::connect(("127.0.0.1", self.client_port)).is_ok()
            } else {
                healthy(self.client_port)
            };
            if ready {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "etcd at {} did not start in time",
                    self.endpoint()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Three etcd members on loopback forming one cluster.
pub struct EtcdCluster {
    /// The members, in start order.
    pub members: Vec<EtcdServer>,
    _temp: tempfile::TempDir,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until all serve.
    pub fn start(size: usize) -> std::io::Result<Self> {
        let temp = tempfile::Builder::new().prefix("pilot-etcd-cluster-").tempdir()?;
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("member-{i}=http://127.0.0.1:{peer}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members = Vec::new();
        for (i, (client_port, peer_port)) in ports.into_iter().enumerate() {
            let mut member = EtcdServer {
                name: format!("member-{i}"),
                client_port,
                peer_port,
                initial_cluster: initial_cluster.clone(),
                data_dir: temp.path().join(format!("member-{i}")),
                tls: None,
                _temp: None,
                process: None,
            };
            member.spawn("new")?;
            members.push(member);
        }
        for member in &mut members {
            member.wait_ready()?;
        }
        Ok(EtcdCluster { members, _temp: temp })
    }

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(EtcdServer::endpoint).collect()
    }
}

/// True when the member on `port` answers `GET /health` with healthy.
fn healthy(port: u16) -> bool {
    if TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)).is_err() {
        return false;
    }
    http::get(port, "/health").1.contains("\"health\":\"true\"")
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}
