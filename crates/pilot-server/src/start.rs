//! The start sequence of `pilot-discovery` ([`run`]), as named steps:
//!
//! 1. [`check`] what the flags point at (tokens, TLS, ADS security), before
//!    anything starts;
//! 2. [`bind`] the listeners (REST, ADS, the injection webhook), so their
//!    addresses are known;
//! 3. [`open`] the store and the registries (the REST port names this
//!    replica by default);
//! 4. [`start_controller`] on the store;
//! 5. [`build_ads`] over the Controller and the registries;
//! 6. [`assemble`] what the handlers share ([`AppState`]) and the status
//!    loop's parts (pilot-distribution);
//! 7. [`spawn_background`] tasks (store probe, replicas, status writer,
//!    metrics, the services file);
//! 8. [`serve`] the listeners (the REST API from pilot-apiserver beside
//!    this server's routes), then [`announce`] the addresses;
//! 9. on shutdown, [`drain`]: end streams, finish in-flight requests, wait
//!    for every task.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use pilot_ads::{ServeOptions, XdsOptions, XdsServer};
use pilot_distribution::{ProxyEvents, ProxyRecords, Replicas, StatusWriter, WriterCounts};
use pilot_model::{ConfigWatch, DynConfig, Membership, ServiceDiscovery};
use pilot_store::{Controller, ControllerOptions, Notification, RegistryWriter};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::args::Args;
use crate::auth::Tokens;
use crate::debug::quarantine::JournalQuarantine;
use crate::error::StartError;
use crate::inject_webhook::{self, Webhook};
use crate::metrics::{self, Metrics};
use crate::state::AppState;
use crate::{auth, backend, ca, health, router, serve};

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
///
/// Writes go through the cached `Controller` (they return once the cache
/// that feeds xDS has them); lists and watches read the backend itself, so
/// a list's `resourceVersion` is a revision a watch can resume after.
///
/// ```no_run
/// # async fn example() -> Result<(), pilot_server::StartError> {
/// let argv = ["pilot-discovery", "--listen", "127.0.0.1:0", "--xds-listen", "127.0.0.1:0"];
/// let args = pilot_server::Args::parse_with_config(argv.map(String::from).to_vec())
///     .expect("valid flags");
/// let stop = async {
///     let _ = tokio::signal::ctrl_c().await;
/// };
/// pilot_server::run(args, stop, |bound| println!("REST API on {}", bound.rest)).await
/// # }
/// ```
pub async fn run(
    args: Args,
    shutdown: impl Future<Output = ()> + Send,
    on_bound: impl FnOnce(Bound),
) -> Result<(), StartError> {
    let mut checked = check(&args)?;
    let providers = crate::mesh_config::extension_providers(&args)?;
    let listeners = bind(&args, checked.tls.clone())?;
    let bound = listeners.bound;
    let mut opened = open(&args, bound).await?;
    open_ca(&args, &mut checked, &opened).await?;
    let services_file = opened.services_file.take();
    let (controller, config_events) = start_controller(Arc::clone(&opened.backend), args.max_body_bytes);
    opened.discovery = with_service_entries(opened.discovery, &controller);
    if let Some(certificates) = &checked.certificates {
        certificates.set_registries(Arc::clone(&opened.discovery));
    }
    let mut xds = build_ads(&args, &controller, &opened.discovery, providers);
    let (credentials, credentials_dir) = open_credentials(&args).await?;
    if let Some(source) = &credentials {
        xds = xds.with_credentials(Arc::clone(source));
    }
    let (closing, shutdown_rx) = watch::channel(false);
    let shared = assemble(&checked, opened, controller, xds, bound, shutdown_rx);
    let mut tasks = spawn_background(&args, &shared, config_events, services_file, credentials);
    if let Some(source) = credentials_dir {
        tasks.push(tokio::spawn(backend::credentials_dir::follow(
            source,
            Duration::from_millis(args.credentials_poll_ms.max(10)),
            shared.shutdown.clone(),
        )));
    }
    if let Some(renewal) = checked.ca_renewal.take() {
        tasks.push(tokio::spawn(renewal.run(shared.shutdown.clone())));
    }
    // The root is looked at this often by what follows it.
    let root_check = args.ca_root_check_interval.min(Duration::from_secs(30));
    if let (Some(serving), Some(ca)) = (checked.serving_cert.take(), checked.ca.clone()) {
        tasks.push(tokio::spawn(serving.run(
            ca,
            args.xds_tls_dns_names.clone(),
            args.workload_cert_ttl,
            root_check,
            shared.shutdown.clone(),
        )));
    }
    if let (Some(name), Some(ca)) = (&args.root_cert_configmap, checked.ca.clone()) {
        let client = backend::kube_client(&args.kube_service_account_dir)
            .await
            .map_err(|e| {
                StartError::Failed(format!("--root-cert-configmap needs a Kubernetes client: {e}"))
            })?;
        tasks.push(tokio::spawn(ca::publish::run(
            client,
            name.clone(),
            ca,
            root_check,
            shared.shutdown.clone(),
        )));
    }
    let serving = serve(
        &args,
        listeners,
        shared,
        checked.tls,
        checked.xds_options,
        checked.max_connections,
        tasks,
    );
    announce(&args, bound, serving.scheme)?;
    on_bound(bound);

    shutdown.await;
    drain(closing, serving).await;
    Ok(())
}

