//! The command line of `pilot-discovery`, and its config file (`--config
//! FILE`: a YAML mapping of the same option names, which the command line
//! overrides).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// `--inject-failure-policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum InjectFailurePolicy {
    /// Admit the pod without a sidecar, with a warning.
    Ignore,
    /// Refuse the pod, with the reason.
    Fail,
}

/// Where configuration objects are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StoreKind {
    /// In this process (with `--data-dir`, persisted to disk).
    Memory,
    /// An etcd v3 cluster (`--etcd-endpoints`).
    Etcd,
    /// Kubernetes custom resources (the cluster of `KUBECONFIG`, or the
    /// one the server runs in).
    Kubernetes,
}

/// A service registry besides the `--services` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RegistryKind {
    /// Services and instances registered in etcd (`--etcd-endpoints`).
    Etcd,
    /// Kubernetes Services, EndpointSlices and Pods.
    Kubernetes,
}

/// `--ca-root-renew-before`: when the root is due for renewal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RenewBefore {
    /// When less than this share of its lifetime (0 to 1) is left.
    Share(f64),
    /// When less than this is left.
    Remaining(std::time::Duration),
}

impl RenewBefore {
    /// `20%` or a duration (`90days`).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim().strip_suffix('%') {
            Some(percent) => match percent.trim().parse::<f64>() {
                Ok(value) if value > 0.0 && value < 100.0 => Ok(RenewBefore::Share(value / 100.0)),
                _ => Err(format!(
                    "{text:?}: a share of the root's lifetime is over 0% and under 100%"
                )),
            },
            None => humantime::parse_duration(text)
                .map(RenewBefore::Remaining)
                .map_err(|e| format!("{text:?} is neither a percentage (20%) nor a duration (90days): {e}")),
        }
    }
}

