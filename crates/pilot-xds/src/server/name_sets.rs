//! Subscriptions' name sets, interned so proxies asking for the same names
//! share one set.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

/// Subscriptions' name sets, shared: the sidecars of a mesh mostly
/// subscribe to the same names (the same clusters' load assignments), so
/// each distinct set is held once however many proxies ask for it.
#[derive(Default)]
pub(crate) struct NameSets {
    /// The sets by hash, and the size at which dead entries are swept.
    sets: Mutex<(Buckets, usize)>,
}

type Buckets = HashMap<u64, Vec<Weak<BTreeSet<String>>>>;

impl NameSets {
    /// The shared copy of `names`.
    pub(crate) fn intern(&self, names: BTreeSet<String>) -> Arc<BTreeSet<String>> {
        let mut hasher = DefaultHasher::new();
        names.hash(&mut hasher);
        let hash = hasher.finish();
        let mut guard = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        let (sets, sweep_at) = &mut *guard;
        let bucket = sets.entry(hash).or_default();
        bucket.retain(|set| set.strong_count() > 0);
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|set| **set == names) {
            return found;
        }
        let set = Arc::new(names);
        bucket.push(Arc::downgrade(&set));
        // Forget the sets nobody holds any more, now and then.
        if sets.len() > *sweep_at {
            sets.retain(|_, bucket| {
                bucket.retain(|set| set.strong_count() > 0);
                !bucket.is_empty()
            });
            *sweep_at = (sets.len() * 2).max(64);
        }
        set
    }
}
