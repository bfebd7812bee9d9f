//! `GET /debug/registryz`: the services of the registries and the labels of
//! their instances, for `pilotctl analyze` (as Istio's `/debug/registryz`).

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

/// `{"services": [{"hostname", "ports": [{name, port, protocol}], "instances": [{address, port, labels}]}]}`,
/// by hostname.
pub(crate) async fn handler(State(state): State<AppState>) -> Json<Value> {
    let mut services = state.discovery.services();
    services.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    let services: Vec<Value> = services
        .iter()
        .map(|service| {
            let instances: Vec<Value> = state
                .discovery
                .instances(&service.hostname, &[], &[])
                .iter()
                .map(|instance| {
                    json!({
                        "address": instance.endpoint.address.to_string(),
                        "port": instance.endpoint.port,
                        "labels": instance.labels.0,
                    })
                })
                .collect();
            let ports: Vec<Value> = service
                .ports
                .iter()
                .map(|p| json!({"name": p.name, "port": p.port, "protocol": p.protocol}))
                .collect();
            json!({"hostname": service.hostname, "ports": ports, "instances": instances})
        })
        .collect();
    Json(json!({ "services": services }))
}
