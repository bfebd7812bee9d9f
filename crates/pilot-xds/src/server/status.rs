//! What each connected proxy was sent, ACKed and NACKed.

use std::collections::BTreeMap;

/// The xDS types, in the order they are pushed.
pub const TYPES: [&str; 4] = ["CDS", "EDS", "LDS", "RDS"];

/// A counter per xDS type (index in [`TYPES`]).
#[derive(Debug, Default)]
pub(crate) struct TypeCounters([std::sync::atomic::AtomicU64; TYPES.len()]);

impl TypeCounters {
    /// Adds one for `short` (`CDS`, ...); other names are ignored.
    pub(crate) fn add(&self, short: &str) {
        if let Some(index) = TYPES.iter().position(|t| *t == short) {
            self.0[index].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Every type with its count.
    pub(crate) fn get(&self) -> [(&'static str, u64); TYPES.len()] {
        std::array::from_fn(|i| (TYPES[i], self.0[i].load(std::sync::atomic::Ordering::Relaxed)))
    }
}

/// A NACK: the version a proxy rejected and what it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nack {
    /// The rejected version.
    pub version: String,
    /// Envoy's error message.
    pub message: String,
}

/// One type's state for one proxy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TypeStatus {
    /// The last version sent.
    pub sent: Option<String>,
    /// The last version the proxy ACKed.
    pub acked: Option<String>,
    /// The last NACK, if the proxy rejected something since connecting.
    pub nack: Option<Nack>,
}

impl TypeStatus {
    /// True when the proxy has ACKed what it was last sent.
    pub fn synced(&self) -> bool {
        self.sent.is_some() && self.sent == self.acked
    }
}

/// A connected proxy's feedback, per type (`CDS`, `EDS`, `LDS`, `RDS`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStatus {
    /// The proxy's node id.
    pub node_id: String,
    /// True for an incremental (delta) stream, false for state of the world.
    pub incremental: bool,
    /// Per type.
    pub types: BTreeMap<&'static str, TypeStatus>,
}
