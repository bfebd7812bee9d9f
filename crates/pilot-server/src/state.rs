//! [`AppState`]: what every REST handler shares, built once by the start
//! sequence ([`crate::start`]) and cloned into each request.

use std::sync::Arc;

use pilot_ads::XdsServer;
use pilot_model::{ConfigStore, ConfigWatch, KindRegistry, ServiceDiscovery};
use pilot_store::Controller;
use tokio::sync::watch;

use crate::auth::Tokens;
use crate::debug::quarantine::JournalQuarantine;
use crate::distribution::proxy_events::ProxyEvents;
use crate::distribution::replicas::Replicas;
use crate::health::BackendHealth;
use crate::metrics::Metrics;

/// What every handler shares.
#[derive(Clone)]
pub(crate) struct AppState {
    /// The Controller, as a store: reads from its cache, writes that wait
    /// for it.
    pub(crate) store: Arc<dyn ConfigStore>,
    /// The backend itself, for lists and watches.
    pub(crate) backend: Arc<dyn ConfigWatch>,
    /// The Controller, for metrics.
    pub(crate) controller: Arc<Controller>,
    /// The kinds served.
    pub(crate) registry: KindRegistry,
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
    /// Largest request body.
    pub(crate) max_body_bytes: usize,
    /// Turns true on shutdown; watches end.
    pub(crate) shutdown: watch::Receiver<bool>,
    /// True once every cache has synced.
    pub(crate) ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// Whether the configuration store answers.
    pub(crate) backend_health: Arc<BackendHealth>,
    /// What `--data-dir`'s journal held back at start.
    pub(crate) journal_quarantine: JournalQuarantine,
    /// This replica among the replicas of its store.
    pub(crate) replicas: Arc<Replicas>,
}
