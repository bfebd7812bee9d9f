//! What subscribers of a Controller receive.

use std::sync::Arc;

use pilot_model::{DynConfig, Event};

/// A change to one configuration object, as the Controller's cache saw it.
pub type ConfigEvent = Event<Arc<DynConfig>>;

/// What a subscriber receives: an event, or word that it fell behind.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification<T> {
    /// A change, already reflected in the cache.
    Event(Event<T>),
    /// The subscriber fell behind by `missed` notifications, which are gone.
    /// Read the current state from the Controller's cache to resync; events
    /// after this one continue normally.
    Lagged {
        /// How many notifications (of all kinds) were skipped.
        missed: u64,
    },
}

impl<T> Notification<T> {
    /// The event, if this is one.
    pub fn event(&self) -> Option<&Event<T>> {
        match self {
            Notification::Event(event) => Some(event),
            Notification::Lagged { .. } => None,
        }
    }
}
