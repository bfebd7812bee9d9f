//! `pilotctl`: the command line for pilot's configuration, in the manner of
//! kubectl and istioctl.
//!
//! ```text
//! pilotctl apply -f examples/bookinfo/          # create or update, validated locally first
//! pilotctl get routerules                       # or rr, RouteRule; -o yaml|json; -A
//! pilotctl replace -f rule.yaml                 # 409 with the current version if stale
//! pilotctl delete rr reviews-default            # or delete -f FILE
//! pilotctl validate -f rules/                   # offline
//! pilotctl analyze -f examples/bookinfo/        # shadowed rules, missing services, ...
//! pilotctl describe service reviews -f examples/bookinfo/networking/ --services services.yaml  # what applies, what lost
//! pilotctl proxy-status                         # SYNCED / STALE / NACKED per type
//! pilotctl proxy-config scope productpage-v1.prod  # the hosts a proxy sees, and why
//! pilotctl proxy-config secret reviews-v1.default  # its certificates: identity, expiry
//! pilotctl quarantine                           # objects in the store that fail validation
//! pilotctl grpc-bootstrap --xds-address 127.0.0.1:15010 -o bootstrap.json  # proxyless gRPC
//! pilotctl kube-inject -f deployment.yaml       # add the sidecar (offline)
//! pilotctl convert -f rules/ [-o out/]          # v1alpha2 routing kinds to networking.istio.io/v1
//! pilotctl convert --to gateway-api -f vs/      # VirtualServices and Gateways to HTTPRoutes and Gateways
//! ```
//!
//! Exit codes: 0 success, 1 an operation failed, 2 usage error; `describe`
//! also 3 (not found) and 4 (something does not work); `convert --strict`
//! 3 (something would not be converted exactly: nothing written).

mod analyze_cmd;
mod bootstrap;
mod client;
mod commands;
mod convert;
mod describe_cmd;
mod files;
mod inject;
mod kinds;
mod proxy_config;
mod proxy_secret;
mod quarantine;
mod refusal;
mod settings;
mod table;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// pilotctl: create, replace, apply, delete, get and validate pilot
/// configuration, and see what each proxy accepted.
#[derive(Debug, Parser)]
#[command(name = "pilotctl", version, about, long_about = None)]
pub struct Cli {
    /// The server (default: $PILOT_SERVER, then server: in the config file,
    /// then http://127.0.0.1:8080).
    #[arg(long, global = true, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token (default: token: in the config file).
    #[arg(long, global = true, value_name = "TOKEN")]
    pub token: Option<String>,
    /// CA certificate (PEM) for an https server.
    #[arg(long, global = true, value_name = "FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// The namespace (objects that name none go here).
    #[arg(
        short = 'n',
        long,
        global = true,
        default_value = "default",
        value_name = "NAMESPACE"
    )]
    pub namespace: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create objects; fails for those that exist.
    Create(FileArgs),
    /// Replace objects; their resourceVersion (or the current one, if the
    /// file has none) must still be current.
    Replace(FileArgs),
    /// Create objects, or update those that exist.
    Apply(FileArgs),
    /// Delete objects named in files, or by kind and names.
    Delete {
        /// The files to read (`-f`).
        #[command(flatten)]
        files: OptionalFiles,
        /// KIND NAME... (instead of -f).
        #[arg(value_name = "KIND NAME")]
        names: Vec<String>,
        /// Succeed for objects that are already gone.
        #[arg(long)]
        ignore_not_found: bool,
    },
    /// Show objects of a kind (by name, plural or short name).
    Get {
        /// The kind: routerule, routerules, rr, ...
        kind: String,
        /// One object's name.
        name: Option<String>,
        /// Output format.
        #[arg(short = 'o', long, value_enum, default_value = "short")]
        output: Output,
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only objects with these labels, e.g. app=reviews,version!=v1.
        #[arg(short = 'l', long, value_name = "SELECTOR")]
        selector: Option<String>,
    },
    /// Check files offline; every error as file:line:col field.path: message,
    /// then what `analyze` finds offline, as warnings.
    Validate(FileArgs),
    /// Analyze configuration as a whole: rules that can never match,
    /// services, versions and subsets that do not exist, overlapping egress
    /// rules, unused destination policies. Files (-f) offline, with
    /// --services for a registry; without -f, the server's configuration
    /// and service registry; -f with --server, the files over the server's
    /// configuration, against its registry.
    Analyze {
        /// The files to read (`-f`).
        #[command(flatten)]
        files: OptionalFiles,
        /// A services file (pilot-discovery's --services format) to check
        /// references against offline.
        #[arg(long, value_name = "FILE")]
        services: Option<std::path::PathBuf>,
        /// Exit 1 on findings of this severity or worse.
        #[arg(long, value_enum, default_value = "error")]
        fail_on: FailOn,
        /// The domain suffix that completes short service names.
        #[arg(long, default_value = "svc.cluster.local")]
        domain: String,
        /// pilot-discovery's mesh config file: CUSTOM AuthorizationPolicies
        /// are checked against its extensionProviders (PLT0312) and, with
        /// a registry, their services against it (PLT0313).
        #[arg(long, value_name = "FILE")]
        mesh_config: Option<std::path::PathBuf>,
    },
    /// What applies to a service, a workload or a connected proxy and what
    /// of it lost: routes in the order that decides (shadowed, matching
    /// nothing), DestinationRules and subsets, the Sidecar's scope,
    /// inbound mTLS and its PeerAuthentication, AuthorizationPolicies,
    /// objects withheld after a NACK, analyze findings. Files (-f) offline
    /// with --services; without -f, the server's. Exit codes: 0 nothing
    /// wrong, 1 an operation failed, 2 usage, 3 not found, 4 something
    /// does not work (an error finding, a missing subset, a withheld
    /// object).
    Describe(describe_cmd::DescribeArgs),
    /// For each connected proxy (of every replica sharing the store), per
    /// xDS type: SYNCED, STALE or NACKED, and the REPLICA serving it.
    ProxyStatus,
    /// What a connected proxy is configured with.
    #[command(subcommand)]
    ProxyConfig(ProxyConfigCommand),
    /// The objects in the server's store that fail their kind's validation
    /// (written around the API): held out of the cache, never pushed or
    /// served until fixed or deleted in the store. Exit 1 when any.
    Quarantine,
    /// Write the xDS bootstrap of a proxyless gRPC workload (for
    /// GRPC_XDS_BOOTSTRAP); needs no server.
    GrpcBootstrap(bootstrap::BootstrapArgs),
    /// Convert v1alpha2 RouteRules, DestinationPolicies, EgressRules and
    /// IngressRules (files, or the server's objects with --from-server) to
    /// networking.istio.io/v1 VirtualServices, DestinationRules,
    /// ServiceEntries and Gateways; with --to gateway-api, VirtualServices
    /// and Istio Gateways to the Gateway API's HTTPRoutes, Gateways and
    /// GatewayClass. Other objects pass through. A note on stderr for each
    /// construct with no exact equivalent; with --strict, any note writes
    /// nothing and exits 3.
    Convert(convert::ConvertArgs),
    /// Add the sidecar (pilot-agent's init container and proxy) to the Pods,
    /// Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs
    /// and Lists of YAML or JSON files; the result goes to stdout (offline).
    KubeInject {
        /// The files to read (`-f`).
        #[command(flatten)]
        files: FileArgs,
        /// The mesh config file whose `sidecarInjector` section sets images,
        /// the discovery address and resources (default: built-in values).
        #[arg(long, value_name = "FILE")]
        mesh_config: Option<std::path::PathBuf>,
        /// Inject as this control-plane revision (`istio.io/rev`): pods
        /// labelled for another revision are left alone, and sidecars connect
        /// to `pilot-discovery-REVISION` unless the mesh config names an
        /// address.
        #[arg(long, value_name = "REVISION")]
        revision: Option<String>,
    },
}

