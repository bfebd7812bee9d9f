//! Test harnesses shared by pilot's crates (`publish = false`; a
//! dev-dependency only). Each exists once here:
//!
//! - [`free_port`], [`ProcessGuard`] (kill on drop, and a watchdog for a
//!   test process that dies first), [`eventually`];
//! - [`corpus`]: other projects' documents, read from `../shared/corpora/`
//!   (never copied into the repository);
//! - [`http`]: plain HTTP/1.1 requests and chunked body decoding;
//! - [`EtcdServer`] and [`EtcdCluster`]: real etcd members;
//! - [`Envoy`]: the real Envoy, on an ADS bootstrap or any other;
//! - [`Discovery`]: a real `pilot-discovery`, and [`binary`], which finds
//!   (or builds) another package's binary for a test;
//! - [`Pki`] and [`TestCerts`]: certificates made with `openssl`;
//! - [`FlakyStore`] and [`SlowRegistry`]: backends that fail or lag on
//!   purpose;
//! - [`pilotctl`]: runs `pilotctl` as a user would, with a clean
//!   environment;
//! - `FakeCluster` (feature `kube`): pilot-kube-fake's API server on a
//!   loopback port with a kubeconfig, for a `pilot-discovery` process;
//! - `ads` (feature `ads`): the ADS client of the tests and the benches,
//!   on a lean HTTP/2 transport: typed streams, a scripted proxy, and
//!   emulated Envoys by the thousand in a child process;
//! - `raw_h2` (feature `raw-h2`): a raw HTTP/2 client that sends any
//!   frame, valid or not, and reports what the server did (GOAWAY, stream
//!   resets, close), for tests that attack a server's HTTP/2 port;
//! - [`measure`]: what the benches measure of a process (CPU time, waits
//!   for a CPU, resident memory, percentiles).
//!
//! What a user of a library crate needs to test their own code stays in
//! that crate: pilot-store's conformance suite (`pilot_store::testing`)
//! and pilot-xds's Envoy check of generated configuration
//! (`pilot_xds::testing`). The fake Kubernetes API server is a test-only
//! crate of its own, `pilot-kube-fake`.

#[cfg(feature = "ads")]
pub mod ads;
mod binaries;
pub mod certs;
mod corpora;
mod discovery;
mod envoy;
mod etcd;
#[cfg(feature = "kube")]
mod fake_cluster;
pub mod http;
pub mod measure;
mod openssl;
mod pilotctl;
mod ports;
mod process;
#[cfg(feature = "raw-h2")]
pub mod raw_h2;
mod registries;
mod stores;

use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use binaries::{Binary, PILOT_AGENT, PILOT_DISCOVERY, PILOTCTL, binary, cargo};
pub use certs::{Pki, TestCerts};
pub use corpora::{CORPORA_VAR, corpora_dir, corpus, corpus_files};
pub use discovery::Discovery;
pub use envoy::{ENVOY_RE2_LIMIT, Envoy, NACKED_REGEX, XDS_CLUSTER, envoy_binary};
pub use etcd::{EtcdCluster, EtcdServer};
#[cfg(feature = "kube")]
pub use fake_cluster::FakeCluster;
pub use openssl::{openssl_server, openssl_sni_server};
pub use pilotctl::{Run, pilotctl, pilotctl_at};
pub use ports::free_port;
pub use process::{ProcessGuard, signal, watchdog};
pub use registries::SlowRegistry;
pub use stores::FlakyStore;

/// How long a test waits for something before failing with a message (it
/// only turns a hang into a failure; never an assertion on speed).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Waits until `check` holds, failing with `what` after [`PATIENCE`].
pub fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let started = Instant::now();
    while !check() {
        assert!(started.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The workspace root (where `Cargo.lock`, `examples/` and `.tools/` are).
pub fn workspace() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}
