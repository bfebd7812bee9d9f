//! Handling the frames a client sends (RFC 9113 §5, §6): stream states,
//! settings, flow control of what we receive, PING, GOAWAY, RST_STREAM and
//! header blocks (HEADERS + CONTINUATION, nothing interleaved).

use std::future::Future;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::conn::{Block, Connection, KEEPALIVE_PING, RESET_ALLOWANCE, max_block};
use crate::conn_headers::{Decoded, decode_request};
use crate::conn_stream::{Stream, StreamRef, lock};
use crate::frame::{self, Frame, FrameError, Head, MAX_WINDOW, Reason, setting};
use crate::grpc::{Messages, Request, Sender};
use crate::server::Service;

impl<T, S, F> Connection<T, S, F>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
    S: Service,
    F: Future<Output = ()> + Send,
{
    /// Handles one received frame.
    pub(crate) fn on_frame(&mut self, head: Head, payload: Bytes) {
        if self.closing.is_some() {
            return;
        }
        if let Some(block) = &self.block {
            if head.kind != frame::kind::CONTINUATION || head.stream != block.stream {
                return self.go_away(Reason::ProtocolError, "a frame interleaved in a header block");
            }
        } else if head.kind == frame::kind::CONTINUATION {
            return self.go_away(Reason::ProtocolError, "CONTINUATION without HEADERS");
        }
        let frame = match Frame::parse(head, payload) {
            Ok(frame) => frame,
            Err(FrameError::Connection { reason, what }) => return self.go_away(reason, what),
            // A HEADERS frame's block is not decoded after a stream error,
            // which would leave HPACK out of step: the connection ends.
            Err(FrameError::Stream { reason, what, .. }) if head.kind == frame::kind::HEADERS => {
                return self.go_away(reason, what);
            }
            Err(FrameError::Stream { stream, reason, .. }) => return self.reset_stream(stream, reason),
        };
        if !self.got_settings {
            if !matches!(frame, Frame::Settings { ack: false, .. }) {
                return self.go_away(Reason::ProtocolError, "the first frame is not SETTINGS");
            }
            self.got_settings = true;
        }
        match frame {
            Frame::Data {
                stream,
                data,
                flow_len,
                end_stream,
            } => self.on_data(stream, data, flow_len, end_stream),
            Frame::Headers {
                stream,
                block,
                end_stream,
                end_headers,
            } => {
                if stream % 2 == 0 {
                    return self.go_away(Reason::ProtocolError, "HEADERS on an even (server) stream id");
                }
                let mut bytes = BytesMut::new();
                bytes.extend_from_slice(&block);
                self.block = Some(Block {
                    stream,
                    end_stream,
                    bytes,
                });
                if end_headers {
                    self.end_block();
                }
            }
            Frame::Continuation {
                block, end_headers, ..
            } => {
                let limit = max_block(&self.config);
                let Some(pending) = &mut self.block else { return };
                if pending.bytes.len() + block.len() > limit {
                    return self.go_away(Reason::EnhanceYourCalm, "a header block beyond every limit");
                }
                pending.bytes.extend_from_slice(&block);
                if end_headers {
                    self.end_block();
                }
            }
            Frame::Priority { .. } | Frame::Unknown => {}
            Frame::Reset { stream, reason } => {
                if stream > self.last_stream {
                    return self.go_away(Reason::ProtocolError, "RST_STREAM on an idle stream");
                }
                let open = {
                    let mut shared = lock(&self.shared);
                    let open = shared.streams.contains_key(&stream);
                    drop_stream(&mut shared, stream, reason);
                    open
                };
                if open {
                    self.client_resets = self.client_resets.saturating_add(1);
                    if self.client_resets > RESET_ALLOWANCE && self.client_resets > self.completed {
                        self.go_away(Reason::EnhanceYourCalm, "streams reset faster than they complete");
                    }
                }
            }
            Frame::Settings { ack: true, .. } => {
                if !self.settings_acked {
                    self.settings_acked = true;
                    self.decoder.set_max_table_size(0);
                    // Streams opened before the ACK had the default window.
                    let ours = i64::from(self.config.initial_window_size);
                    let before = ours.max(i64::from(frame::DEFAULT_WINDOW));
                    if before != ours {
                        let mut shared = lock(&self.shared);
                        for s in shared.streams.values_mut() {
                            s.recv_window -= before - ours;
                        }
                    }
                }
            }
            Frame::Settings { ack: false, params } => self.on_settings(&params),
            Frame::Ping { ack: false, data } => frame::write_ping(data, true, &mut self.control),
            Frame::Ping { ack: true, data } => {
                if data == KEEPALIVE_PING {
                    self.keepalive_answered();
                }
            }
            Frame::GoAway { .. } => {
                // The client opens no more streams; the ones open finish.
                self.peer_goaway = true;
            }
            Frame::WindowUpdate { stream: 0, increment } => {
                self.conn_send_window += i64::from(increment);
                if self.conn_send_window > i64::from(MAX_WINDOW) {
                    return self.go_away(Reason::FlowControlError, "connection window beyond 2^31-1");
                }
                self.unblock();
            }
            Frame::WindowUpdate { stream, increment } => {
                if stream > self.last_stream {
                    return self.go_away(Reason::ProtocolError, "WINDOW_UPDATE on an idle stream");
                }
                let overflow = {
                    let mut shared = lock(&self.shared);
                    match shared.streams.get_mut(&stream) {
                        Some(s) => {
                            s.send_window += i64::from(increment);
                            s.send_window > i64::from(MAX_WINDOW)
                        }
                        None => false,
                    }
                };
                if overflow {
                    return self.reset_stream(stream, Reason::FlowControlError);
                }
                self.unblock();
            }
        }
    }

    fn on_settings(&mut self, params: &[(u16, u32)]) {
        for &(id, value) in params {
            match id {
                setting::INITIAL_WINDOW_SIZE => {
                    let delta = i64::from(value) - self.peer_initial_window;
                    self.peer_initial_window = i64::from(value);
                    let mut overflow = false;
                    {
                        let mut shared = lock(&self.shared);
                        for s in shared.streams.values_mut() {
                            s.send_window += delta;
                            overflow |= s.send_window > i64::from(MAX_WINDOW);
                        }
                    }
                    if overflow {
                        return self.go_away(Reason::FlowControlError, "a stream window beyond 2^31-1");
                    }
                    self.unblock();
                }
                setting::MAX_FRAME_SIZE => self.peer_max_frame = value,
                _ => {}
            }
        }
        frame::write_settings_ack(&mut self.control);
    }

    /// Streams waiting for a window get another look.
    fn unblock(&mut self) {
        if self.blocked.is_empty() {
            return;
        }
        let mut shared = lock(&self.shared);
        for id in std::mem::take(&mut self.blocked) {
            shared.mark_ready(id);
        }
    }

    fn on_data(&mut self, id: u32, data: Bytes, flow_len: u32, end_stream: bool) {
        if id > self.last_stream {
            return self.go_away(Reason::ProtocolError, "DATA on an idle stream");
        }
        self.conn_recv_window -= i64::from(flow_len);
        if self.conn_recv_window < 0 {
            return self.go_away(Reason::FlowControlError, "DATA beyond the connection window");
        }
        let mut shared = lock(&self.shared);
        let shared = &mut *shared;
        // Padding, and data nobody will read, go straight back to the windows.
        let mut refund = flow_len - data.len() as u32;
        let error = match shared.streams.get_mut(&id) {
            None => {
                refund = flow_len;
                Some(Reason::StreamClosed)
            }
            Some(s) if s.recv_eof => {
                refund = flow_len;
                Some(Reason::StreamClosed)
            }
            Some(s) => {
                s.recv_window -= i64::from(flow_len);
                if s.recv_window < 0 {
                    refund = flow_len;
                    Some(Reason::FlowControlError)
                } else {
                    if s.recv_dropped {
                        refund = flow_len;
                    } else if !data.is_empty() {
                        s.recv_len += data.len();
                        s.recv.push_back(data);
                    }
                    s.recv_unacked += refund;
                    if end_stream {
                        s.recv_eof = true;
                    }
                    if let Some(waker) = s.recv_waker.take() {
                        waker.wake();
                    }
                    None
                }
            }
        };
        shared.conn_unacked += refund;
        if refund > 0 {
            shared.mark_ready(id);
        }
        if end_stream {
            remove_if_finished(shared, id);
        }
        if let Some(reason) = error {
            let known = shared.streams.contains_key(&id);
            if known {
                drop_stream(shared, id, reason);
            }
            frame::write_reset(id, reason, &mut self.control);
        }
    }

    /// A stream error: RST_STREAM and the stream dropped.
    pub(crate) fn reset_stream(&mut self, id: u32, reason: Reason) {
        let mut shared = lock(&self.shared);
        drop_stream(&mut shared, id, reason);
        frame::write_reset(id, reason, &mut self.control);
    }

    /// A complete header block: a new request, trailers, or one to decode
    /// only to keep the HPACK state.
    fn end_block(&mut self) {
        let Some(Block {
            stream: id,
            end_stream,
            bytes,
        }) = self.block.take()
        else {
            return;
        };
        let decoded = decode_request(
            &mut self.decoder,
            &bytes,
            self.config.max_header_list_size as usize,
        );
        drop(bytes);
        let decoded = match decoded {
            Ok(decoded) => decoded,
            Err(()) => return self.go_away(Reason::CompressionError, "a header block HPACK cannot decode"),
        };
        if id <= self.last_stream {
            return self.on_trailers(id, end_stream);
        }
        self.last_stream = id;
        if self.goaway_sent {
            // After GOAWAY new streams are ignored; the client retries them.
            return;
        }
        let open = lock(&self.shared).streams.len();
        if open >= self.config.max_concurrent_streams as usize {
            return frame::write_reset(id, Reason::RefusedStream, &mut self.control);
        }
        let head = match decoded {
            Decoded::Request(head) => head,
            Decoded::TooLarge => return self.refuse(id, b"431", end_stream),
            Decoded::Malformed => return frame::write_reset(id, Reason::ProtocolError, &mut self.control),
            Decoded::Refused(status) => return self.refuse(id, status, end_stream),
        };
        let recv_window = if self.settings_acked {
            i64::from(self.config.initial_window_size)
        } else {
            i64::from(self.config.initial_window_size.max(frame::DEFAULT_WINDOW))
        };
        let mut stream = Stream::new(recv_window, self.peer_initial_window);
        stream.recv_eof = end_stream;
        lock(&self.shared).streams.insert(id, Box::new(stream));
        let stream = StreamRef {
            shared: self.shared.clone(),
            id,
        };
        let request = Request {
            head: head.into_head(id, self.info.clone()),
            messages: Messages {
                stream: stream.clone(),
            },
        };
        let sender = Sender {
            stream,
            limit: self.config.send_buffer,
            finished: false,
        };
        // Called without the lock held: the service may poll its handles.
        self.service.call(request, sender);
    }

    /// A header block on a stream already opened: trailers, which must end it.
    fn on_trailers(&mut self, id: u32, end_stream: bool) {
        let mut shared = lock(&self.shared);
        let shared = &mut *shared;
        match shared.streams.get_mut(&id) {
            None => {}
            Some(s) if !end_stream || s.recv_eof => {
                let reason = if s.recv_eof {
                    Reason::StreamClosed
                } else {
                    Reason::ProtocolError
                };
                drop_stream(shared, id, reason);
                frame::write_reset(id, reason, &mut self.control);
            }
            Some(s) => {
                s.recv_eof = true;
                if let Some(waker) = s.recv_waker.take() {
                    waker.wake();
                }
                remove_if_finished(shared, id);
            }
        }
    }

    /// Answers a request with an HTTP status and no body.
    fn refuse(&mut self, id: u32, status: &[u8], end_stream: bool) {
        let mut block = BytesMut::new();
        crate::hpack::Encoder::encode([(&b":status"[..], status)], &mut block);
        frame::write_headers(id, &block, true, self.peer_max_frame, &mut self.control);
        if !end_stream {
            frame::write_reset(id, Reason::NoError, &mut self.control);
        }
    }
}

/// Drops a stream after an error, telling its handles.
fn drop_stream(shared: &mut crate::conn_stream::Shared, id: u32, reason: Reason) {
    if let Some(mut s) = shared.remove(id) {
        s.reset = Some(reason);
        s.wake_all();
        // What it held and nobody will read goes back to the connection window.
        shared.conn_unacked += (s.recv_len - s.recv_credited.min(s.recv_len)) as u32;
    }
}

/// Drops a stream whose both sides ended.
pub(crate) fn remove_if_finished(shared: &mut crate::conn_stream::Shared, id: u32) {
    if shared.streams.get(&id).is_some_and(|s| s.finished())
        && let Some(mut s) = shared.remove(id)
    {
        s.wake_all();
    }
}
