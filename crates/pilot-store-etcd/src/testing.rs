//! Real etcd servers for tests and benches (feature `testing`): single
//! members and three-member clusters on free loopback ports, each with a
//! temporary data directory, killed when dropped.
//!
//! Needs the `etcd` binary (Debian package `etcd-server`) on `PATH`;
//! `.ci/run` installs it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    child: Option<Child>,
    /// Kills etcd if this process dies without dropping the server (a test
    /// killed by a timeout), so no etcd outlives its test.
    watchdog: Option<Child>,
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
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let name = "member-0".to_string();
        let mut server = EtcdServer {
            initial_cluster: format!("{name}=http://127.0.0.1:{peer_port}"),
            name,
            client_port,
            peer_port,
            data_dir: temp.path().join("data"),
            tls,
            _temp: Some(temp),
            child: None,
            watchdog: None,
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
        self.child.as_ref().map(Child::id)
    }

    /// True while the process runs.
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the process with SIGKILL (`kill -9`), leaving its data.
    pub fn kill(&mut self) {
        for mut process in [self.child.take(), self.watchdog.take()].into_iter().flatten() {
            let _ = process.kill();
            let _ = process.wait();
        }
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
        let child = command
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
            .stderr(log)
            .spawn()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!("cannot start etcd (install the etcd-server package): {e}"),
                )
            })?;
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {parent} 2>/dev/null; do sleep 1; done; kill -9 {etcd} 2>/dev/null",
                parent = std::process::id(),
                etcd = child.id()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        self.child = Some(child);
        self.watchdog = Some(watchdog);
        Ok(())
    }

    /// Waits until the member answers on its client port.
    fn wait_ready(&mut self) -> std::io::Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut()
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
        let ports: Vec<(u16, u16)> = (0..size)
            .map(|_| Ok((free_port()?, free_port()?)))
            .collect::<std::io::Result<_>>()?;
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
                child: None,
                watchdog: None,
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

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made
/// with the `openssl` command for one test.
#[derive(Debug, Clone)]
pub struct TestCerts {
    /// The CA certificate (PEM).
    pub ca: PathBuf,
    /// The server's certificate, for IP 127.0.0.1 and `localhost`.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA.
    pub client_cert: PathBuf,
    /// The client's key.
    pub client_key: PathBuf,
}

impl TestCerts {
    /// Generates the certificates into `dir`.
    pub fn generate(dir: &std::path::Path) -> std::io::Result<Self> {
        let path = |name: &str| dir.join(name);
        let openssl = |args: &[&str]| -> std::io::Result<()> {
            let output = Command::new("openssl").args(args).current_dir(dir).output()?;
            if output.status.success() {
                Ok(())
            } else {
                Err(std::io::Error::other(format!(
                    "openssl {}: {}",
                    args.join(" "),
                    String::from_utf8_lossy(&output.stderr)
                )))
            }
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=pilot-test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ])?;
        for (name, extensions) in [
            (
                "server",
                "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
            ),
            ("client", "extendedKeyUsage=clientAuth"),
        ] {
            std::fs::write(path(&format!("{name}.ext")), extensions)?;
            openssl(&[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN=pilot-test-{name}"),
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
            ])?;
            openssl(&[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                &format!("{name}.ext"),
                "-out",
                &format!("{name}.crt"),
            ])?;
        }
        Ok(TestCerts {
            ca: path("ca.crt"),
            server_cert: path("server.crt"),
            server_key: path("server.key"),
            client_cert: path("client.crt"),
            client_key: path("client.key"),
        })
    }
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// True when the member on `port` answers `GET /health` with healthy.
fn healthy(port: u16) -> bool {
    let Ok(mut stream) =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.contains("\"health\":\"true\"")
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}
