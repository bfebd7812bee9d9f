//! HTTP/2 frames as bytes (RFC 9113 section 4.1 and 6): a nine-byte
//! header (24-bit length, type, flags, 31-bit stream id) and a payload,
//! built without checking anything, so a test can send what no conforming
//! client would.

/// `DATA`.
pub const DATA: u8 = 0x0;
/// `HEADERS`.
pub const HEADERS: u8 = 0x1;
/// `PRIORITY`.
pub const PRIORITY: u8 = 0x2;
/// `RST_STREAM`.
pub const RST_STREAM: u8 = 0x3;
/// `SETTINGS`.
pub const SETTINGS: u8 = 0x4;
/// `PUSH_PROMISE`.
pub const PUSH_PROMISE: u8 = 0x5;
/// `PING`.
pub const PING: u8 = 0x6;
/// `GOAWAY`.
pub const GOAWAY: u8 = 0x7;
/// `WINDOW_UPDATE`.
pub const WINDOW_UPDATE: u8 = 0x8;
/// `CONTINUATION`.
pub const CONTINUATION: u8 = 0x9;

/// `END_STREAM` (DATA, HEADERS).
pub const END_STREAM: u8 = 0x1;
/// `ACK` (SETTINGS, PING).
pub const ACK: u8 = 0x1;
/// `END_HEADERS` (HEADERS, CONTINUATION).
pub const END_HEADERS: u8 = 0x4;

/// `SETTINGS_HEADER_TABLE_SIZE`.
pub const SETTINGS_HEADER_TABLE_SIZE: u16 = 0x1;
/// `SETTINGS_ENABLE_PUSH`.
pub const SETTINGS_ENABLE_PUSH: u16 = 0x2;
/// `SETTINGS_MAX_CONCURRENT_STREAMS`.
pub const SETTINGS_MAX_CONCURRENT_STREAMS: u16 = 0x3;
/// `SETTINGS_INITIAL_WINDOW_SIZE`.
pub const SETTINGS_INITIAL_WINDOW_SIZE: u16 = 0x4;
/// `SETTINGS_MAX_FRAME_SIZE`.
pub const SETTINGS_MAX_FRAME_SIZE: u16 = 0x5;
/// `SETTINGS_MAX_HEADER_LIST_SIZE`.
pub const SETTINGS_MAX_HEADER_LIST_SIZE: u16 = 0x6;

/// Error code `NO_ERROR`.
pub const NO_ERROR: u32 = 0x0;
/// Error code `PROTOCOL_ERROR`.
pub const PROTOCOL_ERROR: u32 = 0x1;
/// Error code `FLOW_CONTROL_ERROR`.
pub const FLOW_CONTROL_ERROR: u32 = 0x3;
/// Error code `STREAM_CLOSED`.
pub const STREAM_CLOSED: u32 = 0x5;
/// Error code `REFUSED_STREAM`.
pub const REFUSED_STREAM: u32 = 0x7;
/// Error code `CANCEL`.
pub const CANCEL: u32 = 0x8;
/// Error code `COMPRESSION_ERROR`.
pub const COMPRESSION_ERROR: u32 = 0x9;
/// Error code `ENHANCE_YOUR_CALM`.
pub const ENHANCE_YOUR_CALM: u32 = 0xb;

/// The client connection preface (RFC 9113 section 3.4), without the
/// SETTINGS frame that must follow it.
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The largest payload a frame header can carry (2^24 - 1).
pub const MAX_LENGTH: usize = (1 << 24) - 1;

