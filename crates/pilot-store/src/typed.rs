//! [`TypedStore`]: a store seen through one Rust type.

use std::marker::PhantomData;
use std::sync::Arc;

use pilot_model::{Config, ConfigKey, ConfigKind, ConfigStore, StoreError};

/// A [`ConfigStore`] (a backend or a [`Controller`](crate::Controller)) seen
/// as objects of the typed kind `K`.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use pilot_model::{Config, ConfigKind, KindRegistry};
/// use pilot_store::TypedStore;
/// use pilot_store_memory::MemoryConfigStore;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Clone, Serialize, Deserialize)]
/// struct Greeting { text: String }
/// impl ConfigKind for Greeting {
///     const KIND: &'static str = "Greeting";
///     const PLURAL: &'static str = "greetings";
///     const GROUP: &'static str = "example.com";
///     const VERSION: &'static str = "v1";
/// }
///
/// let registry = KindRegistry::new();
/// registry.register::<Greeting>().unwrap();
/// let greetings = TypedStore::<Greeting>::new(Arc::new(MemoryConfigStore::new(registry)));
/// greetings.create(&Config::new("default", "hi", Greeting { text: "hello".into() })).await.unwrap();
/// let hi = greetings.get("default", "hi").await.unwrap().unwrap();
/// assert_eq!(hi.spec.text, "hello");
/// # });
/// ```
pub struct TypedStore<K> {
    store: Arc<dyn ConfigStore>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for TypedStore<K> {
    fn clone(&self) -> Self {
        TypedStore {
            store: Arc::clone(&self.store),
            kind: PhantomData,
        }
    }
}

impl<K: ConfigKind> TypedStore<K> {
    /// `store` seen as objects of kind `K`.
    pub fn new(store: Arc<dyn ConfigStore>) -> Self {
        TypedStore {
            store,
            kind: PhantomData,
        }
    }

    /// The object named `name` in `namespace`.
    pub async fn get(&self, namespace: &str, name: &str) -> Result<Option<Config<K>>, StoreError> {
        let key = ConfigKey::new(K::id(), namespace, name);
        match self.store.get(&key).await? {
            Some(config) => Config::from_dyn(&config).map(Some),
            None => Ok(None),
        }
    }

    /// The objects in `namespace`, or in all namespaces.
    pub async fn list(&self, namespace: Option<&str>) -> Result<Vec<Config<K>>, StoreError> {
        let items = self.store.list(&K::id(), namespace).await?;
        items.iter().map(|c| Config::from_dyn(c)).collect()
    }

    /// Creates `config`; returns it as stored.
    pub async fn create(&self, config: &Config<K>) -> Result<Config<K>, StoreError> {
        let stored = self.store.create(config.to_dyn()?).await?;
        Config::from_dyn(&stored)
    }

    /// Replaces `config`, which must carry the current resource version.
    pub async fn update(&self, config: &Config<K>) -> Result<Config<K>, StoreError> {
        let stored = self.store.update(config.to_dyn()?).await?;
        Config::from_dyn(&stored)
    }

    /// Deletes the object, optionally only at `resource_version`.
    pub async fn delete(
        &self,
        namespace: &str,
        name: &str,
        resource_version: Option<&str>,
    ) -> Result<(), StoreError> {
        self.store
            .delete(&ConfigKey::new(K::id(), namespace, name), resource_version)
            .await
    }
}