/// Step 1: what the flags point at, read and checked before anything
/// starts.
struct Checked {
    /// The REST and ADS bearer tokens (`--token-file`).
    tokens: Option<Arc<Tokens>>,
    /// Kubernetes service-account tokens on ADS and the CA
    /// (`--kube-token-review`).
    token_review: Option<Arc<auth::token_review::TokenReviewer>>,
    /// HTTPS for the REST listener and the webhook (`--tls-cert`, `--tls-key`).
    tls: Option<TlsAcceptor>,
    /// How ADS is served: TLS, caller authentication, connection limits,
    /// and the certificate service beside it (added by [`open_ca`]).
    xds_options: ServeOptions,
    /// The certificate service's counts, shown in `/metrics`.
    ca_counts: Arc<ca::CaCounts>,
    /// What it issued, shown in `/debug/certificates`.
    ca_issued: Arc<ca::IssuedCertificates>,
    /// The renewal of the self-signed root kept in the store (added by
    /// [`open_ca`]; none for `--ca-dir`).
    ca_renewal: Option<ca::Renewal>,
    /// The authority that signs now (set by [`open_ca`]).
    ca: Option<ca::SharedCa>,
    /// The ADS port's own certificate (`--xds-tls-dns-names`), issued by
    /// [`open_ca`].
    serving_cert: Option<Arc<ca::ServingCert>>,
    /// ADS's authentication, which the certificate service reads too.
    xds_auth: Option<Arc<auth::xds::XdsAuth>>,
    /// The certificate service (made by [`open_ca`]), told the registries
    /// once they are assembled.
    certificates: Option<ca::CertificateService>,
    /// The REST listeners' connection cap (`--max-connections`, or derived
    /// from the open-files limit).
    max_connections: usize,
}

