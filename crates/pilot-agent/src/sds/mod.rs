//! The agent as its Envoy's SDS server: workload certificates from
//! pilot-discovery's CA, served over a Unix socket.
//!
//! - `certificates.rs`: makes the workload's key (it never leaves the
//!   agent), sends a CSR for the proxy's SPIFFE identity to
//!   `istio.v1.auth.IstioCertificateService/CreateCertificate` with the
//!   ADS credentials, and renews at half the certificate's life (Istio's
//!   `SECRET_GRACE_PERIOD_RATIO`), retrying with backoff on failure.
//! - `server.rs`: `envoy.service.secret.v3.SecretDiscoveryService`
//!   (state of the world, as Envoy's `api_type: GRPC` asks): `default`
//!   is the certificate chain and key, `ROOTCA` the root to validate
//!   peers with; every renewal is pushed to every open stream, so Envoy
//!   rotates without a restart.
//!
//! The bootstrap names the socket as the `sds-grpc` cluster
//! ([`crate::bootstrap`]).

mod certificates;
mod server;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{AgentError, DiscoveryAuth};

pub use server::{SDS_CLUSTER, SECRET_TYPE};

/// The SDS resource name of the workload certificate.
pub const DEFAULT_SECRET: &str = "default";
/// The SDS resource name of the root certificate.
pub const ROOT_SECRET: &str = "ROOTCA";

/// Where the certificates come from and where they are served.
#[derive(Debug, Clone)]
pub struct SdsOptions {
    /// The Unix socket Envoy reaches the SDS server on.
    pub socket: PathBuf,
    /// pilot-discovery's ADS address (`HOST:PORT`), where its CA listens.
    pub ca_address: String,
    /// The ADS credentials (token, TLS), which the CA accepts too.
    pub auth: DiscoveryAuth,
    /// The identity to ask for.
    pub identity: pilot_ca::SpiffeId,
    /// The lifetime to ask for (`--secret-ttl`).
    pub ttl: Duration,
}

/// The certificates served at one time.
#[derive(Clone, PartialEq, Eq)]
pub struct Secrets {
    /// Counts renewals from 1 (the SDS version).
    pub version: u64,
    /// The leaf and the intermediates, PEM.
    pub chain_pem: String,
    /// The workload's private key, PEM.
    pub key_pem: String,
    /// The root, PEM.
    pub root_pem: String,
    /// When the leaf expires.
    pub not_after: SystemTime,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("version", &self.version)
            .field("not_after", &self.not_after)
            .finish_non_exhaustive()
    }
}

/// The running SDS server and certificate renewal; both stop when this is
/// dropped.
#[derive(Debug)]
pub struct Sds {
    secrets: watch::Receiver<Option<Arc<Secrets>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sds {
    /// Binds the socket (replacing a stale one), then fetches the first
    /// certificate and renews it in the background while serving.
    pub async fn start(options: SdsOptions) -> Result<Self, AgentError> {
        let listener = server::bind(&options.socket)?;
        let (tx, rx) = watch::channel(None);
        let renewal = tokio::spawn(certificates::renew(options, tx));
        let serving = tokio::spawn(server::serve(listener, rx.clone()));
        Ok(Sds {
            secrets: rx,
            tasks: vec![renewal, serving],
        })
    }

    /// The certificates served now (`None` until the first is issued).
    pub fn current(&self) -> Option<Arc<Secrets>> {
        self.secrets.borrow().clone()
    }

    /// Waits until a certificate at `version` or later is served.
    pub async fn wait_version(&self, version: u64) -> Arc<Secrets> {
        let mut secrets = self.secrets.clone();
        loop {
            if let Some(current) = secrets.borrow_and_update().clone()
                && current.version >= version
            {
                return current;
            }
            if secrets.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Drop for Sds {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}
