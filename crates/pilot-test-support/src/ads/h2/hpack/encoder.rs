//! [`Encoder`]: a server's response headers and trailers to a header block,
//! at run time or in a `const` item ([`block`]).
//!
//! A field in the static table is one index byte (RFC 7541 §6.1); any other
//! is a literal without indexing (§6.2.2), its name a static index when the
//! name is in the table, each string Huffman-coded when that is shorter
//! (§5.2). Nothing goes into the peer's dynamic table, so blocks do not
//! depend on each other: one encoded block may be sent on any stream of any
//! connection.

use bytes::{Bytes, BytesMut};

use super::huffman;
use super::primitives::{encode_int, int_len};
use super::static_table::{StaticMatch, find};

/// Encodes a server's headers and trailers: literal fields without indexing
/// (static-table name indices where the name is in it), Huffman-coded when
/// shorter; no dynamic table.
///
/// Names must be lowercase (RFC 9113 §8.2.1); the encoder does not check.
#[derive(Debug, Clone, Copy, Default)]
pub struct Encoder;

impl Encoder {
    /// Appends the block of `fields`, in order, to `out`.
    pub fn encode<'a>(fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>, out: &mut BytesMut) {
        for (name, value) in fields {
            let start = out.len();
            out.resize(start + field_len(name, value), 0);
            encode_field(name, value, &mut out[start..], 0);
        }
    }

    /// The block of `fields` as shared bytes, for blocks encoded once at run
    /// time and sent on many streams.
    pub fn encode_to_bytes<'a>(fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Bytes {
        let mut out = BytesMut::new();
        Encoder::encode(fields, &mut out);
        out.freeze()
    }

    /// Appends a dynamic table size update to `size` (RFC 7541 §6.3).
    ///
    /// The encoder inserts nothing, but a peer that lowers its
    /// SETTINGS_HEADER_TABLE_SIZE below the previous value may require the
    /// first block it receives after acknowledging it to start with an
    /// update to at most the new value (RFC 7541 §4.2); an update to 0 is
    /// always acceptable.
    pub fn table_size_update(size: usize, out: &mut BytesMut) {
        let start = out.len();
        out.resize(start + int_len(size, 5), 0);
        encode_int(size, 5, 0x20, &mut out[start..], 0);
    }
}

/// The length of the block [`block`] and [`Encoder::encode`] produce for
/// `fields`.
pub const fn block_len(fields: &[(&[u8], &[u8])]) -> usize {
    let mut len = 0;
    let mut i = 0;
    while i < fields.len() {
        len += field_len(fields[i].0, fields[i].1);
        i += 1;
    }
    len
}

/// The block of `fields` in a `const` or `static` item: the same bytes as
/// [`Encoder::encode`], computed at compile time. `N` must be
/// [`block_len`]`(fields)`; anything else fails to compile.
///
/// ```
/// use pilot_test_support::ads::h2::hpack::{block, block_len};
///
/// const FIELDS: &[(&[u8], &[u8])] = &[(b":status", b"200"), (b"content-type", b"application/grpc")];
/// static HEADERS: [u8; block_len(FIELDS)] = block(FIELDS);
/// assert_eq!(HEADERS[0], 0x88); // `:status: 200` is static entry 8.
/// ```
pub const fn block<const N: usize>(fields: &[(&[u8], &[u8])]) -> [u8; N] {
    assert!(N == block_len(fields), "block length: use block_len(fields)");
    let mut out = [0u8; N];
    let mut at = 0;
    let mut i = 0;
    while i < fields.len() {
        at = encode_field(fields[i].0, fields[i].1, &mut out, at);
        i += 1;
    }
    out
}

/// The fields of a gRPC response's headers: `:status: 200`,
/// `content-type: application/grpc`.
pub const GRPC_HEADER_FIELDS: &[(&[u8], &[u8])] =
    &[(b":status", b"200"), (b"content-type", b"application/grpc")];

/// [`GRPC_HEADER_FIELDS`] encoded.
pub const GRPC_HEADERS: &[u8] = &block::<{ block_len(GRPC_HEADER_FIELDS) }>(GRPC_HEADER_FIELDS);

