//! The store revision each recent push was built from: how a push a proxy
//! ACKed becomes the configuration revisions it holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use pilot_model::KindRevisions;

/// The store revision each recent push was built from (pushes are
/// numbered by the server; revisions are the store's, comparable across
/// replicas). Bounded: the oldest pushes are forgotten.
#[derive(Debug, Default)]
pub struct PushRevisions(BTreeMap<u64, Arc<KindRevisions>>);

impl PushRevisions {
    /// Pushes remembered.
    pub const CAPACITY: usize = 4096;

    /// Records that push `version` was built from `revision`.
    pub fn record(&mut self, version: u64, revision: Arc<KindRevisions>) {
        self.0.insert(version, revision);
        while self.0.len() > Self::CAPACITY {
            self.0.pop_first();
        }
    }

    /// The revision push `version` was built from: that of the latest
    /// push at or before it (a proxy holding push N holds what every push
    /// up to N carried). `None` for a push older than what is kept.
    pub fn revision(&self, version: u64) -> Option<KindRevisions> {
        self.0.range(..=version).next_back().map(|(_, r)| (**r).clone())
    }
}
