//! The Kubernetes client: from KUBECONFIG (or `~/.kube/config`), or, in a
//! pod (`KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` set, no
//! `KUBECONFIG`), from the service-account directory
//! (`--kube-service-account-dir`, by default the one the kubelet mounts):
//!
//! - `token`: the bearer token of every request. The kubelet rotates a
//!   projected token in place (at 80% of its lifetime); the file is looked
//!   at before each request and reread when it changed, so a rotated token
//!   is used from the next request on, long before the old one expires.
//!   (kube-rs's own in-cluster client rereads it once a minute, from fixed
//!   paths.) If the file cannot be read, the last token read is kept.
//! - `ca.crt`: the roots the API server's certificate is verified with.
//! - `namespace`: the client's default namespace, so the replicas' Leases,
//!   the status writer's Lease and the CA's root Secret are in the pod's
//!   namespace unless `--kube-namespace` names another.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

/// A client for the cluster of `KUBECONFIG` (or `~/.kube/config`), or,
/// in a pod, the one built from `service_account_dir`. Like kube-rs's
/// default client, it retries a request answered 429 or 5xx, with backoff.
pub(crate) async fn kube_client(service_account_dir: &Path) -> Result<kube::Client, String> {
    client(service_account_dir, true).await
}

/// [`kube_client`] without the retries: for a call that must answer, one
/// way or the other, before a caller's deadline (a TokenReview).
pub(crate) async fn kube_client_without_retries(service_account_dir: &Path) -> Result<kube::Client, String> {
    client(service_account_dir, false).await
}

async fn client(service_account_dir: &Path, retry: bool) -> Result<kube::Client, String> {
    let in_pod = (
        std::env::var("KUBERNETES_SERVICE_HOST"),
        std::env::var("KUBERNETES_SERVICE_PORT"),
    );
    if std::env::var_os("KUBECONFIG").is_none()
        && let (Ok(host), Ok(port)) = in_pod
    {
        return in_cluster(&host, &port, service_account_dir, retry);
    }
    let unreachable = |e: &dyn std::fmt::Display| {
        format!("cannot reach Kubernetes (KUBECONFIG, ~/.kube/config or in-cluster): {e}")
    };
    let mut config = kube::Config::infer().await.map_err(|e| unreachable(&e))?;
    config.default_retry = retry;
    kube::Client::try_from(config).map_err(|e| unreachable(&e))
}

/// The client of the API server at `host:port`, authenticated by the
/// token of `dir` and verified against its `ca.crt`.
fn in_cluster(host: &str, port: &str, dir: &Path, retry: bool) -> Result<kube::Client, String> {
    let context = |what: &str| format!("in-cluster Kubernetes client ({what} of {})", dir.display());
    let port: u16 = port
        .trim()
        .parse()
        .map_err(|_| format!("KUBERNETES_SERVICE_PORT {port:?} is not a port number"))?;
    let host = host.trim();
    let authority = if host.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let url: http::Uri = format!("https://{authority}")
        .parse()
        .map_err(|e| format!("KUBERNETES_SERVICE_HOST {host:?}: {e}"))?;
    let namespace_file = dir.join("namespace");
    let namespace = std::fs::read_to_string(&namespace_file)
        .map_err(|e| {
            format!(
                "{}: cannot read {}: {e}",
                context("namespace"),
                namespace_file.display()
            )
        })?
        .trim()
        .to_string();
    if namespace.is_empty() {
        return Err(format!(
            "{}: {} is empty",
            context("namespace"),
            namespace_file.display()
        ));
    }
    let ca_file = dir.join("ca.crt");
    let roots: Vec<Vec<u8>> = CertificateDer::pem_file_iter(&ca_file)
        .and_then(|certs| certs.map(|c| c.map(|c| c.to_vec())).collect::<Result<_, _>>())
        .map_err(|e| format!("{}: cannot read {}: {e}", context("ca.crt"), ca_file.display()))?;
    if roots.is_empty() {
        return Err(format!(
            "{}: {} holds no certificate",
            context("ca.crt"),
            ca_file.display()
        ));
    }
    let token =
        Arc::new(TokenFile::open(dir.join("token")).map_err(|e| format!("{}: {e}", context("token")))?);
    let mut config = kube::Config::new(url);
    config.default_namespace = namespace;
    config.root_cert = Some(roots);
    config.default_retry = retry;
    let layer = tower::util::MapRequestLayer::new(move |mut request: http::Request<kube::client::Body>| {
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, token.header());
        request
    });
    let builder =
        kube::client::ClientBuilder::try_from(config).map_err(|e| format!("{}: {e}", context("client")))?;
    Ok(builder.with_layer(&layer).build())
}

/// The token file, reread when it changes.
struct TokenFile {
    path: PathBuf,
    /// The file's modification time and length when last read, and the
    /// `Bearer` header of what it held.
    read: Mutex<(Option<(SystemTime, u64)>, http::HeaderValue)>,
}

impl TokenFile {
    /// Reads the token at `path` (it must be there at start).
    fn open(path: PathBuf) -> Result<Self, String> {
        let stamp = stamp(&path);
        let header = read_header(&path)?;
        Ok(TokenFile {
            path,
            read: Mutex::new((stamp, header)),
        })
    }

    /// The `Authorization` value of the token in the file now (the last
    /// one read when the file cannot be read).
    fn header(&self) -> http::HeaderValue {
        let mut read = self
            .read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = stamp(&self.path);
        if now.is_some() && now != read.0 {
            match read_header(&self.path) {
                Ok(header) => *read = (now, header),
                Err(error) => tracing::warn!(%error, "keeping the last service-account token"),
            }
        }
        read.1.clone()
    }
}

/// A file's modification time and length (a rotation changes them).
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// `Bearer TOKEN` of the token file at `path`.
fn read_header(path: &Path) -> Result<http::HeaderValue, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    let mut header = http::HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| format!("{} holds characters a header cannot carry", path.display()))?;
    header.set_sensitive(true);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_token_is_read_at_the_next_request_and_a_missing_one_keeps_the_last() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first-token\n").unwrap();
        let file = TokenFile::open(path.clone()).unwrap();
        assert_eq!(file.header(), "Bearer first-token");
        // As the kubelet does: a new file moved into place.
        let next = dir.path().join("token.new");
        std::fs::write(&next, "second-token-longer").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(file.header(), "Bearer second-token-longer");
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.header(), "Bearer second-token-longer");
        std::fs::write(&path, "").unwrap();
        assert_eq!(file.header(), "Bearer second-token-longer");
    }
}
