//! [`ConfigIndex`]: the concurrent map of configuration objects that backs
//! both the in-memory store and the Controller's cache.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use dashmap::DashMap;
use pilot_model::{ConfigKey, DynConfig};

type KindEntries = Arc<RwLock<BTreeMap<(String, String), Arc<DynConfig>>>>;

/// Objects by key, with point reads and ordered per-kind listing and no
/// global lock on either.
///
/// Point reads go to a sharded hash map; listing reads a per-kind ordered map
/// under that kind's read lock. Writers must be serialized per key by the
/// caller (the memory store holds its write lock; the Controller has one task
/// per kind), which keeps the two views in step.
///
/// ```
/// use std::sync::Arc;
/// use pilot_model::{ConfigMeta, DynConfig};
/// use pilot_store::ConfigIndex;
///
/// let index = ConfigIndex::new();
/// let config = Arc::new(DynConfig { meta: ConfigMeta::new("K", "ns", "a"), spec: serde_json::json!({}) });
/// assert!(index.insert(config.clone()).is_none());
/// assert_eq!(index.get(&config.key()).unwrap().meta.name, "a");
/// assert_eq!(index.list("K", Some("ns")).len(), 1);
/// assert!(index.remove(&config.key()).is_some());
/// assert!(index.list("K", None).is_empty());
/// ```
#[derive(Default)]
pub struct ConfigIndex {
    by_key: DashMap<ConfigKey, Arc<DynConfig>>,
    by_kind: DashMap<String, KindEntries>,
}

impl ConfigIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    /// The object with `key`.
    pub fn get(&self, key: &ConfigKey) -> Option<Arc<DynConfig>> {
        self.by_key.get(key).map(|entry| Arc::clone(entry.value()))
    }

    /// True when an object has `key`.
    pub fn contains(&self, key: &ConfigKey) -> bool {
        self.by_key.contains_key(key)
    }

    /// The objects of `kind` in `namespace` (or all namespaces), ordered by
    /// namespace and name.
    pub fn list(&self, kind: &str, namespace: Option<&str>) -> Vec<Arc<DynConfig>> {
        let Some(entries) = self.kind_entries(kind) else {
            return Vec::new();
        };
        let entries = entries.read().unwrap_or_else(|p| p.into_inner());
        match namespace {
            None => entries.values().cloned().collect(),
            Some(ns) => entries
                .range((ns.to_string(), String::new())..)
                .take_while(|((entry_ns, _), _)| entry_ns == ns)
                .map(|(_, config)| Arc::clone(config))
                .collect(),
        }
    }

    /// How many objects of `kind` there are.
    pub fn count(&self, kind: &str) -> usize {
        self.kind_entries(kind)
            .map(|e| e.read().unwrap_or_else(|p| p.into_inner()).len())
            .unwrap_or(0)
    }

    /// Inserts or replaces an object; returns the one it replaced.
    pub fn insert(&self, config: Arc<DynConfig>) -> Option<Arc<DynConfig>> {
        let meta = &config.meta;
        let entries = match self.kind_entries(&meta.kind) {
            Some(entries) => entries,
            None => Arc::clone(self.by_kind.entry(meta.kind.clone()).or_default().value()),
        };
        entries
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert((meta.namespace.clone(), meta.name.clone()), Arc::clone(&config));
        self.by_key.insert(config.key(), config)
    }

    /// Removes the object with `key`; returns it.
    pub fn remove(&self, key: &ConfigKey) -> Option<Arc<DynConfig>> {
        let removed = self.by_key.remove(key).map(|(_, config)| config);
        if removed.is_some()
            && let Some(entries) = self.kind_entries(&key.kind)
        {
            entries
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&(key.namespace.clone(), key.name.clone()));
        }
        removed
    }

    fn kind_entries(&self, kind: &str) -> Option<KindEntries> {
        self.by_kind.get(kind).map(|e| Arc::clone(e.value()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::ConfigMeta;

    fn config(ns: &str, name: &str) -> Arc<DynConfig> {
        Arc::new(DynConfig {
            meta: ConfigMeta::new("K", ns, name),
            spec: serde_json::json!({}),
        })
    }

    #[test]
    fn lists_are_ordered_and_scoped_to_a_namespace() {
        let index = ConfigIndex::new();
        for (ns, name) in [("b", "2"), ("a", "9"), ("b", "1"), ("ab", "0"), ("a", "1")] {
            index.insert(config(ns, name));
        }
        let names = |ns| -> Vec<String> {
            index
                .list("K", ns)
                .iter()
                .map(|c| format!("{}/{}", c.meta.namespace, c.meta.name))
                .collect()
        };
        assert_eq!(names(None), ["a/1", "a/9", "ab/0", "b/1", "b/2"]);
        assert_eq!(names(Some("a")), ["a/1", "a/9"]);
        assert_eq!(names(Some("c")), Vec::<String>::new());
        assert_eq!(index.count("K"), 5);
        assert!(index.list("Other", None).is_empty());
        index.remove(&ConfigKey::new("K", "a", "9"));
        assert_eq!(names(Some("a")), ["a/1"]);
        assert!(index.get(&ConfigKey::new("K", "a", "9")).is_none());
    }
}
