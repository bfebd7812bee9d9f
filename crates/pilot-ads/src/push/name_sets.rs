//! Subscriptions' name sets, interned so proxies asking for the same names
//! share one set.

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
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

/// A hash of names in order (the same for a set and its sorted slice);
/// foldhash, a new subscription hashes 4,000 names.
fn hash_names<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> u64 {
    let mut hasher = foldhash::fast::FixedState::with_seed(0).build_hasher();
    names.len().hash(&mut hasher);
    for name in names {
        name.hash(&mut hasher);
    }
    hasher.finish()
}

impl NameSets {
    /// The shared set of `names`, sorted and without repeats: no `String`
    /// is made when the set is known (a sidecar subscribing to the same
    /// 4,000 load assignments as the others).
    pub(crate) fn intern_sorted(&self, names: &[&str]) -> Arc<BTreeSet<String>> {
        debug_assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted, no repeats");
        let hash = hash_names(names.iter().copied());
        self.find_or_insert(
            hash,
            |set| set.len() == names.len() && set.iter().map(String::as_str).eq(names.iter().copied()),
            || names.iter().map(|n| n.to_string()).collect(),
        )
    }

    fn find_or_insert(
        &self,
        hash: u64,
        same: impl Fn(&BTreeSet<String>) -> bool,
        make: impl FnOnce() -> BTreeSet<String>,
    ) -> Arc<BTreeSet<String>> {
        let mut guard = self.sets.lock().unwrap_or_else(|p| p.into_inner());
        let (sets, sweep_at) = &mut *guard;
        let bucket = sets.entry(hash).or_default();
        bucket.retain(|set| set.strong_count() > 0);
        if let Some(found) = bucket.iter().filter_map(Weak::upgrade).find(|set| same(set)) {
            return found;
        }
        let set = Arc::new(make());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_names_intern_to_one_copy() {
        let sets = NameSets::default();
        let first = sets.intern_sorted(&["a", "b", "c"]);
        assert!(Arc::ptr_eq(&first, &sets.intern_sorted(&["a", "b", "c"])));
        let other = sets.intern_sorted(&["a", "b"]);
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(other.iter().map(String::as_str).collect::<Vec<_>>(), ["a", "b"]);
        // Names that run together differently are another set.
        assert!(!Arc::ptr_eq(
            &sets.intern_sorted(&["ab", "c"]),
            &sets.intern_sorted(&["a", "bc"])
        ));
    }
}
