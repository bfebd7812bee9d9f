//! [`AppState`]: what this server's own REST handlers share (the REST
//! API has its own state, `pilot_apiserver`'s), built once by the start
//! sequence ([`crate::start`]) and cloned into each request.
//!
//! The arrows point one way: this module gathers the server's parts, and
//! the parts do not import it back. A handler beside its part takes only
//! what it reads, as a sub-state (`State<Arc<Metrics>>`, `State<Readiness>`)
//! that the [`FromRef`] impls below cut out of the `AppState`; only the
//! router, which nothing here imports, takes the whole `AppState`.

use std::sync::Arc;

use axum::extract::FromRef;
use pilot_ads::XdsServer;
use pilot_distribution::{ProxyEvents, Replicas};
use pilot_model::ServiceDiscovery;
use pilot_store::Controller;

use crate::auth::tokens::Tokens;
use crate::debug::quarantine::JournalQuarantine;
use crate::health::Readiness;
use crate::metrics::Metrics;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The Controller, for metrics.
    pub(crate) controller: Arc<Controller>,
    /// The ADS server, for proxy status and metrics.
    pub(crate) xds: XdsServer,
    /// The service registries, for `/debug/registryz`.
    pub(crate) discovery: Arc<dyn ServiceDiscovery>,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// pilot-agents' reports of Envoy's process life.
    pub(crate) proxy_events: Arc<ProxyEvents>,
    /// Accepted tokens; `None` when authentication is off.
    pub(crate) tokens: Option<Arc<Tokens>>,
    /// Kubernetes service-account tokens (`--kube-token-review`), for
    /// the agents' reports.
    pub(crate) token_review: Option<Arc<crate::auth::token_review::TokenReviewer>>,
    /// Whether the store answers and the caches have synced, for `/readyz`.
    pub(crate) readiness: Readiness,
    /// What `--data-dir`'s journal held back at start.
    pub(crate) journal_quarantine: JournalQuarantine,
    /// This replica among the replicas of its store.
    pub(crate) replicas: Arc<Replicas>,
    /// The certificates this replica's CA issued.
    pub(crate) certificates: Arc<crate::ca::IssuedCertificates>,
}

/// `impl FromRef<AppState> for Type`, a clone of the field: a handler
/// that takes `State<Type>` gets it.
macro_rules! sub_states {
    ($($field:ident: $type:ty),* $(,)?) => {
        $(
            impl FromRef<AppState> for $type {
                fn from_ref(state: &AppState) -> Self {
                    state.$field.clone()
                }
            }
        )*
    };
}

sub_states! {
    controller: Arc<Controller>,
    discovery: Arc<dyn ServiceDiscovery>,
    metrics: Arc<Metrics>,
    proxy_events: Arc<ProxyEvents>,
    tokens: Option<Arc<Tokens>>,
    token_review: Option<Arc<crate::auth::token_review::TokenReviewer>>,
    readiness: Readiness,
    journal_quarantine: JournalQuarantine,
    replicas: Arc<Replicas>,
    xds: XdsServer,
    certificates: Arc<crate::ca::IssuedCertificates>,
}
