//! `GET /debug/certificates[?proxy=ID]`: the workload certificates this
//! replica's CA issued, the latest per identity and requesting address,
//! newest first, for `pilotctl proxy-config secret`. With `proxy` (a node
//! id, or the id `<pod>.<namespace>` of a connected proxy), those its
//! agent requested: from the proxy's address, for identities of its
//! namespace.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use pilot_ads::XdsServer;
use pilot_xds::Proxy;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::ca::IssuedCertificates;

/// The query: which proxy, if any.
#[derive(Deserialize)]
pub(crate) struct CertificatesQuery {
    proxy: Option<String>,
}

/// `{"proxy", "certificates": [{"identity", "notAfter", "issuedAt",
/// "caller", "peer"}]}`; 400 for a proxy that is neither a node id nor a
/// connected proxy's id.
pub(crate) async fn handler(
    State(issued): State<Arc<IssuedCertificates>>,
    State(xds): State<XdsServer>,
    Query(query): Query<CertificatesQuery>,
) -> Result<Json<Value>, (StatusCode, Json<Value>)> {
    let Some(wanted) = query.proxy else {
        return Ok(Json(json!({"certificates": issued.to_json(None, None)})));
    };
    let connected = xds
        .status()
        .into_iter()
        .map(|p| p.node_id)
        .find(|node| Proxy::from_node_id(node).is_ok_and(|p| p.id == wanted));
    let node = connected.unwrap_or_else(|| wanted.clone());
    let proxy = Proxy::from_node_id(&node).map_err(|e| {
        (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": format!(
                "{wanted} is neither a node id nor the id of a proxy connected to this replica: {e}"
            )})),
        )
    })?;
    let namespace = proxy.id.rsplit_once('.').map(|(_, ns)| ns.to_string());
    Ok(Json(json!({
        "proxy": node,
        "certificates": issued.to_json(Some(proxy.ip), namespace.as_deref()),
    })))
}
