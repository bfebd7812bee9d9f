//! Property tests: random field lists survive the encoder and decoder, and
//! random bytes never make the decoder panic.

use proptest::prelude::*;

use super::{Decoder, Encoder};

fn field() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let name = prop_oneof![
        Just(b":status".to_vec()),
        Just(b"content-type".to_vec()),
        Just(b"grpc-status".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ];
    let value = prop_oneof![
        Just(b"200".to_vec()),
        Just(b"".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..300),
        "[a-z0-9/.=-]{0,60}".prop_map(String::into_bytes),
    ];
    (name, value)
}

proptest! {
    #[test]
    fn encoded_lists_decode_to_themselves(fields in proptest::collection::vec(field(), 0..12)) {
        let mut block = bytes::BytesMut::new();
        Encoder::encode(fields.iter().map(|(n, v)| (&n[..], &v[..])), &mut block);
        let mut decoder = Decoder::new(4096);
        let mut got = Vec::new();
        decoder.decode(&block, usize::MAX, |n, v| got.push((n.to_vec(), v.to_vec()))).unwrap();
        prop_assert_eq!(got, fields);
        prop_assert_eq!(decoder.allocated(), 0);
    }

    #[test]
    fn random_bytes_never_panic(blocks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 1..6)) {
        let mut decoder = Decoder::new(256);
        for block in blocks {
            let mut n = 0usize;
            if decoder.decode(&block, 1024, |_, _| n += 1).is_err() {
                // A connection error ends the connection; start a new one.
                decoder = Decoder::new(256);
            }
            prop_assert!(decoder.table_size() <= 256);
        }
    }

    #[test]
    fn literal_blocks_with_indexing_keep_the_table_in_step(
        fields in proptest::collection::vec(field(), 1..40),
        max in 0usize..600,
    ) {
        // Each field as a literal with incremental indexing and a literal
        // name, then the whole table re-read by index; the reference model
        // is a plain list.
        let mut decoder = Decoder::new(max);
        let mut model: std::collections::VecDeque<(Vec<u8>, Vec<u8>)> = Default::default();
        for (name, value) in &fields {
            let mut block = vec![0x40];
            for s in [name, value] {
                push_int(&mut block, s.len(), 7, 0);
                block.extend_from_slice(s);
            }
            decoder.decode(&block, usize::MAX, |_, _| {}).unwrap();
            model.push_front((name.clone(), value.clone()));
            let size = |m: &std::collections::VecDeque<(Vec<u8>, Vec<u8>)>| {
                m.iter().map(|(n, v)| n.len() + v.len() + 32).sum::<usize>()
            };
            while size(&model) > max {
                model.pop_back();
            }
            let table: Vec<_> = decoder.table_entries().map(|(n, v)| (n.to_vec(), v.to_vec())).collect();
            prop_assert_eq!(&table, &Vec::from(model.clone()));
            prop_assert_eq!(decoder.table_size(), size(&model));
            // Indexed fields referring to every entry.
            let mut block = Vec::new();
            for i in 0..model.len() {
                push_int(&mut block, 62 + i, 7, 0x80);
            }
            let mut got = Vec::new();
            decoder.decode(&block, usize::MAX, |n, v| got.push((n.to_vec(), v.to_vec()))).unwrap();
            prop_assert_eq!(got, Vec::from(model.clone()));
            if model.is_empty() {
                prop_assert_eq!(decoder.allocated(), 0);
            }
        }
    }
}

/// An HPACK integer (RFC 7541 §5.1), written independently of the crate's.
fn push_int(out: &mut Vec<u8>, value: usize, prefix: u32, flags: u8) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

#[test]
fn huffman_values_of_every_byte_through_the_decoder() {
    // A literal without indexing, name `x` raw, value Huffman-coded: every
    // byte alone, and all 256 in one string.
    let values = (0..=255u8)
        .map(|b| vec![b])
        .chain([(0..=255u8).collect::<Vec<u8>>()]);
    for value in values {
        let mut coded = vec![0; super::huffman::encoded_len(&value)];
        super::huffman::encode_into(&value, &mut coded);
        let mut block = vec![0x00, 0x01, b'x'];
        push_int(&mut block, coded.len(), 7, 0x80);
        block.extend_from_slice(&coded);
        let mut got = Vec::new();
        Decoder::new(0)
            .decode(&block, usize::MAX, |n, v| got.push((n.to_vec(), v.to_vec())))
            .unwrap();
        assert_eq!(got, [(b"x".to_vec(), value)]);
    }
}

#[test]
fn bit_flips_of_valid_blocks_never_panic() {
    // RFC 7541 C.4.1 to C.4.3 and C.6.1 to C.6.3 on one connection each,
    // every bit of every block flipped in turn; the table never exceeds its
    // limit, and an undamaged block after an accepted damaged one decodes
    // or fails cleanly.
    let connections: [(usize, &[&str]); 2] = [
        (
            4096,
            &[
                "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
                "8286 84be 5886 a8eb 1064 9cbf",
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ],
        ),
        (
            256,
            &[
                "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
                 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
                "4883 640e ffc1 c0bf",
                "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
                 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
                 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
            ],
        ),
    ];
    for (max, blocks) in connections {
        let blocks: Vec<Vec<u8>> = blocks.iter().map(|b| super::tests_rfc::hex(b)).collect();
        for damaged in 0..blocks.len() {
            for bit in 0..blocks[damaged].len() * 8 {
                let mut decoder = Decoder::new(max);
                for (i, block) in blocks.iter().enumerate() {
                    let mut block = block.clone();
                    if i == damaged {
                        block[bit / 8] ^= 0x80 >> (bit % 8);
                    }
                    let result = decoder.decode(&block, 1 << 20, |_, _| {});
                    assert!(decoder.table_size() <= max);
                    if result.is_err() {
                        break;
                    }
                }
            }
        }
    }
}
