//! Stream resets as an attack on the ADS port: rapid reset (HEADERS then
//! RST_STREAM, CVE-2023-44487) on one connection, on many reconnecting
//! ones and with one completed stream per reset, and MadeYouReset
//! (CVE-2025-8671: frames that make the server reset the stream itself).
//! Each time the attacker holds the proxy token (a compromised proxy: the
//! handshake deadline does not end its connection) and the server must end
//! the attacking connection, keep its memory within a bound and keep a
//! proxy with a credential on another connection configured throughout.

mod common;

use common::attack::{PROXY, Target, assert_held, assert_read_right, authenticate, hammer, under_attack};
use pilot_test_support::raw_h2::{Connection, frame, hpack};

/// Cycles an attacker may try on one connection; a server that is not
/// cutting the attack off takes them all.
const CYCLES: u64 = 50_000;

/// The bound on memory growth under a reset attack: reset streams are
/// freed, so what remains is the server's per-connection state and the
/// allocator's slack, far below this (a server keeping 100 bytes per reset
/// stream would pass it after 50,000 cycles, one keeping a stream task
/// and its buffers would not).
const RESET_BOUND_MIB: u64 = 64;

/// Streams the server may reset because of the attacker's errors before
/// it ends the connection (MadeYouReset): ten times the h2 crate's default
/// cap of local error resets (1,024); unbounded, each one is a session the
/// server started for nothing.
const SERVER_RESETS_BOUND: u64 = 10_240;

fn ads_block(xds: std::net::SocketAddr) -> Vec<u8> {
    hpack::ads_request(&xds.to_string(), Some(PROXY))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_on_one_connection_is_cut_off() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = ads_block(xds);
        hammer(attacker, CYCLES, 100, |i| {
            let id = 3 + 2 * i as u32;
            [
                frame::headers(id, &block, false, true),
                frame::rst_stream(id, frame::CANCEL),
            ]
            .concat()
        })
    })
    .await;
    assert_held("rapid reset", &outcome, RESET_BOUND_MIB);
    assert_read_right("rapid reset", &outcome.attack);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_on_reconnecting_connections_is_cut_off_each_time() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    // Connections one after another, each attacking until the server ends
    // it; the first one the server does not end stops the attack.
    let outcome = under_attack(&target, move || {
        let block = ads_block(xds);
        let mut ended = Vec::new();
        for _ in 0..20 {
            let mut attacker = Connection::open(xds, &[]).unwrap();
            authenticate(&mut attacker, xds, 1);
            let this = hammer(attacker, CYCLES, 100, |i| {
                let id = 3 + 2 * i as u32;
                [
                    frame::headers(id, &block, false, true),
                    frame::rst_stream(id, frame::CANCEL),
                ]
                .concat()
            });
            let stop = !this.by_server();
            ended.push(this);
            if stop {
                break;
            }
        }
        ended
    })
    .await;
    let last = outcome.attack.last().expect("one connection at least");
    for ended in &outcome.attack {
        assert_read_right("rapid reset on reconnecting connections", ended);
    }
    assert!(
        outcome.attack.iter().all(|ended| ended.by_server()),
        "connection {} of the reconnecting attacker was never ended ({} cycles sent): {last:?}",
        outcome.attack.len(),
        last.sent
    );
    assert!(
        outcome.growth_mib() <= RESET_BOUND_MIB,
        "the server's memory grew by {} MiB (bound {RESET_BOUND_MIB} MiB)",
        outcome.growth_mib()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_with_one_completed_stream_per_reset_is_cut_off() {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = ads_block(xds);
        // A cheap stream that completes (headers ending the request: the
        // server answers and closes it), then one reset at once.
        hammer(attacker, CYCLES, 50, |i| {
            let completed = 3 + 4 * i as u32;
            let reset = completed + 2;
            [
                frame::headers(completed, &block, true, true),
                frame::headers(reset, &block, false, true),
                frame::rst_stream(reset, frame::CANCEL),
            ]
            .concat()
        })
    })
    .await;
    assert_held("rapid reset with completed streams", &outcome, RESET_BOUND_MIB);
    assert_read_right("rapid reset with completed streams", &outcome.attack);
}

/// MadeYouReset: each cycle opens a stream and sends a frame the server
/// must answer with RST_STREAM (`provoke(stream)`).
async fn made_you_reset(attack: &'static str, provoke: fn(u32) -> Vec<u8>, end_stream: bool) {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = ads_block(xds);
        hammer(attacker, CYCLES, 100, |i| {
            let id = 3 + 2 * i as u32;
            [frame::headers(id, &block, end_stream, true), provoke(id)].concat()
        })
    })
    .await;
    assert_held(attack, &outcome, RESET_BOUND_MIB);
    assert_read_right(attack, &outcome.attack);
    assert!(
        outcome.attack.report.resets <= SERVER_RESETS_BOUND,
        "{attack}: the server reset {} streams before ending the connection (bound {SERVER_RESETS_BOUND})",
        outcome.attack.report.resets
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_you_reset_with_a_zero_window_update_is_cut_off() {
    made_you_reset("WINDOW_UPDATE of 0", |id| frame::window_update(id, 0), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_you_reset_with_data_on_a_half_closed_stream_is_cut_off() {
    made_you_reset(
        "DATA after END_STREAM",
        |id| frame::data(id, &[0, 0, 0, 0, 0], false),
        true,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_you_reset_with_an_oversized_window_is_cut_off() {
    made_you_reset(
        "a window over 2^31-1",
        |id| frame::window_update(id, 0x7fff_ffff),
        false,
    )
    .await;
}
