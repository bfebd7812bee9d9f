//! pilot-agent: the proxy agent next to every Envoy. It works out the
//! proxy's identity, writes Envoy's bootstrap, starts Envoy and supervises
//! it with restart epochs (hot restart on a changed input, restart with
//! backoff on a crash), drains it on SIGTERM, serves readiness and stats,
//! and reports Envoy's process life to pilot-discovery. With
//! `--sds-socket` it is Envoy's SDS server too ([`sds`]): the workload's
//! key and certificate from pilot-discovery's CA, checked against the
//! pinned mesh roots and renewed before expiry, on a socket only the
//! agent's uid (or `--sds-socket-group`) can open. The token and the
//! certificates never cross plaintext to another host unless
//! `--insecure-plaintext-discovery` says so ([`plaintext`]).
//!
//! Light on purpose: no etcd or Kubernetes client, only `pilot-model` and
//! `pilot-ca` among pilot's crates.

mod agent;
pub mod args;
pub mod bootstrap;
pub mod envoy;
mod error;
mod http;
pub mod identity;
pub mod iptables;
pub mod plaintext;
pub mod report;
pub mod sds;
pub mod status_port;
pub mod supervisor;

pub use agent::{run_proxy, wait_ready};
pub use args::ProxyArgs;
pub use bootstrap::{BootstrapConfig, DiscoveryAuth, DiscoveryTls};
pub use error::AgentError;
pub use identity::{Identity, IdentityInput};
pub use pilot_proxy_api::{InterceptionMode, ProxyType};
