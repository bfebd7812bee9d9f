//! `/metrics` in OpenMetrics text, written by `prometheus-client`, under
//! the names Istio's pilot exposes (`pilot/pkg/xds/monitoring.go`), so the
//! dashboards operators already have find them:
//!
//! | metric | type | labels | what |
//! |---|---|---|---|
//! | `pilot_xds` | gauge | | proxies with an open ADS stream |
//! | `pilot_xds_pushes` | counter | `type` (`cds`, `eds`, `lds`, `rds`) | xDS responses sent |
//! | `pilot_total_xds_rejects` | counter | `type` | NACKs received |
//! | `pilot_proxy_convergence_time` | histogram | | per proxy: the first change a push carries to the proxy handed every response of it |
//! | `pilot_debounce_time` | histogram | | per push: its first change to the end of its debounce |
//! | `pilot_pushcontext_init_seconds` | histogram | | per push: building its snapshot (rules decoded and compiled, registry frozen) |
//! | `pilot_proxy_queue_time` | histogram | | per proxy and push: the push's publication to the proxy's stream taking it |
//! | `pilot_xds_push_time` | histogram | `type` | per proxy, push and type: making and handing over one response |
//! | `pilot_k8s_cfg_events` | counter | `type` (kind), `event` (`add`, `update`, `delete`) | configuration events the cache applied, from any backend |
//! | `pilot_xds_nacked_proxies` | gauge | `type` | proxies whose last response of a type was NACKed |
//! | `pilot_config_objects` | gauge | `kind` | objects in the cache |
//! | `pilot_config_quarantined` | gauge | `kind` | objects in the store that fail validation, held out of the cache ([`crate::debug::quarantine`]) |
//! | `pilot_config_rejected` | counter | `kind` | objects the store delivered that failed validation (each key at each version once) |
//! | `pilot_xds_refused_streams` | counter | `reason` (`unauthenticated`, `permission_denied`, `invalid_argument`, `resource_exhausted`, `unavailable`) | ADS streams refused |
//! | `pilot_xds_stream_ends` | counter | `reason` (`proxy_closed`, `transport_error`, `bad_request`, `response_dropped`, `server_closed`, `max_age`, `write_timeout`) | ADS streams ended after they started |
//! | `pilot_xds_connections_refused` | counter | | ADS connections closed at accept, over `--xds-max-connections` (every connection admitted) or `--xds-max-pending-per-address` |
//! | `pilot_xds_connections_evicted` | counter | | ADS connections without an admitted stream closed to make room for a new one, every `--xds-max-connections` slot being taken |
//! | `pilot_status_writes` | counter | `result` (`written`, `dropped`, `failed`) | objects' distribution status writes ([`pilot_distribution::StatusWriter`]): accepted, dropped (the object had moved on), failed (tried again) |
//! | `pilot_rest_requests` | counter | `method`, `code` | REST requests answered |
//! | `pilot_rest_request_duration_seconds` | histogram | `method`, `route` | REST latency by route template |
//! | `pilot_rest_watches` | gauge | | open REST watches |
//! | `pilot_rest_watches_opened` | counter | | REST watches opened |
//! | `pilot_proxy_restarts` | counter | | Envoy restarts after a failure, as pilot-agents reported them |
//! | `pilot_proxy_unexpected_exits` | counter | `reason` (`code`, `signal`) | Envoy exits pilot-agents did not ask for |
//! | `pilot_proxy_budget_exhausted` | counter | | pilot-agents that gave up restarting Envoy |
//! | `pilot_replicas` | gauge | | live replicas on this store, as last read ([`pilot_distribution::Replicas`]) |
//! | `pilot_status_writer` | gauge | | 1 while this replica is the elected status writer |
//! | `pilot_replica_failures` | counter | `operation` (`publish`, `read`, `campaign`) | failures to publish this replica's record, read the others', campaign |
//! | `citadel_server_csr_count` | counter | | certificate signing requests received ([`crate::ca`]) |
//! | `citadel_server_success_cert_issuance_count` | counter | | workload certificates issued |
//! | `pilot_ca_impersonated` | counter | | of those, certificates a node proxy (ztunnel) got for a workload of its node |
//! | `pilot_ca_refused` | counter | `reason` (`unauthenticated`, `permission_denied`, `invalid_argument`, `unavailable`, `internal`) | certificate requests refused |
//!
//! OpenMetrics names a counter's sample `NAME_total`: `pilot_xds_pushes` is
//! scraped as `pilot_xds_pushes_total`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use pilot_ads::XdsServer;
use pilot_distribution::{ProxyEvents, Replicas, WriterCounts};
use pilot_model::Event;
use pilot_store::{Controller, Notification};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Bounds of `pilot_rest_request_duration_seconds`, in seconds.
const REQUEST_BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0];

