//! Streams parked on their class: the index of the streams holding a
//! scoped class's configuration, by class, so that a push wakes only the
//! streams whose class it does not keep.
//!
//! A stream holding a scoped class's configuration (and leaving no
//! rejected object out) parks: it stops watching the pushes and waits on
//! its place in the index instead. Each push, once published, goes over
//! the parked classes, not the streams: a class the push keeps (its
//! configuration is the one its streams hold, `GeneratedCache::keeps`) is
//! recorded as kept at that push, once for all its streams, which stay
//! asleep; the streams of every other class are woken and leave the
//! index, as are those whose proxy rejected something (they leave objects
//! out from then on) and those of a proxy whose own instances the push
//! moved (its class may be another, `own_instances.rs`). A woken stream takes the latest push as any stream
//! does and parks again, under its class at that push.
//!
//! - The push a parked stream is at is its class's: the feedback reads it
//!   from the class ([`KeptAt::version`]), so the distribution status
//!   counts a kept proxy as having the push without the stream doing
//!   anything. A stream answering a request while parked first takes the
//!   latest push that kept its class (`KeptAt::snapshot`).
//! - No push is lost: a stream parks under the index's lock and only if no
//!   push newer than the one it holds is published; a push is published
//!   before its pass over the index takes the lock. So either the stream
//!   parked first and the pass finds it, or it sees the newer push and
//!   stays awake to take it.
//! - No leak: a stream leaves the index when it is woken, and when its
//!   [`Ticket`] is dropped (the stream ended, however).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::generation_cache::Held;
use super::proxy_class::ProxyClass;
use super::proxy_config::Generated;
use super::snapshot::MeshSnapshot;

/// The parked streams, by class.
#[derive(Default)]
pub(crate) struct Parking {
    classes: Arc<Mutex<HashMap<ProxyClass, Class>>>,
}

/// A class's parked streams.
struct Class {
    /// The configuration they hold.
    shared: Arc<Generated>,
    /// The latest push that kept it.
    kept: Arc<KeptAt>,
    /// By stream id: the proxy's node id and address, and how to wake
    /// the stream.
    streams: HashMap<u64, (String, IpAddr, Arc<Notify>)>,
}

/// The latest push that kept a class, shared by its parked streams.
pub(crate) struct KeptAt {
    /// Its version (what the feedback reports for a parked stream).
    pub(crate) version: Arc<AtomicU64>,
    snapshot: Mutex<Arc<MeshSnapshot>>,
}

impl KeptAt {
    /// The latest push that kept the class.
    pub(crate) fn snapshot(&self) -> Arc<MeshSnapshot> {
        Arc::clone(&self.snapshot.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn advance(&self, snapshot: &Arc<MeshSnapshot>) {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = Arc::clone(snapshot);
        self.version.store(snapshot.version, Ordering::Release);
    }
}

/// A parked stream's place in the index; dropping it leaves the index.
pub(crate) struct Ticket {
    classes: Arc<Mutex<HashMap<ProxyClass, Class>>>,
    class: ProxyClass,
    id: u64,
    wake: Arc<Notify>,
    /// The latest push that kept the stream's class.
    pub(crate) kept: Arc<KeptAt>,
}

impl Ticket {
    /// Completes once a push woke the stream (it has left the index).
    pub(crate) fn woken(&self) -> impl Future<Output = ()> + Send + 'static {
        let wake = Arc::clone(&self.wake);
        async move { wake.notified().await }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(class) = classes.get_mut(&self.class) {
            if class
                .streams
                .get(&self.id)
                .is_some_and(|(_, _, wake)| Arc::ptr_eq(wake, &self.wake))
            {
                class.streams.remove(&self.id);
            }
            if class.streams.is_empty() {
                classes.remove(&self.class);
            }
        }
    }
}

impl Parking {
    /// Parks stream `id` of proxy `node`, holding `held` at push `current`;
    /// `None` when a newer push is published (`newer`, asked under the
    /// index's lock) or the class's parked streams hold another
    /// configuration (their push is not over yet): then the stream stays
    /// awake.
    pub(crate) fn park(
        &self,
        held: &Held,
        id: u64,
        node: &str,
        current: &Arc<MeshSnapshot>,
        newer: impl FnOnce() -> bool,
    ) -> Option<Ticket> {
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        if newer() {
            return None;
        }
        let class = classes.entry(held.class.clone()).or_insert_with(|| Class {
            shared: Arc::clone(&held.shared),
            kept: Arc::new(KeptAt {
                version: Arc::new(AtomicU64::new(current.version)),
                snapshot: Mutex::new(Arc::clone(current)),
            }),
            streams: HashMap::new(),
        });
        if !Arc::ptr_eq(&class.shared, &held.shared) {
            return None;
        }
        let wake = Arc::new(Notify::new());
        class
            .streams
            .insert(id, (node.to_string(), held.address, Arc::clone(&wake)));
        Some(Ticket {
            classes: Arc::clone(&self.classes),
            class: held.class.clone(),
            id,
            wake,
            kept: Arc::clone(&class.kept),
        })
    }

    /// After `snapshot` is published: records it in every class it keeps,
    /// and wakes the streams of the others, and those whose proxy leaves
    /// something out at it or had its own instances moved by it. Costs a lookup per parked class, and a wake
    /// per stream woken.
    pub(crate) fn published(&self, snapshot: &Arc<MeshSnapshot>) {
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        classes.retain(|class, parked| {
            if !snapshot.generated.keeps(class, &parked.shared) {
                for (_, _, wake) in parked.streams.values() {
                    wake.notify_one();
                }
                return false;
            }
            parked.kept.advance(snapshot);
            if !snapshot.rejected.is_empty() || snapshot.generated.moves_any() {
                parked.streams.retain(|_, (node, address, wake)| {
                    let wakes =
                        snapshot.rejected.contains_key(node.as_str()) || snapshot.generated.moved(*address);
                    if wakes {
                        wake.notify_one();
                    }
                    !wakes
                });
            }
            !parked.streams.is_empty()
        });
    }

    /// How many streams are parked, over how many classes.
    #[cfg(test)]
    pub(crate) fn count(&self) -> (usize, usize) {
        let classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        (classes.values().map(|c| c.streams.len()).sum(), classes.len())
    }
}

#[cfg(test)]
mod tests;
