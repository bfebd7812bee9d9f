//! Every route of the API, with its fallbacks: a `NotFound` `Status` for a
//! path it does not serve, `MethodNotAllowed` for a method a path does not
//! take.

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{any, get};

use crate::server::ApiState;
use crate::{ApiError, discovery, kube_openapi, openapi, patch, resources};

/// The API's routes over `state`.
pub(crate) fn router(state: ApiState) -> Router {
    Router::new()
        .route("/version", get(discovery::version))
        .route("/api", get(discovery::core))
        .route("/apis", get(discovery::groups))
        .route("/apis/{group}", get(discovery::group))
        .route("/apis/{group}/{version}", get(discovery::resources))
        // A cluster-scoped kind's collection (a namespaced kind's: only
        // its list across namespaces, `resources::scoped` says 404 else).
        .route("/apis/{group}/{version}/{plural}", any(resources::at_kind))
        .route(
            "/apis/{group}/{version}/{plural}/{name}",
            get(resources::get_object)
                .put(resources::replace)
                .patch(patch::patch)
                .delete(resources::delete),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
            get(resources::list_namespaced)
                .post(resources::create)
                .delete(resources::delete_collection),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
            get(resources::get_object)
                .put(resources::replace)
                .patch(patch::patch)
                .delete(resources::delete),
        )
        .route("/openapi.json", get(openapi::handler))
        .route("/openapi/v2", get(kube_openapi::v2))
        .route("/openapi/v3", get(kube_openapi::v3_index))
        .route(
            "/openapi/v3/apis/{group}/{version}",
            get(kube_openapi::v3_group_version),
        )
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                "the server could not find the requested resource; see /openapi.json",
            )
        })
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .with_state(state)
}
