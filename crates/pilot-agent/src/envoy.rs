//! One Envoy process (an epoch): its command line, its exit as the agent
//! reports it, and Envoy's admin endpoint (readiness, drain, quit).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use http::Method;
use tokio::io::AsyncBufReadExt;

use crate::AgentError;

/// How every epoch of Envoy is run.
#[derive(Debug, Clone)]
pub struct EnvoyOptions {
    /// The binary.
    pub binary: PathBuf,
    /// Where bootstraps are written.
    pub config_dir: PathBuf,
    /// `--base-id`.
    pub base_id: u32,
    /// `--drain-time-s`.
    pub drain: Duration,
    /// `--parent-shutdown-time-s`.
    pub parent_shutdown: Duration,
    /// `--concurrency`.
    pub concurrency: u16,
    /// `--log-level`.
    pub log_level: String,
    /// More arguments, appended.
    pub extra_args: Vec<String>,
}

impl EnvoyOptions {
    /// Envoy's arguments for `epoch` with the bootstrap at `bootstrap`.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let options = pilot_agent::envoy::EnvoyOptions {
    ///     binary: "envoy".into(),
    ///     config_dir: "/etc/pilot/proxy".into(),
    ///     base_id: 7,
    ///     drain: Duration::from_secs(45),
    ///     parent_shutdown: Duration::from_secs(60),
    ///     concurrency: 2,
    ///     log_level: "warning".into(),
    ///     extra_args: vec![],
    /// };
    /// let args = options.args(3, std::path::Path::new("/etc/pilot/proxy/envoy-rev3.json"));
    /// assert!(args.windows(2).any(|w| w == ["--restart-epoch", "3"]));
    /// assert!(args.windows(2).any(|w| w == ["--base-id", "7"]));
    /// ```
    pub fn args(&self, epoch: u32, bootstrap: &std::path::Path) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "-c".into(),
            bootstrap.display().to_string(),
            "--restart-epoch".into(),
            epoch.to_string(),
            "--base-id".into(),
            self.base_id.to_string(),
            "--drain-time-s".into(),
            whole_seconds(self.drain).to_string(),
            "--parent-shutdown-time-s".into(),
            whole_seconds(self.parent_shutdown).to_string(),
            "--drain-strategy".into(),
            "immediate".into(),
            "--concurrency".into(),
            self.concurrency.to_string(),
            "--log-level".into(),
            self.log_level.clone(),
        ];
        args.extend(self.extra_args.iter().cloned());
        args
    }
}

fn whole_seconds(duration: Duration) -> u64 {
    duration.as_secs_f64().ceil().max(1.0) as u64
}

/// How an Envoy process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl Exit {
    /// From the operating system's status.
    pub fn from_status(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        }
    }

    /// Exit code 0.
    pub fn is_clean(&self) -> bool {
        *self == Exit::Code(0)
    }
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit code {code}"),
            Exit::Signal(signal) => write!(f, "signal {signal}{}", signal_name(*signal)),
        }
    }
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        1 => " (SIGHUP)",
        2 => " (SIGINT)",
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

/// The last lines Envoy wrote to stderr (kept while forwarding them to the
/// agent's own stderr), for exit messages.
/// Checks that `binary` can be run, as `execvp` would find it: a path with
/// a `/` names the file itself, a bare name is looked up on `PATH`. A
/// missing or non-executable binary is a configuration error, reported at
/// once rather than retried as if Envoy had crashed.
pub(crate) fn check_binary(binary: &Path) -> Result<(), AgentError> {
    let error = |message: String| AgentError::EnvoyBinary {
        binary: binary.to_path_buf(),
        message,
    };
    if binary.as_os_str().is_empty() {
        return Err(error("empty path (set --envoy-binary or ENVOY_BINARY)".into()));
    }
    if binary.components().count() > 1 || binary.is_absolute() {
        return executable(binary)
            .map_err(|problem| error(format!("{problem} (set --envoy-binary or ENVOY_BINARY)")));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|dir| executable(&dir.join(binary)).is_ok()) {
        return Ok(());
    }
    Err(error(
        "not found on PATH (give its path with --envoy-binary or ENVOY_BINARY)".into(),
    ))
}

/// Whether `path` is a file someone may execute; what is wrong otherwise.
fn executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        _ => e.to_string(),
    })?;
    if !metadata.is_file() {
        return Err("not a file".into());
    }
    let mode = metadata.permissions().mode();
    if mode & 0o111 == 0 {
        return Err(format!("not executable (mode {:o})", mode & 0o7777));
    }
    Ok(())
}

pub(crate) type LogTail = std::sync::Arc<std::sync::Mutex<VecDeque<String>>>;

