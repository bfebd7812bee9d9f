//! `GET /debug/scope?proxy=ID`: which hosts a connected proxy's scope
//! holds and why (the Sidecar or default that decided it, the egress host
//! entry that imported each host), at the latest push, for `pilotctl
//! proxy-config scope`. `ID` is the proxy's node id or its id
//! (`<pod>.<namespace>`).

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use pilot_ads::XdsServer;
use pilot_api::networking::OutboundMode;
use pilot_xds::Proxy;
use serde::Deserialize;
use serde_json::{Value, json};

/// The query: which proxy.
#[derive(Deserialize)]
pub(crate) struct ScopeQuery {
    proxy: String,
}

/// `{"proxy", "namespace", "decidedBy", "outboundTrafficPolicy", "hosts": [{"host", "reason"}]}`;
/// 404 for a proxy not connected here, 503 before the first push.
pub(crate) async fn handler(
    State(xds): State<XdsServer>,
    Query(query): Query<ScopeQuery>,
) -> Result<Json<Value>, (StatusCode, Json<Value>)> {
    let error = |code: StatusCode, message: String| (code, Json(json!({ "error": message })));
    let node = xds
        .status()
        .into_iter()
        .map(|p| p.node_id)
        .find(|node| *node == query.proxy || Proxy::from_node_id(node).is_ok_and(|p| p.id == query.proxy))
        .ok_or_else(|| {
            error(
                StatusCode::NOT_FOUND,
                format!("no proxy {} is connected to this replica", query.proxy),
            )
        })?;
    let proxy = Proxy::from_node_id(&node).map_err(|e| error(StatusCode::BAD_REQUEST, e.to_string()))?;
    let scope = xds.scope(&proxy).ok_or_else(|| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "no push has happened yet".to_string(),
        )
    })?;
    let hosts: Vec<Value> = scope
        .hosts
        .iter()
        .map(|(host, reason)| json!({"host": host, "reason": reason.to_string()}))
        .collect();
    Ok(Json(json!({
        "proxy": node,
        "namespace": scope.namespace,
        "decidedBy": scope.origin.to_string(),
        "outboundTrafficPolicy": match scope.outbound {
            OutboundMode::RegistryOnly => "REGISTRY_ONLY",
            OutboundMode::AllowAny => "ALLOW_ANY",
        },
        "hosts": hosts,
    })))
}
