//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte head, parsing and validating
//! each frame type a server receives, and writing the frames it sends.
//!
//! Parsing takes a frame's payload as [`Bytes`] so DATA and field blocks are
//! handed on as slices of it; writing produces heads and small control frames
//! only, so DATA payloads go to the socket from the caller's buffers.

use bytes::Bytes;

mod write;
pub use write::{
    data_head, write_goaway, write_headers, write_ping, write_reset, write_settings, write_settings_ack,
    write_window_update,
};

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A frame head's length in bytes.
pub const HEAD_LEN: usize = 9;

/// The smallest (and default) SETTINGS_MAX_FRAME_SIZE.
pub const DEFAULT_MAX_FRAME_SIZE: u32 = 16_384;

/// The largest SETTINGS_MAX_FRAME_SIZE allowed.
pub const MAX_MAX_FRAME_SIZE: u32 = 16_777_215;

/// The largest flow-control window (2^31-1).
pub const MAX_WINDOW: u32 = 0x7fff_ffff;

/// The initial window of every stream and of the connection before SETTINGS.
pub const DEFAULT_WINDOW: u32 = 65_535;

/// HTTP/2 error codes (RFC 9113 §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// Graceful shutdown, or no error.
    NoError,
    /// A protocol error.
    ProtocolError,
    /// An implementation fault.
    InternalError,
    /// Flow-control limits were violated.
    FlowControlError,
    /// SETTINGS were not acknowledged in time.
    SettingsTimeout,
    /// A frame arrived on a half-closed stream.
    StreamClosed,
    /// A frame had an invalid size.
    FrameSizeError,
    /// A stream was refused before any processing.
    RefusedStream,
    /// A stream is no longer needed.
    Cancel,
    /// The header compression context failed.
    CompressionError,
    /// A CONNECT request's connection failed.
    ConnectError,
    /// The peer generates excessive load.
    EnhanceYourCalm,
    /// The transport is not secure enough.
    InadequateSecurity,
    /// HTTP/1.1 is required.
    Http11Required,
    /// A code this implementation does not know.
    Unknown(u32),
}

impl Reason {
    /// The code on the wire.
    pub fn code(self) -> u32 {
        match self {
            Reason::NoError => 0,
            Reason::ProtocolError => 1,
            Reason::InternalError => 2,
            Reason::FlowControlError => 3,
            Reason::SettingsTimeout => 4,
            Reason::StreamClosed => 5,
            Reason::FrameSizeError => 6,
            Reason::RefusedStream => 7,
            Reason::Cancel => 8,
            Reason::CompressionError => 9,
            Reason::ConnectError => 10,
            Reason::EnhanceYourCalm => 11,
            Reason::InadequateSecurity => 12,
            Reason::Http11Required => 13,
            Reason::Unknown(code) => code,
        }
    }

    /// The reason a code on the wire names.
    pub fn from_code(code: u32) -> Reason {
        match code {
            0 => Reason::NoError,
            1 => Reason::ProtocolError,
            2 => Reason::InternalError,
            3 => Reason::FlowControlError,
            4 => Reason::SettingsTimeout,
            5 => Reason::StreamClosed,
            6 => Reason::FrameSizeError,
            7 => Reason::RefusedStream,
            8 => Reason::Cancel,
            9 => Reason::CompressionError,
            10 => Reason::ConnectError,
            11 => Reason::EnhanceYourCalm,
            12 => Reason::InadequateSecurity,
            13 => Reason::Http11Required,
            other => Reason::Unknown(other),
        }
    }
}

/// A violation found while parsing a frame: the error code and whether it
/// ends the connection or only the stream (RFC 9113 §5.4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A connection error: GOAWAY with this code, then close.
    #[error("connection error {reason:?}: {what}")]
    Connection {
        /// The code for GOAWAY.
        reason: Reason,
        /// What was wrong.
        what: &'static str,
    },
    /// A stream error: RST_STREAM on `stream` with this code.
    #[error("stream {stream} error {reason:?}: {what}")]
    Stream {
        /// The stream to reset.
        stream: u32,
        /// The code for RST_STREAM.
        reason: Reason,
        /// What was wrong.
        what: &'static str,
    },
}

fn conn_err(reason: Reason, what: &'static str) -> FrameError {
    FrameError::Connection { reason, what }
}

/// Frame type codes (RFC 9113 §6).
pub mod kind {
    /// DATA.
    pub const DATA: u8 = 0x0;
    /// HEADERS.
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY.
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM.
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS.
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE.
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING.
    pub const PING: u8 = 0x6;
    /// GOAWAY.
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE.
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION.
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (RFC 9113 §6).
pub mod flag {
    /// END_STREAM (DATA, HEADERS).
    pub const END_STREAM: u8 = 0x1;
    /// ACK (SETTINGS, PING).
    pub const ACK: u8 = 0x1;
    /// END_HEADERS (HEADERS, CONTINUATION).
    pub const END_HEADERS: u8 = 0x4;
    /// PADDED (DATA, HEADERS).
    pub const PADDED: u8 = 0x8;
    /// PRIORITY (HEADERS).
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH.
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE.
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE.
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}

/// A frame's 9-byte head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The payload's length.
    pub len: u32,
    /// The frame type.
    pub kind: u8,
    /// The flags.
    pub flags: u8,
    /// The stream identifier (the reserved bit cleared).
    pub stream: u32,
}

