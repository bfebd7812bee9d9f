//! What changed between two encodings of a type: worked out once per pair
//! of encodings (and, for state-of-the-world streams, once per distinct
//! subscription) and shared by every stream that moves from one to the
//! other. Incremental streams (`delta.rs`) read the names changed and the
//! names gone; state-of-the-world streams the responses below.
//!
//! A state-of-the-world response of a type other than Listener and
//! Cluster may carry a subset of the subscribed resources: the client
//! keeps those it is not sent (xDS protocol, "Grouping Resources into
//! Responses"; Envoy hands each EDS/RDS watch only the resources a
//! response names). So after a push a stream is sent only the load
//! assignments and route configurations whose version differs from what
//! it was last sent. A stream remembers only the `Arc` of the encoded type
//! it was last sent (shared by every stream of the same push and class),
//! not a map of versions: 2,000 streams of 4,000 assignments hold 2,000
//! pointers.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;

use super::encoded_type::EncodedType;

/// What differs between two encodings.
pub(crate) struct Changed {
    old: Weak<EncodedType>,
    new: Weak<EncodedType>,
    /// The names whose version differs (present in the newer one, absent
    /// from or different in the older one).
    pub(crate) names: Arc<HashSet<Arc<str>>>,
    /// The names of the older one the newer one lacks.
    pub(crate) gone: Vec<Arc<str>>,
    /// `names`, sorted, made the first time a stream asks.
    sorted: OnceLock<Arc<BTreeSet<String>>>,
}

/// What one subscription is sent when moving between two encodings.
pub(crate) struct Update {
    old: Weak<EncodedType>,
    new: Weak<EncodedType>,
    /// Keeps the subscription's set (and so the address in the key) alive.
    _names: Option<Arc<BTreeSet<String>>>,
    /// The resources to send (slices of the newer encoding's buffer).
    pub(crate) resources: Vec<Bytes>,
    /// How many resources that is.
    pub(crate) count: usize,
}

/// `(old, new, subscription's names, forced names' digest)`, by address.
type UpdateKey = (usize, usize, usize, u64);

/// The shared diffs of a server's streams (both protocols).
#[derive(Default)]
pub(crate) struct Diffs {
    changed: Mutex<Cache<(usize, usize), Arc<Changed>>>,
    updates: Mutex<Cache<UpdateKey, Arc<Update>>>,
}

/// A map whose dead entries (both encodings gone) are swept as it grows.
struct Cache<K, V> {
    map: HashMap<K, V>,
    sweep_at: usize,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Cache {
            map: HashMap::new(),
            sweep_at: 64,
        }
    }
}

trait Pinned {
    /// True while both encodings the entry was computed from are alive
    /// (their addresses cannot be reused meanwhile: the entry holds weak
    /// references, which keep the allocation).
    fn alive(&self) -> bool;
}

impl Pinned for Arc<Changed> {
    fn alive(&self) -> bool {
        self.old.strong_count() > 0 && self.new.strong_count() > 0
    }
}

impl Pinned for Arc<Update> {
    fn alive(&self) -> bool {
        self.old.strong_count() > 0 && self.new.strong_count() > 0
    }
}

impl<K: Hash + Eq + Copy, V: Pinned + Clone> Cache<K, V> {
    fn get(&self, key: &K) -> Option<V> {
        self.map.get(key).filter(|v| v.alive()).cloned()
    }

    fn insert(&mut self, key: K, value: V) {
        self.map.insert(key, value);
        if self.map.len() > self.sweep_at {
            self.map.retain(|_, v| v.alive());
            self.sweep_at = (self.map.len() * 2).max(64);
        }
    }
}

fn address(encoded: &Arc<EncodedType>) -> usize {
    Arc::as_ptr(encoded) as usize
}

impl Diffs {
    /// The names whose version in `new` differs from `old`'s.
    fn changed(&self, old: &Arc<EncodedType>, new: &Arc<EncodedType>) -> Arc<HashSet<Arc<str>>> {
        Arc::clone(&self.between(old, new).names)
    }

