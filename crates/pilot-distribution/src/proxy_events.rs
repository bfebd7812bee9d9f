//! pilot-agent's reports of Envoy's process life ([`ProxyEvents`]:
//! started, exited with a code or signal, restarting, retry budget spent,
//! stopped), kept per proxy in this replica's memory, published with the
//! proxy's record ([`crate::Replicas`]) and counted ([`ProxyEventCounts`]).
//! pilot-discovery takes them at `POST /v1/proxy-events` and shows them in
//! `/debug/proxy-status` (restarts, last exit) and `/metrics`.
//!
//! Each report carries the agent's cumulative restart count, so a lost
//! report is healed by the next one; the count only moves forward.

use std::collections::BTreeMap;
use std::sync::Mutex;

use pilot_model::ProcessReport;
use pilot_proxy_api::{EventKind, ProxyEvent};

/// Proxies remembered at most; the least recently reporting is forgotten
/// first.
const MAX_PROXIES: usize = 10_000;

/// What is known of one proxy's process life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct ProxyProcess {
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
    fn report(&self) -> ProcessReport {
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

/// The agents' counts, for metrics: what [`ProxyEvents`] recorded since it
/// started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProxyEventCounts {
    /// Envoy restarts after a failure, as the agents counted them.
    pub restarts: u64,
    /// Envoy exits the agents did not ask for, with an exit code.
    pub exits_with_code: u64,
    /// Envoy exits the agents did not ask for, by a signal.
    pub exits_by_signal: u64,
    /// Agents that gave up restarting Envoy.
    pub budget_exhausted: u64,
}

/// Every proxy's record of the reports its agent posted (at most 10,000
/// proxies: the one that reported least recently is forgotten first),
/// plus counts.
#[derive(Debug, Default)]
pub struct ProxyEvents {
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
    /// Records `event`. The caller checks that its sender may report on
    /// its node (pilot-discovery: the agent's credential).
    pub fn record(&self, event: &ProxyEvent) {
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
    fn get(&self, node: &str) -> Option<ProxyProcess> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .proxies
            .get(node)
            .cloned()
    }

    /// Every proxy's record, by node id.
    pub fn reports(&self) -> BTreeMap<String, ProcessReport> {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .proxies
            .iter()
            .map(|(node, process)| (node.clone(), process.report()))
            .collect()
    }

    /// The counts so far.
    pub fn counts(&self) -> ProxyEventCounts {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let exits = |label| inner.unexpected_exits.get(label).copied().unwrap_or(0);
        ProxyEventCounts {
            restarts: inner.restarts_total,
            exits_with_code: exits("code"),
            exits_by_signal: exits("signal"),
            budget_exhausted: inner.budget_exhausted_total,
        }
    }
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
        let counts = events.counts();
        assert_eq!(counts.restarts, 1);
        assert_eq!(counts.exits_by_signal, 1);
        assert_eq!(counts.exits_with_code, 0);
        let reports = events.reports();
        let report = &reports["sidecar~10.0.0.1~a.default~default.svc.cluster.local"];
        assert_eq!(report.restarts, 1);
        assert_eq!(report.last_exit.as_deref(), Some("signal 9 (SIGKILL)"));
    }
}