/// Step 1: reads the token file and the TLS files, checks REST and ADS
/// security (an address that is not loopback needs credentials, unless
/// `--allow-unauthenticated` / `--xds-allow-unauthenticated` say so; every
/// listener without one is logged as a warning), raises the open-files
/// limit and fits the connection caps in it. Needs only the flags; fails
/// before any port is bound or store opened.
fn check(args: &Args) -> Result<Checked, StartError> {
    pilot_api::networking::check_export_to_list("--default-export-to", &args.default_export_to)
        .map_err(StartError::Usage)?;
    let tokens = match &args.token_file {
        Some(path) => Some(Arc::new(Tokens::load(path).map_err(StartError::Failed)?)),
        None => None,
    };
    auth::rest::check_open(args, tokens.is_some()).map_err(StartError::Failed)?;
    let open_files = serve::raise_fd_limit();
    tracing::debug!(?open_files, "open-files limit");
    let rest_listeners = 1 + usize::from(args.inject_webhook.is_some());
    let caps = serve::fds::caps(
        open_files,
        args.max_connections,
        args.xds_max_connections,
        rest_listeners,
        serve::PROBE_RESERVE,
    )
    .map_err(StartError::Failed)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(serve::tls_acceptor(cert, key).map_err(StartError::Failed)?),
        _ => None,
    };
    let token_review = auth::token_review::TokenReviewer::from_args(args)
        .map_err(StartError::Usage)?
        .map(Arc::new);
    let xds_auth = auth::xds::XdsAuth::from_args(args, tokens.clone(), token_review.clone())
        .map_err(StartError::Failed)?;
    let serving_cert = (!args.xds_tls_dns_names.is_empty()).then(|| Arc::new(ca::ServingCert::default()));
    let xds_tls = auth::xds::tls_config(
        args,
        tokens.is_some() || token_review.is_some(),
        serving_cert.as_ref(),
    )
    .map_err(StartError::Failed)?;
    let xds_auth = xds_auth.map(Arc::new);
    ca::options(args).map_err(StartError::Failed)?;
    let ca_counts = Arc::new(ca::CaCounts::default());
    let ca_issued = Arc::new(ca::IssuedCertificates::new(args.ca_issued_records_max));
    let xds_options = {
        let mut value = ServeOptions::default();
        value.tls = xds_tls;
        value.auth = xds_auth
            .clone()
            .map(|auth| auth as Arc<dyn pilot_ads::Authenticate>);
        value.max_connections = Some(caps.xds);
        value.handshake_timeout = Some(args.xds_handshake_timeout);
        value.write_timeout = Some(args.xds_write_timeout);
        value.request_buffer_per_connection = args.xds_request_buffer;
        value.max_pending_per_address = Some(args.xds_max_pending_per_address);
        value.max_streams_per_connection = Some(args.xds_max_streams_per_connection);
        value.max_streams_per_caller = args.xds_max_streams_per_credential;
        value.max_connection_age = args.xds_max_connection_age;
        value
    };
    if tokens.is_none() {
        tracing::warn!(
            listen = %args.listen,
            "the REST API accepts requests without a credential (no --token-file): whoever reaches it can read and change the configuration pushed to every proxy"
        );
    }
    if xds_options.auth.is_none() {
        tracing::warn!(
            xds_listen = %args.xds_listen,
            "ADS accepts streams without a credential (no --token-file or --xds-client-ca): whoever reaches it can read every proxy's configuration"
        );
    }
    if let Some(webhook) = args.inject_webhook {
        tracing::warn!(
            inject_webhook = %webhook,
            "the admission webhooks (/inject, /validate) answer AdmissionReviews from any client (TLS, no client credential): they read nothing from the store and write nothing"
        );
    }
    Ok(Checked {
        tokens,
        token_review,
        tls,
        xds_options,
        ca_counts,
        ca_issued,
        ca_renewal: None,
        ca: None,
        serving_cert,
        xds_auth,
        certificates: None,
        max_connections: caps.rest,
    })
}

/// Step 2: the bound listeners and their addresses.
struct Listeners {
    rest: TcpListener,
    xds: TcpListener,
    /// The injection webhook, checked and bound, with `--inject-webhook`.
    inject: Option<Webhook>,
    bound: Bound,
}

/// Step 2: binds the REST and ADS listeners and, with `--inject-webhook`,
/// the webhook's (which needs the REST listener's TLS from [`check`]).
/// Each has a deep accept queue: every proxy reconnects at once when a
/// replica restarts.
fn bind(args: &Args, tls: Option<TlsAcceptor>) -> Result<Listeners, StartError> {
    let listen = |address: SocketAddr, what: &str| {
        pilot_ads::listen(address)
            .map_err(|e| StartError::Failed(format!("cannot listen on {address} for {what}: {e}")))
    };
    let rest = listen(args.listen, "the REST API")?;
    let xds = listen(args.xds_listen, "ADS")?;
    let inject = match args.inject_webhook {
        Some(address) => Some(inject_webhook::start(
            args,
            tls,
            listen(address, "the injection webhook")?,
        )?),
        None => None,
    };
    let bound = Bound {
        rest: rest.local_addr().map_err(|e| StartError::Failed(e.to_string()))?,
        xds: xds.local_addr().map_err(|e| StartError::Failed(e.to_string()))?,
        inject: inject.as_ref().map(|(address, _)| *address),
    };
    Ok(Listeners {
        rest,
        xds,
        inject: inject.map(|(_, webhook)| webhook),
        bound,
    })
}