type Labels2 = [(&'static str, String); 2];

/// The server's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<Labels2, Counter>,
    request_duration: Family<Labels2, Histogram, fn() -> Histogram>,
    watches_open: Gauge,
    watches_opened: Counter,
    config_events: Family<Labels2, Counter>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// The metrics of a server whose ADS server is `xds` and whose cache is
    /// `controller` (read at each scrape).
    pub(crate) fn new(
        xds: XdsServer,
        controller: Arc<Controller>,
        journal_quarantine: crate::debug::quarantine::JournalQuarantine,
        proxy_events: Arc<ProxyEvents>,
        status_writes: Arc<WriterCounts>,
    ) -> Self {
        let mut metrics = Metrics {
            registry: Registry::default(),
            requests: Family::default(),
            request_duration: Family::new_with_constructor(|| Histogram::new(REQUEST_BUCKETS)),
            watches_open: Gauge::default(),
            watches_opened: Counter::default(),
            config_events: Family::default(),
        };
        metrics.register_xds(xds, controller, journal_quarantine);
        metrics.register_rest();
        metrics
            .registry
            .register_collector(Box::new(ProxyEventMetrics(proxy_events)));
        metrics
            .registry
            .register_collector(Box::new(StatusWrites(status_writes)));
        metrics
    }

    fn register_xds(
        &mut self,
        xds: XdsServer,
        controller: Arc<Controller>,
        journal_quarantine: crate::debug::quarantine::JournalQuarantine,
    ) {
        let registry = &mut self.registry;
        registry.register_collector(Box::new(PushTimes(xds.clone())));
        registry.register(
            "pilot_k8s_cfg_events",
            "Configuration events applied to the cache, by kind (type) and event (add, update, delete), from any backend",
            self.config_events.clone(),
        );
        registry.register_collector(Box::new(crate::debug::quarantine::QuarantineMetrics {
            controller: Arc::clone(&controller),
            journal: journal_quarantine,
        }));
        registry.register_collector(Box::new(ScrapeTime { xds, controller }));
    }

    fn register_rest(&mut self) {
        let registry = &mut self.registry;
        registry.register(
            "pilot_rest_requests",
            "REST API requests answered, by method and status code",
            self.requests.clone(),
        );
        registry.register(
            "pilot_rest_request_duration_seconds",
            "REST API request latency to the response head, by method and route template",
            self.request_duration.clone(),
        );
        registry.register(
            "pilot_rest_watches",
            "REST watches open now",
            self.watches_open.clone(),
        );
        registry.register(
            "pilot_rest_watches_opened",
            "REST watches opened since the server started",
            self.watches_opened.clone(),
        );
    }

    /// Counts one answered request, with its latency.
    pub(crate) fn request(&self, method: &str, route: &str, code: u16, elapsed: Duration) {
        self.requests
            .get_or_create(&[("method", method.to_string()), ("code", code.to_string())])
            .inc();
        self.request_duration
            .get_or_create(&[("method", method.to_string()), ("route", route.to_string())])
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one configuration event.
    pub(crate) fn config_event(&self, kind: &str, event: &'static str) {
        self.config_events
            .get_or_create(&[("type", kind.to_string()), ("event", event.to_string())])
            .inc();
    }

    /// Adds a collector read at each scrape (e.g. the replicas' gauges).
    pub(crate) fn register_collector(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    /// The exposition text (OpenMetrics 1.0).
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The REST API's watches, counted while open.
impl pilot_apiserver::WatchObserver for Metrics {
    fn opened(&self) {
        self.watches_opened.inc();
        self.watches_open.inc();
    }

    fn closed(&self) {
        self.watches_open.dec();
    }
}

/// The metrics read from the ADS server and the cache at each scrape.
struct ScrapeTime {
    xds: XdsServer,
    controller: Arc<Controller>,
}

impl std::fmt::Debug for ScrapeTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScrapeTime").finish_non_exhaustive()
    }
}

impl Collector for ScrapeTime {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let status = self.xds.status();
        let gauge = ConstGauge::new(status.len() as i64);
        gauge.encode(encoder.encode_descriptor(
            "pilot_xds",
            "Number of proxies connected to this pilot over ADS",
            None,
            gauge.metric_type(),
        )?)?;

        let by_type = |encoder: &mut DescriptorEncoder, name: &str, help: &str, counts: &[(&str, u64)]| {
            let mut family =
                encoder.encode_descriptor(name, help, None, ConstCounter::new(0u64).metric_type())?;
            for (short, count) in counts {
                let labels = [("type", short.to_ascii_lowercase())];
                ConstCounter::new(*count).encode(family.encode_family(&labels)?)?;
            }
            Ok::<_, std::fmt::Error>(())
        };
        by_type(
            &mut encoder,
            "pilot_xds_pushes",
            "xDS responses sent to proxies, by type",
            &self.xds.sent_by_type(),
        )?;
        by_type(
            &mut encoder,
            "pilot_total_xds_rejects",
            "Total number of xDS responses from pilot rejected by proxies (NACKs), by type",
            &self.xds.nacks_by_type(),
        )?;

        let mut nacked = encoder.encode_descriptor(
            "pilot_xds_nacked_proxies",
            "Connected proxies whose last response of a type was NACKed",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        for short in pilot_ads::TYPES {
            let count = status
                .iter()
                .filter(|p| {
                    p.types
                        .get(short)
                        .is_some_and(|t| crate::debug::proxy_status::state(t) == "NACKED")
                })
                .count();
            let labels = [("type", short.to_ascii_lowercase())];
            ConstGauge::new(count as i64).encode(nacked.encode_family(&labels)?)?;
        }

        let refused = self.xds.refused_streams();
        let mut family = encoder.encode_descriptor(
            "pilot_xds_refused_streams",
            "ADS streams refused: no or bad credential (unauthenticated), a node id outside the credential's namespace (permission_denied), a malformed request (invalid_argument), a credential at --xds-max-streams-per-credential or a request over the size limit (resource_exhausted), a credential that could not be checked (unavailable: a TokenReview unreachable)",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (reason, count) in [
            ("unauthenticated", refused.unauthenticated),
            ("permission_denied", refused.permission_denied),
            ("invalid_argument", refused.invalid_argument),
            ("resource_exhausted", refused.resource_exhausted),
            ("unavailable", refused.unavailable),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }

        // Why ADS streams ended.
        let ends = self.xds.stream_ends();
        let mut family = encoder.encode_descriptor(
            "pilot_xds_stream_ends",
            "ADS streams ended, by reason: the proxy closed, its connection failed (reset, keepalive unanswered), a bad request, the connection went away with a response waiting, server shutdown, maximum connection age",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (reason, count) in [
            ("proxy_closed", ends.proxy_closed),
            ("transport_error", ends.transport_error),
            ("bad_request", ends.bad_request),
            ("response_dropped", ends.response_dropped),
            ("server_closed", ends.server_closed),
            ("max_age", ends.max_age),
            ("write_timeout", ends.write_timeout),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }
        let refused = ConstCounter::new(self.xds.connections_refused());
        refused.encode(encoder.encode_descriptor(
            "pilot_xds_connections_refused",
            "ADS connections closed at accept because --xds-max-connections were open and admitted, or --xds-max-pending-per-address from the same address",
            None,
            refused.metric_type(),
        )?)?;
        let evicted = ConstCounter::new(self.xds.connections_evicted());
        evicted.encode(encoder.encode_descriptor(
            "pilot_xds_connections_evicted",
            "ADS connections without an admitted stream closed to make room for a new one, every --xds-max-connections slot being taken",
            None,
            evicted.metric_type(),
        )?)?;

        let mut objects = encoder.encode_descriptor(
            "pilot_config_objects",
            "Configuration objects in the cache, by kind",
            None,
            ConstGauge::new(0i64).metric_type(),
        )?;
        for kind in self.controller.kinds() {
            // `kinds()` are the watched ones: list_cached answers for each.
            let count = self
                .controller
                .list_cached(kind, None)
                .map_or(0, |cached| cached.len());
            ConstGauge::new(count as i64).encode(objects.encode_family(&[("kind", kind.clone())])?)?;
        }
        Ok(())
    }
}

/// The certificate service's counts: requests, issued, refused by reason.
#[derive(Debug)]
pub(crate) struct CaMetrics(pub(crate) Arc<crate::ca::CaCounts>);

impl Collector for CaMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = &self.0;
        for (name, help, value) in [
            (
                "citadel_server_csr_count",
                "Certificate signing requests received",
                counts.requests.load(Relaxed),
            ),
            (
                "citadel_server_success_cert_issuance_count",
                "Workload certificates issued",
                counts.issued.load(Relaxed),
            ),
            (
                "pilot_ca_impersonated",
                "Workload certificates issued to a node proxy (ztunnel) for a workload of its node",
                counts.impersonated.load(Relaxed),
            ),
        ] {
            let metric = ConstCounter::new(value);
            metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)?;
        }
        let mut family = encoder.encode_descriptor(
            "pilot_ca_refused",
            "Certificate requests refused, by reason: unauthenticated (no valid credential), permission_denied (an identity the credential does not allow), invalid_argument (a bad CSR or lifetime), unavailable (the credential could not be checked: a TokenReview unreachable), internal",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (reason, count) in [
            ("unauthenticated", counts.unauthenticated.load(Relaxed)),
            ("permission_denied", counts.permission_denied.load(Relaxed)),
            ("invalid_argument", counts.invalid_argument.load(Relaxed)),
            ("unavailable", counts.unavailable.load(Relaxed)),
            ("internal", counts.internal.load(Relaxed)),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }
        Ok(())
    }
}

/// Istio's push histograms, read from the ADS server's
/// [`pilot_ads::PushTimings`] at each scrape.
struct PushTimes(XdsServer);

impl std::fmt::Debug for PushTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushTimes").finish_non_exhaustive()
    }
}

