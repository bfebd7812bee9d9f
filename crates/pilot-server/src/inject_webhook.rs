//! The mutating admission webhook for sidecar injection
//! (`--inject-webhook ADDR`, HTTPS only): `POST /inject` takes an
//! `AdmissionReview` v1 and answers with a JSONPatch made by pilot-inject,
//! the code `pilotctl kube-inject` runs. Which namespaces are served is the
//! `MutatingWebhookConfiguration`'s `namespaceSelector`
//! (`examples/inject/mutating-webhook.yaml`); pods opt out with
//! `sidecar.istio.io/inject: "false"`.
//!
//! The same listener serves `POST /validate`, the validating webhook
//! (`validate_webhook.rs`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use pilot_inject::InjectTemplate;
use pilot_inject::admission::{FailurePolicy, review};
use pilot_model::KindRegistry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::args::{Args, InjectFailurePolicy};
use crate::error::StartError;

/// The webhook, bound and ready to serve.
pub(crate) struct Webhook {
    listener: TcpListener,
    tls: TlsAcceptor,
    router: Router,
    max_body_bytes: usize,
}

struct Injector {
    template: InjectTemplate,
    policy: FailurePolicy,
}

/// Checks the webhook's options (HTTPS, the mesh config's template) and
/// returns its address and the server to run.
pub(crate) fn start(
    args: &Args,
    tls: Option<TlsAcceptor>,
    listener: TcpListener,
) -> Result<(SocketAddr, Webhook), StartError> {
    let tls = tls.ok_or_else(|| {
        StartError::Failed(
            "--inject-webhook serves HTTPS only (the Kubernetes API server calls webhooks over TLS): give --tls-cert and --tls-key".into(),
        )
    })?;
    let template = match &args.mesh_config {
        Some(path) => InjectTemplate::load(path).map_err(|e| StartError::Failed(e.to_string()))?,
        None => InjectTemplate::default(),
    }
    .with_revision(args.revision.as_deref().unwrap_or_default());
    let policy = match args.inject_failure_policy {
        InjectFailurePolicy::Ignore => FailurePolicy::Ignore,
        InjectFailurePolicy::Fail => FailurePolicy::Fail,
    };
    let address = listener
        .local_addr()
        .map_err(|e| StartError::Failed(e.to_string()))?;
    let router = Router::new()
        .route("/inject", post(inject))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(args.max_body_bytes))
        .with_state(Arc::new(Injector { template, policy }));
    tracing::info!(%address, "sidecar injection webhook listening (https)");
    Ok((
        address,
        Webhook {
            listener,
            tls,
            router,
            max_body_bytes: args.max_body_bytes,
        },
    ))
}

impl Webhook {
    /// Serves until `shutdown` turns true, with the REST listener's
    /// connection limits; `/validate` validates the kinds of `registry`.
    pub(crate) async fn serve(
        self,
        limits: crate::serve::Limits,
        shutdown: watch::Receiver<bool>,
        registry: KindRegistry,
    ) {
        let router = self.router.merge(
            crate::validate_webhook::routes(registry).layer(DefaultBodyLimit::max(self.max_body_bytes)),
        );
        crate::serve::serve(self.listener, router, Some(self.tls), limits, shutdown).await;
    }
}

async fn inject(State(injector): State<Arc<Injector>>, body: Bytes) -> axum::Json<serde_json::Value> {
    axum::Json(review(&body, &injector.template, injector.policy))
}