impl Head {
    /// Parses a head.
    pub fn parse(bytes: &[u8; HEAD_LEN]) -> Head {
        Head {
            len: u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]),
            kind: bytes[3],
            flags: bytes[4],
            stream: u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & MAX_WINDOW,
        }
    }

    /// The head's bytes.
    pub fn encode(&self) -> [u8; HEAD_LEN] {
        let len = self.len.to_be_bytes();
        let stream = (self.stream & MAX_WINDOW).to_be_bytes();
        [
            len[1], len[2], len[3], self.kind, self.flags, stream[0], stream[1], stream[2], stream[3],
        ]
    }

    /// Whether the flag is set.
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Checks the head alone against our SETTINGS_MAX_FRAME_SIZE, before the
    /// payload is read (so an oversized frame is never buffered).
    pub fn check_size(&self, max_frame_size: u32) -> Result<(), FrameError> {
        if self.len > max_frame_size {
            return Err(conn_err(
                Reason::FrameSizeError,
                "frame larger than SETTINGS_MAX_FRAME_SIZE",
            ));
        }
        Ok(())
    }
}

/// A parsed frame as a server receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// DATA: `data` without padding; `flow_len` is what counts against flow
    /// control (the whole payload, padding included).
    Data {
        /// The stream.
        stream: u32,
        /// The data.
        data: Bytes,
        /// The payload's length as flow control counts it.
        flow_len: u32,
        /// END_STREAM.
        end_stream: bool,
    },
    /// HEADERS: the first fragment of a field block.
    Headers {
        /// The stream.
        stream: u32,
        /// The field block fragment, padding and priority removed.
        block: Bytes,
        /// END_STREAM.
        end_stream: bool,
        /// END_HEADERS.
        end_headers: bool,
    },
    /// PRIORITY: accepted and ignored (RFC 9113 §5.3.2).
    Priority {
        /// The stream.
        stream: u32,
    },
    /// RST_STREAM.
    Reset {
        /// The stream.
        stream: u32,
        /// The error code.
        reason: Reason,
    },
    /// SETTINGS: the parameters in order (none with ACK).
    Settings {
        /// ACK.
        ack: bool,
        /// (identifier, value) pairs.
        params: Vec<(u16, u32)>,
    },
    /// PING.
    Ping {
        /// ACK.
        ack: bool,
        /// The opaque data.
        data: [u8; 8],
    },
    /// GOAWAY.
    GoAway {
        /// The last stream the peer processed.
        last_stream: u32,
        /// The error code.
        reason: Reason,
    },
    /// WINDOW_UPDATE.
    WindowUpdate {
        /// The stream (0: the connection).
        stream: u32,
        /// The increment (1..=2^31-1).
        increment: u32,
    },
    /// CONTINUATION: a further fragment of a field block.
    Continuation {
        /// The stream.
        stream: u32,
        /// The fragment.
        block: Bytes,
        /// END_HEADERS.
        end_headers: bool,
    },
    /// A frame of an unknown type, to be ignored (RFC 9113 §4.1).
    Unknown,
}

