//! The watch cache: one store watch per kind shared by every REST watcher
//! of that kind, as kube-apiserver's watch cache does.
//!
//! Without it each watcher opened its own store watch, checked every event
//! against validation on read and encoded it for itself, and kept its own
//! map of every object it had shown (to tell `ADDED` from `MODIFIED` and
//! what a selector stopped matching): with 500 watchers, every write was
//! validated and encoded 500 times and every object held 500 times.
//!
//! Here a kind's first watcher starts a [`KindCache`]: a snapshot of the
//! kind (its objects, at revision `C`) and one store watch from `C`. Each
//! store event is checked once (validation on read), paired with the
//! object it replaces (the cache's one map of the kind's admitted objects),
//! and appended to a bounded window of events. A watcher keeps only its
//! filter and its position in the window: for each event it decides from
//! the previous and the new object whether it sees `ADDED`, `MODIFIED`,
//! `DELETED` or nothing (a selector it starts or stops matching), and the
//! line it sends is encoded once per (event type, served version, table
//! form) and shared by every watcher that sends the same.
//!
//! A watcher that has caught up writes at most once per
//! `ApiOptions::watch_write_interval` (100 ms): with one writer creating
//! objects one after another, each event would otherwise cost every
//! watcher a wake-up and a socket write of its own; held back, it writes
//! what came meanwhile as one chunk (at most [`CHUNK_BYTES`], so a watcher
//! holds about one chunk while its client reads). An event after a quiet
//! interval goes at once, a watcher behind goes on as fast as its client
//! reads, and each half window appended ends a watcher's wait, so the
//! window does not pass a watcher for waiting.
//!
//! A watcher too slow for the window (its next event was dropped from it)
//! gets an `ERROR` event with `410 Expired` and its watch ends, as
//! kube-apiserver ends a watcher that falls behind: the client lists and
//! watches again, and the server holds nothing for it meanwhile. A watch
//! resuming from a revision older than the window reads the store's own
//! history instead (`list.rs`), as before the cache. When the store's
//! watch breaks (history compacted, the store gone), every watcher of the
//! kind gets that error and the next watcher starts a new cache.
//!
//! The cache lives while watchers use it: the last one gone, its store
//! watch ends.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use pilot_model::{ConfigKey, DynConfig, Revision, WatchEvent};
use tokio::sync::watch;

use crate::ApiError;
use crate::server::{Admits, ApiState, Shutdown};

/// The kinds' caches of one API server, by kind.
#[derive(Default)]
pub(crate) struct WatchCaches {
    kinds: Mutex<HashMap<String, Weak<KindCache>>>,
}

impl WatchCaches {
    /// The cache of `kind`, started when no watcher has one.
    pub(crate) async fn of(&self, state: &ApiState, kind: &str) -> Result<Arc<KindCache>, ApiError> {
        if let Some(cache) = self.live(kind) {
            return Ok(cache);
        }
        // Started without the map's lock (the start awaits the store); a
        // cache another watcher started meanwhile wins, this one is dropped.
        let started = KindCache::start(state, kind).await?;
        let mut kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cache) = kinds.get(kind).and_then(Weak::upgrade).filter(|c| !c.broken()) {
            return Ok(cache);
        }
        kinds.retain(|_, cache| cache.strong_count() > 0);
        kinds.insert(kind.to_string(), Arc::downgrade(&started));
        Ok(started)
    }

    fn live(&self, kind: &str) -> Option<Arc<KindCache>> {
        let kinds = self.kinds.lock().unwrap_or_else(|p| p.into_inner());
        kinds.get(kind).and_then(Weak::upgrade).filter(|c| !c.broken())
    }
}

/// What happened to one object of the kind, once for every watcher.
pub(crate) struct CachedEvent {
    /// The revision the event brings the kind to.
    pub(crate) revision: Revision,
    pub(crate) change: Change,
    /// Its encoded lines, by what decides their bytes.
    lines: Mutex<Vec<(LineKey, Bytes)>>,
}

/// One event's meaning, validation on read applied.
pub(crate) enum Change {
    /// An admitted object written; `previous` is what it replaced (none:
    /// it was not there, or not admitted).
    Put {
        object: Arc<DynConfig>,
        previous: Option<Arc<DynConfig>>,
    },
    /// The object `previous` is gone: deleted, or replaced by something
    /// validation on read refuses (the watchers that showed it see it
    /// `DELETED`).
    Gone { previous: Arc<DynConfig> },
    /// Nothing more of the kind up to the revision (a bookmark).
    Progress,
}

