//! The decoder's dynamic table (RFC 7541 §2.3.2, §4): entries in one byte
//! buffer, oldest first, allocated with the first entry and freed when the
//! table empties.
//!
//! Evicting an entry only moves the start of the live bytes; the dead bytes
//! before it are dropped (the live ones moved to the front) when the buffer
//! would otherwise have to grow and at least half of it is dead, so each byte
//! is moved at most about once. The buffer stays within twice the table's
//! maximum size.

use std::collections::VecDeque;

/// RFC 7541 §4.1: an entry's size is its name and value lengths plus 32.
pub(crate) const ENTRY_OVERHEAD: usize = 32;

/// The name of a field being inserted.
pub(crate) enum Name<'a> {
    /// Bytes outside the table (the block, the static table, scratch).
    Bytes(&'a [u8]),
    /// The name of the dynamic entry with this index (1 = newest), which the
    /// insertion may evict.
    Dynamic(usize),
}

/// Where one entry's name and value lie in the buffer.
#[derive(Clone, Copy, Debug)]
struct Entry {
    /// Offset of the name in `buf`; the value follows it.
    pos: u32,
    name_len: u32,
    value_len: u32,
}

impl Entry {
    fn size(&self) -> usize {
        self.name_len as usize + self.value_len as usize + ENTRY_OVERHEAD
    }

    fn end(&self) -> usize {
        self.pos as usize + self.name_len as usize + self.value_len as usize
    }
}

/// The dynamic table.
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// Entry bytes; those before the oldest entry are dead.
    buf: Vec<u8>,
    /// Oldest first.
    entries: VecDeque<Entry>,
    /// The sum of the entries' sizes.
    size: usize,
    /// The maximum size, from the last size update (or the initial setting).
    max_size: usize,
}

impl Table {
    /// An empty table of at most `max_size` bytes (nothing allocated).
    pub(crate) fn new(max_size: usize) -> Self {
        Table {
            max_size,
            ..Table::default()
        }
    }

