//! `/metrics` in the Prometheus text format: REST requests, pushes, push
//! latency, connected proxies, NACKs, configuration objects per kind.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pilot_store::Controller;
use pilot_xds::XdsServer;

use crate::AppState;

/// Upper bounds of the push latency histogram, in seconds.
const BUCKETS: [f64; 10] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// The server's counters.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency_buckets: [AtomicU64; BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
}

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, method: &str, code: u16) {
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *requests.entry((method.to_string(), code)).or_default() += 1;
    }

    /// Records one push's latency.
    pub fn push_latency(&self, latency: Duration) {
        let seconds = latency.as_secs_f64();
        for (bound, count) in BUCKETS.iter().zip(&self.latency_buckets) {
            if seconds <= *bound {
                count.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        self.latency_sum_micros
            .fetch_add(latency.as_micros() as u64, Ordering::Relaxed);
    }

    /// The exposition text.
    pub fn render(&self, xds: &XdsServer, controller: &Controller) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP pilot_rest_requests_total REST API requests answered, by method and status code."
        );
        let _ = writeln!(out, "# TYPE pilot_rest_requests_total counter");
        for ((method, code), count) in self.requests.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "pilot_rest_requests_total{{method=\"{method}\",code=\"{code}\"}} {count}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP pilot_xds_pushes_total Configuration versions pushed to proxies."
        );
        let _ = writeln!(out, "# TYPE pilot_xds_pushes_total counter");
        let _ = writeln!(out, "pilot_xds_pushes_total {}", xds.version().unwrap_or(0));
        let _ = writeln!(
            out,
            "# HELP pilot_xds_push_latency_seconds From the first configuration or registry change to the push that carries it."
        );
        let _ = writeln!(out, "# TYPE pilot_xds_push_latency_seconds histogram");
        for (bound, count) in BUCKETS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(
                out,
                "pilot_xds_push_latency_seconds_bucket{{le=\"{bound}\"}} {}",
                count.load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "pilot_xds_push_latency_seconds_bucket{{le=\"+Inf\"}} {count}"
        );
        let sum = self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "pilot_xds_push_latency_seconds_sum {sum}");
        let _ = writeln!(out, "pilot_xds_push_latency_seconds_count {count}");
        let status = xds.status();
        let _ = writeln!(
            out,
            "# HELP pilot_xds_connected_proxies Proxies with an open ADS stream."
        );
        let _ = writeln!(out, "# TYPE pilot_xds_connected_proxies gauge");
        let _ = writeln!(out, "pilot_xds_connected_proxies {}", status.len());
        let _ = writeln!(
            out,
            "# HELP pilot_xds_nacked_proxies Connected proxies whose last response of a type was a NACK."
        );
        let _ = writeln!(out, "# TYPE pilot_xds_nacked_proxies gauge");
        let nacks_total = xds.nacks_total();
        for name in pilot_xds::TYPES {
            let nacked = status
                .iter()
                .filter(|p| {
                    p.types
                        .get(name)
                        .is_some_and(|t| crate::proxy_status::state(t) == "NACKED")
                })
                .count();
            let _ = writeln!(out, "pilot_xds_nacked_proxies{{type=\"{name}\"}} {nacked}");
        }
        let _ = writeln!(
            out,
            "# HELP pilot_xds_nacks_total NACKs received from proxies since the server started."
        );
        let _ = writeln!(out, "# TYPE pilot_xds_nacks_total counter");
        let _ = writeln!(out, "pilot_xds_nacks_total {nacks_total}");
        let _ = writeln!(
            out,
            "# HELP pilot_config_objects Configuration objects in the cache, by kind."
        );
        let _ = writeln!(out, "# TYPE pilot_config_objects gauge");
        for kind in controller.kinds() {
            let count = controller.list_cached(kind, None).len();
            let _ = writeln!(out, "pilot_config_objects{{kind=\"{kind}\"}} {count}");
        }
        crate::xds_auth::render_metrics(xds, &mut out);
        out
    }
}

/// Middleware: counts every answered request.
pub async fn count(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let response = next.run(request).await;
    state.metrics.request(&method, response.status().as_u16());
    response
}

/// `GET /metrics`.
pub async fn handler(State(state): State<AppState>) -> Response {
    let text = state.metrics.render(&state.xds, &state.controller);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// Records every push's latency (from the first configuration or registry
/// change it carries to its publication, as the ADS server reports it)
/// until `shutdown`.
pub async fn track_pushes(
    metrics: std::sync::Arc<Metrics>,
    xds: XdsServer,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let mut pushes = xds.subscribe_pushes();
    loop {
        tokio::select! {
            push = pushes.recv() => match push {
                Ok(push) => {
                    if let Some(latency) = push.latency {
                        metrics.push_latency(latency);
                    }
                }
                // Samples missed; the counters stay right.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            () = crate::closed(&mut shutdown) => return,
        }
    }
}
