//! The fake API server's HTTP side: paths and verbs to state operations,
//! `Status` objects for failures, and streaming watch bodies.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Either, Full};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::record::ApiRequest;
use super::state::{Failure, Fields, Resource, State, WATCH_BUFFER, Watcher, event_line, id};
use super::{admission, discovery};

/// What the fake answers with: a whole JSON body, or a watch stream.
pub(crate) type FakeBody = Either<Full<Bytes>, WatchBody>;

/// A watch response: newline-separated JSON events until the watch closes.
pub(crate) struct WatchBody {
    events: mpsc::Receiver<Bytes>,
}

impl Body for WatchBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.events
            .poll_recv(cx)
            .map(|event| event.map(|bytes| Ok(Frame::data(bytes))))
    }
}

/// Answers one request.
pub(crate) async fn handle<B>(state: Arc<Mutex<State>>, request: Request<B>) -> Response<FakeBody>
where
    B: Body,
    B::Error: std::fmt::Display,
{
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            return failure(&Failure::new(
                400,
                "BadRequest",
                format!("unreadable body: {error}"),
            ));
        }
    };
    let query = Query::parse(parts.uri.query().unwrap_or_default());
    let content_type = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let request = ApiRequest::new(
        bearer(&parts.headers),
        &parts.method,
        parts.uri.path(),
        matches!(query.get("watch"), Some("true" | "1")),
    );
    // Recorded before authentication and admission, as the API server's
    // audit sees it: a write a webhook refuses was still authorized.
    lock(&state).requests.insert(request.clone());
    {
        let mut tokens = lock(&state);
        match super::tokens::intercept(&mut tokens.tokens, &parts, &body) {
            Some(Ok((code, object))) => return json_response(code, &object),
            Some(Err(refused)) => return failure(&refused),
            None => {}
        }
    }
    let dry_run = match admission::dry_run(&parts.method, query.get("dryRun"), &body) {
        Ok(dry_run) => dry_run,
        Err(failure) => return self::failure(&failure),
    };
    // Admission webhooks are called before the lock is taken.
    let body = match admission::admit(
        &state,
        &parts.method,
        parts.uri.path(),
        &content_type,
        dry_run,
        body,
    )
    .await
    {
        Ok(body) => body,
        Err(failure) => return self::failure(&failure),
    };
    let mut state = lock(&state);
    // A dry run is made on a copy: checked, answered, forgotten.
    let mut scratch = dry_run.then(|| state.scratch());
    let answer = route(
        scratch.as_mut().unwrap_or(&mut state),
        &parts.method,
        parts.uri.path(),
        &query,
        &content_type,
        &body,
    );
    // A patch that creates the object is authorized as a create too (the
    // API server checks `create` before an apply makes a new object).
    if parts.method == Method::PATCH && matches!(answer, Ok(Answer::Object(201, _))) {
        state.requests.insert(ApiRequest {
            verb: "create".into(),
            ..request
        });
    }
    match answer {
        Ok(Answer::Object(code, object)) => json_response(code, &object),
        Ok(Answer::Watch(events)) => {
            let mut response = Response::new(Either::Right(WatchBody { events }));
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            response
        }
        Err(failure) => self::failure(&failure),
    }
}

fn lock(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

/// The bearer token of a request's `Authorization` header.
fn bearer(headers: &http::HeaderMap) -> Option<String> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim().to_string())
}

enum Answer {
    Object(u16, Value),
    Watch(mpsc::Receiver<Bytes>),
}

/// `/api/v1/...` or `/apis/<group>/<version>/...`, then
/// `[namespaces/<ns>/]<plural>[/<name>]`.
pub(crate) struct Target {
    pub(crate) resource: Resource,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
    /// `/status` after the name.
    pub(crate) status: bool,
}