/// What a line's bytes depend on besides the event: the event type, the
/// version the watcher's URL serves and whether it asked for a `Table`.
pub(crate) type LineKey = (&'static str, String, Option<crate::table::TableRequest>);

impl CachedEvent {
    /// The line for `key`, encoded by `encode` the first time any watcher
    /// asks for it.
    pub(crate) fn line(&self, key: LineKey, encode: impl FnOnce() -> Bytes) -> Bytes {
        let mut lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, line)) = lines.iter().find(|(k, _)| *k == key) {
            return line.clone();
        }
        let line = encode();
        lines.push((key, line.clone()));
        line
    }
}

/// One kind's shared store watch and its window of recent events.
pub(crate) struct KindCache {
    window: Mutex<Window>,
    /// The sequence number after the window's last event: watchers wait
    /// on it.
    appended: watch::Sender<u64>,
    /// The same, sent each time another half window of events has been
    /// appended: a watcher holding back its writes
    /// ([`ApiOptions::watch_write_interval`](crate::ApiOptions)) looks at
    /// once then, so the window cannot pass it while it waits.
    pressure: watch::Sender<u64>,
    /// The store watch's task, ended when the cache is dropped.
    task: Mutex<Option<tokio::task::AbortHandle>>,
}

struct Window {
    /// The most recent events, oldest first.
    events: VecDeque<Arc<CachedEvent>>,
    /// The sequence number of `events[0]`.
    first: u64,
    /// Every event after this revision is in the window (or yet to come):
    /// the cache's start, then the last event dropped from the window.
    floor: Revision,
    /// The most events kept.
    capacity: usize,
    /// The kind's admitted objects as of the last event.
    objects: HashMap<ConfigKey, Arc<DynConfig>>,
    /// The store's watch ended with this error (encoded `ERROR` line).
    broken: Option<Bytes>,
}

/// What a watcher at a position gets next.
pub(crate) enum Next {
    /// These events, in order; the position moves past them. `more`: the
    /// window holds more after them.
    Events {
        events: Vec<Arc<CachedEvent>>,
        more: bool,
    },
    /// Nothing yet.
    Wait,
    /// The window dropped the watcher's next event: it is too slow.
    Expired,
    /// The store's watch broke: this `ERROR` line ends every watch.
    Broken(Bytes),
}

/// The most events a watcher takes at once (one body chunk).
const BATCH: usize = 256;

impl KindCache {
    /// A cache of `kind`: its objects now, and one store watch from there.
    async fn start(state: &ApiState, kind: &str) -> Result<Arc<KindCache>, ApiError> {
        let snapshot = state
            .backend
            .snapshot(kind)
            .await
            .map_err(|e| ApiError::from_store(e, None))?;
        let events = state
            .backend
            .watch(kind, snapshot.revision)
            .await
            .map_err(|e| ApiError::from_store(e, None))?;
        let objects = snapshot
            .items
            .into_iter()
            .filter(|c| (state.admits)(c))
            .map(|c| (c.key(), c))
            .collect();
        let cache = Arc::new(KindCache {
            window: Mutex::new(Window {
                events: VecDeque::new(),
                first: 0,
                floor: snapshot.revision,
                capacity: state.options.watch_cache_events.max(1),
                objects,
                broken: None,
            }),
            appended: watch::channel(0).0,
            pressure: watch::channel(0).0,
            task: Mutex::new(None),
        });
        let task = tokio::spawn(follow(
            Arc::downgrade(&cache),
            events,
            Arc::clone(&state.admits),
            state.shutdown.clone(),
        ));
        *cache.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task.abort_handle());
        Ok(cache)
    }

    fn broken(&self) -> bool {
        self.window
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .broken
            .is_some()
    }

    /// Where a watcher that has seen every change up to `revision` starts:
    /// `None` when the window no longer holds every event after it.
    pub(crate) fn position_after(&self, revision: Revision) -> Option<u64> {
        let window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        if revision < window.floor {
            return None;
        }
        let skipped = window
            .events
            .iter()
            .take_while(|e| e.revision <= revision)
            .count();
        Some(window.first + skipped as u64)
    }

    /// What a watcher at `position` gets next.
    pub(crate) fn next(&self, position: u64) -> Next {
        let window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        if position < window.first {
            return Next::Expired;
        }
        let at = (position - window.first) as usize;
        if at < window.events.len() {
            let events: Vec<_> = window.events.iter().skip(at).take(BATCH).cloned().collect();
            let more = at + events.len() < window.events.len();
            return Next::Events { events, more };
        }
        match &window.broken {
            Some(line) => Next::Broken(line.clone()),
            None => Next::Wait,
        }
    }

    /// Completes when an event is appended after `seen` (or the cache
    /// breaks, or is dropped).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// Completes each time another half window of events is appended (or
    /// the cache breaks, or is dropped).
    pub(crate) fn subscribe_pressure(&self) -> watch::Receiver<u64> {
        self.pressure.subscribe()
    }

    fn append(
        &self,
        revision: Revision,
        change: impl FnOnce(&mut HashMap<ConfigKey, Arc<DynConfig>>) -> Option<Change>,
    ) {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let Some(change) = change(&mut window.objects) else {
            return;
        };
        if window.events.len() == window.capacity
            && let Some(dropped) = window.events.pop_front()
        {
            window.first += 1;
            window.floor = dropped.revision;
        }
        window.events.push_back(Arc::new(CachedEvent {
            revision,
            change,
            lines: Mutex::new(Vec::new()),
        }));
        let end = window.first + window.events.len() as u64;
        let half = (window.capacity as u64 / 2).max(1);
        drop(window);
        self.appended.send_replace(end);
        if end.is_multiple_of(half) {
            self.pressure.send_replace(end);
        }
    }

    fn break_with(&self, line: Bytes) {
        let mut window = self.window.lock().unwrap_or_else(|p| p.into_inner());
        window.broken = Some(line);
        let end = window.first + window.events.len() as u64;
        drop(window);
        // Wakes every watcher, whose next look finds the error.
        self.appended.send_replace(end + 1);
        self.pressure.send_replace(end + 1);
    }
}

