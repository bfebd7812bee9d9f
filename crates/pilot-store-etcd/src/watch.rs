//! Following a kind's prefix in etcd as a [`WatchStream`].

use std::collections::VecDeque;
use std::sync::Arc;

use etcd_client::{Client, EventType, WatchOptions, WatchRequestSender, WatchResponse, WatchResponseStream};
use futures::StreamExt;
use pilot_model::{Revision, StoreError, Undecodable, WatchEvent, WatchStream};
use tokio::sync::watch;

use crate::codec::{decode, decode_status};
use crate::error::EtcdError;
use crate::keyspace::Keyspace;

/// Starts a watch of `prefix` (one kind) strictly after `after`.
pub(crate) async fn watch(
    keys: Arc<Keyspace>,
    mut client: Client,
    kind: &str,
    prefix: String,
    after: Revision,
    nudge: watch::Receiver<u64>,
) -> Result<WatchStream, StoreError> {
    let start = i64::try_from(after).unwrap_or(i64::MAX - 1) + 1;
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(start)
        .with_progress_notify();
    let (sender, responses) = client
        .watch(prefix.clone(), Some(options))
        .await
        .map_err(|e| keys.unavailable(e))?
        .split();
    let state = Following {
        keys,
        kind: kind.to_string(),
        prefix,
        last: after,
        sender,
        responses,
        nudge,
        pending: VecDeque::new(),
        done: false,
    };
    Ok(futures::stream::unfold(state, Following::next).boxed())
}

struct Following {
    keys: Arc<Keyspace>,
    kind: String,
    prefix: String,
    /// The revision of the last event handed out.
    last: Revision,
    sender: WatchRequestSender,
    responses: WatchResponseStream,
    nudge: watch::Receiver<u64>,
    pending: VecDeque<Pending>,
    done: bool,
}

/// What the watch hands out next.
enum Pending {
    Ready(Result<WatchEvent, StoreError>),
    /// An object's status key changed at `revision`: the object, read at
    /// that revision, with its new status (`None`: the status went away,
    /// e.g. with the lease of the replica that wrote it).
    Status {
        revision: Revision,
        key: pilot_model::ConfigKey,
    },
}

impl Following {
    async fn next(mut self) -> Option<(Result<WatchEvent, StoreError>, Self)> {
        loop {
            match self.pending.pop_front() {
                Some(Pending::Ready(item)) => return Some((item, self)),
                Some(Pending::Status { revision, key }) => {
                    let item = self.with_status(revision, &key).await;
                    return Some((item, self));
                }
                None => {}
            }
            if self.done {
                return None;
            }
            tokio::select! {
                message = self.responses.next() => match message {
                    Some(Ok(response)) => self.take(response),
                    Some(Err(error)) => {
                        let error = self.keys.unavailable(error);
                        self.fail(error);
                    }
                    None => self.fail(self.ended(None)),
                },
                changed = self.nudge.changed() => {
                    // Someone waits for this cache to reach the current
                    // revision: ask etcd where this watch stands.
                    if changed.is_ok() && self.sender.request_progress().await.is_err() {
                        self.fail(self.ended(None));
                    }
                }
            }
        }
    }

    /// etcd ended this watch (closed it, or cancelled it with `reason`).
    fn ended(&self, reason: Option<String>) -> StoreError {
        EtcdError::WatchEnded {
            endpoints: self.keys.endpoints().clone(),
            what: format!("{} objects", self.kind),
            reason,
        }
        .into()
    }

    fn fail(&mut self, error: StoreError) {
        self.pending.push_back(Pending::Ready(Err(error)));
        self.done = true;
    }

    /// The object `key` as of `revision` with its status then, as a `Put`
    /// (or only progress when the object is gone by then).
    async fn with_status(
        &self,
        revision: Revision,
        key: &pilot_model::ConfigKey,
    ) -> Result<WatchEvent, StoreError> {
        let at = i64::try_from(revision).unwrap_or(i64::MAX);
        match self.keys.get_at(key, at).await {
            Ok(Some(config)) => Ok(WatchEvent::Put {
                revision,
                config: Arc::new(config),
            }),
            Ok(None) => Ok(WatchEvent::Progress { revision }),
            Err(error) => Err(error),
        }
    }

    fn take(&mut self, response: WatchResponse) {
        if response.canceled() {
            let compacted = response.compact_revision();
            let error = if compacted > 0 {
                StoreError::Compacted {
                    requested: self.last,
                    oldest: u64::try_from(compacted - 1).unwrap_or_default(),
                }
            } else {
                self.ended(Some(response.cancel_reason().to_string()))
            };
            self.fail(error);
            return;
        }
        if response.events().is_empty() {
            // A progress notification (but not the watch's creation, which
            // may come before events it has yet to send).
            if !response.created()
                && let Some(revision) = response.header().map(|h| h.revision())
            {
                let revision = u64::try_from(revision).unwrap_or_default();
                if revision > self.last {
                    self.last = revision;
                    self.pending
                        .push_back(Pending::Ready(Ok(WatchEvent::Progress { revision })));
                }
            }
            return;
        }
        let layout = &self.keys.layout;
        // Objects written in this response, by revision: a status key
        // removed in the same transaction needs no event of its own.
        let written: std::collections::HashSet<(Revision, pilot_model::ConfigKey)> = response
            .events()
            .iter()
            .filter_map(|e| {
                let kv = e.kv()?;
                let key = layout.parse(&self.prefix, &self.kind, kv.key())?;
                Some((u64::try_from(kv.mod_revision()).unwrap_or_default(), key))
            })
            .collect();
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let revision = u64::try_from(kv.mod_revision()).unwrap_or_default();
            self.last = self.last.max(revision);
            if let Some(key) = layout.parse_status(&self.prefix, &self.kind, kv.key()) {
                let item = if written.contains(&(revision, key.clone())) {
                    Pending::Ready(Ok(WatchEvent::Progress { revision }))
                } else {
                    if event.event_type() == EventType::Put
                        && let Err(reason) = decode_status(kv.value())
                    {
                        self.keys.report_bad(kv.key(), &reason);
                    }
                    Pending::Status { revision, key }
                };
                self.pending.push_back(item);
                continue;
            }
            let Some(key) = layout.parse(&self.prefix, &self.kind, kv.key()) else {
                self.keys.report_bad(
                    kv.key(),
                    "the key is not <prefix>/<group>/<kind>/<namespace>/<name>",
                );
                self.pending
                    .push_back(Pending::Ready(Ok(WatchEvent::Progress { revision })));
                continue;
            };
            let item = match event.event_type() {
                EventType::Delete => WatchEvent::Delete { revision, key },
                EventType::Put => match decode(&key, kv.value(), kv.mod_revision()) {
                    Ok(config) => WatchEvent::Put {
                        revision,
                        config: Arc::new(config),
                    },
                    Err(reason) => {
                        self.keys.report_bad(kv.key(), &reason);
                        WatchEvent::Undecodable(Undecodable {
                            key,
                            revision,
                            reason,
                        })
                    }
                },
            };
            self.pending.push_back(Pending::Ready(Ok(item)));
        }
    }
}
