//! The REST configuration API, Kubernetes-style:
//!
//! - `GET/PUT/DELETE /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`
//! - `GET/POST /apis/{group}/{version}/namespaces/{ns}/{plural}` (list, create)
//! - `GET /apis/{group}/{version}/{plural}` (list in all namespaces)
//!
//! Lists take `labelSelector`, and `watch=true` (with an optional
//! `resourceVersion`) streams events as newline-delimited JSON. Bodies are
//! the document form (`apiVersion`, `kind`, `metadata`, `spec`) as JSON;
//! errors are `Status` bodies ([`super::ApiError`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use http_body_util::BodyExt;
use pilot_model::document::{self, ParseOptions};
use pilot_model::{ConfigKey, DynConfig, KindSchema, WatchEvent};
use serde_json::{Value, json};

use super::selector::Selector;
use crate::api::ApiError;
use crate::state::AppState;

type Query_ = Query<HashMap<String, String>>;

/// `GET /apis/{group}/{version}/{plural}`: list or watch in every namespace.
pub(crate) async fn list_all(
    State(state): State<AppState>,
    Path((group, version, plural)): Path<(String, String, String)>,
    Query(query): Query_,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    list_or_watch(state, schema, None, query).await
}

/// `GET /apis/{group}/{version}/namespaces/{ns}/{plural}`: list or watch.
pub(crate) async fn list_namespaced(
    State(state): State<AppState>,
    Path((group, version, namespace, plural)): Path<(String, String, String, String)>,
    Query(query): Query_,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    pilot_model::dns1123_label(&namespace)
        .map_err(|message| ApiError::bad_request(format!("namespace {namespace:?}: {message}")))?;
    list_or_watch(state, schema, Some(namespace), query).await
}

/// `GET .../{name}`.
pub(crate) async fn get_object(
    State(state): State<AppState>,
    Path((group, version, namespace, plural, name)): Path<(String, String, String, String, String)>,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    let key = ConfigKey::new(&schema.kind, namespace, name);
    match state.store.get(&key).await {
        Ok(Some(object)) => Ok(Json(&*object).into_response()),
        Ok(None) => Err(ApiError::from_store(
            pilot_model::StoreError::NotFound { key },
            None,
        )),
        Err(error) => Err(ApiError::from_store(error, None)),
    }
}

/// `POST /apis/{group}/{version}/namespaces/{ns}/{plural}`: 201 with the
/// stored object.
pub(crate) async fn create(
    State(state): State<AppState>,
    Path((group, version, namespace, plural)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    let bytes = read_body(&state, &headers, body).await?;
    let mut config = decode(&state, &schema, &namespace, None, &bytes)?;
    config.meta.resource_version = None;
    let key = config.key();
    match state.store.create(config).await {
        Ok(stored) => {
            tracing::info!(key = %key, version = ?stored.meta.resource_version, "created");
            Ok((StatusCode::CREATED, Json(&*stored)).into_response())
        }
        Err(error) => Err(store_error(&state, &key, error).await),
    }
}

/// `PUT .../{name}`: replaces the object; the body's
/// `metadata.resourceVersion` must be the current one.
pub(crate) async fn replace(
    State(state): State<AppState>,
    Path((group, version, namespace, plural, name)): Path<(String, String, String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    let bytes = read_body(&state, &headers, body).await?;
    let config = decode(&state, &schema, &namespace, Some(&name), &bytes)?;
    let key = config.key();
    match state.store.update(config).await {
        Ok(stored) => {
            tracing::info!(key = %key, version = ?stored.meta.resource_version, "replaced");
            Ok(Json(&*stored).into_response())
        }
        Err(error) => Err(store_error(&state, &key, error).await),
    }
}

/// `DELETE .../{name}`, only if still at `?resourceVersion=` when given.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path((group, version, namespace, plural, name)): Path<(String, String, String, String, String)>,
    Query(query): Query_,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    let key = ConfigKey::new(&schema.kind, namespace, name);
    let version = query.get("resourceVersion").filter(|v| !v.is_empty());
    if let Some(text) = version
        && text.parse::<u64>().is_err()
    {
        return Err(ApiError::bad_request(format!(
            "resourceVersion must be a number, not {text:?}"
        )));
    }
    match state.store.delete(&key, version.map(String::as_str)).await {
        Ok(()) => {
            tracing::info!(key = %key, "deleted");
            Ok(Json(json!({
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Success",
                "code": 200,
                "details": {"kind": key.kind, "namespace": key.namespace, "name": key.name},
            }))
            .into_response())
        }
        Err(error) => Err(store_error(&state, &key, error).await),
    }
}

/// The kind served at `group/version/plural`, or a 404 naming what is
/// served.
fn resolve(state: &AppState, group: &str, version: &str, plural: &str) -> Result<Arc<KindSchema>, ApiError> {
    match state.registry.by_plural(Some(group), plural) {
        Some(schema) if schema.version == version => Ok(schema),
        _ => {
            let served: Vec<String> = state
                .registry
                .kinds()
                .iter()
                .filter_map(|k| state.registry.get(k))
                .map(|s| format!("/apis/{}/{}/{}", s.group, s.version, s.plural))
                .collect();
            Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "NotFound",
                format!(
                    "the server does not serve {plural} in {group}/{version}; it serves {}",
                    served.join(", ")
                ),
            ))
        }
    }
}

