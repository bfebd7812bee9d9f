//! The agent as its Envoy's SDS server: workload certificates from
//! pilot-discovery's CA, served over a Unix socket.
//!
//! - `certificates.rs`: makes the workload's key (it never leaves the
//!   agent), sends a CSR for the proxy's SPIFFE identity to
//!   `istio.v1.auth.IstioCertificateService/CreateCertificate` with the
//!   ADS credentials (over TLS, or plaintext to loopback only unless
//!   `--insecure-plaintext-discovery`), and renews at half the
//!   certificate's life (Istio's `SECRET_GRACE_PERIOD_RATIO`), retrying
//!   with backoff on failure.
//! - [`trust`]: the pinned mesh roots (a configured file, or trust on
//!   first use kept in a file of the agent's) and the checks an answer
//!   passes before it is served: its trust bundle pinned or cross-signed
//!   by a pinned root, its leaf the agent's key and exact identity,
//!   chained to a pinned root. A refused answer leaves the certificates
//!   served before in place.
//! - `socket.rs`: the socket's directory 0700 and the socket 0600 (0770
//!   and 0660 with `--sds-socket-group`), whatever the umask.
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
mod socket;
pub mod trust;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{AgentError, DiscoveryAuth};

pub use server::{SDS_CLUSTER, SECRET_TYPE};
pub use trust::RootPinning;

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
    /// The file the bearer token is read from again for each request
    /// (`--discovery-token-file`): a rotated token, such as a Kubernetes
    /// projected service-account token, is sent from the next request on.
    /// When it cannot be read, `auth.token` (read at start) is sent.
    pub token_file: Option<PathBuf>,
    /// The identity to ask for.
    pub identity: pilot_ca::SpiffeId,
    /// The lifetime to ask for (`--secret-ttl`).
    pub ttl: Duration,
    /// The pinned mesh roots: a configured file, or trust on first use.
    pub pinning: RootPinning,
    /// The group that may open the socket too (`--sds-socket-group`: a
    /// name or a gid); none: the agent's uid only.
    pub socket_group: Option<String>,
    /// Take certificates over plaintext from a CA that is not on loopback
    /// (`--insecure-plaintext-discovery`).
    pub insecure_plaintext: bool,
}

impl SdsOptions {
    /// Options with the defaults of the flags: a 24 h lifetime, trust on
    /// first use kept in `pinning_store`, the socket for the agent's uid
    /// only, no plaintext beyond loopback.
    pub fn new(
        socket: PathBuf,
        ca_address: String,
        auth: DiscoveryAuth,
        identity: pilot_ca::SpiffeId,
        pinning_store: PathBuf,
    ) -> Self {
        SdsOptions {
            socket,
            ca_address,
            auth,
            token_file: None,
            identity,
            ttl: Duration::from_secs(24 * 3600),
            pinning: RootPinning::FirstUse(pinning_store),
            socket_group: None,
            insecure_plaintext: false,
        }
    }
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
    /// The trust bundle, PEM: one or more roots, the signing one first.
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
    last_error: Arc<Mutex<Option<String>>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Sds {
    /// Refuses a plaintext CA address that is not loopback (unless
    /// [`SdsOptions::insecure_plaintext`]), loads the pinned roots, binds
    /// the socket privately (replacing a stale one), then fetches the
    /// first certificate and renews it in the background while serving.
    pub async fn start(options: SdsOptions) -> Result<Self, AgentError> {
        crate::plaintext::check_discovery(
            std::slice::from_ref(&options.ca_address),
            &options.auth,
            true,
            options.insecure_plaintext,
        )?;
        let pinned = trust::Pinned::load(&options.pinning)?;
        let listener = socket::bind(&options.socket, options.socket_group.as_deref())?;
        let (tx, rx) = watch::channel(None);
        let last_error = Arc::new(Mutex::new(None));
        let renewal = tokio::spawn(certificates::renew(options, pinned, tx, last_error.clone()));
        let serving = tokio::spawn(server::serve(listener, rx.clone()));
        Ok(Sds {
            secrets: rx,
            last_error,
            tasks: vec![renewal, serving],
        })
    }

    /// Why the last request failed or its answer was refused; `None`
    /// after a certificate is served.
    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|last| last.clone())
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
