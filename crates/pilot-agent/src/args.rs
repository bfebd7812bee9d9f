//! The flags of `pilot-agent proxy sidecar|router|ingress`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use pilot_proxy_api::InterceptionMode;

use crate::identity::IdentityInput;

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
    /// The workload's service account, sent as node metadata
    /// `SERVICE_ACCOUNT` (pilot-discovery checks it against a SPIFFE
    /// certificate's `sa` or a token's `serviceAccount=`).
    #[arg(long, env = "SERVICE_ACCOUNT", value_name = "SA")]
    pub service_account: Option<String>,
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
    #[arg(long, value_parser = interception_modes(), default_value_t = InterceptionMode::Redirect)]
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
    /// A file holding the bearer token for `--discovery-url` (default:
    /// `--discovery-token-file`'s).
    #[arg(long, env = "PILOT_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// A file holding the bearer token (an `xds` token of pilot-discovery's
    /// `--token-file`, or with its `--kube-token-review` the pod's
    /// projected service-account token, e.g.
    /// `/var/run/secrets/tokens/istio-token` with audience `istio-ca`) that
    /// Envoy sends on its ADS stream as `authorization: Bearer TOKEN`
    /// metadata, and the agent on its reports and certificate requests.
    /// It is read again for each report and certificate request; a change
    /// hot-restarts Envoy with the new token.
    #[arg(long, env = "PILOT_DISCOVERY_TOKEN_FILE", value_name = "FILE")]
    pub discovery_token_file: Option<PathBuf>,
    /// ADS over TLS: the CA (PEM) pilot-discovery's certificate must chain
    /// to. A change hot-restarts Envoy.
    #[arg(long, env = "PILOT_DISCOVERY_CA_FILE", value_name = "FILE")]
    pub discovery_ca_file: Option<PathBuf>,
    /// The name pilot-discovery's certificate must carry (SNI and subject
    /// alt name); default: each `--discovery-address` host.
    #[arg(long, value_name = "NAME", requires = "discovery_ca_file")]
    pub discovery_server_name: Option<String>,
    /// mTLS: the proxy's certificate (PEM; a SPIFFE identity
    /// `spiffe://DOMAIN/ns/NS/sa/SA`) presented to pilot-discovery.
    #[arg(long, value_name = "FILE", requires_all = ["discovery_key", "discovery_ca_file"])]
    pub discovery_cert: Option<PathBuf>,
    /// mTLS: the key of `--discovery-cert`.
    #[arg(long, value_name = "FILE", requires = "discovery_cert")]
    pub discovery_key: Option<PathBuf>,
    /// Serve Envoy's workload certificates over SDS on this Unix socket:
    /// the agent makes the key, gets the certificate for
    /// `spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>` from
    /// pilot-discovery's CA (the first `--discovery-address`, with the ADS
    /// credentials) and renews it at half its life. Needs the service
    /// account. Istio's is `./var/run/secrets/workload-spiffe-uds/socket`.
    #[arg(long, value_name = "PATH")]
    pub sds_socket: Option<PathBuf>,
    /// Who besides the agent's uid may open the SDS socket (a group name
    /// or gid, for an Envoy running as another uid of it): the socket's
    /// directory is then 0770 and the socket 0660, owned by the group;
    /// without it 0700 and 0600, whatever the umask.
    #[arg(long, value_name = "GROUP", requires = "sds_socket")]
    pub sds_socket_group: Option<String>,
    /// The mesh's roots (PEM, one or more CERTIFICATE blocks), pinned: an
    /// answer of the CA whose trust bundle holds another root is refused
    /// unless a pinned root cross-signed it; the leaf must chain to a
    /// pinned root. The agent never writes this file. Without it the agent
    /// trusts the first bundle it is answered and keeps it in
    /// `--mesh-root-store`.
    #[arg(
        long,
        env = "PILOT_MESH_ROOT_FILE",
        value_name = "FILE",
        requires = "sds_socket"
    )]
    pub mesh_root_file: Option<PathBuf>,
    /// Trust on first use (no `--mesh-root-file`): the file where the agent
    /// keeps the mesh roots it pinned, read at start (default:
    /// `<config-dir>/mesh-roots.pem`).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "mesh_root_file",
        requires = "sds_socket"
    )]
    pub mesh_root_store: Option<PathBuf>,
    /// Send the bearer token, and take workload certificates, over
    /// plaintext to a discovery address (or report URL) that is not
    /// loopback. Anyone on the path then reads the token and can swap the
    /// certificates: for a lab only; logged as a warning.
    #[arg(long)]
    pub insecure_plaintext_discovery: bool,
    /// The workload certificate's lifetime to ask for (Istio's
    /// `SECRET_TTL`).
    #[arg(long, default_value = "24h", value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub secret_ttl: Duration,
    /// The trust domain of the workload identity.
    #[arg(long, default_value = "cluster.local", value_name = "DOMAIN")]
    pub trust_domain: String,
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
    /// How long Envoy drains what a change left behind (Envoy's
    /// `--drain-time-s`): the old epoch during a hot restart, and the
    /// connections of a listener or filter chain an update replaced (a
    /// pooled, idle one keeps the old configuration until then).
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
    /// The ADS credentials: the token file read now, the TLS files named
    /// (Envoy reads them).
    pub fn discovery_auth(&self) -> Result<crate::DiscoveryAuth, crate::AgentError> {
        let token = match &self.discovery_token_file {
            Some(path) => Some(read_token(path)?),
            None => None,
        };
        let tls = self.discovery_ca_file.as_ref().map(|ca| crate::DiscoveryTls {
            ca_file: ca.clone(),
            client: self.discovery_cert.clone().zip(self.discovery_key.clone()),
            server_name: self.discovery_server_name.clone(),
        });
        Ok(crate::DiscoveryAuth { token, tls })
    }

    /// Where the mesh roots are pinned: `--mesh-root-file`, else trust on
    /// first use in `--mesh-root-store` (default
    /// `<config-dir>/mesh-roots.pem`).
    pub fn root_pinning(&self) -> crate::sds::RootPinning {
        match (&self.mesh_root_file, &self.mesh_root_store) {
            (Some(file), _) => crate::sds::RootPinning::File(file.clone()),
            (None, Some(store)) => crate::sds::RootPinning::FirstUse(store.clone()),
            (None, None) => crate::sds::RootPinning::FirstUse(self.config_dir.join("mesh-roots.pem")),
        }
    }

    /// The files whose change hot-restarts Envoy: `--watch-file`s and the
    /// ADS CA, certificate and key.
    pub fn watched_files(&self) -> Vec<PathBuf> {
        let mut files = self.watch_files.clone();
        files.extend(
            [&self.discovery_ca_file, &self.discovery_cert, &self.discovery_key]
                .into_iter()
                .flatten()
                .cloned(),
        );
        files
    }

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
            service_account: self.service_account.clone(),
        }
    }
}

