//! HPACK against another implementation: the Python `hpack` package (the
//! one under the Python `h2` library, in the workspace's `.tools/grpc`
//! virtual environment, installed by scripts/install-deps).
//!
//! Pseudo-random header lists go both ways: encoded by Python's encoder
//! (dynamic table with eviction, Huffman, never-indexed fields, a table size
//! update) and decoded by ours, and encoded by ours and decoded by Python's.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use bytes::BytesMut;
use pilot_h2::hpack::{Decoder, Encoder};

/// Reads one header list per line (`hexname=hexvalue` tokens) and prints one
/// block per line in hex (`encode TABLE_SIZE`), or reads one block per line
/// and prints its list (`decode`).
const SCRIPT: &str = r#"
import sys, hpack
mode = sys.argv[1]
if mode == "encode":
    encoder = hpack.Encoder()
    encoder.header_table_size = int(sys.argv[2])
for line in sys.stdin:
    if mode == "encode":
        fields = []
        for i, token in enumerate(line.split()):
            name, value = (bytes.fromhex(p) for p in token.split("="))
            field = hpack.NeverIndexedHeaderTuple(name, value) if i % 7 == 6 else (name, value)
            fields.append(field)
        print(encoder.encode(fields, huffman=True).hex())
    else:
        decoder = hpack.Decoder()
        fields = decoder.decode(bytes.fromhex(line.strip()), raw=True)
        print(" ".join(n.hex() + "=" + v.hex() for n, v in fields))
"#;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn python() -> PathBuf {
    let python = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/grpc/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/install-deps",
        python.display()
    );
    python
}

/// Runs the script with `args`, `input` on stdin; returns its output lines.
fn run(args: &[&str], input: String) -> Vec<String> {
    let mut child = Command::new(python())
        .arg("-c")
        .arg(SCRIPT)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("python output");
    writer.join().expect("writer").expect("write to python");
    assert!(
        output.status.success(),
        "python {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn list_line(fields: &Fields) -> String {
    fields
        .iter()
        .map(|(n, v)| format!("{}={}", hex(n), hex(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn parse_list(line: &str) -> Fields {
    line.split_whitespace()
        .map(|token| {
            let (n, v) = token.split_once('=').expect("name=value");
            (unhex(n), unhex(v))
        })
        .collect()
}

/// Header lists from a fixed-seed generator: names from the static table and
/// a few custom ones (so values repeat and get indexed), values short and
/// long, ASCII and arbitrary bytes.
fn lists(count: usize, seed: u64) -> Vec<Fields> {
    let mut state = seed;
    let mut next = move |n: u64| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 33) % n
    };
    let names: [&[u8]; 10] = [
        b":method",
        b":path",
        b":authority",
        b"content-type",
        b"user-agent",
        b"te",
        b"x-envoy-peer-metadata",
        b"grpc-timeout",
        b"x-request-id",
        b"cookie",
    ];
    (0..count)
        .map(|_| {
            (0..1 + next(12))
                .map(|_| {
                    let name = if next(5) == 0 {
                        (0..1 + next(20)).map(|_| b'a' + next(26) as u8).collect()
                    } else {
                        names[next(names.len() as u64) as usize].to_vec()
                    };
                    let value = match next(4) {
                        0 => format!("v{}", next(8)).into_bytes(),
                        1 => (0..next(300)).map(|_| next(256) as u8).collect(),
                        2 => (0..next(120)).map(|_| b' ' + next(95) as u8).collect(),
                        _ => Vec::new(),
                    };
                    (name, value)
                })
                .collect()
        })
        .collect()
}

#[test]
fn python_encodes_we_decode() {
    for (table_size, seed) in [(4096, 1), (256, 2), (0, 3)] {
        let lists = lists(200, seed);
        let input: String = lists.iter().map(|l| list_line(l) + "\n").collect();
        let blocks = run(&["encode", &table_size.to_string()], input);
        assert_eq!(blocks.len(), lists.len());
        let mut decoder = Decoder::new(4096);
        for (i, (block, want)) in blocks.iter().zip(&lists).enumerate() {
            let mut got = Vec::new();
            decoder
                .decode(&unhex(block), usize::MAX, |n, v| {
                    got.push((n.to_vec(), v.to_vec()))
                })
                .unwrap_or_else(|e| panic!("table {table_size}, block {i}: {e}"));
            assert_eq!(&got, want, "table {table_size}, block {i}");
            assert!(decoder.table_size() <= table_size);
        }
        if table_size == 0 {
            assert_eq!(decoder.allocated(), 0);
        } else {
            assert!(decoder.table_size() > 0, "python indexed nothing");
        }
    }
}

#[test]
fn we_encode_python_decodes() {
    let lists = lists(300, 4);
    let input: String = lists
        .iter()
        .map(|l| {
            let mut block = BytesMut::new();
            Encoder::encode(l.iter().map(|(n, v)| (&n[..], &v[..])), &mut block);
            hex(&block) + "\n"
        })
        .collect();
    let decoded = run(&["decode"], input);
    assert_eq!(decoded.len(), lists.len());
    for (i, (line, want)) in decoded.iter().zip(&lists).enumerate() {
        assert_eq!(&parse_list(line), want, "block {i}");
    }
}
