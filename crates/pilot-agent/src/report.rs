//! Envoy's process life, reported to pilot-discovery.
//!
//! The channel is a REST call, `POST /v1/proxy-events` with the proxy's
//! node id in the body and the operator's bearer token: unlike node
//! metadata (sent only when Envoy connects) it works while Envoy is down,
//! which is exactly when there is something to report (an exit, a spent
//! retry budget); unlike an ADS-adjacent gRPC call it needs no gRPC stack in
//! the agent. Each event carries the cumulative counts, so a lost report is
//! healed by the next one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::Method;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::envoy::Exit;

/// What happened to Envoy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// An epoch started.
    Started,
    /// An epoch exited (`expected` says whether the agent meant it to).
    Exited,
    /// The agent will start Envoy again after `backoff_ms`.
    Restarting,
    /// The retry budget is spent; the agent exits non-zero.
    BudgetExhausted,
    /// The agent drained and stopped Envoy (SIGTERM).
    Stopped,
}

/// One report, as posted.
#[derive(Debug, Clone, Serialize)]
pub struct ProxyEvent {
    /// The proxy's node id.
    pub node: String,
    /// What happened.
    pub kind: EventKind,
    /// The epoch concerned.
    pub epoch: u32,
    /// Envoy's process id, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// The exit code, for exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended Envoy, for exits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether the agent meant the exit (a drained parent, a shutdown).
    pub expected: bool,
    /// A human-readable account (the exit and Envoy's last log lines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Restarts after a failure so far (cumulative).
    pub restarts: u64,
    /// The delay before the next start, for `restarting`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_ms: Option<u64>,
    /// Milliseconds since the Unix epoch.
    pub time_ms: u64,
}

impl ProxyEvent {
    /// An event of `kind` for `node` now.
    pub fn new(node: &str, kind: EventKind, epoch: u32, restarts: u64) -> Self {
        ProxyEvent {
            node: node.to_string(),
            kind,
            epoch,
            pid: None,
            exit_code: None,
            signal: None,
            expected: false,
            message: None,
            restarts,
            backoff_ms: None,
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
        }
    }

    /// With the exit's code or signal.
    pub fn with_exit(mut self, exit: &Exit) -> Self {
        match exit {
            Exit::Code(code) => self.exit_code = Some(*code),
            Exit::Signal(signal) => self.signal = Some(*signal),
        }
        self
    }
}

/// Sends events in order to pilot-discovery from one task (bounded queue;
/// when it is full a new report is dropped with a warning, and the next one
/// carries the counts anyway).
#[derive(Debug)]
pub struct Reporter {
    sender: Option<mpsc::Sender<ProxyEvent>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

const QUEUE: usize = 64;
const TRIES: u32 = 3;

impl Reporter {
    /// Reports to `discovery_url` (none: events are only logged), with the
    /// bearer token of `token_file`, read for each report (a rotated token
    /// is used from the next report on).
    pub fn start(discovery_url: Option<String>, token_file: Option<std::path::PathBuf>) -> Self {
        let Some(base) = discovery_url else {
            return Reporter {
                sender: None,
                task: None,
            };
        };
        let (sender, mut receiver) = mpsc::channel::<ProxyEvent>(QUEUE);
        let url = format!("{}/v1/proxy-events", base.trim_end_matches('/'));
        let task = tokio::spawn(async move {
            while let Some(event) = receiver.recv().await {
                let body = serde_json::to_vec(&event).unwrap_or_default();
                let token = match token_file.as_deref().map(crate::args::read_token).transpose() {
                    Ok(token) => token,
                    Err(e) => {
                        tracing::warn!(error = %e, "report not sent: no token");
                        continue;
                    }
                };
                for attempt in 1..=TRIES {
                    let result = crate::http::request(
                        Method::POST,
                        &url,
                        Some(body.clone()),
                        token.as_deref(),
                        Duration::from_secs(2),
                    )
                    .await;
                    match result {
                        Ok((status, _)) if status.is_success() => break,
                        Ok((status, body)) => {
                            tracing::warn!(%url, %status, body = %String::from_utf8_lossy(&body), "report refused");
                            break;
                        }
                        Err(e) if attempt == TRIES => tracing::warn!(error = %e, "report not delivered"),
                        Err(_) => tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await,
                    }
                }
            }
        });
        Reporter {
            sender: Some(sender),
            task: Some(task),
        }
    }

    /// Queues `event` (and logs it).
    pub fn send(&self, event: ProxyEvent) {
        tracing::info!(kind = ?event.kind, epoch = event.epoch, exit_code = ?event.exit_code, signal = ?event.signal, message = ?event.message, "envoy");
        if let Some(sender) = &self.sender
            && let Err(mpsc::error::TrySendError::Full(_)) = sender.try_send(event)
        {
            tracing::warn!("report queue full; this report is dropped (the next carries the counts)");
        }
    }

    /// Delivers what is queued (bounded by `timeout`), then stops.
    pub async fn flush(mut self, timeout: Duration) {
        self.sender.take();
        if let Some(task) = self.task.take() {
            let _ = tokio::time::timeout(timeout, task).await;
        }
    }
}
