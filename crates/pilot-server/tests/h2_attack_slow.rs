//! Clients that take the server's replies slowly or not at all, with the
//! proxy token: a zero window (`SETTINGS_INITIAL_WINDOW_SIZE 0` and never
//! a WINDOW_UPDATE) and a slow reader. The server's memory stays within a
//! bound and a proxy with a credential on another connection stays
//! configured throughout; a connection whose replies cannot move at all
//! is let go, even though it answers the server's PINGs.

mod common;

use std::time::{Duration, Instant};

use common::attack::{CLOSE_PATIENCE, Ended, Target, assert_held, authenticate, finish, under_attack};
use pilot_test_support::raw_h2::{Connection, frame};

/// The bound on memory growth. What the server queues for a connection
/// that does not take its replies is bounded by its send buffer (and one
/// pending configuration per type, not every push): 20 connections of a
/// few hundred KiB each, far below this; a server that queues every push
/// and every PING answer grows past it.
const SLOW_BOUND_MIB: u64 = 64;

/// Attacking connections.
const CONNECTIONS: usize = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_window_clients_are_let_go() {
    let target = Target::start(&[], &[("--xds-write-timeout", "2s")]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        // Each connection opens an ADS stream with the token and then
        // never lets the server send a byte of DATA.
        let mut attackers: Vec<Connection> = (0..CONNECTIONS)
            .map(|_| {
                let mut attacker =
                    Connection::open(xds, &[(frame::SETTINGS_INITIAL_WINDOW_SIZE, 0)]).unwrap();
                authenticate(&mut attacker, xds, 1);
                // Alive in every other way: a keepalive timeout is not
                // what may end it.
                attacker.answer_pings(true);
                attacker
            })
            .collect();
        // Configuration keeps changing meanwhile (the proxy's pushes):
        // each is one more response the attackers cannot take.
        std::thread::sleep(Duration::from_secs(3));
        // Every connection has the same deadline; the first one the
        // server still holds after it is the one reported.
        let started = Instant::now();
        while attackers
            .iter()
            .any(|a| !a.report().ended() && a.held_by_server())
            && started.elapsed() < CLOSE_PATIENCE
        {
            std::thread::sleep(Duration::from_millis(100));
        }
        let held = attackers
            .iter()
            .position(|a| !a.report().ended() && a.held_by_server());
        match held {
            Some(i) => finish(attackers.swap_remove(i), 1),
            None => Ended {
                report: Default::default(),
                sent: 1,
                released: true,
            },
        }
    })
    .await;
    assert_held("zero-window clients", &outcome, SLOW_BOUND_MIB);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_do_not_grow_the_server() {
    let target = Target::start(&[], &[("--xds-write-timeout", "2s")]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attackers: Vec<Connection> = (0..CONNECTIONS)
            .map(|_| {
                let mut attacker = Connection::silent(xds, &[]).unwrap();
                authenticate(&mut attacker, xds, 1);
                attacker
            })
            .collect();
        // For 20 s each connection asks for 100 PING answers (1,700
        // bytes) and reads 64 bytes, round after round: replies pile up
        // faster than they are read.
        let started = Instant::now();
        let pings: Vec<u8> = (0..100).flat_map(|_| frame::ping(*b"slowread")).collect();
        let mut rounds = 0u64;
        while started.elapsed() < Duration::from_secs(20) {
            for attacker in &mut attackers {
                let _ = attacker.send(&pings);
                let _ = attacker.read_some(64);
            }
            rounds += 1;
        }
        rounds
    })
    .await;
    println!("slow readers: {outcome:?}");
    assert!(
        outcome.growth_mib() <= SLOW_BOUND_MIB,
        "slow readers: the server's memory grew by {} MiB (bound {SLOW_BOUND_MIB} MiB)",
        outcome.growth_mib()
    );
}
