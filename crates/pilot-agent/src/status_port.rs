//! The agent's status port: `/healthz/ready` (200 only when Envoy is LIVE
//! and has ACKed its first listeners and clusters) and `/stats/prometheus`
//! (Envoy's own stats followed by the agent's).

use std::fmt::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AgentError;
use crate::envoy::{Admin, Readiness};

/// What the supervisor publishes about Envoy (read by the status port).
#[derive(Debug, Default)]
pub struct AgentStatus {
    /// Epochs started.
    pub starts: AtomicU64,
    /// Starts after a failure.
    pub restarts: AtomicU64,
    /// Hot restarts (a changed input).
    pub hot_restarts: AtomicU64,
    /// Exits the agent did not ask for.
    pub unexpected_exits: AtomicU64,
    /// The newest running epoch.
    pub epoch: AtomicU64,
    /// The last unexpected exit, as text.
    pub last_exit: Mutex<Option<String>>,
}

impl AgentStatus {
    /// The agent's metrics in Prometheus text format.
    pub fn prometheus(&self) -> String {
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        };
        metric(
            "pilot_agent_envoy_starts_total",
            "counter",
            "Envoy processes (epochs) started.",
            self.starts.load(Ordering::Relaxed),
        );
        metric(
            "pilot_agent_envoy_restarts_total",
            "counter",
            "Envoy starts after an unexpected exit.",
            self.restarts.load(Ordering::Relaxed),
        );
        metric(
            "pilot_agent_envoy_hot_restarts_total",
            "counter",
            "Hot restarts after a changed input (file, labels, SIGHUP).",
            self.hot_restarts.load(Ordering::Relaxed),
        );
        metric(
            "pilot_agent_envoy_unexpected_exits_total",
            "counter",
            "Envoy exits the agent did not ask for.",
            self.unexpected_exits.load(Ordering::Relaxed),
        );
        metric(
            "pilot_agent_envoy_epoch",
            "gauge",
            "The newest running Envoy epoch.",
            self.epoch.load(Ordering::Relaxed),
        );
        if let Some(exit) = self.last_exit.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = writeln!(
                out,
                "# HELP pilot_agent_envoy_last_exit_info The last unexpected exit.\n# TYPE pilot_agent_envoy_last_exit_info gauge\npilot_agent_envoy_last_exit_info{{exit=\"{}\"}} 1",
                exit.replace('\\', "\\\\").replace('"', "\\\"")
            );
        }
        out
    }
}

#[derive(Clone)]
struct StatusState {
    admin: Admin,
    status: Arc<AgentStatus>,
}

/// Binds the status port; the server runs until the returned task is
/// aborted.
pub async fn serve(
    addr: SocketAddr,
    admin: Admin,
    status: Arc<AgentStatus>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), AgentError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| AgentError::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| AgentError::Bind { addr, source })?;
    let app = Router::new()
        .route("/healthz/ready", get(ready))
        .route("/stats/prometheus", get(prometheus))
        .with_state(StatusState { admin, status });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "status server stopped");
        }
    });
    Ok((bound, task))
}

async fn ready(State(state): State<StatusState>) -> Response {
    match state.admin.readiness().await {
        Readiness::Ready => (StatusCode::OK, "LIVE, listeners and clusters received\n").into_response(),
        Readiness::NotReady(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

async fn prometheus(State(state): State<StatusState>) -> Response {
    let envoy = state
        .admin
        .get("/stats/prometheus")
        .await
        .unwrap_or_else(|e| format!("# envoy stats unavailable: {e}\n"));
    let body = format!("{envoy}{}", state.status.prometheus());
    (
        [(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        body,
    )
        .into_response()
}