    /// What differs from `old` to `new`, worked out once per pair.
    pub(crate) fn between(&self, old: &Arc<EncodedType>, new: &Arc<EncodedType>) -> Arc<Changed> {
        let key = (address(old), address(new));
        if let Some(found) = self.lock_changed().get(&key) {
            return found;
        }
        let (names, gone): (HashSet<Arc<str>>, _) = match new.patched_from(old) {
            // `old` patched: the same names in the same order, and only
            // these positions may differ (an endpoint push).
            Some(positions) => (
                positions
                    .iter()
                    .filter(|&&at| old.entries[at].version != new.entries[at].version)
                    .map(|&at| Arc::clone(&new.entries[at].name))
                    .collect(),
                Vec::new(),
            ),
            None => (
                new.entries
                    .iter()
                    .filter(|e| old.position(&e.name).map(|i| old.entries[i].version) != Some(e.version))
                    .map(|e| Arc::clone(&e.name))
                    .collect(),
                old.entries
                    .iter()
                    .filter(|e| new.position(&e.name).is_none())
                    .map(|e| Arc::clone(&e.name))
                    .collect(),
            ),
        };
        let changed = Arc::new(Changed {
            old: Arc::downgrade(old),
            new: Arc::downgrade(new),
            names: Arc::new(names),
            gone,
            sorted: OnceLock::new(),
        });
        self.lock_changed().insert(key, Arc::clone(&changed));
        changed
    }

    /// The names of the resources of `new` that a client holding `old`
    /// lacks (every name of `new` when `old` is `None`): one set for every
    /// stream that asks.
    pub(crate) fn changed_names(
        &self,
        old: Option<&Arc<EncodedType>>,
        new: &Arc<EncodedType>,
    ) -> Arc<BTreeSet<String>> {
        match old {
            Some(old) if Arc::ptr_eq(old, new) => Arc::default(),
            Some(old) => {
                let changed = self.between(old, new);
                Arc::clone(
                    changed
                        .sorted
                        .get_or_init(|| Arc::new(changed.names.iter().map(|n| n.to_string()).collect())),
                )
            }
            None => new.names(),
        }
    }

    /// What a subscription to `names` (`None`: every resource) is sent
    /// when moving from `old` to `new`: the selected resources whose
    /// version changed, plus those named in `forced` (subscribed or not).
    pub(crate) fn update(
        &self,
        old: &Arc<EncodedType>,
        new: &Arc<EncodedType>,
        names: &Option<Arc<BTreeSet<String>>>,
        forced: &BTreeSet<String>,
    ) -> Arc<Update> {
        let forced_digest = if forced.is_empty() {
            0
        } else {
            let mut hasher = DefaultHasher::new();
            forced.hash(&mut hasher);
            hasher.finish() | 1
        };
        let key = (
            address(old),
            address(new),
            names.as_ref().map_or(0, |n| Arc::as_ptr(n) as usize),
            forced_digest,
        );
        if let Some(found) = self.lock_updates().get(&key) {
            return found;
        }
        let changed = if Arc::ptr_eq(old, new) {
            Arc::default()
        } else {
            self.changed(old, new)
        };
        let wanted = |name: &str| names.as_ref().is_none_or(|names| names.contains(name));
        // A forced name goes even before the proxy subscribes to it: the
        // load assignment of a cluster just sent, which warms waiting for
        // it (the proxy's request naming it follows).
        let selected = |name: &str| (wanted(name) && changed.contains(name)) || forced.contains(name);
        let count = new.entries.iter().filter(|e| selected(&e.name)).count();
        let resources = if count == 0 {
            Vec::new()
        } else {
            new.sotw(|e| selected(&e.name))
        };
        let update = Arc::new(Update {
            old: Arc::downgrade(old),
            new: Arc::downgrade(new),
            _names: names.clone(),
            resources,
            count,
        });
        self.lock_updates().insert(key, Arc::clone(&update));
        update
    }

    fn lock_changed(&self) -> std::sync::MutexGuard<'_, Cache<(usize, usize), Arc<Changed>>> {
        self.changed.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_updates(&self) -> std::sync::MutexGuard<'_, Cache<UpdateKey, Arc<Update>>> {
        self.updates.lock().unwrap_or_else(|p| p.into_inner())
    }
}
