//! Malformed blocks the decoder rejects, the header list limit, and table
//! size limits.

use super::tests_rfc::hex;
use super::{Decoder, Encoder, HpackError};

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(d: &mut Decoder, block: &[u8], limit: usize) -> Result<Fields, HpackError> {
    let mut fields = Vec::new();
    d.decode(block, limit, |n, v| fields.push((n.to_vec(), v.to_vec())))
        .map(|()| fields)
}

fn err(block: &str) -> HpackError {
    decode(&mut Decoder::new(4096), &hex(block), usize::MAX).unwrap_err()
}

#[test]
fn index_zero_and_out_of_range() {
    assert_eq!(err("80"), HpackError::IndexZero);
    assert_eq!(
        err("be"),
        HpackError::IndexOutOfRange {
            index: 62,
            dynamic: 0
        }
    );
    // A literal whose name index is past the table.
    assert_eq!(
        err("7f00 0161"),
        HpackError::IndexOutOfRange {
            index: 63,
            dynamic: 0
        }
    );
    assert_eq!(
        err("0f2f 0161"),
        HpackError::IndexOutOfRange {
            index: 62,
            dynamic: 0
        }
    );
    // After one insertion, 62 is valid and 63 is not.
    let mut d = Decoder::new(4096);
    decode(&mut d, &hex("4001 6101 62"), usize::MAX).unwrap();
    assert_eq!(
        decode(&mut d, &hex("be"), usize::MAX).unwrap(),
        [(b"a".to_vec(), b"b".to_vec())]
    );
    assert_eq!(
        decode(&mut d, &hex("bf"), usize::MAX),
        Err(HpackError::IndexOutOfRange {
            index: 63,
            dynamic: 1
        })
    );
}

#[test]
fn huffman_errors() {
    // A value of EOS (30 ones) + 2 bits of padding.
    assert_eq!(err("0001 6184 ffff ffff"), HpackError::HuffmanEos);
    // A value padded with a whole byte.
    assert_eq!(err("0001 6182 07ff"), HpackError::HuffmanPaddingTooLong);
    // A value padded with zeros.
    assert_eq!(err("0001 6181 00"), HpackError::HuffmanPaddingNotEos);
}

#[test]
fn integer_overflow() {
    assert_eq!(err("ff ffff ffff 7f"), HpackError::IntegerOverflow);
    assert_eq!(err("0001 617f 8080 8080 8000"), HpackError::IntegerOverflow);
}

#[test]
fn truncated() {
    for block in [
        "ff",
        "ff80",
        "00",
        "0001",
        "0002 61",
        "0001 61",
        "0001 6102 62",
        "0001 61ff",
        "3f",
    ] {
        assert_eq!(err(block), HpackError::Truncated, "{block}");
    }
    // A string length past the end by a huge amount.
    assert_eq!(err("0001 617f ffff ff0f"), HpackError::Truncated);
}

#[test]
fn table_size_updates() {
    // Above the limit.
    let mut d = Decoder::new(100);
    assert_eq!(
        decode(&mut d, &hex("3f46"), usize::MAX),
        Err(HpackError::TableSizeUpdateTooLarge {
            size: 101,
            limit: 100
        })
    );
    // After a field.
    let mut d = Decoder::new(4096);
    assert_eq!(
        decode(&mut d, &hex("8220"), usize::MAX),
        Err(HpackError::TableSizeUpdateNotAtStart)
    );
    // Several at the start are fine.
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &hex("20 3f21 82"), usize::MAX).unwrap().len(), 1);

    // Lowering the limit requires an update to at most it in the next block.
    let mut d = Decoder::new(4096);
    decode(&mut d, &hex("4001 6101 62"), usize::MAX).unwrap();
    d.set_max_table_size(0);
    d.set_max_table_size(64);
    assert_eq!(
        decode(&mut d, &hex("82"), usize::MAX),
        Err(HpackError::TableSizeUpdateMissing { limit: 0 })
    );
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    d.set_max_table_size(64);
    // An update to 64 alone is not enough: 0 was announced in between.
    assert_eq!(
        decode(&mut d, &hex("3f21 82"), usize::MAX),
        Err(HpackError::TableSizeUpdateMissing { limit: 0 })
    );
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    d.set_max_table_size(64);
    assert_eq!(decode(&mut d, &hex("20 3f21 82"), usize::MAX).unwrap().len(), 1);
    // Then above the new limit is refused, and no further update is needed.
    assert_eq!(
        decode(&mut d, &hex("3f22"), usize::MAX),
        Err(HpackError::TableSizeUpdateTooLarge { size: 65, limit: 64 })
    );
    let mut d = Decoder::new(4096);
    d.set_max_table_size(0);
    decode(&mut d, &hex("20 82"), usize::MAX).unwrap();
    assert_eq!(decode(&mut d, &hex("82"), usize::MAX).unwrap().len(), 1);
    // Raising the limit requires nothing.
    let mut d = Decoder::new(4096);
    d.set_max_table_size(8192);
    assert_eq!(decode(&mut d, &hex("82"), usize::MAX).unwrap().len(), 1);
    assert_eq!(decode(&mut d, &hex("3fe1 3f 82"), usize::MAX).unwrap().len(), 1);
}

#[test]
fn header_list_size() {
    // `:method: GET` counts 7 + 3 + 32 = 42, `a: b` 34.
    let block = hex("82 4001 6101 62 82");
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &block, 118).unwrap().len(), 3);
    let mut d = Decoder::new(4096);
    let mut seen = Vec::new();
    let result = d.decode(&block, 117, |n, _| seen.push(n.to_vec()));
    assert_eq!(
        result,
        Err(HpackError::HeaderListTooLarge {
            size: 118,
            limit: 117
        })
    );
    assert!(!result.unwrap_err().is_connection_error());
    // The fields up to the limit were emitted; the table was still updated.
    assert_eq!(seen, [b":method".to_vec(), b"a".to_vec()]);
    assert_eq!(d.table_size(), 34);
    assert_eq!(
        decode(&mut d, &hex("be"), usize::MAX).unwrap(),
        [(b"a".to_vec(), b"b".to_vec())]
    );
    // A later malformation is a connection error even past the limit.
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, &hex("82 80"), 10), Err(HpackError::IndexZero));
    assert!(HpackError::IndexZero.is_connection_error());
}

#[test]
fn every_truncation_of_valid_blocks_is_an_error_or_a_prefix() {
    let mut block = bytes::BytesMut::new();
    Encoder::encode(
        [
            (&b":status"[..], &b"200"[..]),
            (b"content-type", b"application/grpc"),
            (b"grpc-status", b"13"),
            (b"grpc-message", b"upstream \x00\xff connect error"),
        ],
        &mut block,
    );
    // RFC 7541 C.6.1: literals with indexing, Huffman-coded.
    let indexed = hex(
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
    );
    for full in [&block[..], &indexed[..]] {
        let whole = decode(&mut Decoder::new(4096), full, usize::MAX).unwrap();
        assert_eq!(whole.len(), 4);
        for cut in 0..full.len() {
            // A cut block is an error, or decodes to a prefix of the fields
            // when it falls between two fields.
            if let Ok(fields) = decode(&mut Decoder::new(4096), &full[..cut], usize::MAX) {
                assert!(whole.starts_with(&fields), "cut at {cut}");
                assert!(fields.len() < whole.len(), "cut at {cut}");
            }
        }
    }
}