/// The body, if it is JSON and not larger than the limit.
async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!(
                "the body must be application/json, not {:?}; pilotctl converts YAML files for you",
                content_type
            ),
        ));
    }
    let limit = state.max_body_bytes;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("the body is larger than the server's limit of {limit} bytes (--max-body-bytes)"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large());
    }
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(too_large()),
        Err(error) if crate::serve::body::timed_out(&*error) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "Timeout",
            format!("cannot read the body: {error}"),
        )),
        Err(error) => Err(ApiError::bad_request(format!("cannot read the body: {error}"))),
    }
}

/// The body as a validated object of `schema` in `namespace` (named `name`
/// when given): 400 when it is not a JSON object or names another kind,
/// namespace or name than the URL, 422 with every field error otherwise.
fn decode(
    state: &AppState,
    schema: &KindSchema,
    namespace: &str,
    name: Option<&str>,
    bytes: &[u8],
) -> Result<DynConfig, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object with apiVersion, kind, metadata and spec",
        ));
    }
    let field = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
    if let Some(kind) = field("/kind")
        && kind != schema.kind
    {
        return Err(ApiError::bad_request(format!(
            "the body is a {kind} but the URL is for {}",
            schema.kind
        )));
    }
    if let Some(body_namespace) = field("/metadata/namespace")
        && !body_namespace.is_empty()
        && body_namespace != namespace
    {
        return Err(ApiError::bad_request(format!(
            "metadata.namespace {body_namespace:?} does not match the URL's namespace {namespace:?}"
        )));
    }
    if let (Some(name), Some(body_name)) = (name, field("/metadata/name"))
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "metadata.name {body_name:?} does not match the URL's name {name:?}"
        )));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let options = ParseOptions {
        default_namespace: namespace.to_string(),
        ..Default::default()
    };
    match document::parse_with("body", text, &state.registry, &options) {
        Ok(mut configs) if configs.len() == 1 => Ok(configs.remove(0)),
        Ok(_) => Err(ApiError::bad_request("the body must hold exactly one object")),
        Err(errors) => {
            let key = ConfigKey::new(
                &schema.kind,
                namespace,
                field("/metadata/name").or(name).unwrap_or_default(),
            );
            let causes: Vec<Value> = errors
                .0
                .iter()
                .map(|e| json!({"field": e.path, "message": e.message, "line": e.line, "column": e.column}))
                .collect();
            let list: Vec<String> = errors
                .0
                .iter()
                .map(|e| {
                    if e.path.is_empty() {
                        e.message.clone()
                    } else {
                        format!("{}: {}", e.path, e.message)
                    }
                })
                .collect();
            Err(ApiError {
                details: json!({
                    "kind": key.kind, "namespace": key.namespace, "name": key.name, "causes": causes,
                }),
                ..ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("{key} is invalid: {}", list.join("; ")),
                )
            })
        }
    }
}

/// A store error as a response, with the current version for a conflict
/// on create.
async fn store_error(state: &AppState, key: &ConfigKey, error: pilot_model::StoreError) -> ApiError {
    let current = match &error {
        // The backend refused the create: its version is the one to
        // report (the Controller's cache may not have caught up with it).
        pilot_model::StoreError::AlreadyExists { .. } => state
            .backend
            .get(key)
            .await
            .ok()
            .flatten()
            .and_then(|c| c.meta.resource_version.clone()),
        _ => None,
    };
    if !matches!(
        error,
        pilot_model::StoreError::Invalid { .. } | pilot_model::StoreError::AlreadyExists { .. }
    ) {
        tracing::debug!(key = %key, %error, "write refused");
    }
    ApiError::from_store(error, current)
}

async fn list_or_watch(
    state: AppState,
    schema: Arc<KindSchema>,
    namespace: Option<String>,
    query: HashMap<String, String>,
) -> Result<Response, ApiError> {
    let selector = Selector::parse(query.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(ApiError::bad_request)?;
    let watch = match query.get("watch").map(String::as_str) {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") | Some("") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "watch must be true or false, not {other:?}"
            )));
        }
    };
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
    let keep = {
        let namespace = namespace.clone();
        move |config: &DynConfig| {
            namespace.as_deref().is_none_or(|ns| ns == config.meta.namespace)
                && selector.matches(&config.meta.labels)
        }
    };
    let snapshot = state
        .backend
        .snapshot(&schema.kind)
        .await
        .map_err(|e| ApiError::from_store(e, None))?;
    if let Some(after) = after
        && after > snapshot.revision
    {
        refuse_future_version(&state, after, snapshot.revision).await?;
    }
    if watch {
        return watch_kind(state, schema, snapshot, after, timeout, keep).await;
    }
    // Validation on read: what the cache would not hold is not listed.
    let items: Vec<&DynConfig> = snapshot
        .items
        .iter()
        .map(|c| &**c)
        .filter(|c| keep(c) && state.controller.admits(c).is_ok())
        .collect();
    Ok(Json(json!({
        "apiVersion": format!("{}/{}", schema.group, schema.version),
        "kind": format!("{}List", schema.kind),
        "metadata": {"resourceVersion": snapshot.revision.to_string()},
        "items": items,
    }))
    .into_response())
}