/// pilot-discovery: the REST configuration API and the ADS server.
#[derive(Debug, Clone, Parser)]
#[command(name = "pilot-discovery", version, about, long_about = None, args_override_self = true)]
pub struct Args {
    /// A YAML file of options (`store: etcd`, `etcd-endpoints: [...]`, ...);
    /// flags override it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address of the REST API (and /healthz, /readyz, /metrics); port 0
    /// picks a free port.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Address of the ADS (xDS) gRPC server.
    #[arg(long, default_value = "127.0.0.1:15010", value_name = "ADDR")]
    pub xds_listen: SocketAddr,
    /// The configuration store.
    #[arg(long, value_enum, default_value = "memory")]
    pub store: StoreKind,
    /// With `--store memory`: keep the configuration in this directory so
    /// it survives a restart.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// etcd client URLs, comma separated.
    #[arg(long, value_delimiter = ',', value_name = "URLS")]
    pub etcd_endpoints: Vec<String>,
    /// The etcd key prefix.
    #[arg(long, default_value = "/pilot/config", value_name = "PREFIX")]
    pub etcd_prefix: String,
    /// With Kubernetes: work in this namespace only (default: every
    /// namespace, which needs cluster-wide RBAC).
    #[arg(long, value_name = "NAMESPACE")]
    pub kube_namespace: Option<String>,
    /// With `--store kubernetes`: install (server-side apply) the CRDs of
    /// every kind at start.
    #[arg(long)]
    pub install_crds: bool,
    /// With `--registry kubernetes`: the cluster's DNS domain.
    #[arg(long, default_value = "cluster.local", value_name = "DOMAIN")]
    pub kube_domain: String,
    /// The mesh's root namespace (Istio's `meshConfig.rootNamespace`):
    /// its selector-less Sidecar is the mesh's default scope, its
    /// selector-less PeerAuthentication and its AuthorizationPolicies apply
    /// to the whole mesh.
    #[arg(long, default_value = "istio-system", value_name = "NAMESPACE")]
    pub root_namespace: String,
    /// Where services, VirtualServices and DestinationRules without an
    /// `exportTo` of their own are visible, comma separated: `*` (every
    /// namespace), `.` (their own) or namespaces (Istio's
    /// `meshConfig.defaultServiceExportTo` and siblings).
    #[arg(long, value_delimiter = ',', default_value = "*", value_name = "NAMESPACES")]
    pub default_export_to: Vec<String>,
    /// A YAML file of services and instances for the in-memory registry,
    /// reloaded when it changes.
    #[arg(long, value_name = "FILE")]
    pub services: Option<PathBuf>,
    /// More service registries (repeatable); all are combined.
    #[arg(long = "registry", value_enum, value_name = "KIND")]
    pub registries: Vec<RegistryKind>,
    /// Bearer tokens, one per line: `TOKEN ro|rw [NAME]`. With it, every
    /// request but /healthz and /readyz needs a token.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve the REST API without any credential on an address that is
    /// not loopback (refused at start otherwise): anyone who reaches it
    /// may read and change the configuration pushed to every proxy.
    #[arg(long)]
    pub allow_unauthenticated: bool,
    /// Do not serve the read-only console at `/ui` (served by default,
    /// behind the same tokens and TLS as the REST API).
    #[arg(long)]
    pub no_ui: bool,
    /// Serve the REST API over TLS with this certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) for `--tls-cert`.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = 1024 * 1024, value_name = "BYTES")]
    pub max_body_bytes: usize,
    /// Events of a kind the REST API's watch cache keeps: one store watch
    /// per kind serves every REST watcher, and a watcher more than this
    /// many events behind is ended with `410 Expired` (it lists and
    /// watches again, as from kube-apiserver). 0: a store watch per
    /// watcher.
    #[arg(long, default_value_t = 1024, value_name = "EVENTS")]
    pub watch_cache_events: usize,
    /// Shortest time between two writes to one REST watcher: under a
    /// burst, what comes meanwhile is written together (an event after a
    /// quiet interval goes at once). 0s: every event as soon as seen.
    #[arg(long, default_value = "100ms", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub watch_write_interval: std::time::Duration,
    /// TLS credentials for the proxies, laid out as mounted
    /// `kubernetes.io/tls` Secrets: `DIR/<namespace>/<name>/tls.crt`,
    /// `tls.key` and optionally `ca.crt`. Sent over SDS to the proxies
    /// whose listeners name them (a Gateway API listener's
    /// `certificateRefs`, an Istio Gateway's or DestinationRule's
    /// `credentialName`): a proxy reads its own namespace's, a router
    /// another namespace's under a ReferenceGrant. Read again every
    /// `--credentials-poll-ms`.
    #[arg(long, value_name = "DIR")]
    pub credentials_dir: Option<PathBuf>,
    /// Certificate authority bundles, laid out as mounted ConfigMaps:
    /// `DIR/<namespace>/<name>/ca.crt`. A Gateway API BackendTLSPolicy's
    /// `caCertificateRefs` name them; they are sent over SDS to the
    /// proxies that connect to its Services. Read again every
    /// `--credentials-poll-ms`.
    #[arg(long, value_name = "DIR")]
    pub ca_bundles_dir: Option<PathBuf>,
    /// Serve the cluster's `kubernetes.io/tls` Secrets (of
    /// `--kube-namespace` when set) as `--credentials-dir` serves a
    /// directory's, followed with a watch (field selector
    /// `type=kubernetes.io/tls`: no other Secret is read), and the
    /// `ca.crt` of its ConfigMaps as `--ca-bundles-dir` serves them. Needs
    /// RBAC to list and watch Secrets and ConfigMaps. Not with
    /// `--credentials-dir` or `--ca-bundles-dir`.
    #[arg(long, conflicts_with_all = ["credentials_dir", "ca_bundles_dir"])]
    pub kube_credentials: bool,
    /// How often `--credentials-dir` and `--ca-bundles-dir` are read
    /// again, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub credentials_poll_ms: u64,
    /// How often the `--services` file is checked for changes, in
    /// milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub services_poll_ms: u64,
    /// Once listening, write the bound addresses here as JSON
    /// (`{"rest": URL, "xds": ADDR}`).
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Log level: error, warn, info, debug or trace.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    pub log_level: tracing::Level,
    /// Serve the sidecar injection webhook (AdmissionReview v1 at
    /// `POST /inject`) on this address, over HTTPS with `--tls-cert` and
    /// `--tls-key` (required).
    #[arg(long, value_name = "ADDR", requires = "tls_cert")]
    pub inject_webhook: Option<SocketAddr>,
    /// What the webhook answers for a review it cannot read or a pod it
    /// cannot inject: `ignore` admits it without a sidecar (with a
    /// warning), `fail` refuses it with the reason.
    #[arg(long, value_enum, default_value = "ignore")]
    pub inject_failure_policy: InjectFailurePolicy,
    /// Keep this ValidatingWebhookConfiguration pointing at the webhook
    /// listener's certificate: write the CA (`--webhook-ca-bundle`) into
    /// every webhook's `clientConfig.caBundle`, and once a dry-run create of
    /// an invalid object is denied by the webhook, set `failurePolicy: Fail`.
    /// Needs `--inject-webhook` and a Kubernetes client (KUBECONFIG or
    /// in-cluster).
    #[arg(long, value_name = "NAME", requires = "inject_webhook")]
    pub validation_webhook_config: Option<String>,
    /// The CA (PEM) written into the webhook configuration's caBundle
    /// (default: the last certificate of the `--tls-cert` chain).
    #[arg(long, value_name = "FILE", requires = "validation_webhook_config")]
    pub webhook_ca_bundle: Option<PathBuf>,
    /// The mesh config file: its `sidecarInjector` section is the
    /// webhook's template (default: built-in values, as `pilotctl
    /// kube-inject`), its `extensionProviders` the external authorizers of
    /// CUSTOM AuthorizationPolicies. Read at start.
    #[arg(long, value_name = "FILE")]
    pub mesh_config: Option<PathBuf>,

