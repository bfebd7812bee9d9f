//! Validation on read, for operators: `GET /debug/quarantine` lists the
//! objects the store holds that fail their kind's validation (written
//! around the API: `etcdctl put`, `kubectl apply` without the CRD schema,
//! a rule made stricter since), and `/metrics` counts them.
//!
//! The Controller ([`pilot_store::Quarantine`]) keeps such objects out of
//! its cache, so they are never pushed to proxies and REST `get` does not
//! serve them; the REST API leaves them out of lists and watches, which
//! read the backend itself (`crate::router::api` gives it the Controller's
//! verdict). A later valid write (or a delete) in the store
//! brings the key back (or forgets it).
//!
//! With `--data-dir`, objects the journal finds invalid when the server
//! starts are not loaded at all (they stay in the directory's
//! `quarantine.jsonl`); they are listed and counted here too, with the
//! reason `Journal`, until the next start.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use pilot_model::{ConfigKey, FieldError};
use pilot_store::Controller;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

/// What the data directory's journal held back at start: objects that no
/// longer validate (empty without `--data-dir`).
pub(crate) type JournalQuarantine = Arc<Vec<pilot_store_memory::journal::Quarantined>>;

/// `{"items": [{"kind", "namespace", "name", "resourceVersion", "reason"
/// (`Invalid`; `Undecodable`: not an object at all; `Journal`: held back
/// by `--data-dir`'s journal at start), "errors": [{"field",
/// "message"}]}]}`, ordered by kind, namespace and name.
pub(crate) async fn handler(
    State(controller): State<Arc<Controller>>,
    State(journal): State<JournalQuarantine>,
) -> Json<Value> {
    Json(listing(&controller, &journal))
}

/// The body of `GET /debug/quarantine`.
pub(crate) fn listing(controller: &Controller, journal: &JournalQuarantine) -> Value {
    let held = controller.quarantine().list();
    let from_controller = held.iter().map(|held| {
        item(
            &held.key,
            held.resource_version.as_deref(),
            held.reason.as_str(),
            &held.errors,
        )
    });
    let from_journal = journal.iter().map(|held| {
        item(
            &held.key,
            held.object.meta.resource_version.as_deref(),
            "Journal",
            &held.errors,
        )
    });
    let mut items: Vec<Value> = from_controller.chain(from_journal).collect();
    let order =
        |v: &Value| ["kind", "namespace", "name"].map(|f| v[f].as_str().unwrap_or_default().to_string());
    items.sort_by_key(order);
    json!({ "items": items })
}

/// One listed object.
fn item(key: &ConfigKey, resource_version: Option<&str>, reason: &str, errors: &[FieldError]) -> Value {
    let errors: Vec<Value> = errors
        .iter()
        .map(|e| json!({"field": e.path, "message": e.message}))
        .collect();
    json!({
        "kind": key.kind,
        "namespace": key.namespace,
        "name": key.name,
        "resourceVersion": resource_version,
        "reason": reason,
        "errors": errors,
    })
}

/// `pilot_config_quarantined{kind}` (gauge: held now) and
/// `pilot_config_rejected{kind}` (counter: each key at each version once),
/// read from the Controller at each scrape (plus what the journal held
/// back at start); every cached kind appears, with 0 when it has none.
pub(crate) struct QuarantineMetrics {
    /// The Controller whose quarantine is counted.
    pub controller: Arc<Controller>,
    /// What `--data-dir`'s journal held back at start.
    pub journal: JournalQuarantine,
}

impl std::fmt::Debug for QuarantineMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuarantineMetrics").finish_non_exhaustive()
    }
}

impl Collector for QuarantineMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let quarantine = self.controller.quarantine();
        let mut counts = quarantine.counts();
        let mut rejected = quarantine.rejected();
        for held in self.journal.iter() {
            *counts.entry(held.key.kind.clone()).or_default() += 1;
            *rejected.entry(held.key.kind.clone()).or_default() += 1;
        }
        let mut held = encoder.encode_descriptor(
            "pilot_config_quarantined",
            "Objects in the configuration store that fail validation, held out of the cache (not pushed, not served), by kind",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        for kind in self.controller.kinds() {
            let count = counts.get(kind).copied().unwrap_or(0);
            ConstGauge::new(count as i64).encode(held.encode_family(&[("kind", kind.clone())])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "pilot_config_rejected",
            "Objects delivered by the configuration store that failed validation (each key at each version once), by kind",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for kind in self.controller.kinds() {
            let count = rejected.get(kind).copied().unwrap_or(0);
            ConstCounter::new(count).encode(family.encode_family(&[("kind", kind.clone())])?)?;
        }
        Ok(())
    }
}
