//! The ADS transport: the request/response plumbing of one stream on
//! pilot-h2's gRPC stream, with no knowledge of the xDS protocols. A
//! response goes out as a small header plus slices of the configuration
//! buffers every connection shares (see `generated.rs`): a push to 2,000
//! proxies copies nothing per proxy (pilot-h2 writes the parts behind its
//! frame heads), and what waits in a slow proxy's queue costs only
//! reference counts.
//!
//! Requests are decoded from the received chunks as they came
//! ([`Frames`]), without copying them into one buffer: a sidecar's EDS ACK
//! names every cluster, 160 KB in a 1,000-service mesh, and 2,000 of them
//! copied into fresh buffers made page faults a tenth of the server's CPU
//! in an endpoint push. Nothing is kept between messages (a buffer kept at
//! its high-water mark would cost that per connection).

use std::collections::VecDeque;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The largest request accepted (an EDS subscription to 10,000 clusters is
/// well under 1 MiB).
pub(super) const MAX_REQUEST: usize = 16 * 1024 * 1024;

/// What a stream's task sends.
pub(super) enum Outgoing {
    /// One gRPC message (without its prefix), as buffers to write in order.
    Message(Vec<Bytes>),
    /// End the stream with this status (boxed: it is seven times a
    /// message's size).
    End(Box<tonic::Status>),
}

/// One response message: `head` (the message's own fields), then
/// `resources` (already-encoded repeated fields of the same message,
/// shared with other connections). pilot-h2 adds the gRPC prefix.
pub(super) fn frame(head: &impl prost::Message, resources: Vec<Bytes>) -> Outgoing {
    let head_len = head.encoded_len();
    let mut buffer = BytesMut::with_capacity(head_len);
    head.encode_raw(&mut buffer);
    let mut parts = Vec::with_capacity(1 + resources.len());
    parts.push(buffer.freeze());
    parts.extend(resources);
    Outgoing::Message(parts)
}

/// A stream's response side: messages go to its pilot-h2 sender (which
/// waits while the stream has its send buffer queued: the bounded queue
/// between the task and its connection), and its end is the gRPC status.
/// Dropped without an end, the stream ends with `OK` (the task is done:
/// the proxy left or the server closes).
pub(super) struct Responses {
    sender: Option<pilot_h2::Sender>,
}

impl Responses {
    /// The responses of the stream `sender` answers.
    pub(super) fn new(sender: pilot_h2::Sender) -> Self {
        Responses { sender: Some(sender) }
    }

    /// Responses going nowhere (a task's size, in tests).
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        Responses { sender: None }
    }

    /// Sends one message, or ends the stream; fails when the stream is
    /// gone (reset, connection closed) or already ended.
    pub(super) async fn send(&mut self, outgoing: Outgoing) -> Result<(), Gone> {
        match outgoing {
            Outgoing::Message(parts) => match &mut self.sender {
                Some(sender) => sender.send(parts).await.map_err(|_| Gone),
                None => Err(Gone),
            },
            Outgoing::End(status) => {
                let sender = self.sender.take().ok_or(Gone)?;
                sender.finish(code(status.code()), status.message());
                Ok(())
            }
        }
    }
}

impl Drop for Responses {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            sender.finish(pilot_h2::Code::Ok, "");
        }
    }
}

/// The stream is gone: nobody is left to send to.
#[derive(Debug)]
pub(super) struct Gone;

