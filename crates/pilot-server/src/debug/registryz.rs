//! `GET /debug/registryz`: the services of the registries and the labels of
//! their instances, for `pilotctl analyze` (as Istio's `/debug/registryz`).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use pilot_model::ServiceDiscovery;
use serde_json::{Value, json};

/// `{"services": [{"hostname", "ports": [{name, port, protocol}], "instances": [{address, port, labels}]}]}`,
/// by hostname.
pub(crate) async fn handler(State(discovery): State<Arc<dyn ServiceDiscovery>>) -> Json<Value> {
    let mut services = discovery.services();
    services.sort_by(|a, b| a.hostname.cmp(&b.hostname));
    let services: Vec<Value> = services
        .iter()
        .map(|service| {
            let instances: Vec<Value> = discovery
                .instances(&service.hostname, &[], &[])
                .iter()
                .map(|instance| {
                    json!({
                        "address": instance.endpoint.address.to_string(),
                        "port": instance.endpoint.port,
                        "labels": instance.labels.0,
                        "node": instance.workload.as_ref().and_then(|w| w.node.clone()),
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
