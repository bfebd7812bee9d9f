//! `POST /v1/proxy-events`: pilot-agent's reports of Envoy's process life,
//! checked against the caller's credential and recorded in this replica's
//! [`ProxyEvents`] (pilot-distribution), which publishes them with the
//! proxy's record; `/debug/proxy-status` and `/metrics` show them.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pilot_apiserver::ApiError;
use pilot_distribution::ProxyEvents;
use pilot_proxy_api::ProxyEvent;

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