/// Step 3: the store and the registries.
struct Opened {
    backend: Arc<dyn ConfigWatch>,
    journal_quarantine: JournalQuarantine,
    /// The replicas sharing the store.
    membership: Arc<dyn Membership>,
    /// Every service registry as one.
    discovery: Arc<dyn ServiceDiscovery>,
    /// The `--services` file and the writer of its registry, to follow.
    services_file: Option<(PathBuf, RegistryWriter)>,
    /// Where the store keeps the CA's self-signed root.
    ca_root: ca::RootStore,
}

/// Step 3: opens the configuration store and the service registries the
/// flags name. Needs the REST address from [`bind`]: it names this
/// replica unless `--replica-name` does.
async fn open(args: &Args, bound: Bound) -> Result<Opened, StartError> {
    let registry = pilot_api::default_registry();
    let replica = args
        .replica_name
        .clone()
        .unwrap_or_else(|| crate::args::default_replica_name(bound.rest.port()));
    let store = backend::open_store(args, registry, &replica).await?;
    let registries = backend::open_registries(args).await?;
    Ok(Opened {
        backend: store.store,
        journal_quarantine: store.quarantine,
        membership: store.membership,
        ca_root: store.ca_root,
        discovery: registries.discovery,
        services_file: registries.file,
    })
}

/// Every configuration event of the Controller's cache, for `/metrics`.
type ConfigEvents = BoxStream<'static, Notification<Arc<DynConfig>>>;

/// Step 3, continued: the certificate authority (the files of
/// `--ca-dir`, or the root the store from [`open`] keeps, made if it has
/// none) and its service beside ADS; with `--kube-token-review`, the
/// TokenReview client first, so a server without one does not start.
async fn open_ca(args: &Args, checked: &mut Checked, opened: &Opened) -> Result<(), StartError> {
    if let Some(reviewer) = &checked.token_review {
        reviewer.client().await.map_err(StartError::Failed)?;
    }
    let (ca, renewal) = ca::open(args, &opened.ca_root)
        .await
        .map_err(StartError::Failed)?;
    checked.ca_renewal = renewal;
    if let Some(serving) = &checked.serving_cert {
        // Before the port serves: a handshake never finds no certificate.
        serving
            .issue(&ca, &args.xds_tls_dns_names, args.workload_cert_ttl)
            .map_err(StartError::Failed)?;
    }
    checked.ca = Some(ca.clone());
    let certificates = ca::CertificateService::new(
        ca,
        checked.xds_auth.clone(),
        Arc::clone(&checked.ca_counts),
        Arc::clone(&checked.ca_issued),
    );
    checked.certificates = Some(certificates.clone());
    checked.xds_options.routes = Some(tonic::service::Routes::new(certificates));
    Ok(())
}

/// Step 4: starts the cached Controller on the store from [`open`], with a
/// subscription to all its events taken first, so the initial load is
/// counted. Objects larger than the API's body limit are quarantined.
fn start_controller(
    backend: Arc<dyn ConfigWatch>,
    max_object_bytes: usize,
) -> (Arc<Controller>, ConfigEvents) {
    let options = {
        let mut value = ControllerOptions::default();
        value.max_object_bytes = Some(max_object_bytes);
        value
    };
    let controller = Arc::new(Controller::with_options(backend, options));
    let config_events = controller.subscribe_all();
    controller.run();
    (controller, config_events)
}

/// Step 4, continued: the registries from [`open`] and, after them, the
/// ServiceEntries and WorkloadEntries of the Controller's cache as one
/// more registry (a platform registry's service keeps its hostname).
/// Their writes reach proxies as this registry's changes.
fn with_service_entries(
    discovery: Arc<dyn ServiceDiscovery>,
    controller: &Arc<Controller>,
) -> Arc<dyn ServiceDiscovery> {
    let entries = pilot_store::service_entry_registry(controller);
    Arc::new(pilot_model::AggregateDiscovery::new(vec![
        discovery,
        Arc::new(entries),
    ]))
}