const TAIL_LINES: usize = 5;

/// Starts Envoy with `args`; its stderr goes to the agent's stderr
/// (prefixed with the epoch) and its last lines into the returned tail.
pub(crate) fn spawn(
    options: &EnvoyOptions,
    epoch: u32,
    args: &[String],
) -> Result<(tokio::process::Child, LogTail), AgentError> {
    let mut child = tokio::process::Command::new(&options.binary)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a terminal's Ctrl-C or a group signal
        // reaches the agent, which drains Envoy, not Envoy directly.
        .process_group(0)
        .spawn()
        .map_err(|source| AgentError::Spawn {
            binary: options.binary.clone(),
            source,
        })?;
    let tail = LogTail::default();
    if let Some(stderr) = child.stderr.take() {
        let tail = tail.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("envoy[{epoch}] {line}");
                if line.trim().is_empty() {
                    continue;
                }
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
        });
    }
    Ok((child, tail))
}

/// Envoy's admin endpoint on 127.0.0.1.
#[derive(Debug, Clone, Copy)]
pub struct Admin {
    /// The port.
    pub port: u16,
}

const ADMIN_TIMEOUT: Duration = Duration::from_secs(2);

impl Admin {
    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A GET; the body when the status is 200.
    pub async fn get(&self, path: &str) -> Result<String, AgentError> {
        self.call(Method::GET, path).await
    }

    /// A POST (drain, quit); the body when the status is 200.
    pub async fn post(&self, path: &str) -> Result<String, AgentError> {
        self.call(Method::POST, path).await
    }

    async fn call(&self, method: Method, path: &str) -> Result<String, AgentError> {
        let url = self.url(path);
        let (status, body) = crate::http::request(method, &url, None, None, ADMIN_TIMEOUT).await?;
        if status != http::StatusCode::OK {
            return Err(AgentError::Http {
                url,
                message: format!("status {status}"),
            });
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }

    /// Counters and gauges whose name matches `regex` (Envoy's
    /// `/stats?filter=`).
    pub async fn stats(&self, regex: &str) -> Result<BTreeMap<String, u64>, AgentError> {
        let body = self.get(&format!("/stats?filter={}", encode(regex))).await?;
        Ok(parse_stats(&body))
    }

    /// LIVE, and the first listeners and clusters from pilot ACKed.
    pub async fn readiness(&self) -> Readiness {
        let filter =
            r"^(server\.state|listener_manager\.lds\.update_success|cluster_manager\.cds\.update_success)$";
        match self.stats(filter).await {
            Err(e) => Readiness::NotReady(format!("envoy admin: {e}")),
            Ok(stats) => {
                let state = stats.get("server.state").copied();
                let cds = stats
                    .get("cluster_manager.cds.update_success")
                    .copied()
                    .unwrap_or(0);
                let lds = stats
                    .get("listener_manager.lds.update_success")
                    .copied()
                    .unwrap_or(0);
                if state != Some(0) {
                    Readiness::NotReady(format!("envoy is not LIVE (server.state {state:?})"))
                } else if cds == 0 || lds == 0 {
                    Readiness::NotReady(format!(
                        "config not received from pilot: cds {cds} lds {lds} updates"
                    ))
                } else {
                    Readiness::Ready
                }
            }
        }
    }

    /// Downstream connections open on Envoy's listeners (the admin
    /// listener's own are left out).
    pub async fn active_connections(&self) -> Result<u64, AgentError> {
        let stats = self.stats(r"^listener\..*downstream_cx_active$").await?;
        Ok(stats
            .iter()
            .filter(|(name, _)| !name.starts_with("listener.admin"))
            .map(|(_, v)| v)
            .sum())
    }
}

/// Whether Envoy can take traffic, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// LIVE and configured.
    Ready,
    /// Why not.
    NotReady(String),
}

fn encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `name: value` lines of Envoy's text stats (histograms left out).
pub fn parse_stats(body: &str) -> BTreeMap<String, u64> {
    body.lines()
        .filter_map(|line| {
            let (name, value) = line.split_once(": ")?;
            Some((name.trim().to_string(), value.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_and_exits() {
        let stats = parse_stats("server.state: 0\ncluster_manager.cds.update_success: 3\nh: P0(nan,1)\n");
        assert_eq!(stats["server.state"], 0);
        assert_eq!(stats["cluster_manager.cds.update_success"], 3);
        assert_eq!(stats.len(), 2);
        assert_eq!(Exit::Signal(9).to_string(), "signal 9 (SIGKILL)");
        assert_eq!(encode("^a\\.b$"), "%5Ea%5C.b%24");
        assert_eq!(whole_seconds(Duration::from_millis(1500)), 2);
    }
}
