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
    let notification = tokio::time::timeout(timeout, events.next())
        .await
        .expect("an event in time")
        .expect("the event stream is open");
    let Notification::Event(event) = notification else {
        panic!("expected an event, got {notification:?}")
    };
    let (operation, config) = match &event {
        Event::Added(c) => ('+', c),
        Event::Updated { new, .. } => ('~', new),
        Event::Deleted(c) => ('-', c),
    };
    (operation, config.meta.name.clone())
}
