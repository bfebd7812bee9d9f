//! A subscription to the server's pushes ([`XdsServer::subscribe_pushes`](crate::XdsServer::subscribe_pushes)),
//! for metrics and tests: each push as it is published, with a count of the
//! ones a slow subscriber missed.

use tokio::sync::broadcast;

use super::snapshot::PushInfo;

/// Every push published after the subscription was made. The server keeps
/// the last 64 for each subscriber; one that falls further behind skips to
/// the oldest still kept and [`missed`](Self::missed) counts what it
/// skipped.
#[derive(Debug)]
pub struct PushSubscription {
    receiver: broadcast::Receiver<PushInfo>,
    missed: u64,
}

impl PushSubscription {
    pub(crate) fn new(receiver: broadcast::Receiver<PushInfo>) -> Self {
        PushSubscription { receiver, missed: 0 }
    }

    /// The next push, waiting for it; `None` once the server has stopped.
    pub async fn next(&mut self) -> Option<PushInfo> {
        loop {
            match self.receiver.recv().await {
                Ok(push) => return Some(push),
                Err(broadcast::error::RecvError::Lagged(skipped)) => self.missed += skipped,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// The pushes this subscriber skipped because it fell behind.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}
