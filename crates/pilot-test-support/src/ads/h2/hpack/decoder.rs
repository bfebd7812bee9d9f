//! [`Decoder`]: a connection's request header blocks to fields.

use std::ops::Range;

use super::HpackError;
use super::huffman;
use super::primitives::decode_int;
use super::static_table::STATIC_TABLE;
use super::table::{ENTRY_OVERHEAD, Name, Table};

/// Decodes one connection's request header blocks (RFC 7541 §3), its
/// dynamic table allocated only while non-empty.
///
/// Fields are passed to a callback as slices borrowed from the block, from
/// the static or dynamic table, or from a scratch buffer holding the
/// block's Huffman-decoded strings: allocated once, at the block's first
/// Huffman-coded string, and freed when the block is done. A block without
/// Huffman-coded strings or new table entries allocates nothing.
#[derive(Debug)]
pub struct Decoder {
    table: Table,
    /// SETTINGS_HEADER_TABLE_SIZE in effect: no size update may exceed it.
    limit: usize,
    /// The lowest limit announced since the last block, if it is below the
    /// table's size: the next block must start with an update to at most it.
    required_update: Option<usize>,
}

impl Decoder {
    /// A decoder whose table may hold `max_table_size` bytes (RFC 7541 §4.2;
    /// the SETTINGS_HEADER_TABLE_SIZE we announced, 4,096 until the peer
    /// acknowledged a smaller one). Sizes above 2^30 count as 2^30.
    pub fn new(max_table_size: usize) -> Self {
        let limit = clamp(max_table_size);
        Decoder {
            table: Table::new(limit),
            limit,
            required_update: None,
        }
    }

    /// The limit the peer must respect from now on (after our SETTINGS is
    /// acknowledged); the next block must start with a size update if the
    /// table is larger (RFC 7541 §4.2, §6.3).
    ///
    /// Call it when the peer's SETTINGS ACK is read: the blocks read after
    /// the ACK were encoded after the peer applied the setting. If the limit
    /// is lowered more than once before the next block, that block must
    /// signal the lowest.
    pub fn set_max_table_size(&mut self, size: usize) {
        let size = clamp(size);
        self.limit = size;
        if size < self.table.max_size() {
            self.required_update = Some(self.required_update.map_or(size, |r| r.min(size)));
        }
    }