/// Encodes `histogram`: prometheus-client takes each bucket's own count
/// and the `+Inf` bucket as `f64::MAX`.
fn encode_histogram(
    encoder: &mut prometheus_client::encoding::MetricEncoder<'_>,
    histogram: &pilot_ads::DurationHistogram,
) -> Result<(), std::fmt::Error> {
    let mut below = 0;
    let mut buckets: Vec<(f64, u64)> = histogram
        .buckets
        .iter()
        .map(|(bound, cumulative)| {
            let own = cumulative - below;
            below = *cumulative;
            (*bound, own)
        })
        .collect();
    buckets.push((f64::MAX, histogram.count - below));
    encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
        histogram.sum.as_secs_f64(),
        histogram.count,
        &buckets,
        None,
    )
}

impl Collector for PushTimes {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let timings = self.0.push_timings();
        for (name, help, histogram) in [
            (
                "pilot_proxy_convergence_time",
                "Delay in seconds between a configuration or registry change and a proxy having been sent all the configuration of the push that carries it",
                &timings.convergence,
            ),
            (
                "pilot_debounce_time",
                "Delay in seconds between the first change of a push entering the debounce and the push being built",
                &timings.debounce,
            ),
            (
                "pilot_pushcontext_init_seconds",
                "Time in seconds to build a push's snapshot: the rules decoded and compiled, the registry frozen",
                &timings.build,
            ),
            (
                "pilot_proxy_queue_time",
                "Time in seconds between a push's publication and a proxy's stream taking it",
                &timings.queue,
            ),
        ] {
            let mut metric = encoder.encode_descriptor(
                name,
                help,
                None,
                prometheus_client::metrics::MetricType::Histogram,
            )?;
            encode_histogram(&mut metric, histogram)?;
        }
        let mut family = encoder.encode_descriptor(
            "pilot_xds_push_time",
            "Time in seconds to make and hand over one xDS response to a proxy, by type",
            None,
            prometheus_client::metrics::MetricType::Histogram,
        )?;
        for (short, histogram) in &timings.push {
            let labels = [("type", short.to_ascii_lowercase())];
            encode_histogram(&mut family.encode_family(&labels)?, histogram)?;
        }
        Ok(())
    }
}