    // ADS security (see `auth::xds`).
    /// Serve ADS over TLS with this certificate chain (PEM).
    #[arg(long, value_name = "FILE", requires = "xds_tls_key")]
    pub xds_tls_cert: Option<PathBuf>,
    /// The private key (PEM) for `--xds-tls-cert`.
    #[arg(long, value_name = "FILE", requires = "xds_tls_cert")]
    pub xds_tls_key: Option<PathBuf>,
    /// Serve ADS over TLS with a certificate pilot's own CA issues for
    /// these DNS names (comma separated; the Service's, e.g.
    /// `pilot-discovery.pilot-system,pilot-discovery.pilot-system.svc`),
    /// as istiod serves its secure port: proxies verify it with the mesh's
    /// trust bundle (`--root-cert-configmap`). Reissued at half its life
    /// (`--workload-cert-ttl`) and when the root changes.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        conflicts_with = "xds_tls_cert"
    )]
    pub xds_tls_dns_names: Vec<String>,
    /// Write the mesh's trust bundle into a ConfigMap of this name (key
    /// `root-cert.pem`) in every namespace, kept current as namespaces
    /// come and the root is renewed (Istio's `istio-ca-root-cert`):
    /// injected sidecars read it to verify pilot-discovery and their
    /// peers. Needs a Kubernetes client.
    #[arg(long, value_name = "NAME")]
    pub root_cert_configmap: Option<String>,
    /// mTLS: accept ADS clients with a certificate from this CA (PEM),
    /// whose SPIFFE identity (`spiffe://DOMAIN/ns/NS/sa/SA`) bounds the node
    /// ids they may claim. Without `--token-file`, a certificate is required.
    #[arg(long, value_name = "FILE", requires = "xds_tls_cert")]
    pub xds_client_ca: Option<PathBuf>,
    /// Accept ADS clients without any credential on an address that is not
    /// loopback (refused at start otherwise).
    #[arg(long)]
    pub xds_allow_unauthenticated: bool,

    // ADS connections: see `pilot_ads::ServeOptions`.
    /// ADS connections open at once; one more is closed as soon as it is
    /// accepted (the proxy retries, here or at another replica). Default:
    /// what the open-files limit leaves after the REST connections, at
    /// most 100,000; a cap the limit cannot hold is refused at start.
    #[arg(long, value_name = "N")]
    pub xds_max_connections: Option<usize>,
    /// An ADS connection must open a stream its credential admits within
    /// this long of being accepted (TLS handshake, HTTP/2 preface and the
    /// stream's headers), or it is closed: silent sockets cannot hold
    /// connection slots. Examples: `10s`, `500ms`.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub xds_handshake_timeout: std::time::Duration,
    /// An ADS connection whose writes have made no progress for this long
    /// (the client does not read what it is sent) is closed, whatever it
    /// is doing. Examples: `30s`, `2m`.
    #[arg(long, default_value = "30s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub xds_write_timeout: std::time::Duration,
    /// Bytes of requests received but not yet whole (partial gRPC
    /// messages) that the streams of one ADS connection may hold together;
    /// a stream going over it, or whose one request is larger, ends with
    /// RESOURCE_EXHAUSTED. The default holds a sidecar's largest request
    /// (its EDS subscription, 160 KB at 1,000 services) 25 times over.
    #[arg(long, default_value_t = 4 << 20, value_name = "BYTES")]
    pub xds_request_buffer: usize,
    /// ADS connections from one IP address that have not opened an
    /// admitted stream yet, at once; more are closed as soon as they are
    /// accepted, so one address cannot take every slot.
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub xds_max_pending_per_address: usize,
    /// Concurrent ADS streams on one connection (HTTP/2
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub xds_max_streams_per_connection: u32,
    /// Concurrent ADS streams under one credential (a token, a client
    /// certificate's identity) over all its connections; one more is
    /// refused with RESOURCE_EXHAUSTED. Default: no cap.
    #[arg(long, value_name = "N")]
    pub xds_max_streams_per_credential: Option<usize>,
    /// End every ADS stream after this long (give or take 10%), after the
    /// response in flight, so proxies reconnect and spread again over the
    /// replicas (Istio's default is 30m; off unless given). Examples:
    /// `30m`, `90s`, `1h`.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub xds_max_connection_age: Option<std::time::Duration>,

    // Pushes: see `pilot_ads::XdsOptions`.
    /// A push waits until no change has arrived for this long (Istio's
    /// `PILOT_DEBOUNCE_AFTER`), so that changes made together go out
    /// together. Examples: `10ms`, `100ms`.
    #[arg(long, default_value = "10ms", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub debounce_after: std::time::Duration,
    /// ...but no longer than this after its first change (Istio's
    /// `PILOT_DEBOUNCE_MAX`), however steadily changes keep coming.
    #[arg(long, default_value = "50ms", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub debounce_max: std::time::Duration,
    /// Debounce every push. By default a change that comes alone
    /// (`--debounce-after` or more after the last change, and not while a
    /// push was being built) is pushed at once, and only the changes
    /// right behind it wait.
    #[arg(long)]
    pub no_debounce_leading: bool,

    /// How often routing objects' distribution status is computed and
    /// written back to the store (only objects whose status changed are
    /// written: at most one write per object per interval). `0s` turns
    /// status reporting off.
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub status_interval: std::time::Duration,

    /// This control plane's revision (Istio's `istio.io/rev`), for canary
    /// upgrades: two revisions run side by side on one store. The injection
    /// webhook injects only pods labelled `istio.io/rev: REVISION` (or of
    /// namespaces its webhook configuration selects) and points their
    /// sidecars at `pilot-discovery-REVISION.pilot-system:15010` unless the
    /// mesh config names an address; configuration labelled `istio.io/rev`
    /// for another revision is not served. Default: the default revision
    /// (objects labelled `istio.io/rev: default` or not labelled).
    #[arg(long, value_name = "REVISION", value_parser = parse_revision)]
    pub revision: Option<String>,

    // Several replicas on one store.
    /// This replica's name among the replicas sharing the store (etcd):
    /// unique per replica. Default: the host name and the REST port,
    /// `<hostname>-<port>`.
    #[arg(long, value_name = "NAME")]
    pub replica_name: Option<String>,

    /// How long a replica's record (its proxies, shown by every replica's
    /// proxy-status and counted in objects' status) and its status-writer
    /// election outlive the replica: a replica killed without a clean
    /// shutdown drops out within this. It publishes every third of it.
    #[arg(long, default_value = "15s", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub replica_ttl: std::time::Duration,

    // The certificate authority (see `ca/`).
    /// The CA's directory, Istio's `cacerts` layout: `ca-cert.pem` and
    /// `ca-key.pem` (with `cert-chain.pem` and `root-cert.pem`) sign when
    /// present; otherwise a self-signed root is made there once, and every
    /// replica sharing the directory and every restart signs with it.
    /// Without it the self-signed root is kept in the configured store
    /// (an etcd key, a Kubernetes Secret, `--data-dir`), made once, so
    /// every replica and every restart signs with it; only the memory
    /// store without `--data-dir` keeps it in memory, new at each start.
    #[arg(long, value_name = "DIR")]
    pub ca_dir: Option<PathBuf>,
    /// The trust domain of workload identities,
    /// `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>`.
    #[arg(long, default_value = "cluster.local", value_name = "DOMAIN")]
    pub trust_domain: String,
    /// Another trust domain whose client certificates are accepted as
    /// this mesh's (Istio's trust domain aliases): a workload of
    /// `spiffe://ALIAS/ns/NS/sa/SA` is `NS/SA` here, and renews into
    /// this mesh's trust domain. Repeatable. A client certificate of any
    /// other trust domain is refused.
    #[arg(long = "trust-domain-alias", value_name = "DOMAIN")]
    pub trust_domain_aliases: Vec<String>,
    /// Accept Kubernetes service-account tokens (a pod's projected token)
    /// on ADS and the certificate service, each checked with a TokenReview
    /// by the Kubernetes API (needs a Kubernetes client: KUBECONFIG, or
    /// in-cluster); the caller is `spiffe://<trust-domain>/ns/NS/sa/SA`.
    /// An unreachable API fails the call UNAVAILABLE, never trusts.
    #[arg(long)]
    pub kube_token_review: bool,
    /// With `--kube-token-review`: an audience a token must be for
    /// (repeatable; Istio's `istio-ca` by default).
    #[arg(
        long = "token-audience",
        default_value = "istio-ca",
        value_name = "AUDIENCE",
        requires = "kube_token_review"
    )]
    pub token_audiences: Vec<String>,
    /// With `--kube-token-review`: the service account (`NS/SA`) of the
    /// node proxies (ztunnel); a token of it bound to a node is that
    /// node's proxy, which may ask for the certificates of the workloads
    /// on its node. Repeatable.
    #[arg(
        long = "ztunnel-service-account",
        default_value = "istio-system/ztunnel",
        value_name = "NS/SA",
        requires = "kube_token_review"
    )]
    pub ztunnel_service_accounts: Vec<String>,
    /// In a pod (`KUBERNETES_SERVICE_HOST`/`PORT` set, no KUBECONFIG): the
    /// service-account directory the Kubernetes client is built from
    /// (`token`, reread when it changes; `ca.crt`; `namespace`, where the
    /// replicas' Leases and the CA's root Secret go unless
    /// `--kube-namespace` names another).
    #[arg(
        long,
        default_value = "/var/run/secrets/kubernetes.io/serviceaccount",
        value_name = "DIR"
    )]
    pub kube_service_account_dir: PathBuf,
    /// A workload certificate's lifetime when its request asks none
    /// (Istio's `DEFAULT_WORKLOAD_CERT_TTL`).
    #[arg(long, default_value = "24h", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub workload_cert_ttl: std::time::Duration,
    /// The longest lifetime a workload certificate request may ask
    /// (Istio's `MAX_WORKLOAD_CERT_TTL`); a longer one is refused.
    #[arg(long, default_value = "90days", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub max_workload_cert_ttl: std::time::Duration,
    /// A self-signed root's lifetime (Istio's
    /// `CITADEL_SELF_SIGNED_CA_CERT_TTL`).
    #[arg(long, default_value = "10years", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub ca_root_ttl: std::time::Duration,
    /// Renew the self-signed root (kept in the store, not `--ca-dir`)
    /// when its remaining lifetime falls below this: a share of its
    /// lifetime (`20%`, Istio's default grace period) or a duration
    /// (`90days`). The new root signs from then on; the old one stays in
    /// the trust bundle, with a cross-certificate to the new one, until it
    /// expires.
    #[arg(long, default_value = "20%", value_name = "PERCENT|DURATION", value_parser = RenewBefore::parse)]
    pub ca_root_renew_before: RenewBefore,
    /// How often the CA checks whether the root is due for renewal, and
    /// reads the root another replica may have renewed in the store
    /// (Istio's `CITADEL_SELF_SIGNED_ROOT_CERT_CHECK_INTERVAL`).
    #[arg(long, default_value = "1h", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub ca_root_check_interval: std::time::Duration,
    /// The most issued-certificate records kept for
    /// `/debug/certificates` (one per identity and requesting address);
    /// expired ones are dropped first, then the oldest.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub ca_issued_records_max: usize,

    // REST connection limits (see `serve::Limits`).
    /// Close a REST connection that has not sent a complete request head
    /// within this many milliseconds (idle keep-alive connections too).
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub header_read_timeout_ms: u64,
    /// A request's whole body must arrive within this many milliseconds
    /// of its head, or it is answered 408 and the connection closed.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub body_read_timeout_ms: u64,
    /// REST connections open at once; beyond it a connection is answered
    /// 503 and closed (`/healthz` and `/readyz` are still answered, in a
    /// reserve of 16 connections). The soft open-files limit is raised to
    /// the hard one at start. Default: a quarter of what that limit leaves
    /// for connections, at most 10,000; a cap the limit cannot hold is
    /// refused at start.
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    // etcd security.
    /// Trust this CA (PEM) for etcd's certificate (`https://` endpoints).
    #[arg(long, value_name = "FILE")]
    pub etcd_ca_file: Option<PathBuf>,
    /// Client certificate (PEM) for etcd.
    #[arg(long, value_name = "FILE", requires = "etcd_key")]
    pub etcd_cert: Option<PathBuf>,
    /// The private key (PEM) for `--etcd-cert`.
    #[arg(long, value_name = "FILE", requires = "etcd_cert")]
    pub etcd_key: Option<PathBuf>,
    /// etcd user (with authentication on); the password is read from
    /// `--etcd-password-file`.
    #[arg(long, value_name = "USER", requires = "etcd_password_file")]
    pub etcd_user: Option<String>,
    /// A file holding the etcd user's password (its first line).
    #[arg(long, value_name = "FILE", requires = "etcd_user")]
    pub etcd_password_file: Option<PathBuf>,
}

