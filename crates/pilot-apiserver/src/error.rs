//! Errors as Kubernetes-style `Status` bodies ([`ApiError`]), what every
//! refusal of the API answers, and what middleware around it (an
//! embedder's authentication, connection limits) can answer in the same
//! form.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pilot_model::{ConfigKey, KindSchema, StoreError};
use serde_json::{Value, json};

/// A failed request: its HTTP status, a machine-readable reason, a message a
/// person can act on, and details (the object, versions, field causes).
/// As a response it is a Kubernetes `Status` body with that HTTP status.
///
/// ```
/// use pilot_apiserver::ApiError;
/// use pilot_apiserver::axum::http::StatusCode;
///
/// let error = ApiError::new(StatusCode::FORBIDDEN, "Forbidden", "this token is read-only");
/// assert_eq!(error.body()["reason"], "Forbidden");
/// assert_eq!(error.body()["code"], 403);
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message} ({code}, {reason})")]
pub struct ApiError {
    /// The HTTP status.
    pub(crate) code: StatusCode,
    /// Kubernetes' reason word, e.g. `AlreadyExists`, `Conflict`, `Invalid`.
    pub(crate) reason: &'static str,
    /// What went wrong and what to do.
    pub(crate) message: String,
    /// `details` of the Status body.
    pub(crate) details: Value,
}

impl ApiError {
    /// An error without details: `reason` is Kubernetes' word for it
    /// (`Unauthorized`, `Forbidden`, `NotFound`, ...).
    pub fn new(code: StatusCode, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: Value::Null,
        }
    }

    /// 400: the request cannot be read.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "BadRequest", message)
    }

    /// The error as about `schema`'s resource, as Kubernetes reports it:
    /// `details.kind` is the plural resource name (the kind for `Invalid`,
    /// which kubectl prints as `The RouteRule "x" is invalid`) and
    /// `details.group` its group.
    pub(crate) fn for_resource(mut self, schema: &KindSchema) -> Self {
        if self.details.is_null() {
            self.details = json!({});
        }
        let kind = if self.reason == "Invalid" {
            &schema.kind
        } else {
            &schema.plural
        };
        if let Some(details) = self.details.as_object_mut() {
            details.insert("kind".into(), json!(kind));
            details.insert("group".into(), json!(schema.group));
        }
        self
    }

    /// 405: the path does not take this method.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// The HTTP status.
    pub fn code(&self) -> StatusCode {
        self.code
    }

    /// Kubernetes' reason word, e.g. `AlreadyExists`, `Conflict`, `Invalid`.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// What went wrong and what to do.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The `Status` body as sent.
    pub fn body(&self) -> Value {
        let mut body = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code.as_u16(),
        });
        if !self.details.is_null() {
            body["details"] = self.details.clone();
        }
        body
    }

    /// A store error as the API reports it. `current` is the stored
    /// object's resource version, looked up by the caller for
    /// `AlreadyExists`.
    ///
    /// A backend failure's body says what failed in the user's terms (the
    /// error's `Display`); its details (gRPC status, transport errors) go
    /// to the log only.
    pub(crate) fn from_store(error: StoreError, current: Option<String>) -> Self {
        if error.backend().is_some() {
            tracing::warn!(error = %error.details(), "a request failed in the configuration store");
        }
        match error {
            StoreError::NotFound { key } => ApiError {
                details: key_details(&key),
                ..Self::new(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("{} not found", describe(&key)),
                )
            },
            StoreError::AlreadyExists { key } => {
                let mut details = key_details(&key);
                let message = match &current {
                    Some(version) => {
                        details["currentResourceVersion"] = json!(version);
                        format!("{} already exists at resourceVersion {version}", describe(&key))
                    }
                    None => format!("{} already exists", describe(&key)),
                };
                ApiError {
                    details,
                    ..Self::new(StatusCode::CONFLICT, "AlreadyExists", message)
                }
            }
            StoreError::Conflict {
                key,
                expected,
                actual,
            } => {
                let mut details = key_details(&key);
                details["currentResourceVersion"] = json!(actual);
                details["sentResourceVersion"] = json!(expected);
                let sent = match &expected {
                    Some(version) => format!("you sent {version}"),
                    None => "you sent none".to_string(),
                };
                ApiError {
                    details,
                    ..Self::new(
                        StatusCode::CONFLICT,
                        "Conflict",
                        format!(
                            "stale resourceVersion for {}: {sent}, current is {actual}",
                            describe(&key)
                        ),
                    )
                }
            }
            StoreError::Invalid { key, errors } => {
                let mut details = key_details(&key);
                details["causes"] = errors
                    .iter()
                    .map(|e| json!({"field": e.path, "message": e.message}))
                    .collect();
                let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
                ApiError {
                    details,
                    ..Self::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "Invalid",
                        format!("{} is invalid: {}", describe(&key), list.join("; ")),
                    )
                }
            }
            StoreError::UnknownKind { kind } => {
                Self::new(StatusCode::NOT_FOUND, "NotFound", format!("unknown kind {kind}"))
            }
            StoreError::Compacted { .. } => Self::new(StatusCode::GONE, "Expired", error.to_string()),
            StoreError::Indeterminate { .. } => Self::new(
                StatusCode::GATEWAY_TIMEOUT,
                "Timeout",
                format!("{error}; GET the object to see whether it was, then retry if not"),
            ),
            StoreError::Unavailable { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                error.to_string(),
            ),
            other => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                other.to_string(),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.code, Json(self.body())).into_response()
    }
}

/// `RouteRule default/reviews-default`.
fn describe(key: &ConfigKey) -> String {
    key.to_string()
}

fn key_details(key: &ConfigKey) -> Value {
    json!({"kind": key.kind, "namespace": key.namespace, "name": key.name})
}
