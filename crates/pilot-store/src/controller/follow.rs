//! How a [`Controller`](super::Controller) follows its backend: per kind,
//! a list, then a watch resumed after each event, and a relist when the
//! history is gone; every change applied to the cache (through the
//! quarantine) before subscribers hear of it.

use std::collections::HashSet;
use std::sync::Arc;

use futures::StreamExt;
use pilot_model::{ConfigKey, DynConfig, Event, Revision, Snapshot, StoreError, WatchEvent};

use super::Shared;
use crate::{Backoff, ConfigEvent};

impl Shared {
    /// Lists `kind`, then follows its watch, relisting whenever the watch
    /// cannot resume. Runs until the Controller is dropped.
    pub(super) async fn follow(self: Arc<Self>, kind: String) {
        let mut backoff = Backoff::new(self.options.retry_min, self.options.retry_max);
        loop {
            let snapshot = match self.backend.snapshot(&kind).await {
                Ok(snapshot) => snapshot,
                Err(error) => {
                    tracing::warn!(%kind, error = %error.details(), "list failed; retrying");
                    backoff.wait().await;
                    continue;
                }
            };
            backoff.reset();
            let mut revision = snapshot.revision;
            self.apply_snapshot(&kind, snapshot, revision);
            loop {
                let mut stream = match self.backend.watch(&kind, revision).await {
                    Ok(stream) => stream,
                    Err(StoreError::Compacted { .. }) => break,
                    Err(error) => {
                        tracing::warn!(%kind, revision, error = %error.details(), "watch failed; retrying");
                        backoff.wait().await;
                        continue;
                    }
                };
                let mut compacted = false;
                while let Some(item) = stream.next().await {
                    match item {
                        Ok(event) => {
                            revision = event.revision();
                            self.apply(&kind, event);
                            backoff.reset();
                        }
                        Err(StoreError::Compacted { requested, oldest }) => {
                            tracing::info!(%kind, requested, oldest, "watch history compacted; relisting");
                            compacted = true;
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%kind, revision, error = %error.details(), "watch broke; resuming");
                            break;
                        }
                    }
                }
                if compacted {
                    break;
                }
                backoff.wait().await;
            }
        }
    }

    /// Makes the cache equal `items` and emits the differences: deletes of
    /// what is gone, then adds and updates. The events go out once the
    /// kind's applied revision says the cache holds them (see
    /// [`Shared::publish`]).
    fn apply_snapshot(&self, kind: &str, snapshot: Snapshot, revision: Revision) {
        let items = self.admit_listed(kind, snapshot);
        let listed: HashSet<ConfigKey> = items.iter().map(|c| c.key()).collect();
        let mut events = Vec::new();
        for old in self.cache.list(kind, None) {
            if !listed.contains(&old.key()) {
                self.cache.remove(&old.key());
                events.push(Event::Deleted(old));
            }
        }
        for config in items {
            match self.cache.get(&config.key()) {
                Some(old) if old.meta.resource_version == config.meta.resource_version => {}
                Some(old) => {
                    self.cache.insert(Arc::clone(&config));
                    events.push(Event::Updated { old, new: config });
                }
                None => {
                    self.cache.insert(Arc::clone(&config));
                    events.push(Event::Added(config));
                }
            }
        }
        self.mark_applied(kind, revision, true);
        events.into_iter().for_each(|event| self.publish(event));
    }

    fn apply(&self, kind: &str, event: WatchEvent) {
        let revision = event.revision();
        let delivered = !matches!(event, WatchEvent::Progress { .. });
        let event = match event {
            WatchEvent::Put { config, .. } if !self.quarantine.admit(&config) => {
                // The key's stored object is now one that may not be
                // served: what the cache had of it goes.
                self.cache.remove(&config.key()).map(Event::Deleted)
            }
            WatchEvent::Put { config, .. } => match self.cache.insert(Arc::clone(&config)) {
                // A status write is not a change of configuration: the
                // cache shows it, subscribers (the push) do not see it.
                Some(old) if status_only(&old, &config) => None,
                Some(old) => Some(Event::Updated { old, new: config }),
                None => Some(Event::Added(config)),
            },
            WatchEvent::Undecodable(undecodable) => {
                self.quarantine.hold_undecodable(&undecodable);
                self.cache.remove(&undecodable.key).map(Event::Deleted)
            }
            WatchEvent::Delete { key, .. } => {
                self.quarantine.release(&key);
                self.cache.remove(&key).map(Event::Deleted)
            }
            WatchEvent::Progress { .. } => None,
        };
        self.mark_applied(kind, revision, delivered);
        if let Some(event) = event {
            self.publish(event);
        }
    }

    /// Validation on read for a list: the items that may enter the cache;
    /// the others are quarantined, and quarantined keys the list no longer
    /// holds are released.
    fn admit_listed(&self, kind: &str, snapshot: Snapshot) -> Vec<Arc<DynConfig>> {
        let listed: HashSet<ConfigKey> = snapshot
            .items
            .iter()
            .map(|c| c.key())
            .chain(snapshot.undecodable.iter().map(|u| u.key.clone()))
            .collect();
        self.quarantine.retain_listed(kind, &listed);
        for undecodable in &snapshot.undecodable {
            self.quarantine.hold_undecodable(undecodable);
        }
        snapshot
            .items
            .into_iter()
            .filter(|c| self.quarantine.admit(c))
            .collect()
    }

    /// Sends `event` to the subscribers. Only after the cache holds it and
    /// the kind's applied revision counts it: a subscriber woken by it
    /// (the push, on another thread) reads the cache and
    /// [`Controller::applied_revision`](super::Controller::applied_revision)
    /// at once, and must find both at least as new as the event, or a push
    /// built from the new object would be recorded as built from the
    /// revision before it.
    fn publish(&self, event: ConfigEvent) {
        // With no subscriber the event is not needed; the cache has it.
        let _ = self.events.send(event);
    }

    /// The cache of `kind` has applied everything up to `revision`: by an
    /// event or a list (`delivered`), or by a progress notification.
    fn mark_applied(&self, kind: &str, revision: Revision, delivered: bool) {
        let Some(applied) = self.applied.get(kind) else {
            return;
        };
        let mut first = false;
        applied.send_modify(|caught| {
            first = caught.applied.is_none();
            caught.applied = Some(revision);
            if delivered {
                caught.delivered = caught.delivered.max(revision);
            }
        });
        if first {
            self.synced.send_modify(|count| *count += 1);
        }
    }
}

/// True when `new` differs from `old` in its status (and, where the
/// backend moves it on status writes as Kubernetes does, its resource
/// version) only.
fn status_only(old: &DynConfig, new: &DynConfig) -> bool {
    old.spec == new.spec
        && old.meta.labels == new.meta.labels
        && old.meta.annotations == new.meta.annotations
        && old.meta.group == new.meta.group
        && old.meta.version == new.meta.version
        && old.meta.status != new.meta.status
}
