//! [`ChangeTicks`]: how a source that is read whole (a credential source)
//! announces its changes: a counter bumped after each, read as a stream
//! that yields once per change or several coalesced.

use futures::stream::BoxStream;
use tokio::sync::watch;

/// A change counter and the streams that follow it. Bounded however
/// slowly a stream is read, and nothing is lost: a reader that falls
/// behind sees one item for every change since it last read (what
/// [`CredentialSource::changes`](pilot_model::CredentialSource::changes)
/// promises).
#[derive(Debug)]
pub struct ChangeTicks(watch::Sender<u64>);

impl Default for ChangeTicks {
    fn default() -> Self {
        ChangeTicks(watch::channel(0).0)
    }
}

impl ChangeTicks {
    /// Announces a change: every stream yields once more (at least).
    pub fn announce(&self) {
        self.0.send_modify(|tick| *tick += 1);
    }

    /// The changes announced from now on.
    pub fn stream(&self) -> BoxStream<'static, ()> {
        let mut changes = self.0.subscribe();
        changes.mark_unchanged();
        Box::pin(futures::stream::unfold(changes, |mut changes| async move {
            changes.changed().await.ok()?;
            changes.mark_unchanged();
            Some(((), changes))
        }))
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;

    #[tokio::test]
    async fn changes_before_a_read_coalesce_and_the_stream_ends_with_its_source() {
        let ticks = ChangeTicks::default();
        let mut stream = ticks.stream();
        assert!(
            futures::poll!(stream.next()).is_pending(),
            "nothing announced yet"
        );
        ticks.announce();
        ticks.announce();
        assert_eq!(stream.next().await, Some(()));
        assert!(
            futures::poll!(stream.next()).is_pending(),
            "two changes, one item"
        );
        ticks.announce();
        assert_eq!(stream.next().await, Some(()));
        drop(ticks);
        assert_eq!(stream.next().await, None);
    }
}
