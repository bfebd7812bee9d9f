//! `pilot-agent proxy ...`: the pieces put together. The desired
//! configuration is recomputed when a watched file or the labels file
//! changes, or on SIGHUP; SIGTERM (or SIGINT) drains and stops Envoy.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::envoy::{Admin, EnvoyOptions};
use crate::report::Reporter;
use crate::status_port::AgentStatus;
use crate::supervisor::{Desired, RetryPolicy, Supervisor};
use crate::{AgentError, BootstrapConfig, ProxyArgs, ProxyType};

/// Runs the agent until SIGTERM (`Ok`) or until Envoy cannot be kept
/// running (`Err`).
pub async fn run_proxy(proxy_type: ProxyType, args: ProxyArgs) -> Result<(), AgentError> {
    let env = |k: &str| std::env::var(k).ok();
    let config = |args: &ProxyArgs| -> Result<BootstrapConfig, AgentError> {
        Ok(BootstrapConfig {
            identity: args.identity_input().resolve(proxy_type, env)?,
            discovery: args.discovery_addresses.clone(),
            admin_port: args.admin_port,
            auth: args.discovery_auth()?,
            sds_socket: args.sds_socket.clone(),
        })
    };
    let first = config(&args)?;
    crate::plaintext::check_discovery(
        &first.discovery,
        &first.auth,
        args.sds_socket.is_some(),
        args.insecure_plaintext_discovery,
    )?;
    if let Some(url) = &args.discovery_url {
        let token = args.token_file.is_some() || args.discovery_token_file.is_some();
        crate::plaintext::check_report_url(url, token, args.insecure_plaintext_discovery)?;
    }
    let _sds = match &args.sds_socket {
        Some(socket) => Some(start_sds(&args, &first, socket).await?),
        None => None,
    };
    crate::envoy::check_binary(&args.envoy_binary)?;
    first.render()?;
    std::fs::create_dir_all(&args.config_dir).map_err(|e| AgentError::file(&args.config_dir, e))?;
    // Reports carry --token-file's token, else the ADS one; checked now,
    // read again for each report.
    let token_file = args
        .token_file
        .clone()
        .or_else(|| args.discovery_token_file.clone());
    if let Some(path) = &token_file {
        crate::args::read_token(path)?;
    }

    let admin = Admin {
        port: args.admin_port,
    };
    let status = Arc::new(AgentStatus::default());
    let (status_addr, status_task) =
        crate::status_port::serve(args.status_addr, admin, status.clone()).await?;
    tracing::info!(node = %first.identity.node_id(), status = %status_addr, "pilot-agent started");

    let mut inputs = Inputs::new(&args);
    let (desired_tx, desired_rx) = watch::channel(Desired {
        config: first,
        generation: 0,
    });
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let signal_error = |e: std::io::Error| AgentError::Http {
        url: "signal handler".into(),
        message: e.to_string(),
    };
    let mut hup = signal(SignalKind::hangup()).map_err(signal_error)?;
    let mut term = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut int = signal(SignalKind::interrupt()).map_err(signal_error)?;

    let supervisor = Supervisor {
        envoy: EnvoyOptions {
            binary: args.envoy_binary.clone(),
            config_dir: args.config_dir.clone(),
            base_id: args.base_id,
            drain: args.drain_duration,
            parent_shutdown: args.parent_shutdown_duration,
            concurrency: args.concurrency,
            log_level: args.envoy_log_level.clone(),
            extra_args: args.envoy_args.clone(),
        },
        retry: RetryPolicy {
            max_retries: args.max_retries,
            initial_backoff: args.initial_backoff,
            stable_after: args.budget_reset_after,
        },
        admin,
        termination_drain: args.termination_drain_duration,
        status,
        reporter: Reporter::start(args.discovery_url.clone(), token_file),
    };
    let mut supervised = tokio::spawn(supervisor.run(desired_rx, shutdown_rx));
    let mut tick = tokio::time::interval(args.watch_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let result = loop {
        tokio::select! {
            result = &mut supervised => break result.unwrap_or_else(|e| Err(AgentError::Http { url: "supervisor".into(), message: e.to_string() })),
            _ = hup.recv() => {
                tracing::info!("SIGHUP: hot restart");
                desired_tx.send_modify(|d| d.generation += 1);
            }
            _ = term.recv() => { tracing::info!("SIGTERM: draining"); let _ = shutdown_tx.send(true); }
            _ = int.recv() => { tracing::info!("SIGINT: draining"); let _ = shutdown_tx.send(true); }
            _ = tick.tick() => {
                let files_changed = inputs.changed();
                match config(&args) {
                    Ok(config) => {
                        desired_tx.send_if_modified(|d| {
                            let mut modified = false;
                            if d.config != config {
                                tracing::info!("bootstrap inputs changed: hot restart");
                                d.config = config;
                                modified = true;
                            }
                            if files_changed {
                                tracing::info!("a watched file changed: hot restart");
                                d.generation += 1;
                                modified = true;
                            }
                            modified
                        });
                    }
                    Err(e) => tracing::warn!(error = %e, "inputs not usable; Envoy keeps its configuration"),
                }
            }
        }
    };
    status_task.abort();
    result
}

/// Starts the SDS server for `config`'s identity.
async fn start_sds(
    args: &ProxyArgs,
    config: &BootstrapConfig,
    socket: &std::path::Path,
) -> Result<crate::sds::Sds, AgentError> {
    let identity = &config.identity;
    let account = identity
        .service_account
        .clone()
        .ok_or_else(|| AgentError::Identity {
            field: "--service-account",
            message: "--sds-socket needs the proxy's service account (its certificate's identity)".into(),
        })?;
    let namespace = identity.domain.split('.').next().unwrap_or_default().to_string();
    let ca_address = config.discovery.first().cloned().unwrap_or_default();
    let identity = pilot_ca::SpiffeId::new(args.trust_domain.clone(), namespace, account).map_err(|e| {
        AgentError::Identity {
            field: "--service-account",
            message: e.to_string(),
        }
    })?;
    crate::sds::Sds::start(crate::sds::SdsOptions {
        socket: socket.to_path_buf(),
        ca_address,
        auth: config.auth.clone(),
        token_file: args.discovery_token_file.clone(),
        identity,
        ttl: args.secret_ttl,
        pinning: args.root_pinning(),
        socket_group: args.sds_socket_group.clone(),
        insecure_plaintext: args.insecure_plaintext_discovery,
    })
    .await
}

/// The watched files' contents, as digests (a missing file is a state too).
struct Inputs {
    files: Vec<PathBuf>,
    digests: Vec<Option<u64>>,
}

impl Inputs {
    fn new(args: &ProxyArgs) -> Self {
        let files = args.watched_files();
        let digests = files.iter().map(|f| digest(f)).collect();
        Inputs { files, digests }
    }

    /// Whether any file changed since the last call.
    fn changed(&mut self) -> bool {
        let now: Vec<Option<u64>> = self.files.iter().map(|f| digest(f)).collect();
        let changed = now != self.digests;
        self.digests = now;
        changed
    }
}

fn digest(path: &std::path::Path) -> Option<u64> {
    let bytes = std::fs::read(path).ok()?;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut hasher);
    Some(hasher.finish())
}

/// `pilot-agent wait`: polls the status URL's `/healthz/ready` until it
/// answers 200, or `timeout` passes.
pub async fn wait_ready(status_url: &str, timeout: std::time::Duration) -> Result<(), AgentError> {
    let url = format!("{}/healthz/ready", status_url.trim_end_matches('/'));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match crate::http::request(
            http::Method::GET,
            &url,
            None,
            None,
            std::time::Duration::from_secs(1),
        )
        .await
        {
            Ok((status, _)) if status == http::StatusCode::OK => return Ok(()),
            Ok((status, body)) => format!("{status}: {}", String::from_utf8_lossy(&body).trim()),
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(AgentError::Http {
                url,
                message: format!("not ready after {timeout:?}; last answer: {last}"),
            });
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
