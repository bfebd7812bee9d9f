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
