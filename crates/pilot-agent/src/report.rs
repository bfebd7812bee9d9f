//! Envoy's process life, reported to pilot-discovery.
//!
//! The channel is a REST call, `POST /v1/proxy-events` with the proxy's
//! node id in the body and the operator's bearer token: unlike node
//! metadata (sent only when Envoy connects) it works while Envoy is down,
//! which is exactly when there is something to report (an exit, a spent
//! retry budget); unlike an ADS-adjacent gRPC call it needs no gRPC stack in
//! the agent. Each event carries the cumulative counts, so a lost report is
//! healed by the next one. The report itself is
//! [`pilot_proxy_api::ProxyEvent`], the type pilot-discovery reads.

use std::time::Duration;

use http::Method;
use pilot_proxy_api::ProxyEvent;
use tokio::sync::mpsc;

use crate::envoy::Exit;

/// An event with the exit's code or signal (for `exited` and what follows
/// an exit).
pub trait WithExit {
    /// With the exit's code or signal.
    fn with_exit(self, exit: &Exit) -> Self;
}

impl WithExit for ProxyEvent {
    fn with_exit(mut self, exit: &Exit) -> Self {
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
