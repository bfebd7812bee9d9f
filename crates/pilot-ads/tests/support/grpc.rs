//! gRPC for Python (PyPI's `grpcio`, in `.tools/grpc`, installed by
//! `scripts/install-deps`): the client and server scripts of
//! `crates/pilot-system-tests/tests/grpc/`, driven over stdin and stdout
//! (and `websocket.py`, PyPI's websockets in the same venv).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

/// The venv's Python (`scripts/install-deps` installs grpcio there).
pub(crate) fn python() -> PathBuf {
    let path = pilot_test_support::workspace().join(".tools/grpc/bin/python");
    assert!(
        path.exists(),
        "{} is missing: run scripts/install-deps (PyPI grpcio, grpcio-health-checking)",
        path.display()
    );
    path
}

/// A script of the system tests' `tests/grpc/`, fed commands on stdin,
/// its stderr in a log file; killed when dropped.
pub(crate) struct Python {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Python {
    /// `script` with `args`, `GRPC_XDS_BOOTSTRAP` naming `bootstrap`, its
    /// log in `dir`.
    pub(crate) fn start(script: &str, args: &[&str], bootstrap: &Path, dir: &Path) -> Self {
        let log = dir.join(format!("{script}-{}.log", args.first().unwrap_or(&"client")));
        let mut child = Command::new(python())
            .arg(
                pilot_test_support::workspace()
                    .join("crates/pilot-system-tests/tests/grpc")
                    .join(script),
            )
            .args(args)
            .env("GRPC_XDS_BOOTSTRAP", bootstrap)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("cannot run the grpc venv's python");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Python {
            child,
            stdin,
            stdout,
            log,
        }
    }

    /// `server.py` answering as `name` on `127.0.0.1:port` (not
    /// xDS-enabled), once it serves.
    pub(crate) fn server(name: &str, port: u16, dir: &Path) -> Self {
        let mut server = Python::start(
            "server.py",
            &[name, &port.to_string()],
            Path::new("/nonexistent"),
            dir,
        );
        assert_eq!(server.line(), "started", "{}", server.log());
        server
    }

    /// [`server`](Self::server), serving TLS with the PEM certificate
    /// chain `cert` and its key `key`.
    pub(crate) fn tls_server(name: &str, port: u16, cert: &Path, key: &Path, dir: &Path) -> Self {
        let mut server = Python::start(
            "server.py",
            &[
                name,
                &port.to_string(),
                "--tls",
                cert.to_str().unwrap(),
                key.to_str().unwrap(),
            ],
            Path::new("/nonexistent"),
            dir,
        );
        assert_eq!(server.line(), "started", "{}", server.log());
        server
    }

    /// `websocket.py`'s echo server answering as `name` on
    /// `127.0.0.1:port`, once it listens.
    pub(crate) fn websocket_server(name: &str, port: u16, dir: &Path) -> Self {
        let mut server = Python::start(
            "websocket.py",
            &["server", name, &port.to_string()],
            Path::new("/nonexistent"),
            dir,
        );
        assert_eq!(server.line(), "started", "{}", server.log());
        server
    }

    /// `websocket.py`'s client: [`ask`](Self::ask) it a `ws://` URL.
    pub(crate) fn websocket_client(dir: &Path) -> Self {
        Python::start("websocket.py", &["client"], Path::new("/nonexistent"), dir)
    }

    /// The next line the script printed.
    pub(crate) fn line(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "the script ended:\n{}", self.log());
        line.trim().to_string()
    }

    /// One command, its JSON answer.
    pub(crate) fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("the script's stdin is open");
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let line = self.line();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Closes stdin: `server.py` then stops gracefully (its calls in
    /// flight finish).
    pub(crate) fn retire(&mut self) {
        self.stdin = None;
    }

    /// What the script wrote on stderr.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