/// `pilot_status_writes{result}`, read from the status writer's counts.
#[derive(Debug)]
struct StatusWrites(Arc<WriterCounts>);

impl Collector for StatusWrites {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let counts = &self.0;
        let mut family = encoder.encode_descriptor(
            "pilot_status_writes",
            "Distribution status writes to the store, by result: written, dropped (the object had moved on or was deleted), failed (tried again next round)",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (result, count) in [
            ("written", counts.written.load(Relaxed)),
            ("dropped", counts.dropped.load(Relaxed)),
            ("failed", counts.failed.load(Relaxed)),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("result", result)])?)?;
        }
        let mut family = encoder.encode_descriptor(
            "pilot_status_rounds",
            "Status writer rounds: computed, or skipped because nothing they read had changed since the last",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (result, count) in [
            ("computed", counts.rounds.load(Relaxed)),
            ("skipped", counts.skipped.load(Relaxed)),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("result", result)])?)?;
        }
        Ok(())
    }
}

/// `pilot_replicas`, `pilot_status_writer` and `pilot_replica_failures`,
/// read from this replica's counts.
#[derive(Debug)]
pub(crate) struct ReplicaMetrics(pub(crate) Arc<Replicas>);

impl Collector for ReplicaMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.0.counts();
        let live = ConstGauge::new(counts.live as i64);
        live.encode(encoder.encode_descriptor(
            "pilot_replicas",
            "Live pilot-discovery replicas on this store, as last read (this one included once it published)",
            None,
            live.metric_type(),
        )?)?;
        let writer = ConstGauge::new(i64::from(counts.writer));
        writer.encode(encoder.encode_descriptor(
            "pilot_status_writer",
            "1 while this replica is the elected writer of objects' distribution status",
            None,
            writer.metric_type(),
        )?)?;
        let mut family = encoder.encode_descriptor(
            "pilot_replica_failures",
            "Failures to publish this replica's record, read the replicas' records, or campaign, by operation",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (operation, count) in [
            ("publish", counts.publish_failures),
            ("read", counts.read_failures),
            ("campaign", counts.campaign_failures),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("operation", operation)])?)?;
        }
        Ok(())
    }
}

