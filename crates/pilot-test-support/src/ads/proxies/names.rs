//! The resource names emulated proxies subscribe to, held once for every
//! proxy listing the same: 2,000 sidecars' copies of 4,000 names would
//! make the proxies' process, not the server, what a bench measures.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::wire::encode_names;

/// A sorted list of resource names with its encoding as a request's
/// `resource_names` (state of the world) or `resource_names_subscribe`
/// (delta): field 3, repeated in both.
pub(super) struct NameList {
    pub(super) names: Vec<String>,
    pub(super) encoded: Bytes,
}

/// The distinct values clients hold (one per distinct subscription: a few
/// per namespace), shared while any client holds them, found by a hash of
/// their content: 10,000 clients over 500 namespaces each looking through
/// every held list would make the lookup the clients' largest cost.
type Interned<T> = std::sync::Mutex<BTreeMap<u64, Vec<std::sync::Weak<T>>>>;

/// The held value `same` as `key` (whose content hashes to `hash`), or a
/// new one `make` builds from it.
fn intern<T, K>(
    table: &Interned<T>,
    hash: u64,
    key: K,
    same: impl Fn(&T, &K) -> bool,
    make: impl FnOnce(K) -> T,
) -> Arc<T> {
    let mut held = table.lock().unwrap();
    let bucket = held.entry(hash).or_default();
    bucket.retain(|value| value.strong_count() > 0);
    if let Some(found) = bucket
        .iter()
        .filter_map(std::sync::Weak::upgrade)
        .find(|v| same(v, &key))
    {
        return found;
    }
    let value = Arc::new(make(key));
    bucket.push(Arc::downgrade(&value));
    value
}

/// A hash of `value` (the same in every client of the process).
fn content_hash(value: &impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(value)
}

static NAME_LISTS: Interned<NameList> = std::sync::Mutex::new(BTreeMap::new());

/// The shared list of `names`, sorted and without repeats.
pub(super) fn name_list<'a>(names: impl Iterator<Item = &'a str>) -> Arc<NameList> {
    let mut names: Vec<&str> = names.collect();
    names.sort_unstable();
    names.dedup();
    intern(
        &NAME_LISTS,
        content_hash(&names),
        names,
        |list, names| {
            list.names.len() == names.len() && list.names.iter().map(String::as_str).eq(names.iter().copied())
        },
        |names| NameList {
            names: names.iter().map(|n| n.to_string()).collect(),
            encoded: encode_names(3, names.iter().copied()),
        },
    )
}

/// What a delta client subscribes to on top of `before` to hold `after`,
/// and what it unsubscribes from (fields 3 and 4 of a
/// `DeltaDiscoveryRequest`).
pub(super) fn name_changes(before: Option<&NameList>, after: &NameList) -> (Bytes, Bytes) {
    let Some(before) = before else {
        return (after.encoded.clone(), Bytes::new());
    };
    let (mut added, mut gone) = (Vec::new(), Vec::new());
    let (mut old, mut new) = (before.names.iter().peekable(), after.names.iter().peekable());
    loop {
        match (old.peek(), new.peek()) {
            (Some(o), Some(n)) if o == n => {
                old.next();
                new.next();
            }
            (Some(o), Some(n)) if o < n => gone.push(old.next().unwrap().as_str()),
            (_, Some(_)) => added.push(new.next().unwrap().as_str()),
            (Some(_), None) => gone.push(old.next().unwrap().as_str()),
            (None, None) => break,
        }
    }
    (
        encode_names(3, added.into_iter()),
        encode_names(4, gone.into_iter()),
    )
}

/// The clusters a delta client holds, by name, with whether each uses EDS,
/// and the EDS names that makes it subscribe to; shared by every client
/// holding the same clusters.
pub(super) struct ClusterSet {
    pub(super) clusters: BTreeMap<String, bool>,
    pub(super) eds: Arc<NameList>,
}

static CLUSTER_SETS: Interned<ClusterSet> = std::sync::Mutex::new(BTreeMap::new());

pub(super) fn cluster_set(clusters: BTreeMap<String, bool>) -> Arc<ClusterSet> {
    intern(
        &CLUSTER_SETS,
        content_hash(&clusters),
        clusters,
        |set, clusters| set.clusters == *clusters,
        |clusters| ClusterSet {
            eds: name_list(
                clusters
                    .iter()
                    .filter(|(_, eds)| **eds)
                    .map(|(name, _)| name.as_str()),
            ),
            clusters,
        },
    )
}
