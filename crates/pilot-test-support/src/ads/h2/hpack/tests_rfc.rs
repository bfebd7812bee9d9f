//! The examples of RFC 7541 Appendix C: each block decoded, and the dynamic
//! table (entries newest first, and its size) checked after each one.

use super::Decoder;

/// Hex (spaces ignored) to bytes.
pub(super) fn hex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect()
}

type Fields = Vec<(String, String)>;

fn text(name: &[u8], value: &[u8]) -> (String, String) {
    (
        String::from_utf8(name.to_vec()).unwrap(),
        String::from_utf8(value.to_vec()).unwrap(),
    )
}

fn decode(decoder: &mut Decoder, block: &str) -> Fields {
    let mut fields = Vec::new();
    decoder
        .decode(&hex(block), usize::MAX, |n, v| fields.push(text(n, v)))
        .unwrap();
    fields
}

fn table(decoder: &Decoder) -> Fields {
    decoder.table_entries().map(|(n, v)| text(n, v)).collect()
}

fn fields(list: &[(&str, &str)]) -> Fields {
    list.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
}

#[test]
fn c2_field_representations() {
    // C.2.1: literal with indexing, new name.
    let mut d = Decoder::new(4096);
    let got = decode(
        &mut d,
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
    );
    assert_eq!(got, fields(&[("custom-key", "custom-header")]));
    assert_eq!(table(&d), fields(&[("custom-key", "custom-header")]));
    assert_eq!(d.table_size(), 55);

    // C.2.2: literal without indexing, indexed name.
    let mut d = Decoder::new(4096);
    let got = decode(&mut d, "040c 2f73 616d 706c 652f 7061 7468");
    assert_eq!(got, fields(&[(":path", "/sample/path")]));
    assert_eq!(d.table_size(), 0);
    assert_eq!(d.allocated(), 0);

    // C.2.3: literal never indexed, new name.
    let mut d = Decoder::new(4096);
    let got = decode(&mut d, "1008 7061 7373 776f 7264 0673 6563 7265 74");
    assert_eq!(got, fields(&[("password", "secret")]));
    assert_eq!(d.table_size(), 0);

    // C.2.4: indexed field.
    let mut d = Decoder::new(4096);
    assert_eq!(decode(&mut d, "82"), fields(&[(":method", "GET")]));
    assert_eq!(d.table_size(), 0);
    assert_eq!(d.allocated(), 0);
}

/// C.3 and C.4: three requests on one connection, the same fields and
/// tables whether the strings are Huffman-coded or not.
fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new(4096);
    let got = decode(&mut d, blocks[0]);
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ])
    );
    assert_eq!(table(&d), fields(&[(":authority", "www.example.com")]));
    assert_eq!(d.table_size(), 57);

    let got = decode(&mut d, blocks[1]);
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache"),
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[("cache-control", "no-cache"), (":authority", "www.example.com")])
    );
    assert_eq!(d.table_size(), 110);

    let got = decode(&mut d, blocks[2]);
    assert_eq!(
        got,
        fields(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            ("custom-key", "custom-value"),
            ("cache-control", "no-cache"),
            (":authority", "www.example.com"),
        ])
    );
    assert_eq!(d.table_size(), 164);
}

#[test]
fn c3_requests_without_huffman() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn c4_requests_with_huffman() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

/// C.5 and C.6: three responses with a 256-byte table, evicting entries.
fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new(256);
    let got = decode(&mut d, blocks[0]);
    assert_eq!(
        got,
        fields(&[
            (":status", "302"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            ("location", "https://www.example.com"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("cache-control", "private"),
            (":status", "302"),
        ])
    );
    assert_eq!(d.table_size(), 222);

    let got = decode(&mut d, blocks[1]);
    assert_eq!(
        got,
        fields(&[
            (":status", "307"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("location", "https://www.example.com"),
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            (":status", "307"),
            ("location", "https://www.example.com"),
            ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
            ("cache-control", "private"),
        ])
    );
    assert_eq!(d.table_size(), 222);

    let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
    let got = decode(&mut d, blocks[2]);
    assert_eq!(
        got,
        fields(&[
            (":status", "200"),
            ("cache-control", "private"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
            ("location", "https://www.example.com"),
            ("content-encoding", "gzip"),
            ("set-cookie", cookie),
        ])
    );
    assert_eq!(
        table(&d),
        fields(&[
            ("set-cookie", cookie),
            ("content-encoding", "gzip"),
            ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
        ])
    );
    assert_eq!(d.table_size(), 215);
    assert!(d.allocated() > 0);
}

#[test]
fn c5_responses_without_huffman() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
         3d31",
    ]);
}

#[test]
fn c6_responses_with_huffman() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn size_update_to_zero_frees_the_table() {
    let mut d = Decoder::new(256);
    decode(&mut d, "4803 3330 37");
    assert!(d.allocated() > 0);
    // An update to 0 then back to 256, then an indexed static field.
    assert_eq!(decode(&mut d, "20 3fe1 01 88"), fields(&[(":status", "200")]));
    assert_eq!(d.table_size(), 0);
    assert_eq!(d.allocated(), 0);
}
