//! Lists and watches of one kind, as kube-apiserver serves them: label and
//! field selectors, `resourceVersion` to resume from, `timeoutSeconds`,
//! `allowWatchBookmarks`, and the `Table` form when asked for.
//!
//! A watch is one JSON event a line (`{"type": ..., "object": ...}`),
//! sent as `application/json` as kube-apiserver does (kubectl and the
//! Kubernetes clients ask for that), or as `application/x-ndjson` to a
//! client that asks for that.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use pilot_model::{ConfigKey, DynConfig, KindSchema, WatchEvent};
use serde_json::{Value, json};

use crate::ApiError;
use crate::WatchObserver;
use crate::selector::{FieldSelector, Selector};
use crate::server::ApiState;
use crate::table::{self, TableRequest};
use crate::watch_cache::{CachedEvent, Change, KindCache, Next, lines_for};

/// Which objects a list, watch or delete-collection takes: the namespace
/// of the URL and the label and field selectors.
#[derive(Clone)]
pub(crate) struct Filter {
    namespace: Option<String>,
    labels: Selector,
    fields: FieldSelector,
}

impl Filter {
    /// The filter of a request in `namespace` (all when `None`) with
    /// `labelSelector` and `fieldSelector` from `query`.
    pub(crate) fn parse(
        namespace: Option<String>,
        query: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        let labels = Selector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(query.get("fieldSelector").map(String::as_str).unwrap_or(""))
            .map_err(ApiError::bad_request)?;
        Ok(Filter {
            namespace,
            labels,
            fields,
        })
    }

    /// True when `config` is selected.
    pub(crate) fn keep(&self, config: &DynConfig) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| ns == config.meta.namespace)
            && self.labels.matches(&config.meta.labels)
            && self.fields.matches(&config.meta.namespace, &config.meta.name)
    }
}

/// One object, as JSON or as a `Table` when the client asks for one.
pub(crate) fn one_object(
    state: &ApiState,
    schema: &KindSchema,
    headers: &HeaderMap,
    object: Arc<DynConfig>,
) -> Response {
    match TableRequest::from_headers(headers) {
        Some(request) => {
            let revision = object.meta.resource_version.clone().unwrap_or_default();
            let server = &state.options.server_name;
            Json(table::table(server, schema, &request, &[object], &revision, true)).into_response()
        }
        None => Json(&*at_version(schema, object)).into_response(),
    }
}

/// `object` as served at `schema`'s version (the URL's): a kind served at
/// several versions with one schema is stored at its storage version, and
/// shown at the version asked for with only `apiVersion` changed.
pub(crate) fn at_version(schema: &KindSchema, object: Arc<DynConfig>) -> Arc<DynConfig> {
    if object.meta.group == schema.group && object.meta.version != schema.version {
        let mut shown = (*object).clone();
        shown.meta.version = schema.version.clone();
        Arc::new(shown)
    } else {
        object
    }
}

