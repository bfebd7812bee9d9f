//! `POST /v1/proxy-events`: pilot-agent's reports of Envoy's process life
//! (started, exited with a code or signal, restarting, retry budget spent,
//! stopped), kept per proxy in this replica's memory and shown by
//! `/debug/proxy-status` (restarts, last exit) and `/metrics`.
//!
//! Each report carries the agent's cumulative restart count, so a lost
//! report is healed by the next one; the count only moves forward.

use std::collections::BTreeMap;

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pilot_model::ProcessReport;
use pilot_proxy_api::{EventKind, ProxyEvent};
use serde_json::{Value, json};

use crate::api::ApiError;

/// Proxies remembered at most; the least recently reporting is forgotten
/// first.
const MAX_PROXIES: usize = 10_000;

/// What is known of one proxy's process life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProxyProcess {
    /// Restarts after failures (the agent's count).
    pub restarts: u64,
    /// The newest epoch started.
    pub epoch: u32,
    /// The last unexpected exit: `signal 9 (SIGKILL)`, `exit code 1`.
    pub last_exit: Option<String>,
    /// The agent's message with it.
    pub last_exit_message: Option<String>,
    /// The last report's kind, as posted (`started`, `exited`, ...).
    pub last_event: String,
    /// When the last report was made (agent's clock, ms since the epoch).
    pub time_ms: u64,
    /// Order of arrival, for forgetting the oldest.
    seq: u64,
}

impl ProxyProcess {
    /// The record as other replicas see it (published with the proxy).
    pub(crate) fn report(&self) -> ProcessReport {
        ProcessReport {
            restarts: self.restarts,
            epoch: self.epoch,
            last_exit: self.last_exit.clone(),
            last_exit_message: self.last_exit_message.clone(),
            last_event: self.last_event.clone(),
            time_ms: self.time_ms,
        }
    }
}

/// Every proxy's record, plus counters for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct ProxyEvents {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    proxies: BTreeMap<String, ProxyProcess>,
    seq: u64,
    unexpected_exits: BTreeMap<&'static str, u64>,
    restarts_total: u64,
    budget_exhausted_total: u64,
}

impl ProxyEvents {
    /// Records `event`.
    pub(crate) fn record(&self, event: &ProxyEvent) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.seq += 1;
        let seq = inner.seq;
        if !inner.proxies.contains_key(&event.node) && inner.proxies.len() >= MAX_PROXIES {
            let oldest = inner
                .proxies
                .iter()
                .min_by_key(|(_, r)| r.seq)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                inner.proxies.remove(&oldest);
            }
        }
        let record = inner.proxies.entry(event.node.clone()).or_default();
        let new_restarts = event.restarts.saturating_sub(record.restarts);
        record.restarts = record.restarts.max(event.restarts);
        record.seq = seq;
        record.time_ms = event.time_ms;
        record.last_event = event.kind.as_str().to_string();
        if event.kind == EventKind::Started {
            record.epoch = event.epoch;
        }
        let mut exit_label = None;
        if event.kind == EventKind::Exited && !event.expected {
            let (text, label) = match (event.signal, event.exit_code) {
                (Some(signal), _) => (format!("signal {signal}{}", signal_name(signal)), "signal"),
                (None, Some(code)) => (format!("exit code {code}"), "code"),
                (None, None) => ("exited".to_string(), "code"),
            };
            record.last_exit = Some(text);
            record.last_exit_message = event.message.clone();
            exit_label = Some(label);
        }
        inner.restarts_total += new_restarts;
        if let Some(label) = exit_label {
            *inner.unexpected_exits.entry(label).or_default() += 1;
        }
        if event.kind == EventKind::BudgetExhausted {
            inner.budget_exhausted_total += 1;
        }
    }

    /// The record of `node`.
    #[cfg(test)]
    pub(crate) fn get(&self, node: &str) -> Option<ProxyProcess> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .proxies
            .get(node)
            .cloned()
    }

    /// Every record, by node id.
    pub(crate) fn all(&self) -> BTreeMap<String, ProxyProcess> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .proxies
            .clone()
    }
}

/// The agents' counters for `/metrics`, read at each scrape.
#[derive(Debug)]
pub(crate) struct Collector(pub Arc<ProxyEvents>);

