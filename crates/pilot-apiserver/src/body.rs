//! Request bodies: read within the size limit, read as JSON when no
//! `Content-Type` is sent (as Kubernetes does), and decoded into a validated
//! object of the URL's kind.

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use bytes::Bytes;
use http_body_util::BodyExt;
use pilot_model::document::{self, ParseOptions};
use pilot_model::{ConfigKey, DynConfig, KindRegistry, KindSchema};
use serde_json::{Value, json};

use crate::ApiError;
use crate::options::FieldValidation;
use crate::server::ApiState;
use crate::strict;

/// Metadata the server sets, accepted in a body and ignored, so that an
/// object exported from a cluster (`kubectl get -o yaml`) can be created or
/// replaced as it is.
const SERVER_SET_METADATA: &[&str] = &[
    "uid",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// The JSON type ObjectMeta gives `field` of [`SERVER_SET_METADATA`]: a
/// value of another type is refused, as kube-apiserver fails to decode it,
/// though the value itself is ignored.
fn server_set_type_ok(field: &str, value: &Value) -> bool {
    match field {
        "generation" | "deletionGracePeriodSeconds" => value.is_null() || value.is_i64(),
        "managedFields" => value.is_null() || value.is_array(),
        _ => value.is_null() || value.is_string(),
    }
}

/// The media type of the request body (`application/json` when none is
/// sent), lower case and without parameters.
pub(crate) fn media_type(headers: &HeaderMap) -> String {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = content_type.split(';').next().unwrap_or("").trim();
    if media.is_empty() {
        "application/json".to_string()
    } else {
        media.to_ascii_lowercase()
    }
}

/// The body of a create or replace, if it is JSON (or has no
/// `Content-Type`) and not larger than the limit.
pub(crate) async fn read_json(state: &ApiState, headers: &HeaderMap, body: Body) -> Result<Bytes, ApiError> {
    let media = media_type(headers);
    if media != "application/json" {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body must be application/json, not {media:?}; pilotctl converts YAML files for you"),
        ));
    }
    read_limited(state, headers, body).await
}

/// The body, if not larger than the limit.
pub(crate) async fn read_limited(
    state: &ApiState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Bytes, ApiError> {
    let limit = state.options.max_body_bytes;
    let too_large = || {
        let setting = match &state.options.max_body_bytes_setting {
            Some(setting) => format!(" ({setting})"),
            None => String::new(),
        };
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLarge",
            format!("the body is larger than the server's limit of {limit} bytes{setting}"),
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
        Err(error) if timed_out(&*error) => Err(ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "Timeout",
            format!("cannot read the body: {error}"),
        )),
        Err(error) => Err(ApiError::bad_request(format!("cannot read the body: {error}"))),
    }
}

/// Whether `error`, or any error under it, is an I/O time-out: how a layer
/// that puts a deadline on bodies fails one that missed it.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(error) = next {
        if error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        next = error.source();
    }
    false
}

/// The body as a JSON value: 400 when it is not JSON.
pub(crate) fn json_value(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))
}

