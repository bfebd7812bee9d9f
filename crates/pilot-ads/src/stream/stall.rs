//! Responses that make no progress. The write timeout of `admission.rs`
//! sees a socket that does not drain; a proxy can also stop reading above
//! the socket, by HTTP/2 flow control: it keeps a stream's window shut
//! (`SETTINGS_INITIAL_WINDOW_SIZE 0` and never a WINDOW_UPDATE) and
//! answers PINGs, so the socket drains, h2's keepalive is satisfied, and
//! the response waits for ever. Such a connection holds a slot and a
//! stream's worth of configuration without taking any.
//!
//! So each stream's response body counts the frames it hands to h2
//! ([`Progress`]), and a stream with a response waiting (a message queued
//! or partly written) that has handed over nothing for the write timeout
//! fires its connection's [`WriteStall`]: the connection task drops the
//! connection (nothing flushed), as for a socket that does not drain.
//! The stream's task watches this while it waits for its next event and
//! while it waits to queue a response, so a stalled stream is found
//! whether or not the server has more to send it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Notify, mpsc};

/// One connection's signal that a stream on it stalled: the connection
/// task drops the connection when it fires.
#[derive(Debug)]
pub(crate) struct WriteStall {
    timeout: Option<Duration>,
    fired: Notify,
}

impl WriteStall {
    /// A signal for streams that stall for `timeout` (`None`: never).
    pub(crate) fn new(timeout: Option<Duration>) -> Arc<Self> {
        Arc::new(WriteStall {
            timeout,
            fired: Notify::new(),
        })
    }

    /// How long a stream's response may wait with nothing handed over.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// Tells the connection task to drop the connection (remembered if
    /// the task is not waiting yet).
    pub(crate) fn fire(&self) {
        self.fired.notify_one();
    }

    /// Completes when a stream of the connection stalled.
    pub(crate) async fn fired(&self) {
        self.fired.notified().await;
    }
}

/// What a stream's response body has handed to h2, shared with the
/// stream's task.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    /// Frames handed over since the stream opened.
    frames: AtomicU64,
    /// Whether the body holds parts of a message not yet handed over.
    writing: AtomicBool,
}

impl Progress {
    /// A frame was handed over; `more` parts of its message are left.
    pub(super) fn handed(&self, more: bool) {
        self.frames.fetch_add(1, Ordering::Relaxed);
        self.writing.store(more, Ordering::Relaxed);
    }

    /// The body took a message from the queue (`true`) or ran out of
    /// parts (`false`).
    pub(super) fn writing(&self, writing: bool) {
        self.writing.store(writing, Ordering::Relaxed);
    }

    fn frames(&self) -> u64 {
        self.frames.load(Ordering::Relaxed)
    }
}

/// A stream's watch on its own response: completes (after firing the
/// connection's [`WriteStall`]) once a response has waited for `timeout`
/// with no frame handed over; never while nothing waits.
pub(super) async fn stalled<T>(queue: &mpsc::Sender<T>, progress: &Progress, stall: &WriteStall) {
    let Some(timeout) = stall.timeout() else {
        return std::future::pending().await;
    };
    loop {
        if !waiting(queue, progress) {
            // Looked at again after the stream's next event (a send
            // makes it wait).
            return std::future::pending().await;
        }
        let before = progress.frames();
        // Boxed: a timer is most of a hundred bytes, and this future is
        // part of every idle stream's task.
        Box::pin(tokio::time::sleep(timeout)).await;
        if progress.frames() == before && waiting(queue, progress) {
            stall.fire();
            return;
        }
    }
}

/// Waits for room in the stream's queue as long as the body keeps handing
/// frames over; `Err(())` once it has handed none for the timeout (the
/// connection's [`WriteStall`] fired).
pub(super) async fn reserve<'a, T>(
    queue: &'a mpsc::Sender<T>,
    progress: &Progress,
    stall: Option<&WriteStall>,
) -> Result<mpsc::Permit<'a, T>, Stalled> {
    let Some((stall, timeout)) = stall.and_then(|s| s.timeout().map(|t| (s, t))) else {
        return queue.reserve().await.map_err(|_| Stalled::Gone);
    };
    loop {
        let before = progress.frames();
        match tokio::time::timeout(timeout, queue.reserve()).await {
            Ok(permit) => return permit.map_err(|_| Stalled::Gone),
            Err(_) if progress.frames() != before => continue,
            Err(_) => {
                stall.fire();
                return Err(Stalled::Stalled);
            }
        }
    }
}

/// Why a response could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stalled {
    /// The body is gone (the stream was reset or the connection closed).
    Gone,
    /// The body handed nothing over for the write timeout.
    Stalled,
}

fn waiting<T>(queue: &mpsc::Sender<T>, progress: &Progress) -> bool {
    queue.capacity() < queue.max_capacity() || progress.writing.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_response_nobody_takes_fires_the_connections_stall() {
        let stall = WriteStall::new(Some(Duration::from_secs(30)));
        let progress = Progress::default();
        let (queue, mut body) = mpsc::channel::<u32>(1);
        // Nothing waits: no stall, however long.
        let idle = tokio::time::timeout(Duration::from_secs(120), stalled(&queue, &progress, &stall)).await;
        assert!(idle.is_err(), "an idle stream stalled");
        // A message nobody takes: the stall fires at the timeout.
        queue.send(1).await.unwrap();
        stalled(&queue, &progress, &stall).await;
        tokio::time::timeout(Duration::from_secs(1), stall.fired())
            .await
            .expect("the connection is told");
        // Taken, and its parts handed over as they go: no stall.
        assert_eq!(body.recv().await, Some(1));
        progress.writing(true);
        let watching = stalled(&queue, &progress, &stall);
        tokio::pin!(watching);
        for _ in 0..5 {
            tokio::select! {
                () = &mut watching => panic!("a stream handing frames over stalled"),
                () = tokio::time::sleep(Duration::from_secs(20)) => progress.handed(true),
            }
        }
        progress.handed(false);
        let done = tokio::time::timeout(Duration::from_secs(120), watching).await;
        assert!(done.is_err(), "a stream with nothing left stalled");
    }

    #[tokio::test(start_paused = true)]
    async fn queuing_behind_a_response_nobody_takes_fails_at_the_timeout() {
        let stall = WriteStall::new(Some(Duration::from_secs(30)));
        let progress = Progress::default();
        let (queue, _body) = mpsc::channel::<u32>(1);
        queue.send(1).await.unwrap();
        let refused = reserve(&queue, &progress, Some(&stall)).await.err();
        assert_eq!(refused, Some(Stalled::Stalled));
        tokio::time::timeout(Duration::from_secs(1), stall.fired())
            .await
            .expect("the connection is told");
        // Without a timeout it waits (for the body).
        let none = WriteStall::new(None);
        let waits =
            tokio::time::timeout(Duration::from_secs(300), reserve(&queue, &progress, Some(&none))).await;
        assert!(waits.is_err());
    }
}