    /// The maximum size in effect.
    pub(crate) fn max_size(&self) -> usize {
        self.max_size
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The sum of the entries' sizes (RFC 7541 §4.1).
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// Bytes allocated for the table.
    pub(crate) fn allocated(&self) -> usize {
        self.buf.capacity() + self.entries.capacity() * std::mem::size_of::<Entry>()
    }

    /// The entry with dynamic index `index` (1 = newest), if any.
    pub(crate) fn get(&self, index: usize) -> Option<(&[u8], &[u8])> {
        let e = self.entry(index)?;
        let name_end = e.pos as usize + e.name_len as usize;
        Some((&self.buf[e.pos as usize..name_end], &self.buf[name_end..e.end()]))
    }

    fn entry(&self, index: usize) -> Option<&Entry> {
        if index == 0 {
            return None;
        }
        let i = self.entries.len().checked_sub(index)?;
        self.entries.get(i)
    }

    /// Applies a dynamic table size update, evicting what no longer fits.
    pub(crate) fn set_max_size(&mut self, max_size: usize) {
        self.max_size = max_size;
        while self.size > max_size {
            self.evict();
        }
        if self.entries.is_empty() {
            self.free();
        } else if self.buf.capacity() > 2 * max_size.max(64) {
            let keep = self.entries.front().map_or(0, |e| e.pos as usize);
            self.compact(keep);
            self.buf.shrink_to(2 * max_size);
            self.entries.shrink_to_fit();
        }
    }

    /// Inserts a field as the newest entry (RFC 7541 §4.4): evicts the oldest
    /// entries until it fits, or empties the table if it cannot fit at all.
    pub(crate) fn insert(&mut self, name: Name<'_>, value: &[u8]) {
        let (name_len, name_at) = match name {
            Name::Bytes(n) => (n.len(), None),
            Name::Dynamic(index) => match self.entry(index) {
                Some(e) => (e.name_len as usize, Some(e.pos as usize)),
                None => return,
            },
        };
        let size = name_len + value.len() + ENTRY_OVERHEAD;
        if size > self.max_size {
            self.entries.clear();
            self.size = 0;
            self.free();
            return;
        }
        while self.size + size > self.max_size {
            self.evict();
        }
        let need = name_len + value.len();
        if self.entries.is_empty() && name_at.is_none() {
            // Nothing to keep: start over at the front.
            self.buf.clear();
        }
        // The first byte to keep: the oldest entry's, or the name's if it is
        // in an evicted entry.
        let mut keep = self.entries.front().map_or(self.buf.len(), |e| e.pos as usize);
        if let Some(at) = name_at {
            keep = keep.min(at);
        }
        let mut name_at = name_at;
        if self.buf.len() + need > self.buf.capacity() {
            let live = self.buf.len() - keep;
            if keep > 0 && (keep >= live || self.buf.len() + need > 2 * self.max_size) {
                self.compact(keep);
                name_at = name_at.map(|at| at - keep);
            }
            if self.buf.len() + need > self.buf.capacity() {
                let target = (2 * self.buf.capacity())
                    .clamp(64, (2 * self.max_size).max(64))
                    .max(self.buf.len() + need);
                self.buf.reserve_exact(target - self.buf.len());
            }
        }
        let pos = self.buf.len();
        match (name, name_at) {
            (Name::Bytes(n), _) => self.buf.extend_from_slice(n),
            (Name::Dynamic(_), Some(at)) => self.buf.extend_from_within(at..at + name_len),
            (Name::Dynamic(_), None) => return,
        }
        self.buf.extend_from_slice(value);
        // Positions fit in u32: the decoder caps the maximum size at 2^30.
        self.entries.push_back(Entry {
            pos: pos as u32,
            name_len: name_len as u32,
            value_len: value.len() as u32,
        });
        self.size += size;
    }

    /// Drops the oldest entry (its bytes stay until the next compaction).
    fn evict(&mut self) {
        if let Some(e) = self.entries.pop_front() {
            self.size -= e.size();
        }
        if self.entries.is_empty() {
            self.size = 0;
        }
    }

    /// Moves the bytes from `keep` on to the front of the buffer.
    fn compact(&mut self, keep: usize) {
        self.buf.copy_within(keep.., 0);
        self.buf.truncate(self.buf.len() - keep);
        for e in &mut self.entries {
            e.pos -= keep as u32;
        }
    }

    /// Gives the (empty) table's storage back.
    fn free(&mut self) {
        self.buf = Vec::new();
        self.entries = VecDeque::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
        (1..=t.len())
            .map(|i| {
                let (n, v) = t.get(i).unwrap();
                (n.to_vec(), v.to_vec())
            })
            .collect()
    }

    #[test]
    fn evicts_oldest_and_frees_when_empty() {
        let mut t = Table::new(100);
        assert_eq!(t.allocated(), 0);
        t.insert(Name::Bytes(b"a"), b"1"); // 34
        t.insert(Name::Bytes(b"b"), b"2"); // 68
        assert_eq!(t.size(), 68);
        assert!(t.allocated() > 0);
        t.insert(Name::Bytes(b"c"), b"3"); // evicts a
        assert_eq!(
            fields(&t),
            [(b"c".to_vec(), b"3".to_vec()), (b"b".to_vec(), b"2".to_vec())]
        );
        assert_eq!(t.get(3), None);
        assert_eq!(t.get(0), None);
        t.set_max_size(40);
        assert_eq!(fields(&t), [(b"c".to_vec(), b"3".to_vec())]);
        t.set_max_size(0);
        assert_eq!(t.len(), 0);
        assert_eq!(t.allocated(), 0);
    }

    #[test]
    fn too_large_entry_empties() {
        let mut t = Table::new(64);
        t.insert(Name::Bytes(b"a"), b"1");
        t.insert(Name::Bytes(b"name"), &[b'x'; 40]);
        assert_eq!(t.len(), 0);
        assert_eq!(t.size(), 0);
        assert_eq!(t.allocated(), 0);
    }

    #[test]
    fn name_of_an_evicted_entry() {
        // Room for one entry: inserting with the name of the only entry
        // evicts it first (RFC 7541 §4.4).
        let mut t = Table::new(60);
        t.insert(Name::Bytes(b"custom-key"), b"value-one");
        t.insert(Name::Dynamic(1), b"value-two");
        assert_eq!(fields(&t), [(b"custom-key".to_vec(), b"value-two".to_vec())]);
        for i in 0..1000 {
            t.insert(Name::Dynamic(1), format!("v{i}").as_bytes());
        }
        assert_eq!(fields(&t), [(b"custom-key".to_vec(), b"v999".to_vec())]);
        assert!(t.buf.capacity() <= 2 * 64, "{}", t.buf.capacity());
    }

    #[test]
    fn churn_stays_bounded() {
        let mut t = Table::new(4096);
        for i in 0..10_000usize {
            let value = vec![b'v'; i % 300];
            t.insert(Name::Bytes(format!("k{}", i % 7).as_bytes()), &value);
            assert!(t.size() <= 4096);
            let (n, v) = t.get(1).unwrap();
            assert_eq!(n, format!("k{}", i % 7).as_bytes());
            assert_eq!(v, &value[..]);
        }
        assert!(t.buf.capacity() <= 2 * 4096, "{}", t.buf.capacity());
    }
}
