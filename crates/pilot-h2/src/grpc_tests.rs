//! Received-message assembly and `grpc-message` encoding.

use std::collections::VecDeque;

use bytes::{Buf, Bytes};

use super::*;

#[test]
fn a_message_in_one_chunk_is_a_slice_of_it() {
    let chunk = Bytes::from_static(b"\0\0\0\0\x03abcrest");
    let mut chunks = VecDeque::from([chunk.clone()]);
    let message = take(&mut chunks, 5, 3);
    let bytes = message.into_bytes();
    assert_eq!(&bytes[..], b"abc");
    assert_eq!(bytes.as_ptr(), chunk[5..].as_ptr(), "copied instead of sliced");
    assert_eq!(chunks, VecDeque::from([Bytes::from_static(b"rest")]));
}

#[test]
fn a_message_across_chunks_reads_as_a_buf() {
    let mut chunks = VecDeque::from([
        Bytes::from_static(b"\0\0\0"),
        Bytes::from_static(b"\0\x07ab"),
        Bytes::from_static(b"cde"),
        Bytes::from_static(b"fgNEXT"),
    ]);
    assert_eq!(peek5(&chunks), [0, 0, 0, 0, 7]);
    let mut message = take(&mut chunks, 5, 7);
    assert_eq!(message.remaining(), 7);
    assert_eq!(message.chunk(), b"ab");
    assert_eq!(&message.copy_to_bytes(2)[..], b"ab");
    assert_eq!(message.chunk(), b"cde");
    message.advance(1);
    assert_eq!(&message.clone().into_bytes()[..], b"defg");
    assert_eq!(&message.copy_to_bytes(4)[..], b"defg");
    assert_eq!(message.remaining(), 0);
    assert_eq!(chunks, VecDeque::from([Bytes::from_static(b"NEXT")]));
}

#[test]
fn grpc_message_is_percent_encoded() {
    assert_eq!(percent_encode("plain text"), b"plain text");
    assert_eq!(percent_encode("100% \u{fc}\n"), b"100%25 %C3%BC%0A");
}
