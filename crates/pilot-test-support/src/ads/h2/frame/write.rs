//! Writing the frames a server sends: heads and small control frames into
//! a buffer; DATA as a head only, its payload written from the caller's
//! buffers.

use bytes::{BufMut, BytesMut};

use super::{HEAD_LEN, Head, MAX_WINDOW, Reason, flag, kind};

/// Appends a SETTINGS frame with `params` to `out`.
pub fn write_settings(params: &[(u16, u32)], out: &mut BytesMut) {
    let len = u32::try_from(params.len() * 6).unwrap_or(0);
    out.put_slice(
        &Head {
            len,
            kind: kind::SETTINGS,
            flags: 0,
            stream: 0,
        }
        .encode(),
    );
    for &(id, value) in params {
        out.put_u16(id);
        out.put_u32(value);
    }
}

/// Appends a SETTINGS ACK to `out`.
pub fn write_settings_ack(out: &mut BytesMut) {
    out.put_slice(
        &Head {
            len: 0,
            kind: kind::SETTINGS,
            flags: flag::ACK,
            stream: 0,
        }
        .encode(),
    );
}

/// Appends a PING (or its ACK) to `out`.
pub fn write_ping(data: [u8; 8], ack: bool, out: &mut BytesMut) {
    let flags = if ack { flag::ACK } else { 0 };
    out.put_slice(
        &Head {
            len: 8,
            kind: kind::PING,
            flags,
            stream: 0,
        }
        .encode(),
    );
    out.put_slice(&data);
}

/// Appends a GOAWAY to `out`.
pub fn write_goaway(last_stream: u32, reason: Reason, out: &mut BytesMut) {
    out.put_slice(
        &Head {
            len: 8,
            kind: kind::GOAWAY,
            flags: 0,
            stream: 0,
        }
        .encode(),
    );
    out.put_u32(last_stream & MAX_WINDOW);
    out.put_u32(reason.code());
}

/// Appends a RST_STREAM to `out`.
pub fn write_reset(stream: u32, reason: Reason, out: &mut BytesMut) {
    out.put_slice(
        &Head {
            len: 4,
            kind: kind::RST_STREAM,
            flags: 0,
            stream,
        }
        .encode(),
    );
    out.put_u32(reason.code());
}

/// Appends a WINDOW_UPDATE to `out`.
pub fn write_window_update(stream: u32, increment: u32, out: &mut BytesMut) {
    out.put_slice(
        &Head {
            len: 4,
            kind: kind::WINDOW_UPDATE,
            flags: 0,
            stream,
        }
        .encode(),
    );
    out.put_u32(increment & MAX_WINDOW);
}

/// Appends a field block as HEADERS plus as many CONTINUATIONs as
/// `max_frame_size` needs.
pub fn write_headers(stream: u32, block: &[u8], end_stream: bool, max_frame_size: u32, out: &mut BytesMut) {
    let max = max_frame_size as usize;
    let mut chunks = block.chunks(max.max(1));
    let first = chunks.next().unwrap_or(&[]);
    let mut rest = chunks.peekable();
    let mut flags = if end_stream { flag::END_STREAM } else { 0 };
    if rest.peek().is_none() {
        flags |= flag::END_HEADERS;
    }
    let len = u32::try_from(first.len()).unwrap_or(0);
    out.put_slice(
        &Head {
            len,
            kind: kind::HEADERS,
            flags,
            stream,
        }
        .encode(),
    );
    out.put_slice(first);
    while let Some(chunk) = rest.next() {
        let flags = if rest.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        let len = u32::try_from(chunk.len()).unwrap_or(0);
        out.put_slice(
            &Head {
                len,
                kind: kind::CONTINUATION,
                flags,
                stream,
            }
            .encode(),
        );
        out.put_slice(chunk);
    }
}

/// A DATA frame's head, for a payload written separately.
pub fn data_head(stream: u32, len: u32, end_stream: bool) -> [u8; HEAD_LEN] {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    Head {
        len,
        kind: kind::DATA,
        flags,
        stream,
    }
    .encode()
}
