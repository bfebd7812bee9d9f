//! Writing what streams queued (RFC 9113 §6.9, §8.1): window updates for
//! what the application consumed, response HEADERS, DATA within the peer's
//! stream and connection windows (heads inline, payloads the application's
//! own buffers), trailers, and resets.

use std::future::Future;
use std::task::Context;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::conn::{Connection, HIGH_WATER};
use crate::conn_recv::remove_if_finished;
use crate::conn_stream::{Stream, lock};
use crate::conn_write::Chunk;
use crate::frame::{self, Reason};
use crate::grpc::{Code, Status, percent_encode};
use crate::hpack;
use crate::server::Service;

impl<T, S, F> Connection<T, S, F>
where
    T: AsyncRead + AsyncWrite + Unpin + Send,
    S: Service,
    F: Future<Output = ()> + Send,
{
    /// Takes what the streams have for the socket; registers the task's
    /// waker for more. `true` when work was left for lack of room in `out`.
    pub(crate) fn gather(&mut self, cx: &mut Context<'_>) -> bool {
        let shared_arc = self.shared.clone();
        let mut guard = lock(&shared_arc);
        let shared = &mut *guard;
        shared.conn_waker = Some(cx.waker().clone());
        let threshold = shared.update_threshold;
        if shared.conn_unacked >= threshold || (shared.conn_unacked > 0 && shared.streams.is_empty()) {
            frame::write_window_update(0, shared.conn_unacked, &mut self.control);
            self.conn_recv_window += i64::from(shared.conn_unacked);
            shared.conn_unacked = 0;
        }
        let ready = std::mem::take(&mut shared.ready);
        let mut left = Vec::new();
        for id in ready {
            if self.out.len() + self.control.len() >= HIGH_WATER {
                left.push(id);
                continue;
            }
            let Some(stream) = shared.streams.get_mut(&id) else {
                continue;
            };
            stream.queued = false;
            if let Some(reason) = stream.reset_to_send.take() {
                frame::write_reset(id, reason, &mut self.control);
                remove_if_finished(shared, id);
                continue;
            }
            if stream.recv_eof {
                stream.recv_unacked = 0;
            } else if stream.recv_unacked >= threshold {
                frame::write_window_update(id, stream.recv_unacked, &mut self.control);
                stream.recv_window += i64::from(stream.recv_unacked);
                stream.recv_unacked = 0;
            }
            self.send_stream(id, stream);
            if stream.send_len > 0 && self.out.len() + self.control.len() >= HIGH_WATER {
                stream.queued = true;
                left.push(id);
            }
            remove_if_finished(shared, id);
        }
        let more = !left.is_empty();
        if more {
            left.append(&mut shared.ready);
            shared.ready = left;
        }
        if shared.ready.is_empty() && shared.ready.capacity() > 0 {
            shared.ready = Vec::new();
        }
        more
    }

    /// Writes a stream's response HEADERS, DATA and trailers as far as the
    /// windows allow.
    fn send_stream(&mut self, id: u32, stream: &mut Stream) {
        if stream.send_done || stream.reset.is_some() {
            return;
        }
        if !stream.headers_sent && (stream.send_len > 0 || stream.trailers.is_some() || stream.headers_wanted)
        {
            stream.headers_sent = true;
            if stream.send_len == 0 && !stream.headers_wanted {
                // Trailers-only: the status in the one HEADERS frame.
                let mut block = BytesMut::new();
                let status = stream
                    .trailers
                    .take()
                    .unwrap_or_else(|| Status::new(Code::Ok, ""));
                encode_status(&status, true, &mut block);
                frame::write_headers(id, &block, true, self.peer_max_frame, &mut self.control);
                self.end_sent(id, stream);
                return;
            }
            // Encoded once, at compile time.
            frame::write_headers(
                id,
                hpack::GRPC_HEADERS,
                false,
                self.peer_max_frame,
                &mut self.control,
            );
        }
        let before = stream.send_len;
        while stream.send_len > 0 {
            let window = self
                .conn_send_window
                .min(stream.send_window)
                .min(i64::from(self.peer_max_frame));
            if window <= 0 {
                if !self.blocked.contains(&id) {
                    self.blocked.push(id);
                }
                break;
            }
            if self.out.len() + self.control.len() >= HIGH_WATER {
                break;
            }
            let len = (window as usize).min(stream.send_len);
            self.flush_control();
            self.out
                .push(Chunk::inline(&frame::data_head(id, len as u32, false)));
            let mut need = len;
            while need > 0 {
                let Some(front) = stream.send.front_mut() else {
                    break;
                };
                if front.len() <= need {
                    need -= front.len();
                    if let Some(chunk) = stream.send.pop_front() {
                        self.out.push(chunk);
                    }
                } else {
                    self.out.push(front.split_to(need));
                    need = 0;
                }
            }
            stream.send_len -= len;
            stream.send_window -= len as i64;
            self.conn_send_window -= len as i64;
        }
        if stream.send.is_empty() && stream.send.capacity() > 0 {
            stream.send = Default::default();
        }
        if stream.send_len < before
            && let Some(waker) = stream.send_waker.take()
        {
            waker.wake();
        }
        if stream.send_len == 0
            && let Some(status) = stream.trailers.take()
        {
            let mut block = BytesMut::new();
            encode_status(&status, false, &mut block);
            frame::write_headers(id, &block, true, self.peer_max_frame, &mut self.control);
            self.end_sent(id, stream);
        }
    }

    /// Our side ended: when the client's has not, it is asked to stop
    /// sending (RST_STREAM NO_ERROR, RFC 9113 §8.1).
    fn end_sent(&mut self, id: u32, stream: &mut Stream) {
        stream.send_done = true;
        self.completed = self.completed.saturating_add(1);
        if !stream.recv_eof {
            frame::write_reset(id, Reason::NoError, &mut self.control);
            stream.reset = Some(Reason::NoError);
        }
        stream.wake_all();
    }
}

/// Encodes trailers (or, with `head`, a trailers-only response).
fn encode_status(status: &Status, head: bool, block: &mut BytesMut) {
    if !head && status.code == Code::Ok && status.message.is_empty() {
        block.extend_from_slice(hpack::GRPC_OK_TRAILERS);
        return;
    }
    let code = (status.code as i32).to_string();
    let message = percent_encode(&status.message);
    let mut fields: Vec<(&[u8], &[u8])> = Vec::with_capacity(4);
    if head {
        fields.extend(hpack::GRPC_HEADER_FIELDS.iter().copied());
    }
    fields.push((b"grpc-status", code.as_bytes()));
    if !message.is_empty() {
        fields.push((b"grpc-message", &message));
    }
    hpack::Encoder::encode(fields, block);
}