/// tonic's code as pilot-h2's (the same gRPC numbering).
pub(crate) fn code(code: tonic::Code) -> pilot_h2::Code {
    use pilot_h2::Code as H;
    match code {
        tonic::Code::Ok => H::Ok,
        tonic::Code::Cancelled => H::Cancelled,
        tonic::Code::Unknown => H::Unknown,
        tonic::Code::InvalidArgument => H::InvalidArgument,
        tonic::Code::DeadlineExceeded => H::DeadlineExceeded,
        tonic::Code::NotFound => H::NotFound,
        tonic::Code::AlreadyExists => H::AlreadyExists,
        tonic::Code::PermissionDenied => H::PermissionDenied,
        tonic::Code::ResourceExhausted => H::ResourceExhausted,
        tonic::Code::FailedPrecondition => H::FailedPrecondition,
        tonic::Code::Aborted => H::Aborted,
        tonic::Code::OutOfRange => H::OutOfRange,
        tonic::Code::Unimplemented => H::Unimplemented,
        tonic::Code::Internal => H::Internal,
        tonic::Code::Unavailable => H::Unavailable,
        tonic::Code::DataLoss => H::DataLoss,
        tonic::Code::Unauthenticated => H::Unauthenticated,
    }
}

/// pilot-h2's code as tonic's.
fn tonic_code(code: pilot_h2::Code) -> tonic::Code {
    tonic::Code::from_i32(code as i32)
}

/// Why a stream's requests ended in error.
#[derive(Debug)]
pub(super) enum RequestError {
    /// The proxy sent something that is not a valid request: the stream
    /// ends with this status.
    Malformed(tonic::Status),
    /// The proxy's side failed (reset, connection closed, keepalive
    /// unanswered): nobody is left to tell.
    Transport(tonic::Status),
}

/// A request message type, decoded from its frames.
pub(super) trait Request: Sized + Send + 'static {
    /// Decodes one message (its bytes, without the gRPC prefix).
    fn decode(message: Frames) -> Result<Self, prost::DecodeError>;
}

impl Request for envoy_types::pb::envoy::service::discovery::v3::DeltaDiscoveryRequest {
    fn decode(message: Frames) -> Result<Self, prost::DecodeError> {
        <Self as prost::Message>::decode(message)
    }
}

/// Bytes as a request body's data frames brought them: a [`Buf`] over
/// shared chunks, whose `copy_to_bytes` slices a chunk instead of copying
/// when the bytes lie in one (as almost every field of a request does).
#[derive(Clone, Default, Debug)]
pub(crate) struct Frames {
    chunks: VecDeque<Bytes>,
    remaining: usize,
}

impl Frames {
    /// Appends a frame.
    pub(crate) fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.remaining += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// The first `len` bytes, taken off the front (`len` at most
    /// `remaining()`).
    fn take_front(&mut self, mut len: usize) -> Frames {
        let mut taken = Frames::default();
        while len > 0 {
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let chunk = if front.len() <= len {
                self.chunks.pop_front().unwrap_or_default()
            } else {
                front.split_to(len)
            };
            len -= chunk.len();
            self.remaining -= chunk.len();
            taken.push(chunk);
        }
        taken
    }

    /// The first `N` bytes, left in place (`N` at most `remaining()`).
    #[cfg(test)]
    fn peek<const N: usize>(&self) -> [u8; N] {
        let mut out = [0; N];
        let mut at = 0;
        for chunk in &self.chunks {
            let n = chunk.len().min(N - at);
            out[at..at + n].copy_from_slice(&chunk[..n]);
            at += n;
            if at == N {
                break;
            }
        }
        out
    }

    /// The bytes as one buffer (copied only when they span frames).
    pub(crate) fn contiguous(&self) -> Bytes {
        match self.chunks.len() {
            0 => Bytes::new(),
            1 => self.chunks[0].clone(),
            _ => {
                let mut out = BytesMut::with_capacity(self.remaining);
                for chunk in &self.chunks {
                    out.put_slice(chunk);
                }
                out.freeze()
            }
        }
    }
}

impl From<Bytes> for Frames {
    fn from(bytes: Bytes) -> Self {
        let mut frames = Frames::default();
        frames.push(bytes);
        frames
    }
}

impl Buf for Frames {
    fn remaining(&self) -> usize {
        self.remaining
    }

