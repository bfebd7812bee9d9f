//! HPACK (RFC 7541): decoding a peer's header blocks and encoding ours.
//!
//! - [`Decoder`] decodes one connection's request header blocks. Its dynamic
//!   table keeps all entries in one byte buffer, allocated when the first entry
//!   is inserted and freed when the table empties; fields are handed to a
//!   callback as slices borrowed from the block, the tables, or a scratch
//!   buffer for Huffman-coded strings that lives only while a block is decoded.
//! - [`Encoder`] encodes a server's response headers and trailers: fields that
//!   are in the static table as one index byte, the rest as literals without
//!   indexing (name by static index where it can), Huffman-coded when that is
//!   shorter. It never inserts into the peer's dynamic table, so it holds no
//!   state; [`block`] does the same in a `const` item, for blocks a server
//!   sends unchanged on every stream.
//!
//! ```
//! use pilot_test_support::ads::h2::hpack::{Decoder, Encoder};
//!
//! let mut block = bytes::BytesMut::new();
//! Encoder::encode([(&b":status"[..], &b"200"[..]), (b"grpc-status", b"0")], &mut block);
//!
//! let mut decoder = Decoder::new(4096);
//! let mut fields = Vec::new();
//! decoder
//!     .decode(&block, 16 << 10, |name, value| fields.push((name.to_vec(), value.to_vec())))
//!     .unwrap();
//! assert_eq!(fields, [(b":status".to_vec(), b"200".to_vec()), (b"grpc-status".to_vec(), b"0".to_vec())]);
//! ```

mod decoder;
mod encoder;
mod huffman;
mod huffman_table;
mod primitives;
mod static_table;
mod table;

pub use decoder::Decoder;
pub use encoder::{
    Encoder, GRPC_HEADER_FIELDS, GRPC_HEADERS, GRPC_OK_TRAILER_FIELDS, GRPC_OK_TRAILERS, block, block_len,
};

/// Why a header block could not be decoded.
///
/// Every error but [`HpackError::HeaderListTooLarge`] leaves the decoder's
/// table out of step with the peer's and is a connection error of type
/// COMPRESSION_ERROR (RFC 9113 §4.3); see [`HpackError::is_connection_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    /// The block ended inside a field representation.
    #[error("header block truncated: a field representation runs past its end")]
    Truncated,
    /// An integer longer than this decoder accepts (RFC 7541 §5.1).
    #[error("HPACK integer too large (over 2^32 - 1 or over 5 continuation bytes)")]
    IntegerOverflow,
    /// Index 0 in an indexed field (RFC 7541 §6.1).
    #[error("HPACK index 0 in an indexed header field")]
    IndexZero,
    /// An index past the end of the dynamic table (RFC 7541 §2.3.3).
    #[error("HPACK index {index} out of range: 61 static entries and {dynamic} dynamic")]
    IndexOutOfRange {
        /// The index in the block.
        index: usize,
        /// Entries in the dynamic table then.
        dynamic: usize,
    },
    /// A Huffman-coded string containing EOS (RFC 7541 §5.2).
    #[error("Huffman-coded string contains EOS")]
    HuffmanEos,
    /// A Huffman-coded string padded with more than 7 bits (RFC 7541 §5.2).
    #[error("Huffman-coded string padded with more than 7 bits")]
    HuffmanPaddingTooLong,
    /// A Huffman-coded string padded with bits other than EOS's leading ones.
    #[error("Huffman-coded string padded with bits that are not all ones")]
    HuffmanPaddingNotEos,
    /// A dynamic table size update above the size we announced (RFC 7541 §6.3).
    #[error("dynamic table size update to {size} above the limit of {limit}")]
    TableSizeUpdateTooLarge {
        /// The size in the update.
        size: usize,
        /// SETTINGS_HEADER_TABLE_SIZE in effect.
        limit: usize,
    },
    /// A dynamic table size update after a field of the block (RFC 7541 §4.2).
    #[error("dynamic table size update after the first header field of the block")]
    TableSizeUpdateNotAtStart,
    /// The first block after we lowered the table size limit does not start
    /// with an update to at most that limit (RFC 7541 §4.2).
    #[error("header block does not start with a dynamic table size update to at most {limit}")]
    TableSizeUpdateMissing {
        /// The lowest limit announced since the previous block.
        limit: usize,
    },
    /// The decoded list is larger than the limit (RFC 9113 §6.5.2 counts the
    /// name and value lengths plus 32 per field). The whole block was decoded
    /// and the table updated, so this is a stream error, not a connection one.
    #[error("header list of {size} bytes exceeds the limit of {limit}")]
    HeaderListTooLarge {
        /// The size of the whole decoded list.
        size: usize,
        /// The limit passed to [`Decoder::decode`].
        limit: usize,
    },
}

impl HpackError {
    /// Whether the error ends the connection (COMPRESSION_ERROR): true for all
    /// but [`HpackError::HeaderListTooLarge`], after which the decoder is still
    /// in step with the peer.
    pub fn is_connection_error(&self) -> bool {
        !matches!(self, HpackError::HeaderListTooLarge { .. })
    }
}

#[cfg(test)]
mod tests_reject;
#[cfg(test)]
mod tests_rfc;
