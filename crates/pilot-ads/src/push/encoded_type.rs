//! One xDS type's resources encoded once for every stream that is sent
//! them, in the state-of-the-world form and (built when first needed) the
//! delta form; what a subscription selects of them; and encodings patched
//! from the previous push's when few resources changed.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::{Bytes, BytesMut};
use envoy_types::pb::envoy::service::discovery::v3::Resource;
use envoy_types::pb::google::protobuf::Any;

/// One resource of an [`EncodedType`].
pub(crate) struct Entry {
    pub(crate) name: Arc<str>,
    /// A digest of the resource's encoding.
    pub(crate) version: u64,
    /// Where its entry is in [`EncodedType::sotw`].
    range: Range<usize>,
    /// The length of its `Any.value`.
    value_len: usize,
}

/// One type's resources, encoded once for every connection that is sent
/// them: `sotw` holds each resource as it appears in a
/// `DiscoveryResponse` (field 2, an `Any`), back to back, so a response is
/// a small header plus slices of this buffer; the delta form (field 2 of a
/// `DeltaDiscoveryResponse`, a `Resource` with name and version) is built
/// the first time an incremental stream needs it.
pub(crate) struct EncodedType {
    pub(crate) entries: Vec<Entry>,
    pub(crate) sotw: Bytes,
    delta: OnceLock<(Bytes, Vec<Range<usize>>)>,
    /// Delta forms of single entries, by position, encoded when few were
    /// asked for before `delta` was built.
    delta_few: Mutex<HashMap<usize, Bytes>>,
    /// What each distinct subscription selects (by the address of its
    /// interned set, 0 for the wildcard), worked out once for every stream
    /// and every proxy class sharing this encoding.
    selections: Mutex<HashMap<usize, Arc<Selection>>>,
    /// When this encoding is another one patched (`patched`): that one,
    /// and the positions whose values were replaced.
    patch_of: Option<(Weak<EncodedType>, Vec<usize>)>,
    /// Where each name is in `entries`, built the first time a name is
    /// looked up.
    index: OnceLock<Arc<HashMap<Arc<str>, usize>>>,
    /// Every name, sorted, built the first time a stream asks.
    names: OnceLock<Arc<BTreeSet<String>>>,
    type_url: &'static str,
}

impl EncodedType {
    pub(crate) fn new(type_url: &'static str, resources: Vec<(String, Any)>) -> Self {
        let mut buffer = BytesMut::new();
        let mut entries = Vec::with_capacity(resources.len());
        for (name, any) in resources {
            let start = buffer.len();
            prost::encoding::message::encode(2, &any, &mut buffer);
            entries.push(Entry {
                name: name.into(),
                version: digest_of(&any.value),
                range: start..buffer.len(),
                value_len: any.value.len(),
            });
        }
        EncodedType {
            entries,
            sotw: buffer.freeze(),
            delta: OnceLock::new(),
            delta_few: Mutex::default(),
            selections: Mutex::default(),
            patch_of: None,
            index: OnceLock::new(),
            names: OnceLock::new(),
            type_url,
        }
    }