/// A list (or, with `watch=true`, a watch) of `schema`'s objects.
pub(crate) async fn list_or_watch(
    state: ApiState,
    schema: Arc<KindSchema>,
    namespace: Option<String>,
    headers: &HeaderMap,
    query: HashMap<String, String>,
) -> Result<Response, ApiError> {
    let filter = Filter::parse(namespace, &query)?;
    let flag = |name: &str| -> Result<bool, ApiError> {
        match query.get(name).map(String::as_str) {
            None | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") | Some("") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "{name} must be true or false, not {other:?}"
            ))),
        }
    };
    let watch = flag("watch")?;
    let bookmarks = flag("allowWatchBookmarks")?;
    let after =
        match query.get("resourceVersion").map(String::as_str) {
            None | Some("") | Some("0") => None,
            Some(text) => Some(text.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("resourceVersion must be a number, not {text:?}"))
            })?),
        };
    let timeout = match query.get("timeoutSeconds").map(String::as_str) {
        None | Some("") => None,
        Some(text) => match text.parse::<u64>() {
            Ok(seconds) if seconds > 0 => Some(std::time::Duration::from_secs(seconds)),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "timeoutSeconds must be a positive number of seconds, not {text:?}"
                )));
            }
        },
    };
    let table = TableRequest::from_headers(headers);
    // A watch's cache is started before the watch's own snapshot, so the
    // cache's window holds every change after the snapshot.
    let cache = if watch && state.options.watch_cache_events > 0 {
        Some(state.watch_caches.of(&state, &schema.id).await?)
    } else {
        None
    };
    let snapshot = state
        .backend
        .snapshot(&schema.id)
        .await
        .map_err(|e| ApiError::from_store(e, None))?;
    if let Some(after) = after
        && after > snapshot.revision
    {
        refuse_future_version(&state, after, snapshot.revision).await?;
    }
    if watch {
        let stream = Stream {
            server: state.options.server_name.clone(),
            schema,
            filter,
            table,
            bookmarks,
            ndjson: wants_ndjson(headers),
        };
        let start = after.unwrap_or(snapshot.revision);
        if let Some((cache, position)) =
            cache.and_then(|cache| cache.position_after(start).map(|position| (cache, position)))
        {
            return Ok(watch_cached(
                state, stream, snapshot, after, timeout, cache, position,
            ));
        }
        // Resuming from before the cache's window: the store's history.
        return watch_kind(state, stream, snapshot, after, timeout).await;
    }
    // Validation on read: what the cache would not hold is not listed.
    let items: Vec<Arc<DynConfig>> = snapshot
        .items
        .iter()
        .filter(|c| filter.keep(c) && (state.admits)(c))
        .cloned()
        .collect();
    let revision = snapshot.revision.to_string();
    if let Some(request) = table {
        let server = &state.options.server_name;
        return Ok(Json(table::table(server, &schema, &request, &items, &revision, true)).into_response());
    }
    let items: Vec<Arc<DynConfig>> = items.into_iter().map(|c| at_version(&schema, c)).collect();
    let items: Vec<&DynConfig> = items.iter().map(|c| &**c).collect();
    Ok(Json(json!({
        "apiVersion": format!("{}/{}", schema.group, schema.version),
        "kind": format!("{}List", schema.kind),
        "metadata": {"resourceVersion": revision},
        "items": items,
    }))
    .into_response())
}

/// Whether the client asks for `application/x-ndjson` rather than
/// Kubernetes' `application/json` stream.
fn wants_ndjson(headers: &HeaderMap) -> bool {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.contains("application/x-ndjson") || !accept.contains("application/json")
}

/// A resume version the store has not reached (a client that remembers
/// another server, or a memory store restarted without `--data-dir`) is
/// refused as Kubernetes does (504, cause `ResourceVersionTooLarge`): a
/// watch from there would silently miss every event up to it. The client
/// relists. (A version too old for the history is 410 from the watch.)
async fn refuse_future_version(state: &ApiState, after: u64, listed: u64) -> Result<(), ApiError> {
    // The list's revision, or the store's if it is further (a backend
    // whose lists report the kind's own last change).
    let current = state
        .backend
        .current_revision()
        .await
        .map_err(|e| ApiError::from_store(e, None))?
        .max(listed);
    if after <= current {
        return Ok(());
    }
    let mut error = ApiError::new(
        StatusCode::GATEWAY_TIMEOUT,
        "Timeout",
        format!(
            "Too large resource version: {after}, current: {current}; list again and watch from the list's resourceVersion"
        ),
    );
    error.details = json!({
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    });
    Err(error)
}

/// How a watch's events are written.
struct Stream {
    /// The program writing the status, named in a `Table`.
    server: String,
    schema: Arc<KindSchema>,
    filter: Filter,
    table: Option<TableRequest>,
    bookmarks: bool,
    ndjson: bool,
}

