//! The console at `/ui`: a read-only picture of the mesh, rendered on the
//! server as HTML and inline SVG by our own code ([`html`], [`svg`],
//! [`pages`]), from what this replica knows ([`mesh`]): the objects and
//! their distribution, the analyze findings, the services with their
//! routing drawn, the proxies of every replica.
//!
//! Served on the REST port behind its authentication (the router puts it
//! among the protected routes), on by default and off with `--no-ui`.
//! Only `GET`. Every response carries a strict Content-Security-Policy
//! (nothing but this server's own stylesheet and icon; no script, no
//! frame, no form), so a value that slipped through escaping could still
//! run nothing. Pages need no JavaScript: they reload themselves with
//! `<meta http-equiv=refresh>`.
//!
//! - `/ui`: replicas and proxies by state (SYNCED/STALE/NACKED), objects
//!   with problems first (rejected by a proxy, then analyze errors, then
//!   warnings), services, every finding;
//! - `/ui/objects/KIND/NAMESPACE/NAME`: conditions (`status.conditions`,
//!   `status.validationMessages` when present), which proxies ACKed or
//!   rejected its version and their messages, its findings;
//! - `/ui/services/HOST`: its routing as pilot-routing compiles it, drawn;
//! - `/ui/proxies/ID`: what it was sent, what it rejected, its scope.

mod html;
mod mesh;
mod pages;
mod svg;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use pilot_ads::XdsServer;
use pilot_distribution::Replicas;
use pilot_model::ServiceDiscovery;
use pilot_store::Controller;

use crate::args::Args;
use crate::state::AppState;
use mesh::MeshView;

/// What the console is configured with (from the flags); `None` from
/// [`Settings::from_args`] when `--no-ui` turns it off.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// `--root-namespace`, as the routing model is compiled with it.
    pub(crate) root_namespace: String,
    /// `--default-export-to`.
    pub(crate) default_export_to: Vec<String>,
    /// `--revision`: the objects of another revision are not served, so
    /// not drawn.
    pub(crate) revision: String,
}

impl Settings {
    /// The console's settings, or `None` with `--no-ui`.
    pub(crate) fn from_args(args: &Args) -> Option<Settings> {
        (!args.no_ui).then(|| Settings {
            root_namespace: args.root_namespace.clone(),
            default_export_to: args.default_export_to.clone(),
            revision: args.revision.clone().unwrap_or_default(),
        })
    }
}

/// What the console's handlers read.
#[derive(Clone)]
pub(crate) struct UiState {
    controller: Arc<Controller>,
    discovery: Arc<dyn ServiceDiscovery>,
    replicas: Arc<Replicas>,
    xds: XdsServer,
    settings: Arc<Settings>,
}

/// The console's routes, to be put behind the REST port's
/// authentication; an empty router when `settings` is `None`.
pub(crate) fn routes(state: &AppState, settings: Option<Settings>) -> Router {
    let Some(settings) = settings else {
        return Router::new();
    };
    let state = UiState {
        controller: Arc::clone(&state.controller),
        discovery: Arc::clone(&state.discovery),
        replicas: Arc::clone(&state.replicas),
        xds: state.xds.clone(),
        settings: Arc::new(settings),
    };
    Router::new()
        .route("/ui", get(overview))
        .route("/ui/", get(overview))
        .route("/ui/style.css", get(style))
        .route("/ui/favicon.svg", get(favicon))
        .route("/ui/objects/{kind}/{namespace}/{name}", get(object))
        .route("/ui/services/{host}", get(service))
        .route("/ui/proxies/{id}", get(proxy))
        .route("/ui/{*rest}", get(unknown))
        .with_state(state)
}