    /// Decodes one complete header block (HEADERS + CONTINUATIONs joined),
    /// calling `emit(name, value)` per field in order.
    ///
    /// Fails on any malformation (a connection error COMPRESSION_ERROR), or
    /// with [`HpackError::HeaderListTooLarge`] when the decoded list exceeds
    /// `max_list_size` bytes as RFC 9113 §6.5.2 counts (name + value + 32 per
    /// field): then the fields from the one that crossed the limit on are not
    /// emitted, but the whole block was decoded and the table updated as it
    /// said, so the connection may continue (a stream error).
    pub fn decode(
        &mut self,
        block: &[u8],
        max_list_size: usize,
        mut emit: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut pos = self.size_updates(block)?;
        let mut scratch = Vec::new();
        let mut list_size = 0usize;
        let mut field = |name: &[u8], value: &[u8]| {
            list_size = list_size.saturating_add(name.len() + value.len() + ENTRY_OVERHEAD);
            if list_size <= max_list_size {
                emit(name, value);
            }
        };
        while let Some(&first) = block.get(pos) {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = decode_int(block, &mut pos, 7)?;
                let (name, value) = self.lookup(index)?;
                field(name, value);
                continue;
            }
            if first & 0xe0 == 0x20 {
                return Err(HpackError::TableSizeUpdateNotAtStart);
            }
            // Literal fields (§6.2): with incremental indexing (01), without
            // indexing (0000) or never indexed (0001).
            let indexing = first & 0x40 != 0;
            let index = decode_int(block, &mut pos, if indexing { 6 } else { 4 })?;
            scratch.clear();
            // The name: bytes outside the table, or a dynamic index.
            let literal_name = match index {
                0 => Some(read_string(block, &mut pos, &mut scratch)?),
                _ => None,
            };
            if index > STATIC_TABLE.len() {
                self.lookup(index)?;
            }
            let value = read_string(block, &mut pos, &mut scratch)?;
            let value = value.of(block, &scratch);
            let name = match &literal_name {
                Some(s) => Ok(s.of(block, &scratch)),
                None if index <= STATIC_TABLE.len() => Ok(STATIC_TABLE[index - 1].0),
                None => Err(index - STATIC_TABLE.len()),
            };
            match name {
                Ok(name) => field(name, value),
                Err(dynamic) => {
                    if let Some((name, _)) = self.table.get(dynamic) {
                        field(name, value);
                    }
                }
            }
            if indexing {
                let name = match name {
                    Ok(name) => Name::Bytes(name),
                    Err(dynamic) => Name::Dynamic(dynamic),
                };
                self.table.insert(name, value);
            }
        }
        if list_size > max_list_size {
            return Err(HpackError::HeaderListTooLarge {
                size: list_size,
                limit: max_list_size,
            });
        }
        Ok(())
    }

    /// Bytes the decoder holds now (table entries), for memory accounting
    /// and tests.
    pub fn allocated(&self) -> usize {
        self.table.allocated()
    }

    /// The dynamic table's size as RFC 7541 §4.1 counts it (name + value +
    /// 32 per entry).
    pub fn table_size(&self) -> usize {
        self.table.size()
    }

    /// The dynamic table's entries, newest first.
    pub fn table_entries(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (1..=self.table.len()).filter_map(|i| self.table.get(i))
    }

    /// Applies the size updates at the start of `block` (RFC 7541 §4.2) and
    /// returns where its fields start.
    fn size_updates(&mut self, block: &[u8]) -> Result<usize, HpackError> {
        let mut pos = 0;
        let mut lowest: Option<usize> = None;
        while let Some(&first) = block.get(pos) {
            if first & 0xe0 != 0x20 {
                break;
            }
            let size = decode_int(block, &mut pos, 5)?;
            if size > self.limit {
                return Err(HpackError::TableSizeUpdateTooLarge {
                    size,
                    limit: self.limit,
                });
            }
            self.table.set_max_size(size);
            lowest = Some(lowest.map_or(size, |l| l.min(size)));
        }
        if let Some(limit) = self.required_update.take()
            && lowest.is_none_or(|l| l > limit)
        {
            return Err(HpackError::TableSizeUpdateMissing { limit });
        }
        Ok(pos)
    }

    /// The field at `index` of the static and dynamic tables (RFC 7541
    /// §2.3.3).
    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::IndexZero),
            i if i <= STATIC_TABLE.len() => Ok(STATIC_TABLE[i - 1]),
            i => self
                .table
                .get(i - STATIC_TABLE.len())
                .ok_or(HpackError::IndexOutOfRange {
                    index,
                    dynamic: self.table.len(),
                }),
        }
    }
}

/// A decoded string: in the block, or Huffman-decoded into the scratch
/// buffer.
enum Str {
    Block(Range<usize>),
    Scratch(Range<usize>),
}

impl Str {
    fn of<'a>(&self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Str::Block(r) => &block[r.clone()],
            Str::Scratch(r) => &scratch[r.clone()],
        }
    }
}

/// Reads a string literal (RFC 7541 §5.2) at `block[*pos..]`.
fn read_string(block: &[u8], pos: &mut usize, scratch: &mut Vec<u8>) -> Result<Str, HpackError> {
    let huffman = block.get(*pos).ok_or(HpackError::Truncated)? & 0x80 != 0;
    let len = decode_int(block, pos, 7)?;
    let start = *pos;
    let end = start
        .checked_add(len)
        .filter(|&end| end <= block.len())
        .ok_or(HpackError::Truncated)?;
    *pos = end;
    if !huffman {
        return Ok(Str::Block(start..end));
    }
    if scratch.capacity() == 0 {
        // Once per block: every code is at least 5 bits long, so no field
        // from here on decodes to more than this.
        scratch.reserve_exact((block.len() - start) * 8 / 5);
    }
    let from = scratch.len();
    huffman::decode(&block[start..end], scratch)?;
    Ok(Str::Scratch(from..scratch.len()))
}

/// The largest table size: entry positions in the table's buffer (at most
/// about three times the size) are kept in `u32`.
const MAX_TABLE_SIZE: usize = 1 << 30;

fn clamp(size: usize) -> usize {
    size.min(MAX_TABLE_SIZE)
}
