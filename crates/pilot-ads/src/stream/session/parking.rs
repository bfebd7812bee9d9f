//! A session parked on its class (`push/parked.rs`): a stream holding a
//! scoped class's configuration at the latest push, and leaving nothing
//! out, waits on its class instead of every push; before it answers a
//! request, and when a push wakes it, it takes the latest push that kept
//! its class, as a stream taking each kept push would have.

use std::sync::Arc;

use tokio::sync::watch;

use super::{Sent, Session};
use crate::push::{MeshSnapshot, Ticket};

impl Session {
    /// Parks the stream on its class when it holds a scoped class's
    /// configuration at the latest push (`snapshots` has nothing newer)
    /// and leaves nothing out.
    pub(super) fn park(&mut self, snapshots: &watch::Receiver<Option<Arc<MeshSnapshot>>>) {
        if self.parked.is_some() || !self.left_out.is_empty() {
            return;
        }
        let held = self.generated.as_ref().and_then(|config| config.held.as_ref());
        let (Some(snapshot), Some(held)) = (&self.snapshot, held) else {
            return;
        };
        // A closed channel: the server is going; the loop ends on it.
        let newer = || snapshots.has_changed().unwrap_or(true);
        if let Some(ticket) = self
            .server
            .parking
            .park(held, self.id, &self.node, snapshot, newer)
        {
            self.server
                .feedback
                .parked(self.id, Arc::clone(&ticket.kept.version));
            self.parked = Some(ticket);
        }
    }

    /// Completes when a push wakes the parked stream (never while awake).
    pub(super) fn woken(&self) -> impl Future<Output = ()> + Send + 'static {
        let woken = self.parked.as_ref().map(Ticket::woken);
        async move {
            match woken {
                Some(woken) => woken.await,
                None => std::future::pending().await,
            }
        }
    }

    /// True while the stream is parked.
    pub(super) fn is_parked(&self) -> bool {
        self.parked.is_some()
    }

    /// Woken by a push: takes the latest push that kept the class, and
    /// leaves the index (the push that woke it is taken next, as any).
    pub(super) fn unpark(&mut self) {
        self.catch_up();
        self.parked = None;
    }

    /// While parked: takes the latest push that kept the class. Its
    /// configuration is the one the stream holds, so, as for a stream
    /// taking a kept push, nothing is sent.
    pub(super) fn catch_up(&mut self) {
        let Some(ticket) = &self.parked else {
            return;
        };
        let kept = ticket.kept.snapshot();
        if self.snapshot.as_ref().is_some_and(|s| s.version < kept.version) {
            self.snapshot = Some(kept);
            self.settle(self.sent.each_ref().map(Sent::number));
        }
    }
}