/// One frame: its header and `payload` (at most [`MAX_LENGTH`] bytes; the
/// length field keeps the low 24 bits of a longer one). The stream id's
/// reserved bit is sent as given.
pub fn frame(kind: u8, flags: u8, stream_id: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len().min(MAX_LENGTH) as u32;
    let mut bytes = Vec::with_capacity(9 + payload.len());
    bytes.extend_from_slice(&length.to_be_bytes()[1..]);
    bytes.push(kind);
    bytes.push(flags);
    bytes.extend_from_slice(&stream_id.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// A `HEADERS` frame carrying `block` (a header block fragment, see
/// [`HeaderBlock`](super::HeaderBlock)).
pub fn headers(stream_id: u32, block: &[u8], end_stream: bool, end_headers: bool) -> Vec<u8> {
    let mut flags = 0;
    if end_stream {
        flags |= END_STREAM;
    }
    if end_headers {
        flags |= END_HEADERS;
    }
    frame(HEADERS, flags, stream_id, block)
}

/// A `CONTINUATION` frame carrying `fragment`.
pub fn continuation(stream_id: u32, fragment: &[u8], end_headers: bool) -> Vec<u8> {
    frame(
        CONTINUATION,
        if end_headers { END_HEADERS } else { 0 },
        stream_id,
        fragment,
    )
}

/// A `DATA` frame.
pub fn data(stream_id: u32, payload: &[u8], end_stream: bool) -> Vec<u8> {
    frame(DATA, if end_stream { END_STREAM } else { 0 }, stream_id, payload)
}

/// An `RST_STREAM` frame with `code`.
pub fn rst_stream(stream_id: u32, code: u32) -> Vec<u8> {
    frame(RST_STREAM, 0, stream_id, &code.to_be_bytes())
}

/// A `PING` frame (not an acknowledgement) with `opaque` data.
pub fn ping(opaque: [u8; 8]) -> Vec<u8> {
    frame(PING, 0, 0, &opaque)
}

/// A `SETTINGS` frame with these `(identifier, value)` pairs.
pub fn settings(values: &[(u16, u32)]) -> Vec<u8> {
    let mut payload = Vec::with_capacity(values.len() * 6);
    for (id, value) in values {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&value.to_be_bytes());
    }
    frame(SETTINGS, 0, 0, &payload)
}

/// The acknowledgement of a peer's `SETTINGS`.
pub fn settings_ack() -> Vec<u8> {
    frame(SETTINGS, ACK, 0, &[])
}

/// A `WINDOW_UPDATE` frame (stream 0: the connection's window) adding
/// `increment` (sent as given, 0 and the reserved bit included).
pub fn window_update(stream_id: u32, increment: u32) -> Vec<u8> {
    frame(WINDOW_UPDATE, 0, stream_id, &increment.to_be_bytes())
}

/// A `PRIORITY` frame: `stream_id` depends on `depends_on` with `weight`.
pub fn priority(stream_id: u32, depends_on: u32, weight: u8) -> Vec<u8> {
    let mut payload = depends_on.to_be_bytes().to_vec();
    payload.push(weight);
    frame(PRIORITY, 0, stream_id, &payload)
}

/// A `GOAWAY` frame naming `last_stream_id` and `code`.
pub fn goaway(last_stream_id: u32, code: u32) -> Vec<u8> {
    let mut payload = last_stream_id.to_be_bytes().to_vec();
    payload.extend_from_slice(&code.to_be_bytes());
    frame(GOAWAY, 0, 0, &payload)
}

/// A gRPC length-prefixed message (uncompressed) whose prefix announces
/// `announced` bytes, followed by `body` (which may be shorter: a partial
/// message).
pub fn grpc_message(announced: u32, body: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(5 + body.len());
    bytes.push(0);
    bytes.extend_from_slice(&announced.to_be_bytes());
    bytes.extend_from_slice(body);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_is_length_type_flags_and_stream() {
        let bytes = frame(HEADERS, END_HEADERS, 3, b"abc");
        assert_eq!(bytes[..9], [0, 0, 3, 1, 4, 0, 0, 0, 3]);
        assert_eq!(&bytes[9..], b"abc");
        assert_eq!(
            settings(&[(SETTINGS_INITIAL_WINDOW_SIZE, 0)]),
            [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0]
        );
        assert_eq!(grpc_message(7, b"x"), [0, 0, 0, 0, 7, b'x']);
    }
}
