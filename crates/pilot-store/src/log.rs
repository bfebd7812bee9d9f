//! [`WatchLog`]: a bounded, revisioned history of writes with resumable
//! watches, for backends that have no watch of their own (the in-memory
//! store, a directory of files, a user's adapter).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::StreamExt;
use pilot_model::{ConfigKey, DynConfig, Revision, StoreError, WatchEvent, WatchStream};
use tokio::sync::watch;

/// The default number of writes a [`WatchLog`] keeps for resuming watches.
pub const DEFAULT_HISTORY: usize = 10_000;

/// A history of writes, each at the next revision, kept up to a capacity.
///
/// A backend takes the log's write lock ([`WatchLog::write`]) around each
/// change, so that revision order, its own state and the log agree; watches
/// read the log and wait for new revisions without holding any lock while
/// they wait. A watch that falls further behind than the log keeps receives
/// [`StoreError::Compacted`], never a silent gap.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use futures::StreamExt;
/// use pilot_model::{ConfigMeta, DynConfig, WatchEvent};
/// use pilot_store::WatchLog;
///
/// let log = WatchLog::new(100);
/// let mut watch = log.watch("K", 0).unwrap();
/// let config = Arc::new(DynConfig { meta: ConfigMeta::new("K", "ns", "a"), spec: serde_json::json!({}) });
/// let revision = log.write().put(config);
/// assert_eq!(revision, 1);
/// let Some(Ok(WatchEvent::Put { revision, .. })) = watch.next().await else { panic!() };
/// assert_eq!(revision, 1);
/// # });
/// ```
#[derive(Clone)]
pub struct WatchLog {
    inner: Arc<LogInner>,
}

struct LogInner {
    state: Mutex<LogState>,
    head: watch::Sender<Revision>,
}

struct LogState {
    /// The revision of the last write.
    revision: Revision,
    /// Events with revisions `floor + 1 ..= revision`, one per revision.
    entries: VecDeque<WatchEvent>,
    /// Watches may resume after any revision `>= floor`.
    floor: Revision,
    capacity: usize,
}

/// Exclusive access to a [`WatchLog`] for one or more writes. New revisions
/// are announced to watchers when the writer is dropped.
pub struct LogWriter<'a> {
    state: MutexGuard<'a, LogState>,
    head: &'a watch::Sender<Revision>,
    wrote: bool,
}

impl WatchLog {
    /// An empty log at revision 0 that keeps `capacity` writes.
    pub fn new(capacity: usize) -> Self {
        Self::starting_at(capacity, 0)
    }

    /// An empty log whose last write was `revision`: for a backend that
    /// reopens persisted objects, so that new writes get higher revisions
    /// than any stored one. Watches may resume after `revision` or later.
    pub fn starting_at(capacity: usize, revision: Revision) -> Self {
        let (head, _) = watch::channel(revision);
        WatchLog {
            inner: Arc::new(LogInner {
                state: Mutex::new(LogState {
                    revision,
                    entries: VecDeque::new(),
                    floor: revision,
                    capacity: capacity.max(1),
                }),
                head,
            }),
        }
    }

    /// Takes the write lock. Hold it while checking and changing the
    /// backend's state and recording the change, and never across an
    /// `.await`.
    pub fn write(&self) -> LogWriter<'_> {
        LogWriter {
            state: self.inner.state.lock().unwrap_or_else(|p| p.into_inner()),
            head: &self.inner.head,
            wrote: false,
        }
    }

    /// The revision of the last write.
    pub fn revision(&self) -> Revision {
        *self.inner.head.borrow()
    }

    /// The oldest revision a watch can still resume after.
    pub fn floor(&self) -> Revision {
        self.lock().floor
    }

    /// Forgets history up to and including `revision` (as etcd's compaction
    /// does): watches that have not yet seen it fail with
    /// [`StoreError::Compacted`].
    pub fn compact(&self, revision: Revision) {
        let mut state = self.lock();
        let target = revision.min(state.revision);
        while state.floor < target {
            state.entries.pop_front();
            state.floor += 1;
        }
    }

    /// The changes to `kind` after revision `after`, then live ones. Fails at
    /// once, or later in the stream, with [`StoreError::Compacted`] if that
    /// history is gone; the stream ends when the log is dropped.
    pub fn watch(&self, kind: &str, after: Revision) -> Result<WatchStream, StoreError> {
        let floor = self.floor();
        if after < floor {
            return Err(StoreError::Compacted {
                requested: after,
                oldest: floor,
            });
        }
        let watcher = Watcher {
            log: Arc::downgrade(&self.inner),
            head: self.inner.head.subscribe(),
            kind: kind.to_string(),
            last: after,
            pending: VecDeque::new(),
            done: false,
        };
        Ok(futures::stream::unfold(watcher, Watcher::next).boxed())
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        self.inner.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for WatchLog {
    fn default() -> Self {
        Self::new(DEFAULT_HISTORY)
    }
}

impl LogWriter<'_> {
    /// The revision of the last write.
    pub fn revision(&self) -> Revision {
        self.state.revision
    }

    /// The revision the next write will get.
    pub fn next_revision(&self) -> Revision {
        self.state.revision + 1
    }

    /// Records a create or replace at [`LogWriter::next_revision`], which the
    /// caller has already put in `config`'s resource version; returns it.
    pub fn put(&mut self, config: Arc<DynConfig>) -> Revision {
        let revision = self.next_revision();
        self.record(WatchEvent::Put { revision, config })
    }

    /// Records a delete at [`LogWriter::next_revision`]; returns it.
    pub fn delete(&mut self, key: ConfigKey) -> Revision {
        let revision = self.next_revision();
        self.record(WatchEvent::Delete { revision, key })
    }

    fn record(&mut self, event: WatchEvent) -> Revision {
        let state = &mut *self.state;
        state.revision = event.revision();
        state.entries.push_back(event);
        while state.entries.len() > state.capacity {
            state.entries.pop_front();
            state.floor += 1;
        }
        self.wrote = true;
        state.revision
    }
}