impl prometheus_client::collector::Collector for Collector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        let (restarts, exits, exhausted) = {
            let inner = self.0.inner.lock().unwrap_or_else(|e| e.into_inner());
            let exits: Vec<(&'static str, u64)> = ["code", "signal"]
                .into_iter()
                .map(|label| (label, inner.unexpected_exits.get(label).copied().unwrap_or(0)))
                .collect();
            (inner.restarts_total, exits, inner.budget_exhausted_total)
        };
        let counter = ConstCounter::new(restarts);
        counter.encode(encoder.encode_descriptor(
            "pilot_proxy_restarts",
            "Envoy restarts after a failure, as pilot-agents reported them",
            None,
            counter.metric_type(),
        )?)?;
        let mut family = encoder.encode_descriptor(
            "pilot_proxy_unexpected_exits",
            "Envoy exits pilot-agents did not ask for, by how Envoy ended",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (reason, count) in exits {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }
        let counter = ConstCounter::new(exhausted);
        counter.encode(encoder.encode_descriptor(
            "pilot_proxy_budget_exhausted",
            "pilot-agents that gave up restarting Envoy",
            None,
            counter.metric_type(),
        )?)?;
        Ok(())
    }
}

/// A process report as JSON, for proxy status.
pub(crate) fn record_json(record: Option<&ProcessReport>) -> Value {
    match record {
        None => json!({"restarts": 0, "epoch": null, "last_exit": null, "last_event": null}),
        Some(r) => json!({
            "restarts": r.restarts,
            "epoch": r.epoch,
            "last_exit": r.last_exit,
            "last_exit_message": r.last_exit_message,
            "last_event": r.last_event,
        }),
    }
}

/// `POST /v1/proxy-events`.
///
/// Posted with an `xds` token (the agent's ADS token), the node id must be
/// one that token may claim on ADS (its namespace), or the report is
/// refused (403).
pub(crate) async fn handler(
    State(events): State<Arc<ProxyEvents>>,
    caller: Option<axum::Extension<pilot_ads::Caller>>,
    body: Bytes,
) -> Response {
    let event: ProxyEvent = match serde_json::from_slice(&body) {
        Ok(event) => event,
        Err(e) => {
            return ApiError::new(StatusCode::BAD_REQUEST, "BadRequest", format!("proxy event: {e}"))
                .into_response();
        }
    };
    let proxy = match pilot_xds::Proxy::from_node_id(&event.node) {
        Ok(proxy) => proxy,
        Err(e) => {
            return ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("proxy event .node: {e}"),
            )
            .into_response();
        }
    };
    if let Some(axum::Extension(caller)) = caller
        && let Err(e) = caller.permits(&proxy)
    {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "Forbidden",
            format!("proxy event .node: {e}"),
        )
        .into_response();
    }
    events.record(&event);
    StatusCode::NO_CONTENT.into_response()
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        6 => " (SIGABRT)",
        9 => " (SIGKILL)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(kind: EventKind, restarts: u64, signal: Option<i32>, expected: bool) -> ProxyEvent {
        ProxyEvent {
            node: "sidecar~10.0.0.1~a.default~default.svc.cluster.local".into(),
            kind,
            epoch: 0,
            pid: None,
            exit_code: None,
            signal,
            expected,
            message: Some("epoch 0 signal 9".into()),
            restarts,
            backoff_ms: None,
            time_ms: 1,
        }
    }

    #[test]
    fn counts_move_forward_and_expected_exits_are_not_failures() {
        let events = ProxyEvents::default();
        events.record(&event(EventKind::Started, 0, None, true));
        events.record(&event(EventKind::Exited, 0, Some(9), false));
        events.record(&event(EventKind::Started, 1, None, true));
        // A drained parent after a hot restart.
        events.record(&event(EventKind::Exited, 1, None, true));
        // A late, reordered report does not move the count back.
        events.record(&event(EventKind::Restarting, 0, None, false));
        let record = events
            .get("sidecar~10.0.0.1~a.default~default.svc.cluster.local")
            .unwrap();
        assert_eq!(record.restarts, 1);
        assert_eq!(record.last_exit.as_deref(), Some("signal 9 (SIGKILL)"));
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register_collector(Box::new(Collector(std::sync::Arc::new(events))));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("pilot_proxy_restarts_total 1\n"), "{text}");
        assert!(
            text.contains("pilot_proxy_unexpected_exits_total{reason=\"signal\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("pilot_proxy_unexpected_exits_total{reason=\"code\"} 0\n"),
            "{text}"
        );
    }
}
