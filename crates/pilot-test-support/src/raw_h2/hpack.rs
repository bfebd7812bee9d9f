//! Header blocks for sending (RFC 7541), without Huffman coding: literal
//! fields with or without indexing, references to the static or dynamic
//! table, and table size updates, each written as the test asks.

/// The ADS method's path (`:path` of a `StreamAggregatedResources` call).
pub const ADS_PATH: &str = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources";

/// The dynamic table size of a decoder until its SETTINGS say otherwise.
pub const DEFAULT_TABLE_SIZE: u32 = 4_096;

/// The index of the newest entry of the dynamic table (the static table
/// has 61 entries).
pub const FIRST_DYNAMIC_INDEX: u64 = 62;

/// A header block (fragment) under construction.
#[derive(Debug, Clone, Default)]
pub struct HeaderBlock {
    bytes: Vec<u8>,
}

impl HeaderBlock {
    /// An empty block.
    pub fn new() -> Self {
        Self::default()
    }

    /// A literal field that is not added to the dynamic table (a new
    /// name, section 6.2.2).
    pub fn literal(mut self, name: &str, value: &str) -> Self {
        self.bytes.push(0x00);
        self.string(name.as_bytes());
        self.string(value.as_bytes());
        self
    }

    /// A literal field the decoder adds to its dynamic table (a new name,
    /// section 6.2.1): it becomes entry [`FIRST_DYNAMIC_INDEX`].
    pub fn literal_indexed(mut self, name: &str, value: &[u8]) -> Self {
        self.bytes.push(0x40);
        self.string(name.as_bytes());
        self.string(value);
        self
    }

    /// A reference to entry `index` of the static (1..=61) or dynamic
    /// (62..) table (section 6.1).
    pub fn indexed(mut self, index: u64) -> Self {
        integer(&mut self.bytes, 0x80, 7, index);
        self
    }

    /// A dynamic table size update to `size` (section 6.3).
    pub fn table_size(mut self, size: u64) -> Self {
        integer(&mut self.bytes, 0x20, 5, size);
        self
    }

    /// The bytes of the block.
    pub fn build(self) -> Vec<u8> {
        self.bytes
    }

    fn string(&mut self, value: &[u8]) {
        integer(&mut self.bytes, 0x00, 7, value.len() as u64);
        self.bytes.extend_from_slice(value);
    }
}

/// The header block of a gRPC call of ADS to `authority`
/// (`127.0.0.1:PORT`), with `authorization: Bearer TOKEN` when a token is
/// given.
pub fn ads_request(authority: &str, token: Option<&str>) -> Vec<u8> {
    let mut block = HeaderBlock::new()
        .literal(":method", "POST")
        .literal(":scheme", "http")
        .literal(":path", ADS_PATH)
        .literal(":authority", authority)
        .literal("content-type", "application/grpc")
        .literal("te", "trailers");
    if let Some(token) = token {
        block = block.literal("authorization", &format!("Bearer {token}"));
    }
    block.build()
}

/// An integer with an `n`-bit prefix (section 5.1), the prefix's other
/// bits being `first`.
fn integer(out: &mut Vec<u8>, first: u8, n: u32, value: u64) {
    let max = (1u64 << n) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    let mut rest = value - max;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_the_rfc_examples() {
        // RFC 7541 C.1.1 and C.1.2: 10 and 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 10);
        assert_eq!(out, [10]);
        out.clear();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [31, 154, 10]);
    }

    #[test]
    fn a_literal_with_indexing_matches_the_rfc_example() {
        // RFC 7541 C.2.1.
        let block = HeaderBlock::new()
            .literal_indexed("custom-key", b"custom-header")
            .build();
        let mut expected = vec![0x40, 0x0a];
        expected.extend_from_slice(b"custom-key");
        expected.push(0x0d);
        expected.extend_from_slice(b"custom-header");
        assert_eq!(block, expected);
        assert_eq!(HeaderBlock::new().indexed(2).build(), [0x82]);
    }
}