    /// What a subscription to `names` (`None`: the wildcard) selects:
    /// worked out once for every stream with the same subscription, of
    /// either protocol and any proxy class this encoding is shared by.
    pub(crate) fn selection(&self, names: Option<&Arc<BTreeSet<String>>>) -> Arc<Selection> {
        let key = names.map_or(0, |n| Arc::as_ptr(n) as usize);
        let mut selections = self.selections.lock().unwrap_or_else(|p| p.into_inner());
        let selection = selections.entry(key).or_insert_with(|| {
            let positions: Vec<usize> = match names {
                None => (0..self.entries.len()).collect(),
                Some(names) => self
                    .entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| names.contains(&*e.name))
                    .map(|(i, _)| i)
                    .collect(),
            };
            let selected = || positions.iter().map(|&i| &self.entries[i]);
            Arc::new(Selection {
                digest: digest_entries(selected()),
                resources: slices(&self.sotw, selected().map(|e| (true, e.range.clone()))),
                positions,
                _names: names.cloned(),
            })
        });
        Arc::clone(selection)
    }

    /// The positions whose values may differ from `old`'s, when this
    /// encoding is `old` patched (same names, same order).
    pub(crate) fn patched_from(&self, old: &Arc<EncodedType>) -> Option<&[usize]> {
        let (base, positions) = self.patch_of.as_ref()?;
        (base.as_ptr() == Arc::as_ptr(old)).then_some(positions.as_slice())
    }

    /// The entry at `i` as a `DiscoveryResponse.resources` field (a
    /// slice of the shared buffer).
    pub(crate) fn sotw_entry(&self, i: usize) -> Bytes {
        self.sotw.slice(self.entries[i].range.clone())
    }

    /// Every resource's name.
    pub(crate) fn names(&self) -> Arc<BTreeSet<String>> {
        Arc::clone(
            self.names
                .get_or_init(|| Arc::new(self.entries.iter().map(|e| e.name.to_string()).collect())),
        )
    }

    /// Where the resource `name` is in `entries`.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.index
            .get_or_init(|| {
                Arc::new(
                    self.entries
                        .iter()
                        .enumerate()
                        .map(|(i, e)| (Arc::clone(&e.name), i))
                        .collect(),
                )
            })
            .get(name)
            .copied()
    }

    /// The `DeltaDiscoveryResponse.resources` of the entries at
    /// `positions` (in `entries`; sorted and deduplicated here).
    pub(crate) fn delta_at(&self, positions: &mut Vec<usize>) -> Vec<Bytes> {
        positions.sort_unstable();
        positions.dedup();
        // A few entries of an encoding whose delta form nobody needed yet
        // (a push after a rule change that left the load assignments as
        // they were, say): those entries only, each encoded once.
        if self.delta.get().is_none() && positions.len() * 8 < self.entries.len() {
            let mut few = self.delta_few.lock().unwrap_or_else(|p| p.into_inner());
            return positions
                .iter()
                .map(|&at| {
                    few.entry(at)
                        .or_insert_with(|| {
                            let entry = &self.entries[at];
                            let mut buffer = BytesMut::new();
                            self.encode_delta(entry, self.any_value(entry), &mut buffer);
                            buffer.freeze()
                        })
                        .clone()
                })
                .collect();
        }
        let (buffer, ranges) = self.delta_form();
        slices(buffer, positions.iter().map(|&i| (true, ranges[i].clone())))
    }

    /// A digest of the resources that `wanted` selects.
    pub(crate) fn digest(&self, wanted: impl Fn(&str) -> bool) -> u64 {
        digest_entries(self.entries.iter().filter(|e| wanted(&e.name)))
    }

    /// The `DiscoveryResponse.resources` of the entries `wanted` selects:
    /// slices of the shared buffer (one when the selection is contiguous).
    pub(crate) fn sotw(&self, wanted: impl Fn(&Entry) -> bool) -> Vec<Bytes> {
        slices(
            &self.sotw,
            self.entries.iter().map(|e| (wanted(e), e.range.clone())),
        )
    }

    /// Every entry as a `DeltaDiscoveryResponse.resources` field, back to
    /// back, and where each is.
    fn delta_form(&self) -> &(Bytes, Vec<Range<usize>>) {
        self.delta.get_or_init(|| {
            let mut buffer = BytesMut::new();
            let ranges = self
                .entries
                .iter()
                .map(|entry| self.encode_delta(entry, self.any_value(entry), &mut buffer))
                .collect();
            (buffer.freeze(), ranges)
        })
    }

    /// Appends `entry` (its value `value`) as a
    /// `DeltaDiscoveryResponse.resources` field; where it went.
    fn encode_delta(&self, entry: &Entry, value: &[u8], buffer: &mut BytesMut) -> Range<usize> {
        let start = buffer.len();
        let resource = Resource {
            name: entry.name.to_string(),
            version: version_text(entry.version),
            resource: Some(Any {
                type_url: self.type_url.to_string(),
                value: value.to_vec(),
            }),
            ..Default::default()
        };
        prost::encoding::message::encode(2, &resource, buffer);
        start..buffer.len()
    }

    /// This encoding with the values of the entries at the given positions
    /// (ascending) replaced: the same names in the same order, the other
    /// entries copied as encoded with their versions (no digest taken
    /// again), the name index and name set shared, and the delta form
    /// patched alike when this one has it.
    pub(crate) fn patched(self: &Arc<Self>, changed: Vec<(usize, Bytes)>) -> EncodedType {
        let mut buffer = BytesMut::with_capacity(self.sotw.len());
        let mut entries = Vec::with_capacity(self.entries.len());
        let mut replaced = changed.iter().peekable();
        // Entries copied, not yet written: a run of the old buffer.
        let mut run = 0..0;
        let mut values: Vec<Option<&[u8]>> = Vec::with_capacity(self.entries.len());
        for (at, entry) in self.entries.iter().enumerate() {
            let new_value = replaced.next_if(|(p, _)| *p == at).map(|(_, v)| v.as_ref());
            values.push(new_value);
            let Some(value) = new_value else {
                // Entries lie back to back: a run is one slice.
                if run.is_empty() {
                    run = entry.range.clone();
                }
                run.end = entry.range.end;
                let start = buffer.len() + (entry.range.start - run.start);
                entries.push(Entry {
                    name: Arc::clone(&entry.name),
                    version: entry.version,
                    range: start..start + entry.range.len(),
                    value_len: entry.value_len,
                });
                continue;
            };
            buffer.extend_from_slice(&self.sotw[run.clone()]);
            run = 0..0;
            let start = buffer.len();
            let any = Any {
                type_url: self.type_url.to_string(),
                value: value.to_vec(),
            };
            prost::encoding::message::encode(2, &any, &mut buffer);
            entries.push(Entry {
                name: Arc::clone(&entry.name),
                version: digest_of(value),
                range: start..buffer.len(),
                value_len: value.len(),
            });
        }
        buffer.extend_from_slice(&self.sotw[run]);
        let patched = EncodedType {
            entries,
            sotw: buffer.freeze(),
            delta: OnceLock::new(),
            delta_few: Mutex::default(),
            selections: Mutex::default(),
            patch_of: Some((Arc::downgrade(self), changed.iter().map(|(at, _)| *at).collect())),
            index: self.index.get().cloned().map(OnceLock::from).unwrap_or_default(),
            names: self.names.get().cloned().map(OnceLock::from).unwrap_or_default(),
            type_url: self.type_url,
        };
        if let Some((old, ranges)) = self.delta.get() {
            let mut buffer = BytesMut::with_capacity(old.len());
            let ranges = patched
                .entries
                .iter()
                .zip(ranges)
                .zip(&values)
                .map(|((entry, range), value)| match value {
                    None => {
                        let start = buffer.len();
                        buffer.extend_from_slice(&old[range.clone()]);
                        start..buffer.len()
                    }
                    Some(value) => patched.encode_delta(entry, value, &mut buffer),
                })
                .collect();
            let _ = patched.delta.set((buffer.freeze(), ranges));
        }
        patched
    }

    /// The encoded `Any.value` of an entry: the tail of its `sotw` form
    /// (prost writes `Any`'s fields in tag order, `value` last).
    fn any_value(&self, entry: &Entry) -> &[u8] {
        &self.sotw[entry.range.end - entry.value_len..entry.range.end]
    }
}

