//! [`MemoryCredentials`]: TLS credentials and certificate authority
//! bundles held in memory, set and removed by the embedder (its own vault,
//! a test), served by the ADS server as any [`CredentialSource`].

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use futures::stream::BoxStream;
use pilot_model::{CredentialSource, TlsCredential};
use pilot_store::ChangeTicks;

/// TLS credentials by namespace and name, in memory. Cloning gives
/// another handle on the same credentials.
#[derive(Clone)]
pub struct MemoryCredentials {
    inner: Arc<Inner>,
}

/// What is held by namespace and name.
type Held<T> = RwLock<BTreeMap<(String, String), Arc<T>>>;

struct Inner {
    held: Held<TlsCredential>,
    bundles: Held<Vec<u8>>,
    changes: ChangeTicks,
}

impl Default for MemoryCredentials {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryCredentials {
    /// No credentials yet.
    pub fn new() -> Self {
        MemoryCredentials {
            inner: Arc::new(Inner {
                held: RwLock::new(BTreeMap::new()),
                bundles: RwLock::new(BTreeMap::new()),
                changes: ChangeTicks::default(),
            }),
        }
    }

    /// Sets the credential `name` of `namespace` (replacing one there).
    /// It is not checked: the caller gives what Envoy can load.
    pub fn set(&self, namespace: &str, name: &str, credential: TlsCredential) {
        let mut held = self.inner.held.write().unwrap_or_else(|p| p.into_inner());
        held.insert((namespace.to_string(), name.to_string()), Arc::new(credential));
        drop(held);
        self.inner.changes.announce();
    }

    /// Removes the credential `name` of `namespace`; true when there was
    /// one.
    pub fn remove(&self, namespace: &str, name: &str) -> bool {
        let mut held = self.inner.held.write().unwrap_or_else(|p| p.into_inner());
        let removed = held.remove(&(namespace.to_string(), name.to_string())).is_some();
        drop(held);
        if removed {
            self.inner.changes.announce();
        }
        removed
    }

    /// Sets the certificate authority bundle (PEM) `name` of `namespace`,
    /// as a ConfigMap's `ca.crt` holds it (replacing one there).
    pub fn set_ca_bundle(&self, namespace: &str, name: &str, pem: Vec<u8>) {
        let mut bundles = self.inner.bundles.write().unwrap_or_else(|p| p.into_inner());
        bundles.insert((namespace.to_string(), name.to_string()), Arc::new(pem));
        drop(bundles);
        self.inner.changes.announce();
    }

    /// Removes the bundle `name` of `namespace`; true when there was one.
    pub fn remove_ca_bundle(&self, namespace: &str, name: &str) -> bool {
        let mut bundles = self.inner.bundles.write().unwrap_or_else(|p| p.into_inner());
        let removed = bundles
            .remove(&(namespace.to_string(), name.to_string()))
            .is_some();
        drop(bundles);
        if removed {
            self.inner.changes.announce();
        }
        removed
    }
}

impl CredentialSource for MemoryCredentials {
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

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    fn credential(chain: &str) -> TlsCredential {
        TlsCredential {
            certificate_chain: chain.as_bytes().to_vec(),
            private_key: b"key".to_vec(),
            ca_certificates: None,
        }
    }

    #[tokio::test]
    async fn changes_coalesce_and_none_is_lost() {
        let credentials = MemoryCredentials::new();
        let mut changes = credentials.changes();
        credentials.set("web", "shop", credential("one"));
        credentials.set("web", "shop", credential("two"));
        // Two changes before the reader looked: one item, after which the
        // latest is there.
        changes.next().await.unwrap();
        assert_eq!(credentials.get("web", "shop").unwrap().certificate_chain, b"two");
        let pending = futures::poll!(changes.next());
        assert!(pending.is_pending(), "no change since");
        assert!(credentials.remove("web", "shop"));
        assert!(!credentials.remove("web", "shop"));
        changes.next().await.unwrap();
        assert!(credentials.get("web", "shop").is_none());

        credentials.set_ca_bundle("web", "ca", b"pem".to_vec());
        changes.next().await.unwrap();
        assert_eq!(
            credentials.ca_bundle("web", "ca").as_deref(),
            Some(&b"pem".to_vec())
        );
        assert!(credentials.get("web", "ca").is_none(), "a bundle is no Secret");
        assert!(credentials.remove_ca_bundle("web", "ca"));
        changes.next().await.unwrap();
        assert!(credentials.ca_bundle("web", "ca").is_none());
    }
}
