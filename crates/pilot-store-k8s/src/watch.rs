//! Following a kind's custom objects as a [`WatchStream`].

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, WatchEvent as KubeEvent, WatchParams};
use pilot_model::{KindSchema, Revision, StoreError, WatchEvent, WatchStream};

use crate::convert::{self, to_config};
use crate::error::{self, KubeError};

/// How long the API server keeps one watch request open; the Controller
/// resumes after the last revision when it ends.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// Watches `api` strictly after `after`, with bookmarks.
///
/// A 410 Gone (the history after `after` was compacted), whether answered
/// to the request or sent as an `ERROR` event, ends the stream with
/// [`StoreError::Compacted`]; any other failure with
/// [`StoreError::Unavailable`].
pub(crate) async fn watch(
    schema: Arc<KindSchema>,
    resource: ApiResource,
    api: Api<DynamicObject>,
    after: Revision,
) -> Result<WatchStream, StoreError> {
    let params = WatchParams::default().timeout(WATCH_TIMEOUT_SECONDS);
    let events = match api.watch(&params, &after.to_string()).await {
        Ok(events) => events,
        Err(kube::Error::Api(status)) if status.code == 410 => return Err(compacted(after)),
        Err(error) => {
            return Err(error::unavailable(
                format!("watching {}.{}", resource.plural, resource.group),
                error,
            ));
        }
    };
    let plural = resource.plural.clone();
    let mut failed = false;
    let stream = events
        .map_err(move |error| error::unavailable(format!("watching {plural}"), error))
        .map(move |item| item.and_then(|event| translate(&schema, after, event)))
        // Nothing after an error: the Controller resumes or relists.
        .take_while(move |item| {
            let go_on = !failed;
            failed |= item.is_err();
            futures::future::ready(go_on)
        });
    Ok(stream.boxed())
}

fn translate(
    schema: &KindSchema,
    after: Revision,
    event: KubeEvent<DynamicObject>,
) -> Result<WatchEvent, StoreError> {
    let (object, deleted) = match event {
        KubeEvent::Added(object) | KubeEvent::Modified(object) => (object, false),
        KubeEvent::Deleted(object) => (object, true),
        KubeEvent::Bookmark(bookmark) => {
            let revision = convert::revision(
                Some(&bookmark.metadata.resource_version),
                &format!("a {} bookmark", schema.kind),
            )?;
            return Ok(WatchEvent::Progress { revision });
        }
        KubeEvent::Error(status) if status.code == 410 => return Err(compacted(after)),
        KubeEvent::Error(status) => {
            return Err(KubeError::WatchEnded {
                what: schema.kind.clone(),
                code: status.code,
                reason: status.reason,
                message: status.message,
            }
            .into());
        }
    };
    let what = format!(
        "{} {}/{}",
        schema.kind,
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    );
    let revision = convert::revision(object.metadata.resource_version.as_deref(), &what)?;
    match to_config(schema, &object) {
        Ok(config) if deleted => Ok(WatchEvent::Delete {
            revision,
            key: config.key(),
        }),
        Ok(config) => Ok(WatchEvent::Put {
            revision,
            config: Arc::new(config),
        }),
        Err(reason) => {
            // Not a pilot object (written around pilot, e.g. without a
            // spec): whatever the cache held under its name is gone, and a
            // delete is never dropped.
            tracing::warn!(%reason, "a custom object that is not a pilot object; treating it as absent");
            let (Some(namespace), Some(name)) = (object.metadata.namespace, object.metadata.name) else {
                return Ok(WatchEvent::Progress { revision });
            };
            Ok(WatchEvent::Delete {
                revision,
                key: pilot_model::ConfigKey::new(&schema.id, namespace, name),
            })
        }
    }
}

fn compacted(after: Revision) -> StoreError {
    // The API server does not say how far its history reaches; at least
    // the revision after `after` is gone.
    StoreError::Compacted {
        requested: after,
        oldest: after + 1,
    }
}