/// Step 5, continued: the credential source the flags name
/// (`--credentials-dir` and `--ca-bundles-dir`, `--kube-credentials`),
/// and the directories' to
/// follow.
async fn open_credentials(
    args: &Args,
) -> Result<
    (
        Option<Arc<dyn pilot_model::CredentialSource>>,
        Option<Arc<backend::credentials_dir::CredentialsDir>>,
    ),
    StartError,
> {
    if args.credentials_dir.is_some() || args.ca_bundles_dir.is_some() {
        let source = backend::credentials_dir::CredentialsDir::open(
            args.credentials_dir.as_deref(),
            args.ca_bundles_dir.as_deref(),
        )
        .map_err(|e| StartError::Usage(e.to_string()))?;
        return Ok((Some(Arc::clone(&source) as _), Some(source)));
    }
    if args.kube_credentials {
        let client = backend::kube_client(&args.kube_service_account_dir)
            .await
            .map_err(StartError::Failed)?;
        let source = pilot_store_k8s::KubeCredentials::start(client, args.kube_namespace.as_deref());
        return Ok((Some(Arc::new(source)), None));
    }
    Ok((None, None))
}

/// Step 5: the ADS server over the Controller from [`start_controller`]
/// and the registries from [`open`] (not serving yet).
fn build_ads(
    args: &Args,
    controller: &Arc<Controller>,
    discovery: &Arc<dyn ServiceDiscovery>,
    extension_providers: Arc<pilot_api::mesh::ExtensionProviders>,
) -> XdsServer {
    let mut options = XdsOptions::default();
    options.extension_providers = extension_providers;
    options.root_namespace = args.root_namespace.clone();
    options.trust_domain = args.trust_domain.clone();
    options.default_export_to = args.default_export_to.clone();
    options.revision = args.revision.clone().unwrap_or_default();
    options.debounce_quiet = args.debounce_after;
    options.debounce_max = args.debounce_max.max(args.debounce_after);
    options.debounce_leading = !args.no_debounce_leading;
    XdsServer::new(Arc::clone(controller), Arc::clone(discovery), options)
}

/// Step 6: what the handlers and the background tasks share.
struct Shared {
    /// The handlers' state.
    state: AppState,
    /// The store itself: lists and watches of the REST API, status writes,
    /// the readiness probe.
    backend: Arc<dyn ConfigWatch>,
    /// The ADS server.
    xds: XdsServer,
    /// The Controller.
    controller: Arc<Controller>,
    /// The metrics registry.
    metrics: Arc<Metrics>,
    /// This replica among the replicas of the store.
    replicas: Arc<Replicas>,
    /// The status writer's counts, shown in `/metrics`.
    status_writes: Arc<WriterCounts>,
    /// The store probe's verdict, for `/readyz`.
    backend_health: Arc<health::BackendHealth>,
    /// Turns true on shutdown.
    shutdown: watch::Receiver<bool>,
}