impl Stream {
    /// One event line: the object as JSON, or as a one-row `Table`.
    fn line(&self, kind: &str, object: &DynConfig) -> Bytes {
        let object = match &self.table {
            Some(request) => {
                let revision = object.meta.resource_version.clone().unwrap_or_default();
                table::table(
                    &self.server,
                    &self.schema,
                    request,
                    &[Arc::new(object.clone())],
                    &revision,
                    true,
                )
            }
            None if object.meta.group == self.schema.group && object.meta.version != self.schema.version => {
                let mut shown = object.clone();
                shown.meta.version = self.schema.version.clone();
                json!(shown)
            }
            None => json!(object),
        };
        event_line(kind, &object)
    }

    /// A `BOOKMARK` at `revision`, when the client allows them.
    fn bookmark(&self, revision: u64) -> Option<Bytes> {
        self.bookmarks.then(|| {
            event_line(
                "BOOKMARK",
                &json!({
                    "apiVersion": format!("{}/{}", self.schema.group, self.schema.version),
                    "kind": self.schema.kind,
                    "metadata": {"resourceVersion": revision.to_string()},
                }),
            )
        })
    }
}

/// A watch served from the kind's shared cache (`watch_cache.rs`): without
/// `after`, every object of `snapshot` as `ADDED`, then the cache's events
/// after the snapshot from `position`; with it, the events after `after`.
/// Ends as [`watch_kind`] does, and with `410 Expired` when the watcher
/// falls behind the cache's window.
fn watch_cached(
    state: ApiState,
    stream: Stream,
    snapshot: pilot_model::Snapshot,
    after: Option<u64>,
    timeout: Option<std::time::Duration>,
    cache: Arc<KindCache>,
    position: u64,
) -> Response {
    let mut initial = Vec::new();
    let start = match after {
        None => {
            for object in snapshot.items.iter().filter(|c| (state.admits)(c)) {
                if stream.filter.keep(object) {
                    initial.push(stream.line("ADDED", object));
                }
            }
            initial.extend(stream.bookmark(snapshot.revision));
            snapshot.revision
        }
        Some(after) => after,
    };
    let content_type = if stream.ndjson {
        "application/x-ndjson"
    } else {
        "application/json"
    };
    let appended = cache.subscribe();
    let pressure = cache.subscribe_pressure();
    let watcher = Watcher {
        stream,
        cache,
        position,
        start,
        written: None,
    };
    let interval = state.options.watch_write_interval;
    let live = futures::stream::unfold(
        Some((watcher, (appended, pressure), state.shutdown.clone())),
        move |state| async move {
            let (mut watcher, (mut appended, mut pressure), mut shutdown) = state?;
            loop {
                // Caught up, it writes at most once per interval: what
                // comes meanwhile goes out together (an event after a
                // quiet interval goes at once). Half a window appended
                // meanwhile ends the wait, so the window never passes it.
                if let Some(written) = watcher.written.take() {
                    let due = written + interval;
                    if tokio::time::Instant::now() < due {
                        pressure.borrow_and_update();
                        tokio::select! {
                            () = tokio::time::sleep_until(due) => {}
                            _ = pressure.changed() => {}
                            () = &mut shutdown => return None,
                        }
                    }
                }
                // Marked seen before looking, so an append after the look
                // wakes the wait below.
                appended.borrow_and_update();
                match watcher.cache.next(watcher.position) {
                    Next::Events { events, more } => {
                        let (chunk, taken) = lines_for(&events, |event| watcher.line(event));
                        watcher.position += taken as u64;
                        let caught_up = !more && taken == events.len();
                        if !chunk.is_empty() {
                            // Behind, it goes on as fast as its client reads.
                            watcher.written = caught_up.then(tokio::time::Instant::now);
                            return Some((chunk, Some((watcher, (appended, pressure), shutdown))));
                        }
                    }
                    Next::Wait => {
                        tokio::select! {
                            changed = appended.changed() => if changed.is_err() { return None },
                            () = &mut shutdown => return None,
                        }
                    }
                    Next::Expired => {
                        let status = ApiError::new(
                            StatusCode::GONE,
                            "Expired",
                            "the watch fell behind the server's watch cache; list and watch again",
                        )
                        .body();
                        return Some((event_line("ERROR", &status), None));
                    }
                    Next::Broken(line) => return Some((line, None)),
                }
            }
        },
    );
    let deadline = async move {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let open = Open::new(state.watches.clone());
    let body = futures::stream::iter(initial)
        .chain(live)
        .take_until(deadline)
        .map(move |line| {
            // Counted as open until the stream is dropped.
            let _ = &open;
            Ok::<_, Infallible>(line)
        });
    ([(header::CONTENT_TYPE, content_type)], Body::from_stream(body)).into_response()
}

/// One watcher of a cache: its filter and form, and where it is.
struct Watcher {
    stream: Stream,
    cache: Arc<KindCache>,
    /// The next event's sequence number in the cache.
    position: u64,
    /// Events up to this revision are in what it was sent first.
    start: u64,
    /// When it last took a chunk of events that left none after it.
    written: Option<tokio::time::Instant>,
}

impl Watcher {
    /// The line this watcher sends for `event` (none: nothing it sees).
    fn line(&self, event: &CachedEvent) -> Option<Bytes> {
        if event.revision <= self.start {
            return None;
        }
        let stream = &self.stream;
        let keep = |config: &DynConfig| stream.filter.keep(config);
        let key = |kind: &'static str| (kind, stream.schema.version.clone(), stream.table);
        match &event.change {
            Change::Progress => stream.bookmarks.then(|| {
                event.line(key("BOOKMARK"), || {
                    stream.bookmark(event.revision).unwrap_or_default()
                })
            }),
            Change::Put { object, previous } => {
                // As Kubernetes does with a selector: an object that stops
                // matching is DELETED, one that starts is ADDED.
                let kind = match (previous.as_deref().map(keep), keep(object)) {
                    (Some(true), true) => "MODIFIED",
                    (_, true) => "ADDED",
                    (Some(true), false) => "DELETED",
                    (_, false) => return None,
                };
                Some(event.line(key(kind), || stream.line(kind, object)))
            }
            Change::Gone { previous } if keep(previous) => Some(event.line(key("DELETED"), || {
                let mut last = (**previous).clone();
                last.meta.resource_version = Some(event.revision.to_string());
                stream.line("DELETED", &last)
            })),
            Change::Gone { .. } => None,
        }
    }
}

/// A watch: without `after`, every current object as `ADDED` then the
/// changes; with it, the changes after that revision. Ends on shutdown, and
/// with an `ERROR` event (410 for history compacted) if the backend's watch
/// breaks; the client watches again from the last version it saw. With
/// `timeout` (`?timeoutSeconds=`, as in Kubernetes) it ends after that long.
/// With bookmarks allowed, the backend's progress reports are `BOOKMARK`s.
async fn watch_kind(
    state: ApiState,
    stream: Stream,
    snapshot: pilot_model::Snapshot,
    after: Option<u64>,
    timeout: Option<std::time::Duration>,
) -> Result<Response, ApiError> {
    let mut known: HashMap<ConfigKey, Arc<DynConfig>> = HashMap::new();
    let mut initial = Vec::new();
    // Validation on read: an object that fails is never shown; a change
    // that makes a shown object fail is its DELETED.
    let admits = Arc::clone(&state.admits);
    let admitted = move |config: &DynConfig| admits(config);
    let items: Vec<&Arc<DynConfig>> = snapshot.items.iter().filter(|c| admitted(c)).collect();
    let start = match after {
        None => {
            for object in items {
                known.insert(object.key(), Arc::clone(object));
                if stream.filter.keep(object) {
                    initial.push(stream.line("ADDED", object));
                }
            }
            initial.extend(stream.bookmark(snapshot.revision));
            snapshot.revision
        }
        Some(after) => {
            // Objects not written since `after` certainly existed then.
            for object in items {
                let version = object
                    .meta
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok());
                if version.is_some_and(|v| v <= after) {
                    known.insert(object.key(), Arc::clone(object));
                }
            }
            after
        }
    };
    let events = state
        .backend
        .watch(&stream.schema.id, start)
        .await
        .map_err(|e| ApiError::from_store(e, None))?;
    let content_type = if stream.ndjson {
        "application/x-ndjson"
    } else {
        "application/json"
    };
    let stream = Arc::new(stream);
    let live = futures::stream::unfold(
        Some((events, known, state.shutdown.clone(), stream, admitted)),
        |state| async move {
            let (mut events, mut known, mut shutdown, stream, admitted) = state?;
            let keep = |config: &DynConfig| stream.filter.keep(config);
            loop {
                let next = tokio::select! {
                    next = events.next() => next,
                    () = &mut shutdown => return None,
                };
                let gone = |last: Arc<DynConfig>, revision: u64| {
                    let mut last = (*last).clone();
                    last.meta.resource_version = Some(revision.to_string());
                    stream.line("DELETED", &last)
                };
                let line = match next {
                    None => return None,
                    Some(Err(error)) => {
                        let status = ApiError::from_store(error, None).body();
                        return Some((event_line("ERROR", &status), None));
                    }
                    Some(Ok(WatchEvent::Progress { revision })) => match stream.bookmark(revision) {
                        Some(line) => line,
                        None => continue,
                    },
                    Some(Ok(WatchEvent::Undecodable(pilot_model::Undecodable { key, revision, .. }))) => {
                        match known.remove(&key) {
                            Some(last) if keep(&last) => gone(last, revision),
                            _ => continue,
                        }
                    }
                    Some(Ok(WatchEvent::Put { config, revision })) if !admitted(&config) => {
                        match known.remove(&config.key()) {
                            Some(last) if keep(&last) => gone(last, revision),
                            _ => continue,
                        }
                    }
                    Some(Ok(WatchEvent::Put { config, .. })) => {
                        let was = known
                            .insert(config.key(), Arc::clone(&config))
                            .map(|last| keep(&last));
                        // As Kubernetes does with a selector: an object that
                        // stops matching is DELETED, one that starts is ADDED.
                        let kind = match (was, keep(&config)) {
                            (Some(true), true) => "MODIFIED",
                            (_, true) => "ADDED",
                            (Some(true), false) => "DELETED",
                            (_, false) => continue,
                        };
                        stream.line(kind, &config)
                    }
                    Some(Ok(WatchEvent::Delete { key, revision })) => match known.remove(&key) {
                        Some(last) if !keep(&last) => continue,
                        Some(last) => gone(last, revision),
                        None => event_line(
                            "DELETED",
                            &json!({
                                "apiVersion": format!("{}/{}", stream.schema.group, stream.schema.version),
                                "kind": stream.schema.kind,
                                "metadata": {
                                    "name": key.name,
                                    "namespace": key.namespace,
                                    "resourceVersion": revision.to_string(),
                                },
                            }),
                        ),
                    },
                };
                return Some((line, Some((events, known, shutdown, stream, admitted))));
            }
        },
    );
    let deadline = async move {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let open = Open::new(state.watches.clone());
    let body = futures::stream::iter(initial)
        .chain(live)
        .take_until(deadline)
        .map(move |line| {
            // Counted as open until the stream is dropped.
            let _ = &open;
            Ok::<_, Infallible>(line)
        });
    Ok(([(header::CONTENT_TYPE, content_type)], Body::from_stream(body)).into_response())
}

/// A watch counted as open (by the [`WatchObserver`], if any) until
/// dropped.
struct Open(Option<Arc<dyn WatchObserver>>);

impl Open {
    fn new(observer: Option<Arc<dyn WatchObserver>>) -> Self {
        if let Some(observer) = &observer {
            observer.opened();
        }
        Open(observer)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(observer) = &self.0 {
            observer.closed();
        }
    }
}

pub(crate) fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
