//! The proxy status endpoint: per connected proxy and xDS type, the
//! versions sent and ACKed, the last NACK, and a one-word state.

use axum::Json;
use axum::extract::State;
use pilot_xds::{ProxyStatus, TYPES, TypeStatus};
use serde_json::{Value, json};

use crate::AppState;

/// `SYNCED` (ACKed what was last sent), `NACKED` (rejected what was last
/// sent), `STALE` (sent, not answered yet) or `NOT SENT`.
pub fn state(status: &TypeStatus) -> &'static str {
    match (&status.sent, &status.nack) {
        (None, _) => "NOT SENT",
        _ if status.synced() => "SYNCED",
        (Some(sent), Some(nack)) if &nack.version == sent => "NACKED",
        _ => "STALE",
    }
}

/// Every proxy's status as JSON.
pub fn to_json(proxies: &[ProxyStatus]) -> Value {
    let proxies: Vec<Value> = proxies
        .iter()
        .map(|proxy| {
            let types: serde_json::Map<String, Value> = TYPES
                .iter()
                .map(|name| {
                    let status = proxy.types.get(name).cloned().unwrap_or_default();
                    let value = json!({
                        "state": state(&status),
                        "sent": status.sent,
                        "acked": status.acked,
                        "nack": status.nack.as_ref().map(|n| json!({"version": n.version, "message": n.message})),
                    });
                    (name.to_string(), value)
                })
                .collect();
            json!({"node": proxy.node_id, "incremental": proxy.incremental, "types": types})
        })
        .collect();
    json!({"proxies": proxies})
}

/// `GET /debug/proxy-status`.
pub async fn handler(State(state): State<AppState>) -> Json<Value> {
    Json(to_json(&state.xds.status()))
}
