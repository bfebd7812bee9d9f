//! `pilot-discovery`: one process that serves the REST configuration API
//! and the ADS (xDS) server over a chosen configuration store and service
//! registries.
//!
//! - [`args::Args`]: flags and the `--config` file; [`backend`] turns them
//!   into a store (memory, memory with `--data-dir` (`pilot_store_memory::journal`), etcd)
//!   and registries (a `--services` file ([`services_file`]), etcd).
//! - [`router`]: the REST API ([`api`]), `/healthz`, `/readyz`,
//!   `/metrics` ([`metrics`]), `/debug/proxy-status` ([`proxy_status`]),
//!   `/openapi.json` ([`openapi`]), behind bearer tokens ([`auth`]) when
//!   configured.
//! - [`run`]: binds both listeners, serves until shutdown, then ends watch
//!   and ADS streams and drains in-flight requests ([`serve`]).
//!
//! Writes go through the cached `Controller` (they return once the cache
//! that feeds xDS has them); lists and watches read the backend itself, so
//! a list's `resourceVersion` is a revision a watch can resume after.

pub mod api;
pub mod args;
pub mod auth;
pub mod backend;
pub mod health;
pub mod inject_webhook;
pub mod metrics;
pub mod openapi;
pub mod proxy_events;
pub mod proxy_status;
pub mod quarantine;
pub mod registryz;
pub mod replicas;
pub mod selector;
pub mod serve;
pub mod services_file;
pub mod status;
pub mod status_writer;
pub mod xds_auth;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::response::IntoResponse;
use axum::routing::get;
use pilot_ads::{ServeOptions, XdsOptions, XdsServer};
use pilot_model::{ConfigStore, ConfigWatch, KindRegistry, ServiceDiscovery};
use pilot_store::Controller;
use tokio::sync::watch;

pub use args::Args;
pub use backend::StartError;

use crate::status::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The Controller, as a store: reads from its cache, writes that wait
    /// for it.
    pub store: Arc<dyn ConfigStore>,
    /// The backend itself, for lists and watches.
    pub backend: Arc<dyn ConfigWatch>,
    /// The Controller, for metrics.
    pub controller: Arc<Controller>,
    /// The kinds served.
    pub registry: KindRegistry,
    /// The ADS server, for proxy status and metrics.
    pub xds: XdsServer,
    /// The service registries, for `/debug/registryz`.
    pub discovery: Arc<dyn ServiceDiscovery>,
    /// Counters.
    pub metrics: Arc<metrics::Metrics>,
    /// pilot-agents' reports of Envoy's process life.
    pub proxy_events: Arc<proxy_events::ProxyEvents>,
    /// Accepted tokens; `None` when authentication is off.
    pub tokens: Option<Arc<auth::Tokens>>,
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Turns true on shutdown; watches end.
    pub shutdown: watch::Receiver<bool>,
    /// True once every cache has synced.
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Whether the configuration store answers (issue 19).
    pub backend_health: Arc<health::BackendHealth>,
    /// What `--data-dir`'s journal held back at start (issue 19).
    pub journal_quarantine: quarantine::JournalQuarantine,
    /// This replica among the replicas of its store (issue 13).
    pub replicas: Arc<replicas::Replicas>,
}

/// Every route of the server.
pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/apis/{group}/{version}/{plural}", get(api::list_all))
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}",
            get(api::list_namespaced).post(api::create),
        )
        .route(
            "/apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}",
            get(api::get_object).put(api::replace).delete(api::delete),
        )
        .route("/metrics", get(metrics::handler))
        .route("/debug/proxy-status", get(proxy_status::handler))
        .route("/debug/registryz", get(registryz::handler))
        .route("/debug/quarantine", get(quarantine::handler))
        .route("/v1/proxy-events", axum::routing::post(proxy_events::handler))
        .route(
            "/openapi.json",
            get(
                |axum::extract::State(state): axum::extract::State<AppState>| async move {
                    let options = openapi::Options {
                        auth: state.tokens.is_some(),
                    };
                    axum::Json(openapi::document(&state.registry, options))
                },
            ),
        )
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                "no such path; see /openapi.json",
            )
        })
        .layer(from_fn_with_state(state.clone(), auth::require));
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(
                |axum::extract::State(state): axum::extract::State<AppState>| async move {
                    if let Some(problem) = state.backend_health.problem() {
                        (StatusCode::SERVICE_UNAVAILABLE, problem).into_response()
                    } else if (state.ready)() {
                        (StatusCode::OK, "ready").into_response()
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "caches have not synced yet").into_response()
                    }
                },
            ),
        )
        .merge(protected)
        .layer(from_fn_with_state(state.clone(), metrics::count))
        .with_state(state)
}

