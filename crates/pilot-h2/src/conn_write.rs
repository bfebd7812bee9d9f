//! Outgoing bytes: frame heads and small control frames inline, payloads as
//! the application's shared [`Bytes`], written with `write_vectored` so no
//! staging buffer holds a copy. The queue is emptied (and its storage given
//! back) whenever the socket takes everything.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;

/// The most slices handed to one `write_vectored` (Linux's IOV_MAX is 1,024).
const MAX_SLICES: usize = 64;

/// A piece of outgoing bytes: up to 9 bytes inline (a frame head, a gRPC
/// message prefix) or a shared buffer.
#[derive(Debug, Clone)]
pub(crate) enum Chunk {
    /// `len` bytes of `bytes` from `start`.
    Inline { bytes: [u8; 9], start: u8, len: u8 },
    /// A shared buffer.
    Shared(Bytes),
}

impl Chunk {
    /// An inline chunk of up to 9 bytes (more are cut).
    pub(crate) fn inline(slice: &[u8]) -> Chunk {
        let mut bytes = [0; 9];
        let len = slice.len().min(9);
        bytes[..len].copy_from_slice(&slice[..len]);
        Chunk::Inline {
            bytes,
            start: 0,
            len: len as u8,
        }
    }

    /// The chunk's length.
    pub(crate) fn len(&self) -> usize {
        match self {
            Chunk::Inline { len, .. } => usize::from(*len),
            Chunk::Shared(bytes) => bytes.len(),
        }
    }

    /// The chunk's bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Chunk::Inline { bytes, start, len } => {
                &bytes[usize::from(*start)..usize::from(*start) + usize::from(*len)]
            }
            Chunk::Shared(bytes) => bytes,
        }
    }

    /// Splits off the first `n` bytes (`n` < `len()`), without copying a
    /// shared buffer.
    pub(crate) fn split_to(&mut self, n: usize) -> Chunk {
        match self {
            Chunk::Inline { bytes, start, len } => {
                let first = Chunk::inline(&bytes[usize::from(*start)..usize::from(*start) + n]);
                *start += n as u8;
                *len -= n as u8;
                first
            }
            Chunk::Shared(bytes) => Chunk::Shared(bytes.split_to(n)),
        }
    }

    /// Drops the first `n` bytes (`n` <= `len()`).
    fn advance(&mut self, n: usize) {
        match self {
            Chunk::Inline { start, len, .. } => {
                *start += n as u8;
                *len -= n as u8;
            }
            Chunk::Shared(bytes) => {
                let _ = bytes.split_to(n);
            }
        }
    }
}

/// Bytes waiting for the socket.
#[derive(Default)]
pub(crate) struct WriteQueue {
    chunks: VecDeque<Chunk>,
    len: usize,
}

impl WriteQueue {
    /// Queues a chunk.
    pub(crate) fn push(&mut self, chunk: Chunk) {
        if chunk.len() > 0 {
            self.len += chunk.len();
            self.chunks.push_back(chunk);
        }
    }

    /// Queues a shared buffer.
    pub(crate) fn push_bytes(&mut self, bytes: Bytes) {
        self.push(Chunk::Shared(bytes));
    }

    /// The bytes queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Writes what the socket takes; ready when everything is written (the
    /// queue's storage then given back).
    pub(crate) fn poll_flush<T: AsyncWrite + Unpin>(
        &mut self,
        io: &mut T,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while !self.chunks.is_empty() {
            let mut slices = [IoSlice::new(&[]); MAX_SLICES];
            let mut count = 0;
            for (slice, chunk) in slices.iter_mut().zip(self.chunks.iter()) {
                *slice = IoSlice::new(chunk.as_slice());
                count += 1;
            }
            let written = match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..count]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            };
            self.consume(written);
        }
        self.chunks = VecDeque::new();
        Pin::new(&mut *io).poll_flush(cx)
    }

    fn consume(&mut self, mut written: usize) {
        self.len -= written;
        while written > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            if front.len() <= written {
                written -= front.len();
                self.chunks.pop_front();
            } else {
                front.advance(written);
                written = 0;
            }
        }
    }
}
