//! Change events, shared by configuration and the service registry.

/// A change to one object, as a subscriber sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    /// The object appeared.
    Added(T),
    /// The object changed from `old` to `new`.
    Updated {
        /// The object before the change.
        old: T,
        /// The object after the change.
        new: T,
    },
    /// The object went away; this is its last known state.
    Deleted(T),
}

impl<T> Event<T> {
    /// The object as it is after the event (for a delete, as it was last).
    pub fn object(&self) -> &T {
        match self {
            Event::Added(object) | Event::Deleted(object) => object,
            Event::Updated { new, .. } => new,
        }
    }

    /// The same event over a transformed object.
    pub fn map<U>(self, mut f: impl FnMut(T) -> U) -> Event<U> {
        match self {
            Event::Added(object) => Event::Added(f(object)),
            Event::Updated { old, new } => Event::Updated {
                old: f(old),
                new: f(new),
            },
            Event::Deleted(object) => Event::Deleted(f(object)),
        }
    }

    /// Like [`Event::map`] for a fallible transformation.
    pub fn try_map<U, E>(self, mut f: impl FnMut(T) -> Result<U, E>) -> Result<Event<U>, E> {
        Ok(match self {
            Event::Added(object) => Event::Added(f(object)?),
            Event::Updated { old, new } => Event::Updated {
                old: f(old)?,
                new: f(new)?,
            },
            Event::Deleted(object) => Event::Deleted(f(object)?),
        })
    }
}