impl Drop for LogWriter<'_> {
    fn drop(&mut self) {
        if self.wrote {
            // Still under the lock, so announcements never go backwards.
            self.head.send_replace(self.state.revision);
        }
    }
}

struct Watcher {
    /// Weak, so that dropping the log ends its watches.
    log: Weak<LogInner>,
    head: watch::Receiver<Revision>,
    kind: String,
    last: Revision,
    pending: VecDeque<WatchEvent>,
    done: bool,
}

impl Watcher {
    async fn next(mut self) -> Option<(Result<WatchEvent, StoreError>, Self)> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            self.head.borrow_and_update();
            if let Err(error) = self.fill() {
                self.done = true;
                return Some((Err(error), self));
            }
            if self.pending.is_empty() && self.head.changed().await.is_err() {
                return None;
            }
        }
    }

    /// Copies this kind's events after `last` out of the log, ending with a
    /// progress event when the log moved on past the kind's last event.
    fn fill(&mut self) -> Result<(), StoreError> {
        let Some(log) = self.log.upgrade() else {
            return Ok(());
        };
        let state = log.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.last < state.floor {
            return Err(StoreError::Compacted {
                requested: self.last,
                oldest: state.floor,
            });
        }
        if state.revision <= self.last {
            return Ok(());
        }
        let start = usize::try_from(self.last - state.floor).unwrap_or(usize::MAX);
        let mut last_event = self.last;
        for event in state.entries.range(start..) {
            let kind = match event {
                WatchEvent::Put { config, .. } => &config.meta.kind,
                WatchEvent::Delete { key, .. } => &key.kind,
                WatchEvent::Undecodable(undecodable) => &undecodable.key.kind,
                WatchEvent::Progress { .. } => continue,
            };
            if *kind == self.kind {
                last_event = event.revision();
                self.pending.push_back(event.clone());
            }
        }
        if last_event < state.revision {
            self.pending.push_back(WatchEvent::Progress {
                revision: state.revision,
            });
        }
        self.last = state.revision;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pilot_model::ConfigMeta;

    fn config(kind: &str, name: &str) -> Arc<DynConfig> {
        Arc::new(DynConfig {
            meta: ConfigMeta::new(kind, "ns", name),
            spec: serde_json::json!({}),
        })
    }

    fn revisions(events: &[WatchEvent]) -> Vec<(char, Revision)> {
        events
            .iter()
            .map(|e| match e {
                WatchEvent::Put { revision, .. } => ('p', *revision),
                WatchEvent::Delete { revision, .. } => ('d', *revision),
                WatchEvent::Progress { revision } => ('.', *revision),
                WatchEvent::Undecodable(u) => ('u', u.revision),
            })
            .collect()
    }

    #[tokio::test]
    async fn watch_filters_by_kind_resumes_and_reports_progress() {
        let log = WatchLog::new(100);
        {
            let mut w = log.write();
            w.put(config("A", "1"));
            w.put(config("B", "1"));
            w.delete(ConfigKey::new("A", "ns", "1"));
            w.put(config("B", "2"));
        }
        let events: Vec<_> = log
            .watch("A", 0)
            .unwrap()
            .take(3)
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(revisions(&events), [('p', 1), ('d', 3), ('.', 4)]);
        let events: Vec<_> = log
            .watch("A", 1)
            .unwrap()
            .take(2)
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(revisions(&events), [('d', 3), ('.', 4)]);
        let mut live = log.watch("B", 4).unwrap();
        log.write().put(config("B", "3"));
        let event = live.next().await.unwrap().unwrap();
        assert_eq!(revisions(&[event]), [('p', 5)]);
    }

    #[tokio::test]
    async fn a_watch_behind_the_kept_history_is_told_so() {
        let log = WatchLog::new(2);
        for i in 0..5 {
            log.write().put(config("A", &i.to_string()));
        }
        assert_eq!(log.floor(), 3);
        assert!(matches!(
            log.watch("A", 2),
            Err(StoreError::Compacted {
                requested: 2,
                oldest: 3
            })
        ));
        let mut slow = log.watch("A", 3).unwrap();
        for i in 5..10 {
            log.write().put(config("A", &i.to_string()));
        }
        assert!(matches!(
            slow.next().await,
            Some(Err(StoreError::Compacted { requested: 3, .. }))
        ));
        assert!(slow.next().await.is_none());
        log.compact(9);
        assert!(log.watch("A", 8).is_err());
        assert!(log.watch("A", 9).is_ok());
    }

    #[tokio::test]
    async fn a_watch_ends_when_the_log_is_dropped() {
        let log = WatchLog::new(2);
        let mut watch = log.watch("A", 0).unwrap();
        drop(log);
        assert!(watch.next().await.is_none());
    }
}