fn route(
    state: &mut State,
    method: &Method,
    path: &str,
    query: &Query,
    content_type: &str,
    body: &[u8],
) -> Result<Answer, Failure> {
    if *method == Method::GET
        && let Some(answer) = discovery::answer(state, path)
    {
        return Ok(Answer::Object(200, answer));
    }
    let target = target(state, path)?;
    let resource = &target.resource;
    let namespace = target.namespace.as_deref().unwrap_or_default();
    if state.writes_refused && *method != Method::GET {
        return Err(Failure::new(
            403,
            "Forbidden",
            format!(
                "{}.{} is forbidden: the fake API server refuses writes for now",
                resource.plural, resource.group
            ),
        ));
    }
    if query.get("labelSelector").is_some() {
        return Err(Failure::new(
            400,
            "BadRequest",
            "the fake API server does not implement label selectors",
        ));
    }
    let fields = Fields::parse(query.get("fieldSelector").unwrap_or_default(), resource)?;
    if target.status {
        return match (method, target.name.as_deref()) {
            (&Method::GET, Some(name)) => Ok(Answer::Object(200, state.get(resource, namespace, name)?)),
            (&Method::PUT, Some(name)) => {
                let object = object_in(body, &target)?;
                same_name(&object, name)?;
                Ok(Answer::Object(
                    200,
                    state.replace_status(resource, namespace, object)?,
                ))
            }
            _ => Err(Failure::new(
                405,
                "MethodNotAllowed",
                format!("the fake API server does not implement {method} on {path}"),
            )),
        };
    }
    match (method, target.name.as_deref()) {
        (&Method::GET, None) if query.get("watch").is_some_and(|w| w == "true" || w == "1") => {
            watch(state, &target, query, fields)
        }
        (&Method::GET, None) => {
            let (mut items, revision) = state.list(resource, target.namespace.as_deref());
            items.retain(|object| fields.matches(object));
            Ok(Answer::Object(
                200,
                json!({
                    "apiVersion": resource.api_version(), "kind": format!("{}List", resource.kind),
                    "metadata": {"resourceVersion": revision.to_string()}, "items": items,
                }),
            ))
        }
        (&Method::GET, Some(name)) => Ok(Answer::Object(200, state.get(resource, namespace, name)?)),
        (&Method::POST, None) => {
            let object = object_in(body, &target)?;
            Ok(Answer::Object(201, state.create(resource, namespace, object)?))
        }
        (&Method::PUT, Some(name)) => {
            let object = object_in(body, &target)?;
            same_name(&object, name)?;
            Ok(Answer::Object(200, state.replace(resource, namespace, object)?))
        }
        (&Method::PATCH, Some(name)) => {
            if !content_type.starts_with("application/apply-patch") {
                return Err(Failure::new(
                    415,
                    "UnsupportedMediaType",
                    format!("the fake API server only implements server-side apply, not {content_type:?}"),
                ));
            }
            if query.get("fieldManager").is_none_or(str::is_empty) {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    "PATCH with apply requires a fieldManager",
                ));
            }
            let object = object_in(body, &target)?;
            same_name(&object, name)?;
            // An apply that creates is answered 201 Created, as the API
            // server answers it.
            let created = state.get(resource, namespace, name).is_err();
            let applied = state.apply(resource, namespace, object)?;
            Ok(Answer::Object(if created { 201 } else { 200 }, applied))
        }
        (&Method::DELETE, Some(name)) => {
            let options: Value = if body.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(body)
                    .map_err(|e| Failure::new(400, "BadRequest", format!("DeleteOptions: {e}")))?
            };
            let precondition = options["preconditions"]["resourceVersion"].as_str();
            Ok(Answer::Object(
                200,
                state.delete(resource, namespace, name, precondition)?,
            ))
        }
        _ => Err(Failure::new(
            405,
            "MethodNotAllowed",
            format!("{method} is not allowed on {path}"),
        )),
    }
}

