//! [`KubeCredentials`]: a cluster's `kubernetes.io/tls` Secrets as a
//! [`CredentialSource`]: what Gateway API listeners' `certificateRefs`
//! and Istio's `credentialName`s name, sent to proxies over SDS; and its
//! ConfigMaps' certificate authority bundles, which BackendTLSPolicies
//! name.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use pilot_model::{CredentialSource, TlsCredential};
use pilot_store::ChangeTicks;

/// The type of the Secrets followed.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// An object's namespace and name.
type Key = (String, String);

type Held<T> = BTreeMap<Key, Arc<T>>;

/// The `kubernetes.io/tls` Secrets of a cluster (or of one namespace), as
/// they are now: each Secret's `tls.crt`, `tls.key` and optional
/// `ca.crt`; and the certificate authority bundles of its ConfigMaps
/// (their `ca.crt`, which a BackendTLSPolicy's `caCertificateRefs` name).
///
/// - Followed with kube-runtime's watcher (for Secrets, a field selector
///   on `type`, so other Secrets, service account tokens among them, are
///   never read), with its default backoff: a broken watch or a 410 Gone
///   lists again, and what the new list lacks is gone.
/// - A Secret without `tls.crt` or `tls.key`, or whose files are not PEM,
///   is left out and logged (the API server does not check a TLS
///   Secret's content; Envoy would refuse it). A ConfigMap without
///   `ca.crt` is not held; one whose `ca.crt` holds no PEM certificate is
///   left out and logged.
/// - Needs RBAC to list and watch Secrets and ConfigMaps (cluster-wide,
///   or in the one namespace).
///
/// Dropping the last handle stops the watches.
#[derive(Clone)]
pub struct KubeCredentials {
    inner: Arc<Inner>,
}

struct Inner {
    held: RwLock<Held<TlsCredential>>,
    bundles: RwLock<Held<Vec<u8>>>,
    changes: ChangeTicks,
    /// Whether the Secrets, then the ConfigMaps, were listed once.
    synced: [AtomicBool; 2],
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in self.tasks.get_mut().unwrap_or_else(|p| p.into_inner()).drain(..) {
            task.abort();
        }
    }
}

impl KubeCredentials {
    /// Starts following the TLS Secrets and the ConfigMaps of `namespace`
    /// (`None`: every namespace). Must be called inside a Tokio runtime.
    pub fn start(client: Client, namespace: Option<&str>) -> Self {
        let inner = Arc::new(Inner {
            held: RwLock::new(Held::new()),
            bundles: RwLock::new(Held::new()),
            changes: ChangeTicks::default(),
            synced: [AtomicBool::new(false), AtomicBool::new(false)],
            tasks: std::sync::Mutex::new(Vec::new()),
        });
        let secrets = Follow {
            what: "TLS Secrets",
            held: |inner| &inner.held,
            synced: 0,
            of: credential_of,
        };
        let bundles = Follow {
            what: "ConfigMaps",
            held: |inner| &inner.bundles,
            synced: 1,
            of: bundle_of,
        };
        let tasks = vec![
            tokio::spawn(secrets.run(
                api::<Secret>(&client, namespace),
                watcher::Config::default().fields(&format!("type={TLS_SECRET_TYPE}")),
                Arc::downgrade(&inner),
            )),
            tokio::spawn(bundles.run(
                api::<ConfigMap>(&client, namespace),
                watcher::Config::default(),
                Arc::downgrade(&inner),
            )),
        ];
        *inner.tasks.lock().unwrap_or_else(|p| p.into_inner()) = tasks;
        KubeCredentials { inner }
    }

    /// True once the Secrets and the ConfigMaps were listed once.
    pub fn has_synced(&self) -> bool {
        self.inner.synced.iter().all(|s| s.load(Ordering::Acquire))
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope>,
    <K as kube::Resource>::DynamicType: Default,
{
    match namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

impl CredentialSource for KubeCredentials {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<TlsCredential>> {
        let held = self.inner.held.read().unwrap_or_else(|p| p.into_inner());
        held.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn ca_bundle(&self, namespace: &str, name: &str) -> Option<Arc<Vec<u8>>> {
        let bundles = self.inner.bundles.read().unwrap_or_else(|p| p.into_inner());
        bundles.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    fn changes(&self) -> BoxStream<'static, ()> {
        self.inner.changes.stream()
    }
}

/// How one kind of object is followed into what [`Inner`] holds.
struct Follow<K, T> {
    what: &'static str,
    held: fn(&Inner) -> &RwLock<Held<T>>,
    synced: usize,
    /// The key and what is held of an object; `None` when nothing is.
    of: fn(&K) -> Option<(Key, T)>,
}

impl<K, T> Follow<K, T>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    <K as kube::Resource>::DynamicType: Default,
    T: PartialEq,
{
    /// Keeps `inner` equal to the objects the watch lists, until it is
    /// gone.
    async fn run(self, api: Api<K>, config: watcher::Config, inner: std::sync::Weak<Inner>) {
        let mut events = watcher(api, config).default_backoff().boxed();
        // The list in progress (between `Init` and `InitDone`).
        let mut listing: Option<Held<T>> = None;
        while let Some(event) = events.next().await {
            let Some(inner) = inner.upgrade() else { return };
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, what = self.what, "watch failed; retrying");
                    continue;
                }
            };
            let mut held = (self.held)(&inner).write().unwrap_or_else(|p| p.into_inner());
            let changed = match event {
                watcher::Event::Init => {
                    listing = Some(Held::new());
                    false
                }
                watcher::Event::InitApply(object) => {
                    if let (Some(list), Some((key, value))) = (listing.as_mut(), (self.of)(&object)) {
                        list.insert(key, Arc::new(value));
                    }
                    false
                }
                watcher::Event::InitDone => {
                    let listed = listing.take().unwrap_or_default();
                    let changed = *held != listed;
                    *held = listed;
                    inner.synced[self.synced].store(true, Ordering::Release);
                    changed
                }
                watcher::Event::Apply(object) => match (self.of)(&object) {
                    Some((key, value)) => {
                        let same = held.get(&key).is_some_and(|before| **before == value);
                        if !same {
                            held.insert(key, Arc::new(value));
                        }
                        !same
                    }
                    None => key_of(&object).is_some_and(|key| held.remove(&key).is_some()),
                },
                watcher::Event::Delete(object) => {
                    key_of(&object).is_some_and(|key| held.remove(&key).is_some())
                }
            };
            drop(held);
            if changed {
                inner.changes.announce();
            }
        }
    }
}

fn key_of<K: kube::Resource>(object: &K) -> Option<Key> {
    let meta = object.meta();
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

/// The bundle of a ConfigMap: its `ca.crt` (in `data` or `binaryData`);
/// `None` when it has none, or (logged) when it holds no PEM certificate.
fn bundle_of(map: &ConfigMap) -> Option<(Key, Vec<u8>)> {
    let key = key_of(map)?;
    let pem = map
        .data
        .as_ref()
        .and_then(|d| d.get("ca.crt"))
        .map(|text| text.as_bytes().to_vec())
        .or_else(|| {
            map.binary_data
                .as_ref()
                .and_then(|d| d.get("ca.crt"))
                .map(|b| b.0.clone())
        })?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        tracing::warn!(configmap = %format!("{}/{}", key.0, key.1), "CA bundle left out: its ca.crt holds no PEM certificate");
        return None;
    }
    Some((key, pem))
}

/// The credential of a TLS Secret; `None` (logged) when it lacks its
/// certificate or key, or they are not PEM.
fn credential_of(secret: &Secret) -> Option<(Key, TlsCredential)> {
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