impl Args {
    /// Parses `argv`, reading `--config` first when given. Errors are
    /// clap's (usage, exit code 2) or the config file's.
    pub fn parse_with_config(argv: Vec<String>) -> Result<Self, clap::Error> {
        let first = Args::try_parse_from(&argv)?;
        let Some(path) = &first.config else {
            return Ok(first);
        };
        let mut merged = vec![argv.first().cloned().unwrap_or_default()];
        merged.extend(config_file_args(path).map_err(|message| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{message}\n"))
        })?);
        merged.extend(argv.into_iter().skip(1));
        Args::try_parse_from(merged)
    }
}

/// The options in a config file as `--name=value` arguments.
fn config_file_args(path: &std::path::Path) -> Result<Vec<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let source = path.display().to_string();
    let values = pilot_model::document::parse_values(&source, &text).map_err(|e| e.to_string())?;
    let Some(value) = values.into_iter().next() else {
        return Ok(Vec::new());
    };
    let serde_json::Value::Object(options) = value else {
        return Err(format!("{source}: expected a mapping of option names to values"));
    };
    let mut args = Vec::new();
    for (name, value) in options {
        if name == "config" {
            return Err(format!("{source}: a config file cannot name another config file"));
        }
        let items = match value {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        };
        for item in items {
            let text = match item {
                serde_json::Value::String(s) => s,
                serde_json::Value::Bool(true) => String::new(),
                other => other.to_string(),
            };
            args.push(if text.is_empty() {
                format!("--{name}")
            } else {
                format!("--{name}={text}")
            });
        }
    }
    Ok(args)
}