/// The console's routes in `/openapi.json` (beside the server's own,
/// `crate::openapi`): HTML pages a read token may get.
pub(crate) fn documented_routes() -> Vec<(String, serde_json::Value)> {
    use serde_json::json;
    let html = |description: &str| json!({"description": description, "content": {"text/html": {"schema": {"type": "string"}}}});
    let param = |name: &str, description: &str| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}, "description": description});
    let page = |summary: &str, params: Vec<serde_json::Value>| {
        json!({"get": {"summary": summary, "x-access": "read", "parameters": params,
            "responses": {"200": html("the page"), "404": html("no such thing (a page that says so)")}}})
    };
    vec![
        (
            "/ui".to_string(),
            json!({"get": {"summary": "The console (off with --no-ui): services, proxies by state per replica, objects with problems first",
                "x-access": "read", "responses": {"200": html("the overview")}}}),
        ),
        (
            "/ui/objects/{kind}/{namespace}/{name}".to_string(),
            page(
                "One object: its conditions, which proxies ACKed or rejected its version, its analyze findings",
                vec![
                    param("kind", "the kind, e.g. VirtualService"),
                    param("namespace", "its namespace"),
                    param("name", "its name"),
                ],
            ),
        ),
        (
            "/ui/services/{host}".to_string(),
            page(
                "One service: its routing drawn (routes, matches, destinations and subsets with weights, endpoints)",
                vec![param("host", "the service's hostname")],
            ),
        ),
        (
            "/ui/proxies/{id}".to_string(),
            page(
                "One proxy: what it was sent, what it rejected, its scope",
                vec![param("id", "a node id (type~ip~id~domain), or <pod>.<namespace>")],
            ),
        ),
    ]
}

/// Nothing but this server's stylesheet and icon; no script at all.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; base-uri 'none'; \
                   form-action 'none'; frame-ancestors 'none'";

fn respond(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = (status, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

fn html(status: StatusCode, body: String) -> Response {
    respond(status, "text/html; charset=utf-8", body)
}

async fn overview(State(state): State<UiState>) -> Response {
    let view = MeshView::gather(&state).await;
    html(StatusCode::OK, pages::overview(&view))
}

async fn style() -> Response {
    respond(StatusCode::OK, "text/css; charset=utf-8", html::STYLE.to_string())
}

async fn favicon() -> Response {
    respond(StatusCode::OK, "image/svg+xml", html::FAVICON.to_string())
}

async fn object(
    State(state): State<UiState>,
    Path((kind, namespace, name)): Path<(String, String, String)>,
) -> Response {
    let view = MeshView::gather(&state).await;
    match pages::object(&view, &kind, &namespace, &name) {
        Some(page) => html(StatusCode::OK, page),
        None => html(
            StatusCode::NOT_FOUND,
            pages::not_found(&format!("There is no {kind} {namespace}/{name}.")),
        ),
    }
}

async fn service(State(state): State<UiState>, Path(host): Path<String>) -> Response {
    let view = MeshView::gather(&state).await;
    match pages::service(&view, &host) {
        Some(page) => html(StatusCode::OK, page),
        None => html(
            StatusCode::NOT_FOUND,
            pages::not_found(&format!("No registry and no route knows the host {host}.")),
        ),
    }
}

async fn proxy(State(state): State<UiState>, Path(id): Path<String>) -> Response {
    let view = MeshView::gather(&state).await;
    let Some((replica, record)) = view.proxy(&id) else {
        return html(
            StatusCode::NOT_FOUND,
            pages::not_found(&format!("No replica has a proxy {id} connected.")),
        );
    };
    // Its scope is known to the replica serving it.
    let scope = (*replica == view.replica).then(|| {
        let proxy = pilot_xds::Proxy::from_node_id(&record.node_id).map_err(|e| e.to_string())?;
        state
            .xds
            .scope(&proxy)
            .ok_or_else(|| "No push has happened yet.".to_string())
    });
    html(StatusCode::OK, pages::proxy(&view, replica, record, scope))
}

async fn unknown(Path(rest): Path<String>) -> Response {
    html(
        StatusCode::NOT_FOUND,
        pages::not_found(&format!("The console has no page /ui/{rest}.")),
    )
}