/// Step 6: assembles the handlers' [`AppState`] from the tokens and the
/// certificate service's counts ([`check`]), the store and registries ([`open`]), the Controller and
/// the ADS server, with the proxies' event records, this replica's record
/// (named by the addresses from [`bind`]), the metrics registry and the
/// readiness check.
fn assemble(
    checked: &Checked,
    opened: Opened,
    controller: Arc<Controller>,
    xds: XdsServer,
    bound: Bound,
    shutdown: watch::Receiver<bool>,
) -> Shared {
    let Opened {
        backend,
        journal_quarantine,
        membership,
        discovery,
        services_file: _,
        ca_root: _,
    } = opened;
    let proxy_events = Arc::new(ProxyEvents::default());
    let replicas = Arc::new(
        Replicas::new(membership, xds.clone())
            .with_proxy_events(Arc::clone(&proxy_events))
            .with_addresses(bound.rest.to_string(), bound.xds.to_string()),
    );
    let status_writes = Arc::new(WriterCounts::default());
    let mut metrics = Metrics::new(
        xds.clone(),
        Arc::clone(&controller),
        Arc::clone(&journal_quarantine),
        Arc::clone(&proxy_events),
        Arc::clone(&status_writes),
    );
    metrics.register_collector(Box::new(crate::metrics::ReplicaMetrics(Arc::clone(&replicas))));
    metrics.register_collector(Box::new(crate::metrics::CaMetrics(Arc::clone(
        &checked.ca_counts,
    ))));
    let metrics = Arc::new(metrics);
    let synced = {
        let controller = Arc::clone(&controller);
        let discovery = Arc::clone(&discovery);
        Arc::new(move || controller.has_synced() && discovery.has_synced())
            as Arc<dyn Fn() -> bool + Send + Sync>
    };
    let backend_health = Arc::new(health::BackendHealth::default());
    let state = AppState {
        controller: Arc::clone(&controller),
        xds: xds.clone(),
        discovery,
        metrics: Arc::clone(&metrics),
        proxy_events,
        tokens: checked.tokens.clone(),
        token_review: checked.token_review.clone(),
        readiness: health::Readiness {
            backend_health: Arc::clone(&backend_health),
            synced,
        },
        journal_quarantine,
        replicas: Arc::clone(&replicas),
        certificates: Arc::clone(&checked.ca_issued),
    };
    Shared {
        state,
        backend,
        xds,
        controller,
        metrics,
        replicas,
        status_writes,
        backend_health,
        shutdown,
    }
}

/// Step 7: starts the tasks that run beside the listeners until shutdown:
/// the store probe (`/readyz`), this replica's record, the status writer
/// (unless `--status-interval 0`), the push and configuration-event
/// metrics (on the events subscribed in [`start_controller`]), the
/// `--services` file's follower, and the count of the credential
/// source's changes the status writer's findings read.
fn spawn_background(
    args: &Args,
    shared: &Shared,
    config_events: ConfigEvents,
    services_file: Option<(PathBuf, RegistryWriter)>,
    credentials: Option<Arc<dyn pilot_model::CredentialSource>>,
) -> Vec<JoinHandle<()>> {
    let shutdown = &shared.shutdown;
    let mut tasks = Vec::new();
    let closed = || {
        let mut shutdown = shutdown.clone();
        async move { crate::shutdown::closed(&mut shutdown).await }
    };
    tasks.push(tokio::spawn(health::probe(
        Arc::clone(&shared.backend),
        Arc::clone(&shared.backend_health),
        shutdown.clone(),
    )));
    tasks.push(tokio::spawn(Arc::clone(&shared.replicas).run(closed())));
    if !args.status_interval.is_zero() {
        let credentials = credentials.map(|source| {
            let changes = Arc::new(std::sync::atomic::AtomicU64::new(0));
            tasks.push(tokio::spawn(crate::findings::count_credential_changes(
                Arc::clone(&source),
                Arc::clone(&changes),
                shutdown.clone(),
            )));
            (source, changes)
        });
        let writer = StatusWriter::new(
            Arc::clone(&shared.controller),
            Arc::clone(&shared.backend) as Arc<dyn pilot_model::ConfigStore>,
            Arc::clone(&shared.replicas) as Arc<dyn ProxyRecords>,
        )
        .interval(args.status_interval)
        .with_counts(Arc::clone(&shared.status_writes))
        .with_findings(Arc::new(crate::findings::ServerFindings {
            controller: Arc::clone(&shared.controller),
            discovery: Arc::clone(&shared.state.discovery),
            proxies: Arc::clone(&shared.replicas) as Arc<dyn ProxyRecords>,
            domain: format!("svc.{}", args.kube_domain),
            credentials,
            last: Default::default(),
        }));
        tasks.push(tokio::spawn(writer.run(closed())));
    }
    tasks.push(tokio::spawn(metrics::track_config_events(
        Arc::clone(&shared.metrics),
        config_events,
        shutdown.clone(),
    )));
    if let Some((path, writer)) = services_file {
        tasks.push(tokio::spawn(backend::services_file::follow(
            path,
            writer,
            Duration::from_millis(args.services_poll_ms.max(10)),
            shutdown.clone(),
        )));
    }
    tasks
}

