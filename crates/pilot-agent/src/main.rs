//! `pilot-agent`: the proxy agent.
//!
//! ```text
//! pilot-agent proxy sidecar|router|ingress [FLAGS]   bootstrap, run and supervise Envoy
//! pilot-agent iptables [--dry-run|--cleanup] [FLAGS]  capture the pod's traffic
//! ```
#![forbid(unsafe_code)]

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

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant, reason = "parsed once per process")]
enum Command {
    /// Run Envoy as a sidecar, router or ingress proxy.
    Proxy {
        #[command(subcommand)]
        role: ProxyRole,
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
            run_proxy(proxy_type, args)
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

fn run_proxy(proxy_type: ProxyType, args: ProxyArgs) -> anyhow::Result<()> {
    let identity = args
        .identity_input()
        .resolve(proxy_type, |k| std::env::var(k).ok())?;
    let config = pilot_agent::BootstrapConfig {
        identity,
        discovery: args.discovery_addresses.clone(),
        admin_port: args.admin_port,
    };
    let path = config.write(&args.config_dir, 0)?;
    anyhow::bail!(
        "wrote {}; supervision of Envoy is not implemented yet in this build",
        path.display()
    )
}
