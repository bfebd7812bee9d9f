//! Stream-state and message errors on the ADS port, as RFC 9113 says a
//! server answers them: a stream id lower than one already used, HEADERS
//! on a stream the client reset, trailers that do not end the stream, a
//! `content-length` the body disagrees with. Each is sent on an
//! authenticated connection (the handshake deadline does not end it);
//! the server must answer with the error the RFC names (a GOAWAY or the
//! stream's RST_STREAM, never silence), and a proxy with a credential on
//! another connection keeps getting its configuration throughout.

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::attack::{PROXY, Target, authenticate, first_request, under_attack};
use pilot_test_support::raw_h2::{Connection, HeaderBlock, Report, frame, hpack};

/// How long the server has to answer a violation: generous, it catches
/// silence, not slowness.
const PATIENCE: Duration = Duration::from_secs(30);

/// Sends `violation` after an authenticated stream 1, then waits until the
/// server has answered it (`answered`) or [`PATIENCE`] passed; what the
/// server sent.
async fn violate(
    violation: impl FnOnce(SocketAddr) -> Vec<u8> + Send + 'static,
    answered: fn(&Report) -> bool,
) -> Report {
    let target = Target::start(&[], &[]);
    let xds = target.xds;
    let outcome = under_attack(&target, move || {
        let mut attacker = Connection::open(xds, &[]).expect("connect");
        authenticate(&mut attacker, xds, 1);
        // The server may close as it reads: what it answered is what counts.
        let _ = attacker.send(&violation(xds));
        let started = Instant::now();
        loop {
            let report = attacker.report();
            if answered(&report) || report.closed || started.elapsed() > PATIENCE {
                return report;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await;
    outcome.attack
}

fn request_block(xds: SocketAddr, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut block = HeaderBlock::new()
        .literal(":method", "POST")
        .literal(":scheme", "http")
        .literal(":path", hpack::ADS_PATH)
        .literal(":authority", &xds.to_string())
        .literal("content-type", "application/grpc")
        .literal("te", "trailers")
        .literal("authorization", &format!("Bearer {PROXY}"));
    for (name, value) in extra {
        block = block.literal(name, value);
    }
    block.build()
}

fn goaway_with(report: &Report, codes: &[u32]) -> bool {
    report
        .goaway
        .as_ref()
        .is_some_and(|goaway| codes.contains(&goaway.code))
}

fn reset_with(report: &Report, codes: &[u32]) -> bool {
    report.last_reset_code.is_some_and(|code| codes.contains(&code))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decreasing_stream_id_is_a_connection_error() {
    // Stream 5 opened, then HEADERS on stream 3: a stream id may only grow
    // (section 5.1.1), a connection error of type PROTOCOL_ERROR.
    let report = violate(
        |xds| {
            let block = request_block(xds, &[]);
            [
                frame::headers(5, &block, false, true),
                frame::headers(3, &block, false, true),
            ]
            .concat()
        },
        |report| report.goaway.is_some(),
    )
    .await;
    assert!(
        goaway_with(&report, &[frame::PROTOCOL_ERROR]),
        "HEADERS on stream 3 after stream 5 was not answered with GOAWAY PROTOCOL_ERROR: {report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_on_a_stream_the_client_reset_are_an_error() {
    // Stream 3 opened and reset by the client, then HEADERS on it again: a
    // frame on a closed stream (section 5.1), STREAM_CLOSED or
    // PROTOCOL_ERROR, as a stream or a connection error.
    let report = violate(
        |xds| {
            let block = request_block(xds, &[]);
            [
                frame::headers(3, &block, false, true),
                frame::rst_stream(3, frame::CANCEL),
                frame::headers(3, &block, false, true),
            ]
            .concat()
        },
        |report| report.goaway.is_some() || report.resets > 0,
    )
    .await;
    let codes = [frame::STREAM_CLOSED, frame::PROTOCOL_ERROR];
    assert!(
        goaway_with(&report, &codes) || reset_with(&report, &codes),
        "HEADERS on a stream the client reset were not answered with STREAM_CLOSED or PROTOCOL_ERROR: {report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trailers_that_do_not_end_the_stream_are_an_error() {
    // A request, a message, then a second HEADERS without END_STREAM:
    // trailers must end the stream (section 8.1), else the request is
    // malformed: PROTOCOL_ERROR.
    let report = violate(
        |xds| {
            let block = request_block(xds, &[]);
            let trailers = HeaderBlock::new().literal("x-trailer", "1").build();
            [
                frame::headers(3, &block, false, true),
                frame::data(3, &first_request(), false),
                frame::headers(3, &trailers, false, true),
            ]
            .concat()
        },
        |report| report.goaway.is_some() || report.resets > 0,
    )
    .await;
    let codes = [frame::PROTOCOL_ERROR];
    assert!(
        goaway_with(&report, &codes) || reset_with(&report, &codes),
        "trailers without END_STREAM were not answered with PROTOCOL_ERROR: {report:?}"
    );
}

/// A request announcing `content-length: LENGTH` whose body is one ADS
/// request that ends the stream: a malformed request (section 8.1.1) when
/// they disagree, answered with PROTOCOL_ERROR.
async fn content_length_disagreeing_with_the_body(length: &'static str, which: &str) {
    let violation = move |xds: SocketAddr| {
        let block = request_block(xds, &[("content-length", length)]);
        [
            frame::headers(3, &block, false, true),
            frame::data(3, &first_request(), true),
        ]
        .concat()
    };
    let report = violate(violation, |report| report.goaway.is_some() || report.resets > 0).await;
    let codes = [frame::PROTOCOL_ERROR];
    assert!(
        goaway_with(&report, &codes) || reset_with(&report, &codes),
        "a body {which} than its content-length ({length}) was not answered with PROTOCOL_ERROR: {report:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_longer_than_its_content_length_is_an_error() {
    content_length_disagreeing_with_the_body("5", "longer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_shorter_than_its_content_length_is_an_error() {
    content_length_disagreeing_with_the_body("100000", "shorter").await;
}
