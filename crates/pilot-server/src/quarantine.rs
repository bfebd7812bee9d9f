//! Validation on read, for operators: `GET /debug/quarantine` lists the
//! objects the store holds that fail their kind's validation (written
//! around the API: `etcdctl put`, `kubectl apply` without the CRD schema,
//! a rule made stricter since), and `/metrics` counts them.
//!
//! The Controller ([`pilot_store::Quarantine`]) keeps such objects out of
//! its cache, so they are never pushed to proxies and REST `get` does not
//! serve them; `api.rs` leaves them out of lists and watches, which read
//! the backend itself. A later valid write (or a delete) in the store
//! brings the key back (or forgets it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use pilot_store::Controller;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use serde_json::{Value, json};

use crate::AppState;

/// `{"items": [{"kind", "namespace", "name", "resourceVersion", "reason"
/// (`Invalid`, or `Undecodable`: not an object at all), "errors":
/// [{"field", "message"}]}]}`, ordered by kind, namespace and name.
pub async fn handler(State(state): State<AppState>) -> Json<Value> {
    Json(listing(&state.controller))
}

/// The body of `GET /debug/quarantine`.
pub fn listing(controller: &Controller) -> Value {
    let items: Vec<Value> = controller
        .quarantine()
        .list()
        .into_iter()
        .map(|held| {
            let errors: Vec<Value> = held
                .errors
                .iter()
                .map(|e| json!({"field": e.path, "message": e.message}))
                .collect();
            json!({
                "kind": held.key.kind,
                "namespace": held.key.namespace,
                "name": held.key.name,
                "resourceVersion": held.resource_version,
                "reason": held.reason.as_str(),
                "errors": errors,
            })
        })
        .collect();
    json!({ "items": items })
}

/// `pilot_config_quarantined{kind}` (gauge: held now) and
/// `pilot_config_rejected{kind}` (counter: each key at each version once),
/// read from the Controller at each scrape; every cached kind appears,
/// with 0 when it has none.
pub struct QuarantineMetrics(pub Arc<Controller>);

impl std::fmt::Debug for QuarantineMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuarantineMetrics").finish_non_exhaustive()
    }
}

impl Collector for QuarantineMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let quarantine = self.0.quarantine();
        let counts = quarantine.counts();
        let mut held = encoder.encode_descriptor(
            "pilot_config_quarantined",
            "Objects in the configuration store that fail validation, held out of the cache (not pushed, not served), by kind",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        for kind in self.0.kinds() {
            let count = counts.get(kind).copied().unwrap_or(0);
            ConstGauge::new(count as i64).encode(held.encode_family(&[("kind", kind.clone())])?)?;
        }
        let rejected = quarantine.rejected();
        let mut family = encoder.encode_descriptor(
            "pilot_config_rejected",
            "Objects delivered by the configuration store that failed validation (each key at each version once), by kind",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for kind in self.0.kinds() {
            let count = rejected.get(kind).copied().unwrap_or(0);
            ConstCounter::new(count).encode(family.encode_family(&[("kind", kind.clone())])?)?;
        }
        Ok(())
    }
}