impl Frame {
    /// Parses and validates a frame a client sent (RFC 9113 §6): `payload`
    /// holds exactly `head.len` bytes.
    pub fn parse(head: Head, payload: Bytes) -> Result<Frame, FrameError> {
        let stream = head.stream;
        let need_stream = |what| {
            if stream == 0 {
                Err(conn_err(Reason::ProtocolError, what))
            } else {
                Ok(())
            }
        };
        let no_stream = |what| {
            if stream != 0 {
                Err(conn_err(Reason::ProtocolError, what))
            } else {
                Ok(())
            }
        };
        match head.kind {
            kind::DATA => {
                need_stream("DATA on stream 0")?;
                let data = unpad(&head, payload)?;
                Ok(Frame::Data {
                    stream,
                    data,
                    flow_len: head.len,
                    end_stream: head.has(flag::END_STREAM),
                })
            }
            kind::HEADERS => {
                need_stream("HEADERS on stream 0")?;
                let mut block = unpad(&head, payload)?;
                if head.has(flag::PRIORITY) {
                    if block.len() < 5 {
                        return Err(conn_err(
                            Reason::FrameSizeError,
                            "HEADERS too short for its priority",
                        ));
                    }
                    let dependency =
                        u32::from_be_bytes([block[0], block[1], block[2], block[3]]) & MAX_WINDOW;
                    if dependency == stream {
                        return Err(FrameError::Stream {
                            stream,
                            reason: Reason::ProtocolError,
                            what: "stream depends on itself",
                        });
                    }
                    let _ = block.split_to(5);
                }
                Ok(Frame::Headers {
                    stream,
                    block,
                    end_stream: head.has(flag::END_STREAM),
                    end_headers: head.has(flag::END_HEADERS),
                })
            }
            kind::PRIORITY => {
                need_stream("PRIORITY on stream 0")?;
                if head.len != 5 {
                    return Err(FrameError::Stream {
                        stream,
                        reason: Reason::FrameSizeError,
                        what: "PRIORITY of a length other than 5",
                    });
                }
                Ok(Frame::Priority { stream })
            }
            kind::RST_STREAM => {
                need_stream("RST_STREAM on stream 0")?;
                if head.len != 4 {
                    return Err(conn_err(
                        Reason::FrameSizeError,
                        "RST_STREAM of a length other than 4",
                    ));
                }
                Ok(Frame::Reset {
                    stream,
                    reason: Reason::from_code(be32(&payload)),
                })
            }
            kind::SETTINGS => {
                no_stream("SETTINGS on a stream")?;
                let ack = head.has(flag::ACK);
                if ack && head.len != 0 {
                    return Err(conn_err(Reason::FrameSizeError, "SETTINGS ACK with a payload"));
                }
                if !head.len.is_multiple_of(6) {
                    return Err(conn_err(
                        Reason::FrameSizeError,
                        "SETTINGS length not a multiple of 6",
                    ));
                }
                let params = payload
                    .chunks_exact(6)
                    .map(|p| (u16::from_be_bytes([p[0], p[1]]), be32(&p[2..])))
                    .collect::<Vec<_>>();
                for &(id, value) in &params {
                    match id {
                        setting::ENABLE_PUSH if value > 1 => {
                            return Err(conn_err(Reason::ProtocolError, "SETTINGS_ENABLE_PUSH not 0 or 1"));
                        }
                        setting::INITIAL_WINDOW_SIZE if value > MAX_WINDOW => {
                            return Err(conn_err(
                                Reason::FlowControlError,
                                "SETTINGS_INITIAL_WINDOW_SIZE over 2^31-1",
                            ));
                        }
                        setting::MAX_FRAME_SIZE
                            if !(DEFAULT_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&value) =>
                        {
                            return Err(conn_err(
                                Reason::ProtocolError,
                                "SETTINGS_MAX_FRAME_SIZE out of range",
                            ));
                        }
                        _ => {}
                    }
                }
                Ok(Frame::Settings { ack, params })
            }
            kind::PUSH_PROMISE => Err(conn_err(Reason::ProtocolError, "PUSH_PROMISE from a client")),
            kind::PING => {
                no_stream("PING on a stream")?;
                if head.len != 8 {
                    return Err(conn_err(Reason::FrameSizeError, "PING of a length other than 8"));
                }
                let mut data = [0; 8];
                data.copy_from_slice(&payload);
                Ok(Frame::Ping {
                    ack: head.has(flag::ACK),
                    data,
                })
            }
            kind::GOAWAY => {
                no_stream("GOAWAY on a stream")?;
                if head.len < 8 {
                    return Err(conn_err(Reason::FrameSizeError, "GOAWAY shorter than 8"));
                }
                Ok(Frame::GoAway {
                    last_stream: be32(&payload) & MAX_WINDOW,
                    reason: Reason::from_code(be32(&payload[4..])),
                })
            }
            kind::WINDOW_UPDATE => {
                if head.len != 4 {
                    return Err(conn_err(
                        Reason::FrameSizeError,
                        "WINDOW_UPDATE of a length other than 4",
                    ));
                }
                let increment = be32(&payload) & MAX_WINDOW;
                if increment == 0 {
                    let what = "WINDOW_UPDATE with an increment of 0";
                    return Err(if stream == 0 {
                        conn_err(Reason::ProtocolError, what)
                    } else {
                        FrameError::Stream {
                            stream,
                            reason: Reason::ProtocolError,
                            what,
                        }
                    });
                }
                Ok(Frame::WindowUpdate { stream, increment })
            }
            kind::CONTINUATION => {
                need_stream("CONTINUATION on stream 0")?;
                Ok(Frame::Continuation {
                    stream,
                    block: payload,
                    end_headers: head.has(flag::END_HEADERS),
                })
            }
            _ => Ok(Frame::Unknown),
        }
    }
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}

/// Strips the padding of a PADDED DATA or HEADERS payload (RFC 9113 §6.1).
fn unpad(head: &Head, mut payload: Bytes) -> Result<Bytes, FrameError> {
    if !head.has(flag::PADDED) {
        return Ok(payload);
    }
    let Some(&pad) = payload.first() else {
        return Err(conn_err(
            Reason::FrameSizeError,
            "PADDED frame without its pad length",
        ));
    };
    let pad = usize::from(pad);
    if pad >= payload.len() {
        return Err(conn_err(Reason::ProtocolError, "padding as long as the payload"));
    }
    let _ = payload.split_to(1);
    payload.truncate(payload.len() - pad);
    Ok(payload)
}

#[cfg(test)]
mod tests;
