//! Floods of frames on the ADS port: CONTINUATION floods (many empty
//! frames; many bytes in one header block), an HPACK bomb (one large
//! header in the dynamic table referenced thousands of times), and PING
//! and SETTINGS floods from a client that never reads the replies. The
//! server must end the attacking connection (or let it go), keep its
//! memory within a bound and keep a proxy with a credential on another
//! connection configured throughout.

mod common;

use common::attack::{PROXY, Target, assert_held, assert_read_right, authenticate, hammer, under_attack};
use pilot_test_support::raw_h2::{Connection, HeaderBlock, frame, hpack};

/// The bound on memory growth under a flood. A server that bounds a
/// header block (HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`, kilobytes to a
/// few MiB) and the replies it queues for a connection (a send buffer)
/// stays far below it; one that keeps a 256 MiB header block, or every
/// PING's answer, does not.
const FLOOD_BOUND_MIB: u64 = 64;

/// The largest frame payload every server accepts (the default
/// `SETTINGS_MAX_FRAME_SIZE`).
const FRAME: usize = 16_384;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_empty_continuation_frames_is_cut_off() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = hpack::ads_request(&xds.to_string(), Some(PROXY));
        // A header block that never ends: 3,000,000 empty fragments.
        attacker.send(&frame::headers(3, &block, false, false)).unwrap();
        hammer(attacker, 3_000_000, 10_000, |_| {
            frame::continuation(3, &[], false)
        })
    })
    .await;
    assert_held("empty CONTINUATION frames", &outcome, FLOOD_BOUND_MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_block_of_256_mib_in_continuation_frames_is_cut_off() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        // One literal header whose value announces 256 MiB, sent 16 KiB
        // per CONTINUATION frame.
        let mut block = hpack::ads_request(&xds.to_string(), Some(PROXY));
        let value_length = 256u64 << 20;
        block.extend_from_slice(&HeaderBlock::new().literal("x-flood", "").build());
        // Replace the empty value's length byte with the long length.
        block.pop();
        block.extend_from_slice(&string_length(value_length));
        attacker.send(&frame::headers(3, &block, false, false)).unwrap();
        let chunk = vec![b'a'; FRAME];
        hammer(attacker, value_length / FRAME as u64, 16, |_| {
            frame::continuation(3, &chunk, false)
        })
    })
    .await;
    assert_held("256 MiB of CONTINUATION", &outcome, FLOOD_BOUND_MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hpack_bomb_is_cut_off() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    // The largest header the server's dynamic table holds (an entry costs
    // its name, its value and 32 bytes), at most 4,000 bytes.
    let table = Connection::open(xds, &[]).unwrap().header_table_size() as usize;
    let value = table.saturating_sub(32 + "x-bomb".len()).min(4_000);
    if value < 100 {
        println!("the server keeps a dynamic table of {table} bytes: nothing to amplify");
        return;
    }
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let request = hpack::ads_request(&xds.to_string(), Some(PROXY));
        // A large header enters the decoder's dynamic table...
        let insert = [
            request.clone(),
            HeaderBlock::new()
                .literal_indexed("x-bomb", "a".repeat(value).as_bytes())
                .build(),
        ]
        .concat();
        attacker.send(&frame::headers(3, &insert, false, true)).unwrap();
        // ...then each stream's block names it 4,000 times: 4 KB on the
        // wire, 16 MB of headers once decoded.
        let mut references = HeaderBlock::new();
        for _ in 0..4_000 {
            references = references.indexed(hpack::FIRST_DYNAMIC_INDEX);
        }
        let bomb = [request, references.build()].concat();
        hammer(attacker, 20_000, 10, |i| {
            frame::headers(5 + 2 * i as u32, &bomb, false, true)
        })
    })
    .await;
    assert_held("an HPACK bomb", &outcome, FLOOD_BOUND_MIB);
    assert_read_right("an HPACK bomb", &outcome.attack);
}

/// A connection that never reads floods `unit` frames; `authenticated`:
/// after opening a stream with the proxy token.
async fn flood_without_reading(attack: &'static str, authenticated: bool, unit: Vec<u8>) {
    let target = Target::start(&[], &[("--xds-write-timeout", "2s")]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::silent(xds, &[]).unwrap();
        if authenticated {
            authenticate(&mut attacker, xds, 1);
        }
        hammer(attacker, 5_000_000, 1_000, |_| unit.clone())
    })
    .await;
    assert_held(attack, &outcome, FLOOD_BOUND_MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_without_a_credential_from_a_client_that_never_reads_is_cut_off() {
    flood_without_reading(
        "a PING flood without a credential",
        false,
        frame::ping(*b"flooding"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_flood_from_an_authenticated_client_that_never_reads_is_cut_off() {
    flood_without_reading("a PING flood", true, frame::ping(*b"flooding")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settings_flood_from_an_authenticated_client_that_never_reads_is_cut_off() {
    flood_without_reading("a SETTINGS flood", true, frame::settings(&[])).await;
}

/// An HPACK string length prefix (no Huffman) for `length` bytes.
fn string_length(length: u64) -> Vec<u8> {
    // A 7-bit prefix integer (RFC 7541 section 5.1).
    let mut out = vec![0x7f];
    let mut rest = length - 0x7f;
    while rest >= 128 {
        out.push((rest % 128) as u8 | 0x80);
        rest /= 128;
    }
    out.push(rest as u8);
    out
}