/// The resources of one type a subscription selects (see
/// [`EncodedType::selection`]).
pub(crate) struct Selection {
    /// Their positions in the encoding's entries, ascending.
    pub(crate) positions: Vec<usize>,
    /// A digest of their names and versions: unchanged means nothing to send.
    pub(crate) digest: u64,
    /// Their `DiscoveryResponse.resources`, as shared slices.
    pub(crate) resources: Vec<Bytes>,
    /// Keeps the set (and so the address in the key) alive.
    _names: Option<Arc<BTreeSet<String>>>,
}

/// A digest of entries' names and versions, in order.
fn digest_entries<'a>(entries: impl Iterator<Item = &'a Entry>) -> u64 {
    let mut hasher = DefaultHasher::new();
    for entry in entries {
        entry.name.hash(&mut hasher);
        entry.version.hash(&mut hasher);
    }
    hasher.finish()
}

/// The slices of `buffer` whose flag is set, neighbours joined.
fn slices(buffer: &Bytes, ranges: impl Iterator<Item = (bool, Range<usize>)>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut run: Option<Range<usize>> = None;
    for (wanted, range) in ranges {
        if !wanted {
            continue;
        }
        run = match run {
            Some(r) if r.end == range.start => Some(r.start..range.end),
            Some(r) => {
                out.push(buffer.slice(r));
                Some(range)
            }
            None => Some(range),
        };
    }
    out.extend(run.map(|r| buffer.slice(r)));
    out
}