/// `--interception-mode`: one of the metadata spellings, exactly
/// (`REDIRECT`, `TPROXY`, `NONE`), listed in the help.
fn interception_modes() -> impl TypedValueParser<Value = InterceptionMode> {
    PossibleValuesParser::new(InterceptionMode::ALL.map(InterceptionMode::as_str))
        .try_map(|mode| mode.parse::<InterceptionMode>())
}

/// A bearer token file's token: its first line, trimmed; an empty file or
/// a token with spaces is an error naming the file.
pub fn read_token(path: &std::path::Path) -> Result<String, crate::AgentError> {
    let text = std::fs::read_to_string(path).map_err(|e| crate::AgentError::file(path, e))?;
    let token = text.lines().next().unwrap_or_default().trim();
    let bad = |message: &str| crate::AgentError::File {
        path: path.to_path_buf(),
        message: message.to_string(),
    };
    if token.is_empty() {
        return Err(bad(
            "line 1: no token (the file should hold the bearer token on its first line)",
        ));
    }
    if token.contains(char::is_whitespace) || !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(bad("line 1: a token is one word of printable ASCII"));
    }
    Ok(token.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        proxy: ProxyArgs,
    }

    #[test]
    fn tls_flags_need_their_companions() {
        use clap::Parser;
        let parse =
            |args: &[&str]| Cli::try_parse_from(std::iter::once("pilot-agent").chain(args.iter().copied()));
        let err = parse(&["--discovery-cert", "c.pem", "--discovery-ca-file", "ca.pem"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--discovery-key"), "{err}");
        let err = parse(&["--discovery-cert", "c.pem", "--discovery-key", "k.pem"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--discovery-ca-file"), "{err}");
        let err = parse(&["--discovery-server-name", "pilot"])
            .unwrap_err()
            .to_string();
        assert!(err.contains("--discovery-ca-file"), "{err}");
        let cli = parse(&[
            "--discovery-ca-file",
            "ca.pem",
            "--discovery-cert",
            "c.pem",
            "--discovery-key",
            "k.pem",
        ])
        .unwrap();
        let auth = cli.proxy.discovery_auth().unwrap();
        let tls = auth.tls.unwrap();
        assert_eq!(tls.client, Some((PathBuf::from("c.pem"), PathBuf::from("k.pem"))));
        assert_eq!(auth.token, None);
        assert_eq!(cli.proxy.watched_files().len(), 3);
    }

    #[test]
    fn token_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  abc-0123456789-xyz \n").unwrap();
        assert_eq!(read_token(&path).unwrap(), "abc-0123456789-xyz");
        std::fs::write(&path, "\n").unwrap();
        let err = read_token(&path).unwrap_err().to_string();
        assert!(err.contains("token") && err.contains("line 1: no token"), "{err}");
        std::fs::write(&path, "two words\n").unwrap();
        assert!(read_token(&path).unwrap_err().to_string().contains("one word"));
        let err = read_token(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
