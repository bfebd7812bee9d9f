//! Every route of the REST listener: the configuration API, the OpenAPI
//! document, `/metrics`, the `/debug/` pages and the agents' proxy events
//! behind bearer tokens (when configured), and the probes `/healthz` and
//! `/readyz` open to all; every request counted in `/metrics`.

use axum::Router;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::api::{self, ApiError};
use crate::debug::{certificates, proxy_status, quarantine, registryz, scope};
use crate::distribution::proxy_events;
use crate::state::AppState;
use crate::{auth, health, metrics};

/// Every route of the server.
pub(crate) fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/version", get(api::discovery::version))
        .route("/api", get(api::discovery::core))
        .route("/apis", get(api::discovery::groups))
        .route("/apis/{group}", get(api::discovery::group))
        .route("/apis/{group}/{version}", get(api::discovery::resources))
        .route("/apis/{group}/{version}/{plural}", get(api::resources::list_all))
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
            get(api::resources::list_namespaced)
                .post(api::resources::create)
                .delete(api::resources::delete_collection),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
            get(api::resources::get_object)
                .put(api::resources::replace)
                .patch(api::patch::patch)
                .delete(api::resources::delete),
        )
        .route("/metrics", get(metrics::handler))
        .route("/debug/proxy-status", get(proxy_status::handler))
        .route("/debug/registryz", get(registryz::handler))
        .route("/debug/quarantine", get(quarantine::handler))
        .route("/debug/scope", get(scope::handler))
        .route("/debug/certificates", get(certificates::handler))
        .route("/v1/proxy-events", post(proxy_events::handler))
        .route("/openapi.json", get(api::openapi::handler))
        .route("/openapi/v2", get(api::kube_openapi::v2))
        .route("/openapi/v3", get(api::kube_openapi::v3_index))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(api::kube_openapi::v3_group_version),
        )
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the server could not find the requested resource; see /openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(from_fn_with_state(state.clone(), auth::rest::require));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .merge(protected)
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(from_fn_with_state(state.clone(), metrics::count))
        .with_state(state)
}
