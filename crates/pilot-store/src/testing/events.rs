//! Reading a Controller subscriber's events in tests.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use pilot_model::{DynConfig, Event};

use crate::Notification;

/// The next event on `events` as `(operation, name)`: `'+'` added, `'~'`
/// updated, `'-'` deleted. Panics when none comes within `timeout`, when
/// the stream ends, or on a notification that is not an event.
pub async fn next_change(
    events: &mut BoxStream<'static, Notification<Arc<DynConfig>>>,
    timeout: Duration,
) -> (char, String) {
    let notification = match tokio::time::timeout(timeout, events.next()).await {
        Ok(Some(notification)) => notification,
        Ok(None) => panic!("a Controller's subscription must stay open while the Controller lives; it ended"),
        Err(_) => {
            panic!("the Controller must hand the change to its subscribers: no event within {timeout:?}")
        }
    };
    let Notification::Event(event) = notification else {
        panic!("a subscriber reading at once must get events: expected an event, got {notification:?}")
    };
    let (operation, config) = match &event {
        Event::Added(c) => ('+', c),
        Event::Updated { new, .. } => ('~', new),
        Event::Deleted(c) => ('-', c),
    };
    (operation, config.meta.name.clone())
}
