//! The proxy status endpoint: per connected proxy and xDS type, the
//! versions sent and ACKed, the last NACK, and a one-word state; the
//! objects left out of its configuration because it rejected them
//! (`withheld`: kind, namespace, name, the version rejected, the type and
//! its message); beside
//! it, what pilot-agent reported of Envoy's process life (restarts, the last
//! unexpected exit), also for proxies that are not connected now.
//!
//! With several replicas on one store, every replica lists every live
//! replica's proxies, each with the `replica` serving it: its own from
//! memory, the others' from their published records
//! ([`pilot_distribution::Replicas`]), plus a `replicas` list. Process
//! reports are those posted to this replica.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use pilot_ads::{ProxyStatus, TypeStatus};
use pilot_distribution::{ProxyEvents, Replicas};
use pilot_model::ProcessReport;
use serde_json::{Value, json};

/// `SYNCED` (ACKed what was last sent), `NACKED` (rejected what was last
/// sent), `STALE` (sent, not answered yet) or `NOT SENT`.
pub(crate) fn state(status: &TypeStatus) -> &'static str {
    match (&status.sent, &status.nack) {
        (None, _) => "NOT SENT",
        _ if status.synced() => "SYNCED",
        (Some(sent), Some(nack)) if &nack.version == sent => "NACKED",
        _ => "STALE",
    }
}

/// Every proxy's status as JSON, each with the replica serving it, with
/// the agents' reports (`events`): a proxy known only from reports is
/// listed with `connected: false`.
pub(crate) fn to_json(
    proxies: &[(String, ProxyStatus)],
    events: &std::collections::BTreeMap<String, ProcessReport>,
) -> Value {
    let connected: std::collections::BTreeSet<&str> =
        proxies.iter().map(|(_, p)| p.node_id.as_str()).collect();
    let mut list: Vec<Value> = proxies
        .iter()
        .map(|(replica, proxy)| {
            // A ztunnel's types (WDS, WADS), an Envoy's (CDS, EDS, LDS, RDS,
            // and SRDS for an edge proxy taking routes from scopes).
            let types: serde_json::Map<String, Value> = proxy
                .types_shown()
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
            json!({
                "node": proxy.node_id,
                "nodeName": proxy.node_name,
                "replica": replica,
                "connected": true,
                "incremental": proxy.incremental,
                "types": types,
                "withheld": proxy.withheld,
                "process": record_json(events.get(&proxy.node_id)),
            })
        })
        .collect();
    for (node, record) in events {
        if !connected.contains(node.as_str()) {
            list.push(json!({
                "node": node,
                "connected": false,
                "types": {},
                "process": record_json(Some(record)),
            }));
        }
    }
    json!({"proxies": list})
}

/// `GET /debug/proxy-status`: every live replica's proxies, and the
/// replicas (name, addresses, proxies, whether it writes status).
pub(crate) async fn handler(
    State(replicas): State<Arc<Replicas>>,
    State(events): State<Arc<ProxyEvents>>,
) -> Json<Value> {
    let mut reports = std::collections::BTreeMap::new();
    let proxies: Vec<(String, ProxyStatus)> = replicas
        .all_proxies()
        .into_iter()
        .map(|(replica, mut proxy)| {
            // Reports posted to the replica a proxy's agent talks to,
            // published with the proxy's record.
            if let Some(report) = proxy.process.take() {
                reports.insert(proxy.node_id.clone(), report);
            }
            (replica, ProxyStatus::from_record(proxy))
        })
        .collect();
    // Reports posted here are the freshest this replica has.
    reports.extend(events.reports());
    let mut value = to_json(&proxies, &reports);
    let own = replicas.own_record();
    let list: Vec<Value> = std::iter::once(own)
        .chain(replicas.others())
        .map(|record| {
            json!({
                "name": record.replica,
                "restAddress": record.rest_address,
                "xdsAddress": record.xds_address,
                "proxies": record.proxies.len(),
                "writer": record.writer,
                "published": humantime::format_rfc3339_seconds(record.published).to_string(),
            })
        })
        .collect();
    value["replica"] = json!(replicas.name());
    value["replicas"] = Value::Array(list);
    Json(value)
}

/// A process report as JSON.
fn record_json(record: Option<&ProcessReport>) -> Value {
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

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_ads::Nack;

    #[test]
    fn states_say_what_the_proxy_did_with_the_last_push() {
        let status = |sent: Option<&str>, acked: Option<&str>, nack: Option<&str>| {
            let mut status = TypeStatus::default();
            status.sent = sent.map(str::to_string);
            status.acked = acked.map(str::to_string);
            status.nack = nack.map(|version| Nack::new(version, "bad regex"));
            status
        };
        assert_eq!(state(&status(None, None, None)), "NOT SENT");
        assert_eq!(state(&status(Some("3"), Some("3"), None)), "SYNCED");
        assert_eq!(state(&status(Some("3"), Some("2"), None)), "STALE");
        assert_eq!(state(&status(Some("3"), Some("2"), Some("3"))), "NACKED");
        // An old NACK does not hide a later ACK, nor make a newer push NACKED.
        assert_eq!(state(&status(Some("4"), Some("4"), Some("3"))), "SYNCED");
        assert_eq!(state(&status(Some("4"), Some("2"), Some("3"))), "STALE");
        let mut proxy = ProxyStatus::default();
        proxy.node_id = "sidecar~1.2.3.4~a.default~default.svc.cluster.local".into();
        proxy.types = [("CDS", status(Some("3"), Some("2"), Some("3")))]
            .into_iter()
            .collect();
        proxy.push = Some(3);
        let json = to_json(&[("pilot-1".to_string(), proxy)], &Default::default());
        assert_eq!(json["proxies"][0]["replica"], "pilot-1");
        assert_eq!(json["proxies"][0]["types"]["CDS"]["state"], "NACKED");
        assert_eq!(json["proxies"][0]["types"]["CDS"]["nack"]["message"], "bad regex");
        assert_eq!(json["proxies"][0]["types"]["RDS"]["state"], "NOT SENT");
    }
}