/// `-f` (required).
#[derive(Debug, clap::Args)]
pub struct FileArgs {
    /// A file, a directory (its .yaml, .yml and .json files) or - for stdin;
    /// repeatable.
    #[arg(short = 'f', long = "filename", required = true, value_name = "PATH")]
    pub files: Vec<String>,
}

/// `-f` (optional).
#[derive(Debug, clap::Args)]
pub struct OptionalFiles {
    /// A file, a directory or - for stdin; repeatable.
    #[arg(short = 'f', long = "filename", value_name = "PATH")]
    pub files: Vec<String>,
}

/// `-o`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// A table.
    Short,
    /// YAML documents, as the files read by -f.
    Yaml,
    /// JSON.
    Json,
}

/// `analyze --fail-on`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOn {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warning,
    /// Never (report only).
    Never,
}

/// Why a command did not succeed, and its exit code.
#[derive(Debug)]
pub struct Failure {
    /// 1 (operation failed) or 2 (usage).
    pub code: u8,
    /// Lines to print on stderr.
    pub messages: Vec<String>,
}

impl Failure {
    /// Exit code 1.
    pub fn failed(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            messages: vec![message.into()],
        }
    }

    /// Exit code 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            messages: vec![message.into()],
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return ExitCode::from(if error.use_stderr() { 2 } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("pilotctl: cannot start: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            for message in &failure.messages {
                eprintln!("{message}");
            }
            ExitCode::from(failure.code)
        }
    }
}

/// `pilotctl proxy-config` subcommands.
#[derive(Debug, Subcommand)]
pub enum ProxyConfigCommand {
    /// The hosts the proxy's scope holds (its Sidecar, or the namespace's
    /// or mesh's default, filtered by exportTo) and why each.
    Scope {
        /// The proxy: its node id or its id (`<pod>.<namespace>`).
        proxy: String,
    },
    /// The workload certificates the server's CA issued to the proxy's
    /// agent: identity (SPIFFE) and expiry.
    Secret {
        /// The proxy: its node id, or the id (`<pod>.<namespace>`) of a
        /// connected proxy.
        proxy: String,
    },
}