/// Step 8: the serving listeners and the tasks to wait for on shutdown.
struct Serving {
    /// `http` or `https`: the REST listener's scheme.
    scheme: &'static str,
    rest: JoinHandle<()>,
    xds: JoinHandle<Result<(), tonic::transport::Error>>,
    /// The background tasks and the webhook.
    tasks: Vec<JoinHandle<()>>,
}

/// Step 8: serves the listeners from [`bind`]: the REST router (the API
/// over the store and this server's routes, on the state from
/// [`assemble`]) with the connection limits of the flags and [`check`],
/// the webhook, and ADS with the options from [`check`]; each until the
/// shutdown signal.
fn serve(
    args: &Args,
    listeners: Listeners,
    shared: Shared,
    tls: Option<TlsAcceptor>,
    xds_options: ServeOptions,
    max_connections: usize,
    mut tasks: Vec<JoinHandle<()>>,
) -> Serving {
    let shutdown = shared.shutdown.clone();
    let xds = shared.xds.clone();
    // The kinds `/validate` checks: the ones the REST API serves.
    let registry = shared.backend.registry().clone();
    let api = router::api(args, &shared.state, shared.backend, shutdown.clone());
    let scheme = if tls.is_some() { "https" } else { "http" };
    let limits = serve::Limits {
        header_read_timeout: Duration::from_millis(args.header_read_timeout_ms.max(1)),
        body_read_timeout: Duration::from_millis(args.body_read_timeout_ms.max(1)),
        max_connections,
    };
    if let Some(webhook) = listeners.inject {
        tasks.push(tokio::spawn(webhook.serve(limits, shutdown.clone(), registry)));
    }
    if let Some(controller) = crate::validation_config::ValidationConfig::from_args(args) {
        tasks.push(tokio::spawn(controller.run(shutdown.clone())));
    }
    let rest = tokio::spawn(serve::serve(
        listeners.rest,
        router::router(shared.state, api, crate::ui::Settings::from_args(args)),
        tls,
        limits,
        shutdown.clone(),
    ));
    let xds_task = {
        let mut shutdown = shutdown.clone();
        let listener = listeners.xds;
        tokio::spawn(async move {
            xds.serve_with(listener, xds_options, async move {
                let _ = shutdown.wait_for(|closing| *closing).await;
            })
            .await
        })
    };
    Serving {
        scheme,
        rest,
        xds: xds_task,
        tasks,
    }
}

/// Step 8, last: logs the addresses and writes them to `--ready-file`
/// (written aside and renamed, so a reader never sees half of it).
fn announce(args: &Args, bound: Bound, scheme: &str) -> Result<(), StartError> {
    tracing::info!(rest = %format!("{scheme}://{}", bound.rest), xds = %bound.xds, "pilot-discovery listening");
    if let Some(path) = &args.ready_file {
        let body =
            serde_json::json!({"rest": format!("{scheme}://{}", bound.rest), "xds": bound.xds.to_string()});
        let temporary = path.with_extension("tmp");
        std::fs::write(&temporary, body.to_string())
            .and_then(|()| std::fs::rename(&temporary, path))
            .map_err(|e| StartError::Failed(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Step 9: turns the shutdown signal on (listeners close, watch and ADS
/// streams end), then waits for the REST listener to finish its in-flight
/// requests, for ADS, and for every task from [`serve`].
async fn drain(closing: watch::Sender<bool>, serving: Serving) {
    tracing::info!("shutting down: closing listeners, ending streams, finishing in-flight requests");
    closing.send_replace(true);
    let _ = serving.rest.await;
    match serving.xds.await {
        Ok(Err(error)) => tracing::warn!(%error, "ADS server ended with an error"),
        Err(error) => tracing::warn!(%error, "ADS server task failed"),
        Ok(Ok(())) => {}
    }
    for task in serving.tasks {
        let _ = task.await;
    }
    tracing::info!("stopped");
}
