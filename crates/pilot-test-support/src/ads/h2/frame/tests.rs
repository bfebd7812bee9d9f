//! Frame parsing and writing rules (RFC 9113 §4, §6).

use bytes::{Bytes, BytesMut};

use super::*;

fn head(kind: u8, flags: u8, stream: u32, len: usize) -> Head {
    Head {
        len: len as u32,
        kind,
        flags,
        stream,
    }
}

fn parse(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Result<Frame, FrameError> {
    Frame::parse(
        head(kind, flags, stream, payload.len()),
        Bytes::copy_from_slice(payload),
    )
}

fn connection_reason(result: Result<Frame, FrameError>) -> Reason {
    match result {
        Err(FrameError::Connection { reason, .. }) => reason,
        other => panic!("expected a connection error, got {other:?}"),
    }
}

#[test]
fn head_round_trips_and_clears_the_reserved_bit() {
    let h = Head {
        len: 0x01_02_03,
        kind: kind::HEADERS,
        flags: 0x25,
        stream: 7,
    };
    assert_eq!(Head::parse(&h.encode()), h);
    let mut bytes = h.encode();
    bytes[5] |= 0x80;
    assert_eq!(Head::parse(&bytes).stream, 7);
}

#[test]
fn frames_over_max_frame_size_are_refused_before_reading() {
    assert!(
        head(kind::DATA, 0, 1, 16_384)
            .check_size(DEFAULT_MAX_FRAME_SIZE)
            .is_ok()
    );
    let error = head(kind::DATA, 0, 1, 16_385)
        .check_size(DEFAULT_MAX_FRAME_SIZE)
        .unwrap_err();
    assert_eq!(
        error,
        FrameError::Connection {
            reason: Reason::FrameSizeError,
            what: "frame larger than SETTINGS_MAX_FRAME_SIZE"
        }
    );
}

#[test]
fn data_strips_padding_and_counts_it_for_flow_control() {
    let frame = parse(kind::DATA, flag::PADDED | flag::END_STREAM, 1, b"\x03abc\0\0\0").unwrap();
    assert_eq!(
        frame,
        Frame::Data {
            stream: 1,
            data: Bytes::from_static(b"abc"),
            flow_len: 7,
            end_stream: true
        }
    );
    assert_eq!(
        connection_reason(parse(kind::DATA, flag::PADDED, 1, b"\x03ab")),
        Reason::ProtocolError
    );
    assert_eq!(
        connection_reason(parse(kind::DATA, flag::PADDED, 1, b"")),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::DATA, 0, 0, b"x")),
        Reason::ProtocolError
    );
}

#[test]
fn headers_strip_padding_and_priority() {
    let frame = parse(
        kind::HEADERS,
        flag::PADDED | flag::PRIORITY | flag::END_HEADERS,
        3,
        b"\x01\0\0\0\0\x10blk\0",
    )
    .unwrap();
    assert_eq!(
        frame,
        Frame::Headers {
            stream: 3,
            block: Bytes::from_static(b"blk"),
            end_stream: false,
            end_headers: true
        }
    );
    assert!(matches!(
        parse(kind::HEADERS, flag::PRIORITY, 3, b"\0\0\0\x03\x10"),
        Err(FrameError::Stream {
            stream: 3,
            reason: Reason::ProtocolError,
            ..
        })
    ));
    assert_eq!(
        connection_reason(parse(kind::HEADERS, 0, 0, b"")),
        Reason::ProtocolError
    );
}

#[test]
fn priority_is_accepted_with_five_bytes_only() {
    assert_eq!(
        parse(kind::PRIORITY, 0, 5, &[0; 5]).unwrap(),
        Frame::Priority { stream: 5 }
    );
    assert!(matches!(
        parse(kind::PRIORITY, 0, 5, &[0; 4]),
        Err(FrameError::Stream {
            reason: Reason::FrameSizeError,
            ..
        })
    ));
    assert_eq!(
        connection_reason(parse(kind::PRIORITY, 0, 0, &[0; 5])),
        Reason::ProtocolError
    );
}

#[test]
fn rst_stream_rules() {
    assert_eq!(
        parse(kind::RST_STREAM, 0, 1, &[0, 0, 0, 8]).unwrap(),
        Frame::Reset {
            stream: 1,
            reason: Reason::Cancel
        }
    );
    assert_eq!(
        connection_reason(parse(kind::RST_STREAM, 0, 1, &[0, 0, 8])),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::RST_STREAM, 0, 0, &[0, 0, 0, 8])),
        Reason::ProtocolError
    );
}

#[test]
fn settings_rules() {
    let frame = parse(kind::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 10, 0, 0x99, 0, 0, 0, 1]).unwrap();
    assert_eq!(
        frame,
        Frame::Settings {
            ack: false,
            params: vec![(4, 10), (0x99, 1)]
        }
    );
    assert_eq!(
        parse(kind::SETTINGS, flag::ACK, 0, &[]).unwrap(),
        Frame::Settings {
            ack: true,
            params: vec![]
        }
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, flag::ACK, 0, &[0; 6])),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 0, &[0; 5])),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 1, &[])),
        Reason::ProtocolError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 0, &[0, 2, 0, 0, 0, 2])),
        Reason::ProtocolError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0])),
        Reason::FlowControlError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 0, &[0, 5, 0, 0, 0x3f, 0xff])),
        Reason::ProtocolError
    );
    assert_eq!(
        connection_reason(parse(kind::SETTINGS, 0, 0, &[0, 5, 1, 0, 0, 0])),
        Reason::ProtocolError
    );
}