/// A duration as `N` followed by `ms`, `s`, `m` or `h`.
fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit: write e.g. 30m, 90s, 1h or 500ms"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a whole number"))?;
    if number == 0 {
        return Err(format!("{text:?}: the age must be more than zero"));
    }
    let seconds = match unit {
        "ms" => return Ok(std::time::Duration::from_millis(number)),
        "s" => number,
        "m" => number * 60,
        "h" => number * 3600,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m or h)")),
    };
    Ok(std::time::Duration::from_secs(seconds))
}

/// The default replica name (`--replica-name`): the host name and the
/// REST port.
pub(crate) fn default_replica_name(rest_port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|text| text.trim().to_string())
        .filter(|host| !host.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "pilot".to_string());
    format!("{host}-{rest_port}")
}

/// A revision name: a DNS-1123 label, as it names Services and webhook
/// configurations (`pilot-discovery-REVISION`); `default` is the default
/// revision's label value, not a revision of its own.
fn parse_revision(value: &str) -> Result<String, String> {
    if value == "default" {
        return Err("`default` is the default revision's label value: leave --revision out".into());
    }
    if value.is_empty()
        || value.len() > 40
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        || value.starts_with('-')
        || value.ends_with('-')
    {
        return Err(format!(
            "{value:?} is not a revision name: lower-case letters, digits and '-', starting and ending with a letter or digit, at most 40 characters (it names the Service pilot-discovery-REVISION)"
        ));
    }
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_a_label_that_can_name_a_service() {
        assert_eq!(parse_revision("canary").as_deref(), Ok("canary"));
        assert_eq!(parse_revision("1-30-0").as_deref(), Ok("1-30-0"));
        for bad in ["", "Canary", "1.30", "-a", "a-", &"a".repeat(41)] {
            let error = parse_revision(bad).unwrap_err();
            assert!(error.contains("not a revision name"), "{bad}: {error}");
        }
        assert!(
            parse_revision("default")
                .unwrap_err()
                .contains("leave --revision out")
        );
    }

    #[test]
    fn token_audiences_default_to_istio_ca_and_need_token_review() {
        let parse = |extra: &[&str]| {
            let argv = ["pilot-discovery"]
                .iter()
                .chain(extra)
                .map(|s| s.to_string())
                .collect();
            Args::parse_with_config(argv)
        };
        let args = parse(&["--kube-token-review"]).unwrap();
        assert_eq!(args.token_audiences, ["istio-ca"]);
        let args = parse(&[
            "--kube-token-review",
            "--token-audience",
            "a",
            "--token-audience",
            "b",
        ])
        .unwrap();
        assert_eq!(args.token_audiences, ["a", "b"]);
        assert_eq!(args.ztunnel_service_accounts, ["istio-system/ztunnel"]);
        let error = parse(&["--token-audience", "a"]).unwrap_err().to_string();
        assert!(error.contains("--kube-token-review"), "{error}");
        let error = parse(&["--ztunnel-service-account", "kube-system/ztunnel"])
            .unwrap_err()
            .to_string();
        assert!(error.contains("--kube-token-review"), "{error}");
        let args = parse(&[
            "--kube-token-review",
            "--ztunnel-service-account",
            "kube-system/zt",
        ])
        .unwrap();
        assert_eq!(args.ztunnel_service_accounts, ["kube-system/zt"]);
        assert_eq!(
            parse(&[]).unwrap().kube_service_account_dir,
            PathBuf::from("/var/run/secrets/kubernetes.io/serviceaccount")
        );
    }

    #[test]
    fn the_default_name_is_the_host_and_the_port() {
        let name = default_replica_name(8080);
        assert!(name.ends_with("-8080"), "{name}");
        assert!(name.len() > "-8080".len(), "{name}");
    }

    #[test]
    fn flags_override_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pilot.yaml");
        std::fs::write(
            &file,
            "store: etcd\netcd-endpoints: [http://a:2379, http://b:2379]\nlisten: 127.0.0.1:9000\n",
        )
        .unwrap();
        let argv = |extra: &[&str]| {
            let mut argv = vec![
                "pilot-discovery".to_string(),
                "--config".into(),
                file.display().to_string(),
            ];
            argv.extend(extra.iter().map(|s| s.to_string()));
            argv
        };
        let args = Args::parse_with_config(argv(&[])).unwrap();
        assert_eq!(args.store, StoreKind::Etcd);
        assert_eq!(args.etcd_endpoints, ["http://a:2379", "http://b:2379"]);
        assert_eq!(args.listen.port(), 9000);
        let args = Args::parse_with_config(argv(&["--listen", "127.0.0.1:0", "--store", "memory"])).unwrap();
        assert_eq!(args.listen.port(), 0);
        assert_eq!(args.store, StoreKind::Memory);
        std::fs::write(&file, "stroe: etcd\n").unwrap();
        let error = Args::parse_with_config(argv(&[])).unwrap_err();
        assert!(error.to_string().contains("--stroe"), "{error}");
    }

    #[test]
    fn connection_ages_need_a_unit_and_more_than_zero() {
        assert_eq!(parse_duration("30m"), Ok(std::time::Duration::from_secs(1800)));
        assert_eq!(
            parse_duration("1500ms"),
            Ok(std::time::Duration::from_millis(1500))
        );
        assert!(parse_duration("30").unwrap_err().contains("no unit"));
        assert!(parse_duration("0s").unwrap_err().contains("more than zero"));
        assert!(parse_duration("5d").unwrap_err().contains("unknown unit"));
    }
}