    fn chunk(&self) -> &[u8] {
        self.chunks.front().map_or(&[], |c| c.as_ref())
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.remaining, "advance past the end");
        self.remaining -= cnt;
        while cnt > 0 {
            let front = self.chunks.front_mut().expect("counted");
            if front.len() > cnt {
                front.advance(cnt);
                return;
            }
            cnt -= front.len();
            self.chunks.pop_front();
        }
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        match self.chunks.front_mut() {
            Some(front) if front.len() >= len => {
                let out = front.split_to(len);
                if front.is_empty() {
                    self.chunks.pop_front();
                }
                self.remaining -= len;
                out
            }
            _ => {
                assert!(len <= self.remaining, "copy_to_bytes past the end");
                let mut out = BytesMut::with_capacity(len);
                out.put(self.take_front(len));
                out.freeze()
            }
        }
    }
}

/// A stream's requests, decoded one message at a time.
pub(super) struct Requests<T> {
    /// `None`: a stream with no requests (a task's size, in tests).
    messages: Option<pilot_h2::Messages>,
    _message: std::marker::PhantomData<fn() -> T>,
}

impl<T: Request> Requests<T> {
    /// The requests of a stream's `messages`.
    pub(super) fn new(messages: pilot_h2::Messages) -> Self {
        Requests {
            messages: Some(messages),
            _message: std::marker::PhantomData,
        }
    }

    /// No requests (a task's size, in tests).
    #[cfg(test)]
    pub(super) fn detached() -> Self {
        Requests {
            messages: None,
            _message: std::marker::PhantomData,
        }
    }

    /// The next request; `None` when the proxy ended the stream.
    pub(super) async fn message(&mut self) -> Result<Option<T>, RequestError> {
        let Some(messages) = &mut self.messages else {
            return Ok(None);
        };
        match messages.next().await {
            None => Ok(None),
            Some(Ok(mut message)) => {
                // The received chunks, sliced, not copied.
                let mut frames = Frames::default();
                while message.has_remaining() {
                    let n = message.chunk().len();
                    frames.push(message.copy_to_bytes(n));
                }
                T::decode(frames).map(Some).map_err(|e| {
                    RequestError::Malformed(tonic::Status::invalid_argument(format!(
                        "undecodable request: {e}"
                    )))
                })
            }
            Some(Err(status)) => {
                let code = tonic_code(status.code);
                let status = tonic::Status::new(code, status.message);
                match code {
                    // The stream or its connection is gone.
                    tonic::Code::Cancelled | tonic::Code::Unavailable => Err(RequestError::Transport(status)),
                    // A message refused (compressed, too large, cut):
                    // pilot-h2 is ending the stream with its status.
                    _ => Err(RequestError::Malformed(status)),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message split across frames at every point reads the same.
    #[test]
    fn frames_read_as_the_bytes_they_hold_wherever_they_are_split() {
        let bytes: Vec<u8> = (0..=255u8).collect();
        for cut in [0, 1, 7, 128, 255, 256] {
            for second in [cut, (cut + 3).min(256)] {
                let mut frames = Frames::default();
                frames.push(Bytes::copy_from_slice(&bytes[..cut]));
                frames.push(Bytes::copy_from_slice(&bytes[cut..second]));
                frames.push(Bytes::copy_from_slice(&bytes[second..]));
                assert_eq!(frames.remaining(), 256);
                assert_eq!(frames.contiguous(), &bytes[..]);
                assert_eq!(frames.peek::<5>(), [0, 1, 2, 3, 4]);
                let mut read = frames.clone();
                let head = read.copy_to_bytes(100);
                assert_eq!(head, &bytes[..100]);
                let mut middle = read.take_front(50);
                assert_eq!(middle.copy_to_bytes(50), &bytes[100..150]);
                read.advance(6);
                assert_eq!(read.remaining(), 100);
                let mut rest = Vec::new();
                while read.has_remaining() {
                    let n = read.chunk().len();
                    rest.extend_from_slice(read.chunk());
                    read.advance(n);
                }
                assert_eq!(rest, &bytes[156..]);
            }
        }
    }
}