/// The addresses a running server listens on.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    /// The REST API.
    pub rest: SocketAddr,
    /// ADS.
    pub xds: SocketAddr,
    /// The sidecar injection webhook (HTTPS), with `--inject-webhook`.
    pub inject: Option<SocketAddr>,
}

/// Runs the server until `shutdown` completes; `on_bound` is told the
/// addresses once both listeners are bound.
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send,
    on_bound: impl FnOnce(Bound),
) -> Result<(), StartError> {
    let registry = pilot_model::istio::registry();
    let tokens = match &args.token_file {
        Some(path) => Some(Arc::new(auth::Tokens::load(path).map_err(StartError::Failed)?)),
        None => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(serve::tls_acceptor(cert, key).map_err(StartError::Failed)?),
        _ => None,
    };
    // ADS security (issue 19): checked before anything starts.
    let xds_auth = xds_auth::XdsAuth::from_args(&args, tokens.clone()).map_err(StartError::Failed)?;
    let xds_tls = xds_auth::tls_config(&args, tokens.is_some()).map_err(StartError::Failed)?;
    let bind = |address: SocketAddr, what: &str| {
        let what = what.to_string();
        async move {
            // A deep accept queue: every proxy reconnects at once when a
            // replica restarts.
            pilot_ads::listen(address)
                .map_err(|e| StartError::Failed(format!("cannot listen on {address} for {what}: {e}")))
        }
    };
    let rest_listener = bind(args.listen, "the REST API").await?;
    let xds_listener = bind(args.xds_listen, "ADS").await?;
    let inject = match args.inject_webhook {
        Some(address) => Some(inject_webhook::start(
            &args,
            tls.clone(),
            bind(address, "the injection webhook").await?,
        )?),
        None => None,
    };
    let bound = Bound {
        rest: rest_listener
            .local_addr()
            .map_err(|e| StartError::Failed(e.to_string()))?,
        xds: xds_listener
            .local_addr()
            .map_err(|e| StartError::Failed(e.to_string()))?,
        inject: inject.as_ref().map(|(address, _)| *address),
    };
    // The store is opened once the REST port is known: it names this
    // replica by default.
    let replica = args
        .replica_name
        .clone()
        .unwrap_or_else(|| replicas::default_name(bound.rest.port()));
    let (backend, journal_quarantine, membership) =
        backend::open_store(&args, registry.clone(), &replica).await?;
    let registries = backend::open_registries(&args).await?;
    let controller = Arc::new(Controller::new(Arc::clone(&backend)));
    let config_events = controller.subscribe_all();
    controller.run();

    let discovery = registries.discovery;
    let xds = XdsServer::new(
        Arc::clone(&controller),
        Arc::clone(&discovery),
        XdsOptions::default(),
    );
    let (closing, shutdown_rx) = watch::channel(false);
    let proxy_events = Arc::new(proxy_events::ProxyEvents::default());
    let replicas = Arc::new(replicas::Replicas::new(
        membership,
        xds.clone(),
        Arc::clone(&proxy_events),
        bound.rest.to_string(),
        bound.xds.to_string(),
    ));
    let status_writes = Arc::new(status_writer::WriterCounts::default());
    let mut metrics = metrics::Metrics::new(
        xds.clone(),
        Arc::clone(&controller),
        Arc::clone(&journal_quarantine),
        Arc::clone(&proxy_events),
        Arc::clone(&status_writes),
    );
    metrics.register_collector(Box::new(replicas::Metrics(Arc::clone(&replicas))));
    let metrics = Arc::new(metrics);
    let ready = {
        let controller = Arc::clone(&controller);
        let discovery = Arc::clone(&discovery);
        Arc::new(move || controller.has_synced() && discovery.has_synced())
            as Arc<dyn Fn() -> bool + Send + Sync>
    };
    let backend_health = Arc::new(health::BackendHealth::default());
    let state = AppState {
        store: Arc::clone(&controller) as Arc<dyn ConfigStore>,
        backend,
        controller: Arc::clone(&controller),
        registry,
        xds: xds.clone(),
        discovery: Arc::clone(&discovery),
        metrics: Arc::clone(&metrics),
        proxy_events,
        tokens,
        max_body_bytes: args.max_body_bytes,
        shutdown: shutdown_rx.clone(),
        ready,
        backend_health: Arc::clone(&backend_health),
        journal_quarantine: Arc::clone(&journal_quarantine),
        replicas: Arc::clone(&replicas),
    };

    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(health::probe(
        Arc::clone(&state.backend),
        backend_health,
        shutdown_rx.clone(),
    )));
    tasks.push(tokio::spawn(replicas::run(
        Arc::clone(&replicas),
        shutdown_rx.clone(),
    )));
    if !args.status_interval.is_zero() {
        tasks.push(tokio::spawn(status_writer::run(
            Arc::clone(&controller),
            Arc::clone(&state.backend),
            Arc::clone(&replicas) as Arc<dyn status_writer::ProxyRecords>,
            args.status_interval,
            status_writes,
            shutdown_rx.clone(),
        )));
    }
    tasks.push(tokio::spawn(metrics::track_pushes(
        Arc::clone(&metrics),
        xds.clone(),
        shutdown_rx.clone(),
    )));
    tasks.push(tokio::spawn(metrics::track_config_events(
        metrics,
        config_events,
        shutdown_rx.clone(),
    )));
    if let Some((path, writer)) = registries.file {
        tasks.push(tokio::spawn(services_file::follow(
            path,
            writer,
            Duration::from_millis(args.services_poll_ms.max(10)),
            shutdown_rx.clone(),
        )));
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    // Connection limits (issue 19).
    let open_files = serve::raise_fd_limit();
    tracing::debug!(?open_files, "open-files limit");
    let limits = serve::Limits {
        header_read_timeout: Duration::from_millis(args.header_read_timeout_ms.max(1)),
        max_connections: args.max_connections,
    };
    if let Some((_, webhook)) = inject {
        tasks.push(tokio::spawn(webhook.serve(limits, shutdown_rx.clone())));
    }
    let rest = tokio::spawn(serve::serve(
        rest_listener,
        router(state),
        tls,
        limits,
        shutdown_rx.clone(),
    ));
    let xds_task = {
        let xds = xds.clone();
        let mut shutdown_rx = shutdown_rx.clone();
        let options = ServeOptions {
            tls: xds_tls,
            auth: xds_auth.map(|auth| Arc::new(auth) as Arc<dyn pilot_ads::Authenticate>),
            max_connections: Some(args.xds_max_connections),
            max_connection_age: args.xds_max_connection_age,
            ..ServeOptions::default()
        };
        options
            .check()
            .map_err(|e| StartError::Failed(format!("ADS TLS: {e}")))?;
        tokio::spawn(async move {
            xds.serve_with(xds_listener, options, async move {
                let _ = shutdown_rx.wait_for(|closing| *closing).await;
            })
            .await
        })
    };
    tracing::info!(rest = %format!("{scheme}://{}", bound.rest), xds = %bound.xds, "pilot-discovery listening");
    if let Some(path) = &args.ready_file {
        let body =
            serde_json::json!({"rest": format!("{scheme}://{}", bound.rest), "xds": bound.xds.to_string()});
        let temporary = path.with_extension("tmp");
        std::fs::write(&temporary, body.to_string())
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(|e| StartError::Failed(format!("cannot write {}: {e}", path.display())))?;
    }
    on_bound(bound);

    shutdown.await;
    tracing::info!("shutting down: closing listeners, ending streams, finishing in-flight requests");
    closing.send_replace(true);
    let _ = rest.await;
    match xds_task.await {
        Ok(Err(error)) => tracing::warn!(%error, "ADS server ended with an error"),
        Err(error) => tracing::warn!(%error, "ADS server task failed"),
        Ok(Ok(())) => {}
    }
    for task in tasks {
        let _ = task.await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Completes once `shutdown` turns true (or its sender is gone).
pub async fn closed(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|closing| *closing).await;
}
