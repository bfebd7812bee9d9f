//! Every route of the REST listener: the configuration API
//! (pilot-apiserver, configured from the flags: [`api`]), `/metrics`, the
//! `/debug/` pages and the agents' proxy events, behind bearer tokens
//! (when configured), and the probes `/healthz` and `/readyz` open to all;
//! every request counted in `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use pilot_apiserver::{ApiError, ApiOptions, ApiServer};
use pilot_model::ConfigWatch;
use tokio::sync::watch;

use crate::args::Args;
use crate::debug::{certificates, proxy_status, quarantine, registryz, scope};
use crate::state::AppState;
use crate::{auth, health, metrics, openapi, proxy_events};

/// Every route of the server: `api` beside this server's own.
pub(crate) fn router(state: AppState, api: Router, ui: Option<crate::ui::Settings>) -> Router {
    let console = crate::ui::routes(&state, ui);
    let own = Router::new()
        .route("/metrics", get(metrics::handler))
        .route("/debug/proxy-status", get(proxy_status::handler))
        .route("/debug/registryz", get(registryz::handler))
        .route("/debug/quarantine", get(quarantine::handler))
        .route("/debug/scope", get(scope::handler))
        .route("/debug/certificates", get(certificates::handler))
        .route("/v1/proxy-events", post(proxy_events::handler))
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .with_state(state.clone());
    // The API's fallback (a NotFound Status) answers what neither serves.
    let protected = api
        .merge(own)
        .merge(console)
        .layer(from_fn_with_state(state.clone(), auth::rest::require));
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .with_state(state.clone())
        .merge(protected)
        .method_not_allowed_fallback(|| async { ApiError::method_not_allowed() })
        .layer(from_fn_with_state(state, metrics::count))
}

/// The REST API: writes, and reads of one object, through the Controller
/// (they answer once the cache that feeds xDS has them); lists and
/// watches from `backend` itself, showing only what the Controller admits
/// (validation on read); watches counted in `/metrics` and ended by
/// `shutdown`; this server's routes documented beside the API's in
/// `/openapi.json`, with the bearer scheme when it has tokens.
pub(crate) fn api(
    args: &Args,
    state: &AppState,
    backend: Arc<dyn ConfigWatch>,
    mut shutdown: watch::Receiver<bool>,
) -> Router {
    let controller = Arc::clone(&state.controller);
    ApiServer::new(backend)
        .cache(Arc::clone(&state.controller) as Arc<dyn pilot_model::ConfigStore>)
        .admits(move |config| controller.admits(config).is_ok())
        .watch_observer(Arc::clone(&state.metrics) as Arc<dyn pilot_apiserver::WatchObserver>)
        .shutdown(async move { crate::shutdown::closed(&mut shutdown).await })
        .options({
            let mut options = api_options(args.max_body_bytes, state.tokens.is_some());
            options.watch_cache_events = args.watch_cache_events;
            options.watch_write_interval = args.watch_write_interval;
            if !args.no_ui {
                options.documented_routes.extend(crate::ui::documented_routes());
            }
            options
        })
        .into_router()
}

/// What the API says of this server: its flags in messages, its name, its
/// routes in `/openapi.json`, bearer tokens when it has them.
pub(crate) fn api_options(max_body_bytes: usize, bearer_auth: bool) -> ApiOptions {
    let mut options = ApiOptions::default();
    options.max_body_bytes = max_body_bytes;
    options.max_body_bytes_setting = Some("--max-body-bytes".into());
    options.body_deadline_setting = Some("--body-read-timeout-ms".into());
    options.server_name = "pilot-discovery".into();
    options.description =
        "Kubernetes-style REST API of pilot-discovery: Istio routing configuration, probes, metrics and proxy status."
            .into();
    options.bearer_auth = bearer_auth;
    options.documented_routes = openapi::routes();
    options
}
