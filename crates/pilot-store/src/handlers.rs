//! Registered handlers, run on one queue in registration order.

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, RwLock};

use futures::FutureExt;
use futures::future::BoxFuture;
use pilot_model::DynConfig;
use tokio::sync::broadcast;

use crate::{ConfigEvent, Notification};

/// A function the Controller calls for every notification about a kind.
///
/// Any `Fn(Notification<Arc<DynConfig>>) -> impl Future<Output = ()>` is a
/// handler. A [`Notification::Lagged`] goes to every handler of every kind.
pub trait Handler: Send + Sync + 'static {
    /// Handles one notification; the next waits until this one is done.
    fn handle(&self, notification: Notification<Arc<DynConfig>>) -> BoxFuture<'static, ()>;
}

impl<F, Fut> Handler for F
where
    F: Fn(Notification<Arc<DynConfig>>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    fn handle(&self, notification: Notification<Arc<DynConfig>>) -> BoxFuture<'static, ()> {
        Box::pin(self(notification))
    }
}

type ByKind = HashMap<String, Vec<Arc<dyn Handler>>>;

/// Handlers by kind, in registration order.
#[derive(Clone, Default)]
pub(crate) struct Handlers {
    by_kind: Arc<RwLock<ByKind>>,
}

impl Handlers {
    pub(crate) fn add(&self, kind: &str, handler: impl Handler) {
        self.by_kind
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind.to_string())
            .or_default()
            .push(Arc::new(handler));
    }

    /// Runs handlers for every notification, one at a time, until the
    /// Controller goes away.
    pub(crate) async fn dispatch(self, mut events: broadcast::Receiver<ConfigEvent>) {
        loop {
            let (handlers, notification) = match events.recv().await {
                Ok(event) => (
                    self.for_kind(Some(&event.object().meta.kind)),
                    Notification::Event(event),
                ),
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "handlers fell behind; sending them Lagged");
                    (self.for_kind(None), Notification::Lagged { missed })
                }
                Err(broadcast::error::RecvError::Closed) => return,
            };
            for handler in handlers {
                // A panicking handler is reported and skipped; the queue and
                // the handlers after it go on.
                let run = AssertUnwindSafe(handler.handle(notification.clone())).catch_unwind();
                if run.await.is_err() {
                    tracing::error!("a Controller handler panicked; continuing with the next");
                }
            }
        }
    }

    /// The handlers of `kind` (of all kinds for `None`), copied out so no
    /// lock is held while they run.
    fn for_kind(&self, kind: Option<&str>) -> Vec<Arc<dyn Handler>> {
        let by_kind = self.by_kind.read().unwrap_or_else(|p| p.into_inner());
        match kind {
            Some(kind) => by_kind.get(kind).cloned().unwrap_or_default(),
            None => by_kind.values().flatten().cloned().collect(),
        }
    }
}