pub(crate) fn target(state: &State, path: &str) -> Result<Target, Failure> {
    let not_found = || {
        Failure::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    };
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found()),
    };
    let (namespace, plural, name, status) = match rest {
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 1 => (Some(*ns), *plural, tail.first(), false),
        ["namespaces", ns, plural, name, "status"] => (Some(*ns), *plural, Some(name), true),
        [plural] => (None, *plural, None, false),
        [plural, name] => (None, *plural, Some(name), false),
        [plural, name, "status"] => (None, *plural, Some(name), true),
        _ => return Err(not_found()),
    };
    let resource = state
        .resource(&id(group, version, plural))
        .ok_or_else(not_found)?;
    if namespace.is_some() && !resource.namespaced {
        return Err(not_found());
    }
    if namespace.is_none() && resource.namespaced && name.is_some() {
        return Err(not_found());
    }
    if status && !resource.status {
        return Err(not_found());
    }
    Ok(Target {
        resource,
        namespace: namespace.map(str::to_string),
        name: name.map(|n| n.to_string()),
        status,
    })
}

fn watch(state: &mut State, target: &Target, query: &Query, fields: Fields) -> Result<Answer, Failure> {
    if state.watches_refused {
        return Err(Failure::new(
            503,
            "ServiceUnavailable",
            "the fake API server refuses watches for now",
        ));
    }
    let resource = &target.resource;
    let key = id(&resource.group, &resource.version, &resource.plural);
    let from = query.get("resourceVersion").unwrap_or_default();
    let replay = if from.is_empty() || from == "0" {
        // Start at the most recent state: every object as ADDED first.
        let (items, _) = state.list(resource, target.namespace.as_deref());
        items
            .iter()
            .filter(|object| fields.matches(object))
            .map(|object| event_line("ADDED", object))
            .collect()
    } else {
        let after: u64 = from.parse().map_err(|_| {
            Failure::new(
                400,
                "BadRequest",
                format!("resourceVersion {from:?} is not a valid resource version"),
            )
        })?;
        if after > state.revision {
            return Err(Failure::new(
                504,
                "Timeout",
                format!("Too large resource version: {after}, current: {}", state.revision),
            ));
        }
        match state.replay(&key, target.namespace.as_deref(), &fields, after) {
            Some(replay) => replay,
            None => {
                // As the API server does: 200, then an ERROR event with 410.
                state.expired_answers += 1;
                let gone = Failure::new(
                    410,
                    "Expired",
                    format!("too old resource version: {after} ({})", state.oldest),
                );
                let (sender, events) = mpsc::channel(1);
                let _ = sender.try_send(event_line("ERROR", &gone.status()));
                return Ok(Answer::Watch(events));
            }
        }
    };
    let (sender, events) = mpsc::channel(WATCH_BUFFER + replay.len());
    for line in replay {
        let _ = sender.try_send(line);
    }
    state.watchers.push(Watcher {
        resource: key,
        namespace: target.namespace.clone(),
        fields,
        bookmarks: query.get("allowWatchBookmarks").is_some_and(|b| b == "true"),
        sender,
    });
    Ok(Answer::Watch(events))
}

/// The request body as an object in the request's namespace.
pub(crate) fn object_in(body: &[u8], target: &Target) -> Result<Value, Failure> {
    let mut object: Value = serde_json::from_slice(body)
        .map_err(|e| Failure::new(400, "BadRequest", format!("the body is not a JSON object: {e}")))?;
    if !object.is_object() || !object["metadata"].is_object() {
        return Err(Failure::new(
            400,
            "BadRequest",
            "the body is not an object with metadata",
        ));
    }
    if let Some(namespace) = &target.namespace {
        match object["metadata"]["namespace"].as_str() {
            Some(ns) if ns != namespace => {
                return Err(Failure::new(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            _ => object["metadata"]["namespace"] = json!(namespace),
        }
    }
    Ok(object)
}

fn same_name(object: &Value, name: &str) -> Result<(), Failure> {
    if object["metadata"]["name"].as_str() == Some(name) {
        Ok(())
    } else {
        Err(Failure::new(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        ))
    }
}

fn json_response(code: u16, value: &Value) -> Response<FakeBody> {
    let body = Full::new(Bytes::from(serde_json::to_vec(value).unwrap_or_default()));
    let mut response = Response::new(Either::Left(body));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn failure(failure: &Failure) -> Response<FakeBody> {
    json_response(failure.code, &failure.status())
}

/// Query parameters, percent-decoded.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Self {
        Query(
            query
                .split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                    (decode(key), decode(value))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
