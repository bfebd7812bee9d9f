//! Attacks on the ADS port's admission: clients without a credential that
//! never read holding every connection slot, partial gRPC messages on many
//! streams, and more streams than the server allows. A proxy with a
//! credential still gets its configuration, the server's memory stays
//! within a bound, and the attacking connections are ended.

mod common;

use std::time::{Duration, Instant};

use common::attack::{
    CLOSE_PATIENCE, PROXY, Proxy, Target, assert_held, assert_read_right, authenticate, hammer, under_attack,
    wait_for,
};
use pilot_test_support::raw_h2::{Connection, frame, hpack};

/// The bound on memory growth under these attacks (see each test).
const ADMISSION_BOUND_MIB: u64 = 64;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_reading_clients_without_a_credential_cannot_lock_out_a_proxy() {
    let target = Target::start(
        &["--xds-max-connections", "10", "--xds-handshake-timeout", "2s"],
        &[("--xds-write-timeout", "2s")],
    );
    let xds = target.xds;
    let before = target.rss_kib();
    // Ten sockets take every slot: each sends the preface and PINGs and
    // never reads, until the server stops taking its frames.
    let attackers = tokio::task::spawn_blocking(move || {
        let mut attackers: Vec<Connection> = (0..10).map(|_| Connection::silent(xds, &[]).unwrap()).collect();
        let pings: Vec<u8> = (0..1_000).flat_map(|_| frame::ping(*b"lockout!")).collect();
        for attacker in &mut attackers {
            for _ in 0..1_000 {
                if attacker.send(&pings).is_err() {
                    break;
                }
            }
        }
        attackers
    })
    .await
    .unwrap();
    // A proxy with the token, arriving after them, gets its configuration
    // (retrying as Envoy does).
    let proxy = Proxy::start(xds);
    wait_for(
        "the proxy's configuration while ten sockets hold the slots",
        || proxy.configured(),
    )
    .await;
    // And every attacking socket is let go.
    let held = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        attackers
            .iter()
            .filter(|attacker| !attacker.wait_released(CLOSE_PATIENCE.saturating_sub(started.elapsed())))
            .count()
    })
    .await
    .unwrap();
    assert_eq!(held, 0, "sockets without a credential the server never let go");
    let growth = target.rss_kib().saturating_sub(before) / 1024;
    assert!(
        growth <= ADMISSION_BOUND_MIB,
        "the server's memory grew by {growth} MiB (bound {ADMISSION_BOUND_MIB} MiB)"
    );
    drop(proxy);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_grpc_messages_on_many_streams_do_not_grow_the_server() {
    // 64 streams each announcing a message of 4 MiB - 1 (under gRPC's
    // usual 4 MiB cap) and sending it as fast as the server's windows
    // allow, never finishing: 256 MiB if the server buffered each stream's
    // message whole. The bound: the request data the server may buffer
    // per connection (`--xds-request-buffer`, given 4 MiB here where the
    // server has it) plus flow-control windows and slack.
    let target = Target::start(&[], &[("--xds-request-buffer", "4194304")]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let streams: Vec<u32> = (0..64).map(|i| 3 + 2 * i).collect();
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = hpack::ads_request(&xds.to_string(), Some(PROXY));
        let announced: u32 = (4 << 20) - 1;
        let mut sent = vec![0u64; streams.len()];
        let mut connection_sent = 0u64;
        // The attacker's first request on stream 1 counted against the
        // connection window.
        connection_sent += common::attack::first_request().len() as u64;
        for (i, &id) in streams.iter().enumerate() {
            let prefix = frame::grpc_message(announced, &[]);
            let opened = [
                frame::headers(id, &block, false, true),
                frame::data(id, &prefix, false),
            ]
            .concat();
            if attacker.send(&opened).is_err() {
                return (attacker.report(), sent.iter().sum::<u64>());
            }
            sent[i] += prefix.len() as u64;
            connection_sent += prefix.len() as u64;
        }
        let chunk = vec![0x42u8; 16_384];
        let mut last_progress = Instant::now();
        while last_progress.elapsed() < Duration::from_secs(5) {
            let report = attacker.report();
            if report.ended() {
                break;
            }
            let mut progressed = false;
            for (i, &id) in streams.iter().enumerate() {
                let room = (report.allowed(0).saturating_sub(connection_sent))
                    .min(report.allowed(id).saturating_sub(sent[i]))
                    .min(u64::from(announced) + 5 - sent[i])
                    .min(chunk.len() as u64) as usize;
                if room == 0 {
                    continue;
                }
                if attacker.send(&frame::data(id, &chunk[..room], false)).is_err() {
                    return (attacker.report(), sent.iter().sum::<u64>());
                }
                sent[i] += room as u64;
                connection_sent += room as u64;
                progressed = true;
            }
            if progressed {
                last_progress = Instant::now();
            } else {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        (attacker.report(), sent.iter().sum::<u64>())
    })
    .await;
    let (report, sent) = &outcome.attack;
    println!("partial messages: {} MiB sent; {outcome:?}", sent >> 20);
    assert!(
        outcome.growth_mib() <= ADMISSION_BOUND_MIB,
        "the server's memory grew by {} MiB with {} MiB of partial messages sent (bound {ADMISSION_BOUND_MIB} MiB): {report:?}",
        outcome.growth_mib(),
        sent >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_beyond_the_limit_are_refused_and_the_abuser_cut_off() {
    let target = Target::start(&["--xds-max-streams-per-connection", "4"], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).unwrap();
        authenticate(&mut attacker, xds, 1);
        let block = hpack::ads_request(&xds.to_string(), Some(PROXY));
        let request = common::attack::first_request();
        // Streams opened without waiting, never closed, each with its
        // first request: 4 are allowed.
        hammer(attacker, 50_000, 100, |i| {
            let id = 3 + 2 * i as u32;
            [
                frame::headers(id, &block, false, true),
                frame::data(id, &request, false),
            ]
            .concat()
        })
    })
    .await;
    assert_held("streams beyond the limit", &outcome, ADMISSION_BOUND_MIB);
    assert_read_right("streams beyond the limit", &outcome.attack);
}