/// The trailers of a gRPC call that succeeded: `grpc-status: 0`.
pub const GRPC_OK_TRAILER_FIELDS: &[(&[u8], &[u8])] = &[(b"grpc-status", b"0")];

/// [`GRPC_OK_TRAILER_FIELDS`] encoded.
pub const GRPC_OK_TRAILERS: &[u8] = &block::<{ block_len(GRPC_OK_TRAILER_FIELDS) }>(GRPC_OK_TRAILER_FIELDS);

/// The encoded length of one field.
const fn field_len(name: &[u8], value: &[u8]) -> usize {
    match find(name, value) {
        StaticMatch::Field(index) => int_len(index, 7),
        StaticMatch::Name(index) => int_len(index, 4) + string_len(value),
        StaticMatch::None => 1 + string_len(name) + string_len(value),
    }
}

/// Writes one field at `out[at..]`; returns the position after it.
const fn encode_field(name: &[u8], value: &[u8], out: &mut [u8], at: usize) -> usize {
    match find(name, value) {
        StaticMatch::Field(index) => encode_int(index, 7, 0x80, out, at),
        StaticMatch::Name(index) => {
            let at = encode_int(index, 4, 0x00, out, at);
            encode_string(value, out, at)
        }
        StaticMatch::None => {
            out[at] = 0x00;
            let at = encode_string(name, out, at + 1);
            encode_string(value, out, at)
        }
    }
}

/// The encoded length of a string literal: Huffman-coded when shorter.
const fn string_len(s: &[u8]) -> usize {
    let huffman = huffman::encoded_len(s);
    let len = if huffman < s.len() { huffman } else { s.len() };
    int_len(len, 7) + len
}

/// Writes a string literal at `out[at..]`; returns the position after it.
const fn encode_string(s: &[u8], out: &mut [u8], at: usize) -> usize {
    let huffman = huffman::encoded_len(s);
    if huffman < s.len() {
        let at = encode_int(huffman, 7, 0x80, out, at);
        let (_, rest) = out.split_at_mut(at);
        let (dst, _) = rest.split_at_mut(huffman);
        huffman::encode_into(s, dst);
        at + huffman
    } else {
        let at = encode_int(s.len(), 7, 0x00, out, at);
        let (_, rest) = out.split_at_mut(at);
        let (dst, _) = rest.split_at_mut(s.len());
        dst.copy_from_slice(s);
        at + s.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_blocks_match_the_encoder() {
        for (fields, bytes) in [
            (GRPC_HEADER_FIELDS, GRPC_HEADERS),
            (GRPC_OK_TRAILER_FIELDS, GRPC_OK_TRAILERS),
        ] {
            assert_eq!(&Encoder::encode_to_bytes(fields.iter().copied())[..], bytes);
        }
        // `:status: 200` indexed, `content-type` by static name 31 (0x0f 0x10).
        assert_eq!(&GRPC_HEADERS[..3], [0x88, 0x0f, 0x10]);
        // `grpc-status` is a literal name.
        assert_eq!(GRPC_OK_TRAILERS[0], 0x00);
    }

    #[test]
    fn huffman_only_when_shorter() {
        let mut out = BytesMut::new();
        // Bytes with 28-bit codes: Huffman is longer, so raw.
        Encoder::encode([(&b"x-bin"[..], &[0u8, 1, 2][..])], &mut out);
        // The name Huffman-coded (0x84: 4 bytes), the value raw (0x03).
        assert_eq!(out[..2], [0x00, 0x84]);
        assert_eq!(out[6..], [0x03, 0, 1, 2]);
        let mut name = Vec::new();
        huffman::decode(&out[2..6], &mut name).unwrap();
        assert_eq!(name, b"x-bin");
    }

    #[test]
    fn size_update() {
        let mut out = BytesMut::new();
        Encoder::table_size_update(0, &mut out);
        Encoder::table_size_update(4096, &mut out);
        assert_eq!(&out[..], [0x20, 0x3f, 0xe1, 0x1f]);
    }
}