/// A digest of a resource's encoding: its version.
pub(crate) fn digest_of(value: &[u8]) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// A resource version as sent to proxies.
pub(crate) fn version_text(version: u64) -> String {
    format!("{version:016x}")
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::google::protobuf::Any;

    use super::*;
    use crate::xds_type::XdsType;

    #[test]
    fn a_patched_encoding_equals_one_encoded_afresh() {
        let url = XdsType::Endpoint.url();
        let encoded = |values: &[&str]| {
            let resources = values
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let any = Any {
                        type_url: url.to_string(),
                        value: v.as_bytes().to_vec(),
                    };
                    (format!("cluster-{i}"), any)
                })
                .collect();
            EncodedType::new(url, resources)
        };
        let before = Arc::new(encoded(&["a", "bb", "ccc", "dddd", "e"]));
        // The delta form and the name index exist before the patch, so both
        // are carried over (patched) rather than built afresh.
        let _ = before.delta_form();
        assert_eq!(before.position("cluster-3"), Some(3));
        // Longer, shorter, at the start, in the middle, at the end, and one
        // "replaced" by the same value.
        let changes = [(0, "A longer value"), (2, ""), (3, "dddd"), (4, "E")];
        let patched = Arc::new(
            before.patched(
                changes
                    .iter()
                    .map(|(at, v)| (*at, Bytes::copy_from_slice(v.as_bytes())))
                    .collect(),
            ),
        );
        let afresh = encoded(&["A longer value", "bb", "", "dddd", "E"]);
        // What changed between the two is read from the patch, and is what a
        // comparison of every entry finds.
        assert_eq!(patched.patched_from(&before), Some(&[0, 2, 3, 4][..]));
        let diffs = crate::push::Diffs::default();
        let changed = diffs.between(&before, &patched);
        let mut names: Vec<&str> = changed.names.iter().map(|n| &**n).collect();
        names.sort();
        assert_eq!(names, ["cluster-0", "cluster-2", "cluster-4"]);
        assert!(changed.gone.is_empty());
        let compared = diffs.between(
            &before,
            &Arc::new(encoded(&["A longer value", "bb", "", "dddd", "E"])),
        );
        assert_eq!(*compared.names, *changed.names);
        assert_eq!(patched.sotw, afresh.sotw);
        assert_eq!(patched.delta_form(), afresh.delta_form());
        for (p, a) in patched.entries.iter().zip(&afresh.entries) {
            assert_eq!(
                (&p.name, p.version, &p.range, p.value_len),
                (&a.name, a.version, &a.range, a.value_len)
            );
        }
        assert_eq!(patched.entries.len(), afresh.entries.len());
        assert_eq!(patched.position("cluster-4"), Some(4));
        // Unchanged entries kept their versions, changed ones did not.
        let versions = |t: &EncodedType| t.entries.iter().map(|e| e.version).collect::<Vec<_>>();
        let (old, new) = (versions(&before), versions(&patched));
        assert_eq!([old[1], old[3]], [new[1], new[3]]);
        assert!(old[0] != new[0] && old[2] != new[2] && old[4] != new[4]);
        // Without a delta form, the patched one builds its own on demand; a
        // few entries asked for are encoded alone, as the whole form has them.
        let values: Vec<String> = (0..20).map(|i| format!("value {i}")).collect();
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        let plain = Arc::new(encoded(&values));
        let patched = plain.patched(vec![(1, Bytes::from_static(b"xy"))]);
        assert!(patched.delta.get().is_none());
        let few = patched.delta_at(&mut vec![1]);
        assert!(
            patched.delta.get().is_none(),
            "one entry of 20 builds no whole form"
        );
        let mut expected = values.clone();
        expected[1] = "xy";
        let afresh = encoded(&expected);
        let (buffer, ranges) = afresh.delta_form();
        assert_eq!(few, vec![buffer.slice(ranges[1].clone())]);
        assert_eq!(patched.delta_form(), afresh.delta_form());
    }
}
