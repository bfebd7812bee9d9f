//! `pilot-agent`: the proxy agent.
//!
//! ```text
//! pilot-agent proxy sidecar|router|ingress [FLAGS]   bootstrap, run and supervise Envoy
//! pilot-agent wait [--status-url URL] [--timeout D]   block until the proxy is ready
//! pilot-agent iptables [--dry-run|--cleanup] [FLAGS]  capture the pod's traffic
//! ```

use clap::{Parser, Subcommand};
use pilot_agent::{ProxyArgs, ProxyType};

/// pilot-agent: bootstraps, supervises and hot-restarts Envoy, and reports
/// its failures to pilot-discovery.
#[derive(Debug, Parser)]
#[command(name = "pilot-agent", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of a variant does not matter.
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start: the size of a variant does not matter"
)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run Envoy as a sidecar, router or ingress proxy.
    Proxy {
        #[command(subcommand)]
        role: ProxyRole,
    },
    /// Block until the agent's proxy is ready (LIVE, first listeners and
    /// clusters ACKed), for applications that must start after it.
    Wait {
        /// The agent's status URL.
        #[arg(long, default_value = "http://127.0.0.1:15020", value_name = "URL")]
        status_url: String,
        /// Give up (exit 1) after this long.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "DURATION")]
        timeout: std::time::Duration,
    },
    /// Install the iptables rules that capture this network namespace's TCP
    /// traffic for the sidecar (`--dry-run` prints them, `--cleanup`
    /// removes them).
    Iptables(pilot_agent::iptables::IptablesArgs),
}

#[derive(Debug, Subcommand)]
enum ProxyRole {
    /// A sidecar next to one workload instance.
    Sidecar(ProxyArgs),
    /// A router (egress or gateway).
    Router(ProxyArgs),
    /// An ingress proxy at the edge of the mesh.
    Ingress(ProxyArgs),
}

impl ProxyRole {
    fn split(self) -> (ProxyType, ProxyArgs) {
        match self {
            ProxyRole::Sidecar(args) => (ProxyType::Sidecar, args),
            ProxyRole::Router(args) => (ProxyType::Router, args),
            ProxyRole::Ingress(args) => (ProxyType::Ingress, args),
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::INFO)
        .init();
    let result = match cli.command {
        Command::Proxy { role } => {
            let (proxy_type, args) = role.split();
            runtime().and_then(|rt| Ok(rt.block_on(pilot_agent::run_proxy(proxy_type, args))?))
        }
        Command::Wait { status_url, timeout } => {
            runtime().and_then(|rt| Ok(rt.block_on(pilot_agent::wait_ready(&status_url, timeout))?))
        }
        Command::Iptables(args) => args.run(&mut std::io::stdout()).map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pilot-agent: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?)
}