#[test]
fn push_promise_from_a_client_is_a_protocol_error() {
    assert_eq!(
        connection_reason(parse(kind::PUSH_PROMISE, flag::END_HEADERS, 1, &[0, 0, 0, 2])),
        Reason::ProtocolError
    );
}

#[test]
fn ping_and_goaway_rules() {
    assert_eq!(
        parse(kind::PING, flag::ACK, 0, b"12345678").unwrap(),
        Frame::Ping {
            ack: true,
            data: *b"12345678"
        }
    );
    assert_eq!(
        connection_reason(parse(kind::PING, 0, 0, b"1234567")),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::PING, 0, 1, b"12345678")),
        Reason::ProtocolError
    );
    let frame = parse(kind::GOAWAY, 0, 0, &[0x80, 0, 0, 5, 0, 0, 0, 11, b'x']).unwrap();
    assert_eq!(
        frame,
        Frame::GoAway {
            last_stream: 5,
            reason: Reason::EnhanceYourCalm
        }
    );
    assert_eq!(
        connection_reason(parse(kind::GOAWAY, 0, 0, &[0; 7])),
        Reason::FrameSizeError
    );
    assert_eq!(
        connection_reason(parse(kind::GOAWAY, 0, 3, &[0; 8])),
        Reason::ProtocolError
    );
}

#[test]
fn window_update_rules() {
    assert_eq!(
        parse(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]).unwrap(),
        Frame::WindowUpdate {
            stream: 0,
            increment: 256
        }
    );
    assert_eq!(
        connection_reason(parse(kind::WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0])),
        Reason::ProtocolError
    );
    assert!(matches!(
        parse(kind::WINDOW_UPDATE, 0, 9, &[0, 0, 0, 0]),
        Err(FrameError::Stream {
            stream: 9,
            reason: Reason::ProtocolError,
            ..
        })
    ));
    assert_eq!(
        connection_reason(parse(kind::WINDOW_UPDATE, 0, 1, &[0, 0, 1])),
        Reason::FrameSizeError
    );
}

#[test]
fn continuation_and_unknown_frames() {
    let frame = parse(kind::CONTINUATION, flag::END_HEADERS, 1, b"rest").unwrap();
    assert_eq!(
        frame,
        Frame::Continuation {
            stream: 1,
            block: Bytes::from_static(b"rest"),
            end_headers: true
        }
    );
    assert_eq!(
        connection_reason(parse(kind::CONTINUATION, 0, 0, b"")),
        Reason::ProtocolError
    );
    assert_eq!(parse(0xfa, 0xff, 0, b"anything").unwrap(), Frame::Unknown);
}

#[test]
fn written_frames_parse_back() {
    let mut out = BytesMut::new();
    write_settings(
        &[(setting::HEADER_TABLE_SIZE, 0), (setting::ENABLE_PUSH, 0)],
        &mut out,
    );
    write_settings_ack(&mut out);
    write_ping(*b"abcdefgh", true, &mut out);
    write_goaway(3, Reason::NoError, &mut out);
    write_reset(5, Reason::RefusedStream, &mut out);
    write_window_update(0, 1000, &mut out);
    let mut frames = Vec::new();
    let mut bytes = out.freeze();
    while !bytes.is_empty() {
        let h = Head::parse(bytes[..HEAD_LEN].try_into().unwrap());
        let _ = bytes.split_to(HEAD_LEN);
        frames.push(Frame::parse(h, bytes.split_to(h.len as usize)).unwrap());
    }
    assert_eq!(
        frames,
        vec![
            Frame::Settings {
                ack: false,
                params: vec![(1, 0), (2, 0)]
            },
            Frame::Settings {
                ack: true,
                params: vec![]
            },
            Frame::Ping {
                ack: true,
                data: *b"abcdefgh"
            },
            Frame::GoAway {
                last_stream: 3,
                reason: Reason::NoError
            },
            Frame::Reset {
                stream: 5,
                reason: Reason::RefusedStream
            },
            Frame::WindowUpdate {
                stream: 0,
                increment: 1000
            },
        ]
    );
}

#[test]
fn large_field_blocks_are_split_into_continuations() {
    let block = vec![7u8; 40_000];
    let mut out = BytesMut::new();
    write_headers(1, &block, true, 16_384, &mut out);
    let mut bytes = out.freeze();
    let mut heads = Vec::new();
    let mut joined = Vec::new();
    while !bytes.is_empty() {
        let h = Head::parse(bytes[..HEAD_LEN].try_into().unwrap());
        let _ = bytes.split_to(HEAD_LEN);
        joined.extend_from_slice(&bytes.split_to(h.len as usize));
        heads.push((h.kind, h.flags, h.len));
    }
    assert_eq!(
        heads,
        vec![
            (kind::HEADERS, flag::END_STREAM, 16_384),
            (kind::CONTINUATION, 0, 16_384),
            (kind::CONTINUATION, flag::END_HEADERS, 7_232)
        ]
    );
    assert_eq!(joined, block);
    assert_eq!(
        data_head(3, 10, true),
        Head {
            len: 10,
            kind: kind::DATA,
            flags: flag::END_STREAM,
            stream: 3
        }
        .encode()
    );
}
