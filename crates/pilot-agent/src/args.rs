//! The flags of `pilot-agent proxy sidecar|router|ingress`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::identity::{IdentityInput, InterceptionMode};

/// Flags shared by `pilot-agent proxy sidecar|router|ingress`. Identity
/// flags fall back to the environment a Kubernetes pod gives.
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// The workload's IP.
    #[arg(long, env = "INSTANCE_IP", value_name = "IP")]
    pub ip: Option<String>,
    /// The proxy's id (default `POD_NAME.POD_NAMESPACE`).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The workload's namespace.
    #[arg(long, env = "POD_NAMESPACE", value_name = "NAMESPACE")]
    pub namespace: Option<String>,
    /// The proxy's DNS domain (default `<namespace>.svc.cluster.local`).
    #[arg(long, value_name = "DOMAIN")]
    pub domain: Option<String>,
    /// The downward API's labels file (`key="value"` lines); a change
    /// hot-restarts Envoy with the new labels.
    #[arg(long, env = "PILOT_AGENT_LABELS_FILE", value_name = "FILE")]
    pub labels_file: Option<PathBuf>,
    /// A workload label `key=value` (repeatable; wins over the file).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// How traffic reaches the sidecar.
    #[arg(long, value_enum, default_value_t = InterceptionMode::Redirect)]
    pub interception_mode: InterceptionMode,
    /// Envoy's service cluster (default: the `app` label).
    #[arg(long, value_name = "NAME")]
    pub service_cluster: Option<String>,
    /// pilot-discovery's ADS address (repeatable or comma separated: one
    /// per replica).
    #[arg(
        long = "discovery-address",
        value_delimiter = ',',
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:15010"
    )]
    pub discovery_addresses: Vec<String>,
    /// pilot-discovery's REST URL, where Envoy's starts, exits and restarts
    /// are reported (`POST /v1/proxy-events`); none: not reported.
    #[arg(long, env = "PILOT_DISCOVERY_URL", value_name = "URL")]
    pub discovery_url: Option<String>,
    /// A file holding the bearer token for `--discovery-url`.
    #[arg(long, env = "PILOT_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The Envoy binary.
    #[arg(long, env = "ENVOY_BINARY", default_value = "envoy", value_name = "PATH")]
    pub envoy_binary: PathBuf,
    /// Where bootstraps (`envoy-rev<EPOCH>.json`) are written.
    #[arg(long, default_value = "/etc/pilot/proxy", value_name = "DIR")]
    pub config_dir: PathBuf,
    /// Envoy's admin port, on 127.0.0.1 only.
    #[arg(long, default_value_t = 15000, value_name = "PORT")]
    pub admin_port: u16,
    /// The agent's status address: /healthz/ready and /stats/prometheus.
    #[arg(long, default_value = "127.0.0.1:15020", value_name = "ADDR")]
    pub status_addr: SocketAddr,
    /// Envoy's `--base-id` (shared memory of hot restart): distinct per
    /// Envoy on one host.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub base_id: u32,
    /// How long the old epoch drains during a hot restart (Envoy's
    /// `--drain-time-s`).
    #[arg(long, default_value = "45s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub drain_duration: Duration,
    /// When the old epoch is told to exit during a hot restart (Envoy's
    /// `--parent-shutdown-time-s`).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub parent_shutdown_duration: Duration,
    /// On SIGTERM: how long Envoy drains its listeners before it is
    /// stopped (less if no connection is left).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub termination_drain_duration: Duration,
    /// Envoy's worker threads.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub concurrency: u16,
    /// A file whose change hot-restarts Envoy (certificates; repeatable).
    #[arg(long = "watch-file", value_name = "FILE")]
    pub watch_files: Vec<PathBuf>,
    /// How often watched files are checked.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub watch_interval: Duration,
    /// Envoy exits tolerated in a row before the agent gives up.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub max_retries: u32,
    /// The first restart delay; it doubles with each retry.
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub initial_backoff: Duration,
    /// How long a restarted Envoy must stay ready before the retry budget
    /// is refilled.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "DURATION")]
    pub budget_reset_after: Duration,
    /// One more argument for Envoy (repeatable).
    #[arg(long = "envoy-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub envoy_args: Vec<String>,
    /// Envoy's log level.
    #[arg(long, default_value = "warning", value_name = "LEVEL")]
    pub envoy_log_level: String,
}

impl ProxyArgs {
    /// The identity part of the flags (the environment fills the rest).
    pub fn identity_input(&self) -> IdentityInput {
        IdentityInput {
            ip: self.ip.clone(),
            id: self.id.clone(),
            namespace: self.namespace.clone(),
            domain: self.domain.clone(),
            labels_file: self.labels_file.clone(),
            labels: self.labels.clone(),
            interception: self.interception_mode,
            cluster: self.service_cluster.clone(),
        }
    }
}