/// A resume version the store has not reached (a client that remembers
/// another server, or a memory store restarted without `--data-dir`) is
/// refused as Kubernetes does (504, cause `ResourceVersionTooLarge`): a
/// watch from there would silently miss every event up to it. The client
/// relists. (A version too old for the history is 410 from the watch.)
async fn refuse_future_version(state: &AppState, after: u64, listed: u64) -> Result<(), ApiError> {
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

/// A watch: without `after`, every current object as `ADDED` then the
/// changes; with it, the changes after that revision. Ends on shutdown, and
/// with an `ERROR` event (410 for history compacted) if the backend's watch
/// breaks; the client watches again from the last version it saw. With
/// `timeout` (`?timeoutSeconds=`, as in Kubernetes) it ends after that long.
async fn watch_kind(
    state: AppState,
    schema: Arc<KindSchema>,
    snapshot: pilot_model::Snapshot,
    after: Option<u64>,
    timeout: Option<std::time::Duration>,
    keep: impl Fn(&DynConfig) -> bool + Send + 'static,
) -> Result<Response, ApiError> {
    let mut known: HashMap<ConfigKey, Arc<DynConfig>> = HashMap::new();
    let mut initial = Vec::new();
    // Validation on read: an object that fails is never shown; a change
    // that makes a shown object fail is its DELETED.
    let controller = Arc::clone(&state.controller);
    let admitted = move |config: &DynConfig| controller.admits(config).is_ok();
    let items: Vec<&Arc<DynConfig>> = snapshot.items.iter().filter(|c| admitted(c)).collect();
    let start = match after {
        None => {
            for object in items {
                known.insert(object.key(), Arc::clone(object));
                if keep(object) {
                    initial.push(event_line("ADDED", &json!(&**object)));
                }
            }
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
        .watch(&schema.kind, start)
        .await
        .map_err(|e| ApiError::from_store(e, None))?;
    let live = futures::stream::unfold(
        Some((events, known, state.shutdown.clone(), keep, admitted)),
        |state| async move {
            let (mut events, mut known, mut shutdown, keep, admitted) = state?;
            loop {
                let next = tokio::select! {
                    next = events.next() => next,
                    () = crate::shutdown::closed(&mut shutdown) => return None,
                };
                let line = match next {
                    None => return None,
                    Some(Err(error)) => {
                        let status = ApiError::from_store(error, None).body();
                        return Some((event_line("ERROR", &status), None));
                    }
                    Some(Ok(WatchEvent::Progress { .. })) => continue,
                    Some(Ok(WatchEvent::Undecodable(pilot_model::Undecodable { key, revision, .. }))) => {
                        match known.remove(&key) {
                            Some(last) if keep(&last) => {
                                let mut last = (*last).clone();
                                last.meta.resource_version = Some(revision.to_string());
                                event_line("DELETED", &json!(last))
                            }
                            _ => continue,
                        }
                    }
                    Some(Ok(WatchEvent::Put { config, revision })) if !admitted(&config) => {
                        match known.remove(&config.key()) {
                            Some(last) if keep(&last) => {
                                let mut last = (*last).clone();
                                last.meta.resource_version = Some(revision.to_string());
                                event_line("DELETED", &json!(last))
                            }
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
                        event_line(kind, &json!(&*config))
                    }
                    Some(Ok(WatchEvent::Delete { key, revision })) => {
                        let object = match known.remove(&key) {
                            Some(last) if !keep(&last) => continue,
                            Some(last) => {
                                let mut last = (*last).clone();
                                last.meta.resource_version = Some(revision.to_string());
                                json!(last)
                            }
                            None => json!({
                                "kind": key.kind,
                                "metadata": {
                                    "name": key.name,
                                    "namespace": key.namespace,
                                    "resourceVersion": revision.to_string(),
                                },
                            }),
                        };
                        event_line("DELETED", &object)
                    }
                };
                return Some((line, Some((events, known, shutdown, keep, admitted))));
            }
        },
    );
    let deadline = async move {
        match timeout {
            Some(timeout) => tokio::time::sleep(timeout).await,
            None => std::future::pending().await,
        }
    };
    let open = state.metrics.watch_opened();
    let stream = futures::stream::iter(initial)
        .chain(live)
        .take_until(deadline)
        .map(move |line| {
            // Counted as open until the stream is dropped.
            let _ = &open;
            Ok::<_, Infallible>(line)
        });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        Body::from_stream(stream),
    )
        .into_response())
}

fn event_line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}
