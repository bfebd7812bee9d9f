//! The probes: `/healthz` (the process answers) and `/readyz` (ready to
//! serve). Ready means every cache has synced and the configuration store
//! answers: a probe asks the store for its current revision every second;
//! while it fails or does not answer in time, `/readyz` is 503 with the
//! reason, so a load balancer stops sending writes that would fail (and
//! lists that would be stale).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pilot_model::ConfigWatch;
use tokio::sync::watch;

/// How often the store is probed.
const EVERY: Duration = Duration::from_secs(1);
/// How long a probe may take before the store counts as unreachable.
const TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`: 200 while the process serves requests.
pub(crate) async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 once every cache has synced and while the store
/// answers; 503 with the reason otherwise.
pub(crate) async fn readyz(State(readiness): State<Readiness>) -> Response {
    if let Some(problem) = readiness.backend_health.problem() {
        (StatusCode::SERVICE_UNAVAILABLE, problem).into_response()
    } else if (readiness.synced)() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches have not synced yet").into_response()
    }
}

/// What `/readyz` reads: the store probe's verdict and whether the caches
/// have synced.
#[derive(Clone)]
pub(crate) struct Readiness {
    /// Whether the configuration store answers.
    pub(crate) backend_health: Arc<BackendHealth>,
    /// True once every cache has synced.
    pub(crate) synced: Arc<dyn Fn() -> bool + Send + Sync>,
}

/// The last probe's verdict.
#[derive(Debug, Default)]
pub(crate) struct BackendHealth {
    problem: Mutex<Option<String>>,
}

impl BackendHealth {
    /// Why the store is not usable, if it is not.
    pub(crate) fn problem(&self) -> Option<String> {
        self.problem.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, problem: Option<String>) {
        let mut current = self.problem.lock().unwrap_or_else(|p| p.into_inner());
        if *current != problem {
            match &problem {
                Some(reason) => tracing::warn!(%reason, "configuration store unreachable: not ready"),
                None => tracing::info!("configuration store reachable again"),
            }
            *current = problem;
        }
    }
}

/// Probes `backend` until `shutdown`.
pub(crate) async fn probe(
    backend: Arc<dyn ConfigWatch>,
    health: Arc<BackendHealth>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let verdict = match tokio::time::timeout(TIMEOUT, backend.current_revision()).await {
            Ok(Ok(_)) => None,
            Ok(Err(error)) => {
                tracing::debug!(error = %error.details(), "store probe failed");
                Some(format!("the configuration store failed: {error}"))
            }
            Err(_) => Some(format!(
                "the configuration store did not answer within {TIMEOUT:?}"
            )),
        };
        health.set(verdict);
        tokio::select! {
            () = tokio::time::sleep(EVERY) => {}
            () = crate::shutdown::closed(&mut shutdown) => return,
        }
    }
}