/// The agents' counters, read from the proxy events' counts.
#[derive(Debug)]
struct ProxyEventMetrics(Arc<ProxyEvents>);

impl Collector for ProxyEventMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let counts = self.0.counts();
        let counter = ConstCounter::new(counts.restarts);
        counter.encode(encoder.encode_descriptor(
            "pilot_proxy_restarts",
            "Envoy restarts after a failure, as pilot-agents reported them",
            None,
            counter.metric_type(),
        )?)?;
        let mut family = encoder.encode_descriptor(
            "pilot_proxy_unexpected_exits",
            "Envoy exits pilot-agents did not ask for, by how Envoy ended",
            None,
            ConstCounter::new(0u64).metric_type(),
        )?;
        for (reason, count) in [
            ("code", counts.exits_with_code),
            ("signal", counts.exits_by_signal),
        ] {
            ConstCounter::new(count).encode(family.encode_family(&[("reason", reason)])?)?;
        }
        let counter = ConstCounter::new(counts.budget_exhausted);
        counter.encode(encoder.encode_descriptor(
            "pilot_proxy_budget_exhausted",
            "pilot-agents that gave up restarting Envoy",
            None,
            counter.metric_type(),
        )?)?;
        Ok(())
    }
}

/// Middleware: counts every answered request, with its latency by route
/// template (`unmatched` for paths no route serves).
pub(crate) async fn count(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".to_string());
    let started = Instant::now();
    let response = next.run(request).await;
    metrics.request(&method, &route, response.status().as_u16(), started.elapsed());
    response
}

/// `GET /metrics`.
pub(crate) async fn handler(State(metrics): State<Arc<Metrics>>) -> Response {
    let text = metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Counts every configuration event in `events` (the cache's,
/// [`Controller::subscribe_all`], subscribed before the Controller runs so
/// the initial load counts) until `shutdown`.
pub(crate) async fn track_config_events(
    metrics: Arc<Metrics>,
    mut events: futures::stream::BoxStream<'static, Notification<Arc<pilot_model::DynConfig>>>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = crate::shutdown::closed(&mut shutdown) => return,
        };
        match next {
            None => return,
            Some(Notification::Event(event)) => {
                let (name, object) = match &event {
                    Event::Added(object) => ("add", object),
                    Event::Updated { new, .. } => ("update", new),
                    Event::Deleted(object) => ("delete", object),
                };
                metrics.config_event(&object.meta.kind, name);
            }
            Some(Notification::Lagged { missed }) => {
                tracing::warn!(
                    missed,
                    "pilot_k8s_cfg_events fell behind the cache; these events are not counted"
                );
            }
        }
    }
}