/// The body as a validated object of `schema` in `namespace` (named `name`
/// when given): 400 when it is not a JSON object or names another kind,
/// namespace or name than the URL, 422 with every field error otherwise.
/// Unknown and duplicate fields are refused (400, as kube-apiserver's
/// strict decoding), dropped or dropped with a warning (added to
/// `warnings`) as `validation` says; of a duplicate field the last value
/// is kept.
pub(crate) fn decode(
    state: &ApiState,
    schema: &KindSchema,
    namespace: &str,
    name: Option<&str>,
    bytes: &[u8],
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<DynConfig, ApiError> {
    let value = json_value(bytes)?;
    decode_value(
        state,
        schema,
        namespace,
        name,
        value,
        Some(bytes),
        validation,
        warnings,
    )
}

/// [`decode`] of a value already read (a patched object); `text` is the
/// body as sent, for line and column in errors, when the value is it.
#[allow(
    clippy::too_many_arguments,
    reason = "one decoding entry point for every write path; each argument is a fact of the request"
)]
pub(crate) fn decode_value(
    state: &ApiState,
    schema: &KindSchema,
    namespace: &str,
    name: Option<&str>,
    value: Value,
    text: Option<&[u8]>,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<DynConfig, ApiError> {
    decode_in(
        &state.registry,
        schema,
        namespace,
        name,
        value,
        text,
        validation,
        warnings,
    )
}

/// [`decode_value`] against the kinds of `registry`: what the validating
/// admission webhook runs (`admission.rs`), so that it refuses what the
/// REST API refuses, with the same messages.
#[allow(
    clippy::too_many_arguments,
    reason = "one decoding entry point for every write path; each argument is a fact of the request"
)]
pub(crate) fn decode_in(
    registry: &KindRegistry,
    schema: &KindSchema,
    namespace: &str,
    name: Option<&str>,
    mut value: Value,
    text: Option<&[u8]>,
    validation: FieldValidation,
    warnings: &mut Vec<String>,
) -> Result<DynConfig, ApiError> {
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body must be a JSON object with apiVersion, kind, metadata and spec",
        ));
    }
    let field = |pointer: &str| value.pointer(pointer).and_then(Value::as_str).map(str::to_string);
    if let Some(kind) = field("/kind")
        && kind != schema.kind
    {
        return Err(ApiError::bad_request(format!(
            "the body is a {kind} but the URL is for {}",
            schema.kind
        )));
    }
    // Two groups may have kinds of one name (Istio's Gateway and the
    // Gateway API's): the body's group is the URL's.
    if let Some(api_version) = field("/apiVersion") {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", &api_version));
        if group != schema.group || !schema.serves(version) {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({api_version}) does not match the URL's ({}/{})",
                schema.group, schema.version
            )));
        }
    }
    if let Some(metadata) = value.get("metadata").and_then(Value::as_object) {
        for field in SERVER_SET_METADATA {
            if let Some(sent) = metadata.get(*field)
                && !server_set_type_ok(field, sent)
            {
                return Err(ApiError::bad_request(format!(
                    "metadata.{field}: {sent} is not of the type ObjectMeta gives it"
                )));
            }
        }
    }
    // A cluster-scoped kind's object has none: one written is dropped, as
    // kube-apiserver drops it.
    if let Some(body_namespace) = field("/metadata/namespace")
        && !body_namespace.is_empty()
        && !schema.cluster_scoped
        && body_namespace != namespace
    {
        return Err(ApiError::bad_request(format!(
            "metadata.namespace {body_namespace:?} does not match the URL's namespace {namespace:?}"
        )));
    }
    let body_name = field("/metadata/name");
    if let (Some(name), Some(body_name)) = (name, &body_name)
        && body_name != name
    {
        return Err(ApiError::bad_request(format!(
            "metadata.name {body_name:?} does not match the URL's name {name:?}"
        )));
    }
    // Finalizers are refused whatever fieldValidation says: dropping one
    // would delete at once an object its writer meant to outlive a delete.
    if value
        .pointer("/metadata/finalizers")
        .is_some_and(|f| f.as_array().is_none_or(|list| !list.is_empty()))
    {
        let key = ConfigKey::new(
            &schema.id,
            namespace,
            body_name.as_deref().or(name).unwrap_or_default(),
        );
        let message =
            "finalizers are not supported: pilot deletes an object at once; remove metadata.finalizers";
        return Err(ApiError {
            details: json!({
                "kind": key.kind, "namespace": key.namespace, "name": key.name,
                "causes": [{"reason": "FieldValueForbidden", "field": "metadata.finalizers", "message": message}],
            }),
            ..ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                format!("{key} is invalid: metadata.finalizers: {message}"),
            )
        });
    }
    let mut stripped = false;
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        // An empty list of finalizers is none.
        if metadata.get("finalizers").is_some() {
            metadata.remove("finalizers");
            stripped = true;
        }
        for field in SERVER_SET_METADATA {
            stripped |= metadata.remove(*field).is_some();
        }
        // An empty resourceVersion is none (a client's zero value).
        if metadata.get("resourceVersion").and_then(Value::as_str) == Some("") {
            metadata.remove("resourceVersion");
            stripped = true;
        }
        if metadata.get("creationTimestamp").is_some_and(Value::is_null) {
            metadata.remove("creationTimestamp");
            stripped = true;
        }
    }
    let mut text = match text {
        Some(text) if !stripped => std::str::from_utf8(text)
            .map_err(|e| ApiError::bad_request(e.to_string()))?
            .to_string(),
        _ => serde_json::to_string_pretty(&value).unwrap_or_default(),
    };
    let options = ParseOptions {
        default_namespace: namespace.to_string(),
        ..Default::default()
    };
    let mut dropped = Vec::new();
    let mut duplicates = Vec::new();
    let errors = loop {
        match document::parse_reporting("body", &text, registry, &options) {
            Ok(mut parsed) if parsed.configs.len() == 1 => {
                if validation == FieldValidation::Warn {
                    warnings.extend(duplicates.iter().map(|path| format!("duplicate field {path:?}")));
                    warnings.extend(dropped.iter().map(|path| format!("unknown field {path:?}")));
                }
                // What the kind accepts but will not do: in every mode.
                warnings.extend(
                    parsed
                        .warnings
                        .iter()
                        .map(|w| format!("{}: {}", w.path, w.message)),
                );
                return Ok(parsed.configs.remove(0));
            }
            Ok(_) => return Err(ApiError::bad_request("the body must hold exactly one object")),
            Err(errors) if validation == FieldValidation::Strict => {
                if let Some(error) = strict::decoding_error(schema, namespace, &errors) {
                    return Err(error);
                }
                break errors;
            }
            // Warn and Ignore drop the unknown fields and read the rest
            // again (each pass may find more, deeper or in other objects);
            // a field given twice keeps its last value, as the body read
            // as JSON has it.
            Err(errors) if dropped.len() < MAX_DROPPED => {
                let before = (dropped.len(), duplicates.len());
                for error in &errors.0 {
                    if strict::is_unknown(error) {
                        if remove_path(&mut value, &error.path) {
                            dropped.push(error.path.clone());
                        }
                    } else if strict::is_duplicate(error) && !duplicates.contains(&error.path) {
                        duplicates.push(error.path.clone());
                    }
                }
                if (dropped.len(), duplicates.len()) == before {
                    break errors;
                }
                text = serde_json::to_string_pretty(&value).unwrap_or_default();
            }
            Err(errors) => break errors,
        }
    };
    let key = ConfigKey::new(
        &schema.id,
        namespace,
        body_name.as_deref().or(name).unwrap_or_default(),
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
            // An unknown field as kube-apiserver names it (`unknown field
            // "spec.x"`), with pilot's suggestion after it.
            if let Some(rest) = e.message.strip_prefix("unknown field `")
                && !e.path.is_empty()
            {
                let hint = rest
                    .split_once(';')
                    .map(|(_, hint)| format!(";{hint}"))
                    .unwrap_or_default();
                format!("unknown field {:?}{hint}", e.path)
            } else if e.path.is_empty() {
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

/// How many unknown fields Warn and Ignore drop from one body at most.
const MAX_DROPPED: usize = 256;

/// Removes the field at `path` (`spec.route[1].wieght`, as field errors
/// name it) from `value`; false when there is none.
fn remove_path(value: &mut Value, path: &str) -> bool {
    let mut segments = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        let name_end = rest.find('[').unwrap_or(rest.len());
        if name_end > 0 {
            segments.push(rest[..name_end].to_string());
        }
        rest = &rest[name_end..];
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else { return false };
            segments.push(inner[..end].to_string());
            rest = &inner[end + 1..];
        }
        if !rest.is_empty() {
            return false;
        }
    }
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut node = value;
    for segment in parents {
        node = match node {
            Value::Object(map) => match map.get_mut(segment) {
                Some(child) => child,
                None => return false,
            },
            Value::Array(items) => match segment.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(child) => child,
                None => return false,
            },
            _ => return false,
        };
    }
    node.as_object_mut().is_some_and(|map| map.remove(last).is_some())
}
