//! [`KubeCredentials`]: a cluster's `kubernetes.io/tls` Secrets as a
//! [`CredentialSource`]: what Gateway API listeners' `certificateRefs`
//! and Istio's `credentialName`s name, sent to proxies over SDS.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use pilot_model::{CredentialSource, TlsCredential};
use pilot_store::ChangeTicks;

/// The type of the Secrets followed.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

type Held = BTreeMap<(String, String), Arc<TlsCredential>>;

/// The `kubernetes.io/tls` Secrets of a cluster (or of one namespace), as
/// they are now: each Secret's `tls.crt`, `tls.key` and optional
/// `ca.crt`.
///
/// - Followed with kube-runtime's watcher (a field selector on `type`,
///   so other Secrets, service account tokens among them, are never
///   read), with its default backoff: a broken watch or a 410 Gone lists
///   again, and what the new list lacks is gone.
/// - A Secret without `tls.crt` or `tls.key`, or whose files are not PEM,
///   is left out and logged (the API server does not check a TLS
///   Secret's content; Envoy would refuse it).
/// - Needs RBAC to list and watch Secrets (cluster-wide, or in the one
///   namespace).
///
/// Dropping the last handle stops the watch.
#[derive(Clone)]
pub struct KubeCredentials {
    inner: Arc<Inner>,
}

struct Inner {
    held: RwLock<Held>,
    changes: ChangeTicks,
    synced: AtomicBool,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

impl KubeCredentials {
    /// Starts following the TLS Secrets of `namespace` (`None`: every
    /// namespace). Must be called inside a Tokio runtime.
    pub fn start(client: Client, namespace: Option<&str>) -> Self {
        let api: Api<Secret> = match namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        };
        let inner = Arc::new(Inner {
            held: RwLock::new(Held::new()),
            changes: ChangeTicks::default(),
            synced: AtomicBool::new(false),
            task: std::sync::Mutex::new(None),
        });
        let task = tokio::spawn(follow(api, Arc::downgrade(&inner)));
        *inner.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        KubeCredentials { inner }
    }

    /// True once the Secrets were listed once.
    pub fn has_synced(&self) -> bool {
        self.inner.synced.load(Ordering::Acquire)
    }
}

impl CredentialSource for KubeCredentials {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<TlsCredential>> {
        let held = self.inner.held.read().unwrap_or_else(|p| p.into_inner());
        held.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        self.inner.changes.stream()
    }
}

/// Keeps `inner` equal to the Secrets the watch lists, until it is gone.
async fn follow(api: Api<Secret>, inner: std::sync::Weak<Inner>) {
    let config = watcher::Config::default().fields(&format!("type={TLS_SECRET_TYPE}"));
    let mut events = watcher(api, config).default_backoff().boxed();
    // The list in progress (between `Init` and `InitDone`).
    let mut listing: Option<Held> = None;
    while let Some(event) = events.next().await {
        let Some(inner) = inner.upgrade() else { return };
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "watch of TLS Secrets failed; retrying");
                continue;
            }
        };
        let mut held = inner.held.write().unwrap_or_else(|p| p.into_inner());
        let changed = match event {
            watcher::Event::Init => {
                listing = Some(Held::new());
                false
            }
            watcher::Event::InitApply(secret) => {
                if let (Some(list), Some((key, credential))) = (listing.as_mut(), credential_of(&secret)) {
                    list.insert(key, Arc::new(credential));
                }
                false
            }
            watcher::Event::InitDone => {
                let listed = listing.take().unwrap_or_default();
                let changed = *held != listed;
                *held = listed;
                inner.synced.store(true, Ordering::Release);
                changed
            }
            watcher::Event::Apply(secret) => match credential_of(&secret) {
                Some((key, credential)) => {
                    let same = held.get(&key).is_some_and(|before| **before == credential);
                    if !same {
                        held.insert(key, Arc::new(credential));
                    }
                    !same
                }
                None => key_of(&secret).is_some_and(|key| held.remove(&key).is_some()),
            },
            watcher::Event::Delete(secret) => key_of(&secret).is_some_and(|key| held.remove(&key).is_some()),
        };
        drop(held);
        if changed {
            inner.changes.announce();
        }
    }
}

fn key_of(secret: &Secret) -> Option<(String, String)> {
    Some((secret.metadata.namespace.clone()?, secret.metadata.name.clone()?))
}

/// The credential of a TLS Secret; `None` (logged) when it lacks its
/// certificate or key, or they are not PEM.
fn credential_of(secret: &Secret) -> Option<((String, String), TlsCredential)> {
    let key = key_of(secret)?;
    let data = secret.data.as_ref();
    let field = |name: &str| data.and_then(|d| d.get(name)).map(|bytes| bytes.0.clone());
    let pem = |bytes: &[u8], label: &str| {
        let text = String::from_utf8_lossy(bytes);
        text.contains("-----BEGIN ") && text.contains(label)
    };
    let (Some(chain), Some(private_key)) = (field("tls.crt"), field("tls.key")) else {
        tracing::warn!(secret = %format!("{}/{}", key.0, key.1), "TLS Secret left out: it lacks tls.crt or tls.key");
        return None;
    };
    if !pem(&chain, "CERTIFICATE-----") || !pem(&private_key, "PRIVATE KEY-----") {
        tracing::warn!(secret = %format!("{}/{}", key.0, key.1), "TLS Secret left out: tls.crt or tls.key is not PEM");
        return None;
    }
    let credential = TlsCredential {
        certificate_chain: chain,
        private_key,
        ca_certificates: field("ca.crt"),
    };
    Some((key, credential))
}