impl Drop for KindCache {
    fn drop(&mut self) {
        if let Some(task) = self.task.get_mut().unwrap_or_else(|p| p.into_inner()).take() {
            task.abort();
        }
    }
}

/// The cache's store watch: each event checked and appended once.
async fn follow(
    cache: Weak<KindCache>,
    mut events: pilot_model::WatchStream,
    admits: Arc<Admits>,
    mut shutdown: Shutdown,
) {
    loop {
        let next = tokio::select! {
            next = events.next() => next,
            () = &mut shutdown => return,
        };
        let Some(cache) = cache.upgrade() else {
            return;
        };
        match next {
            None => return,
            Some(Err(error)) => {
                let status = ApiError::from_store(error, None).body();
                cache.break_with(crate::list::event_line("ERROR", &status));
                return;
            }
            Some(Ok(WatchEvent::Progress { revision })) => cache.append(revision, |_| Some(Change::Progress)),
            Some(Ok(WatchEvent::Put { config, revision })) if !admits(&config) => {
                cache.append(revision, |objects| {
                    objects
                        .remove(&config.key())
                        .map(|previous| Change::Gone { previous })
                });
            }
            Some(Ok(WatchEvent::Put { config, revision })) => cache.append(revision, |objects| {
                let previous = objects.insert(config.key(), Arc::clone(&config));
                Some(Change::Put {
                    object: config,
                    previous,
                })
            }),
            Some(Ok(WatchEvent::Delete { key, revision }))
            | Some(Ok(WatchEvent::Undecodable(pilot_model::Undecodable { key, revision, .. }))) => {
                cache.append(revision, |objects| {
                    objects.remove(&key).map(|previous| Change::Gone { previous })
                });
            }
        }
    }
}

/// The most bytes of lines a watcher puts in one chunk (one more line may
/// pass it): what a watcher holds in the server while its client reads
/// slowly is about one chunk, whatever the burst.
pub(crate) const CHUNK_BYTES: usize = 32 * 1024;

/// A watcher's bytes for a batch of events: the lines it sends, in order,
/// in one chunk (empty when none of them concerns it), and how many of
/// `events` they cover. The chunk stops after the line that reaches
/// [`CHUNK_BYTES`]; the events after it are left for the next chunk.
pub(crate) fn lines_for(
    events: &[Arc<CachedEvent>],
    mut line: impl FnMut(&CachedEvent) -> Option<Bytes>,
) -> (Bytes, usize) {
    let mut chunk = BytesMut::new();
    for (taken, event) in events.iter().enumerate() {
        if let Some(line) = line(event) {
            chunk.extend_from_slice(&line);
            if chunk.len() >= CHUNK_BYTES {
                return (chunk.freeze(), taken + 1);
            }
        }
    }
    (chunk.freeze(), events.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(revision: Revision) -> Arc<CachedEvent> {
        Arc::new(CachedEvent {
            revision,
            change: Change::Progress,
            lines: Mutex::new(Vec::new()),
        })
    }

    #[test]
    fn a_chunk_stops_at_its_byte_budget_and_leaves_the_rest() {
        let events: Vec<_> = (1..=10).map(progress).collect();
        let line = Bytes::from(vec![b'x'; CHUNK_BYTES / 4]);
        let (chunk, taken) = lines_for(&events, |_| Some(line.clone()));
        assert_eq!(taken, 4);
        assert_eq!(chunk.len(), CHUNK_BYTES);
        // Events the watcher does not see are passed over without a limit.
        let (chunk, taken) = lines_for(&events, |e| (e.revision == 10).then(|| line.clone()));
        assert_eq!((chunk.len(), taken), (line.len(), 10));
    }
}
