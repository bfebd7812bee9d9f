//! `DeleteOptions`, as kube-apiserver reads them for a delete and a
//! deletecollection: from the body (what kubectl and the Kubernetes
//! clients send) and from the query (`dryRun`, `propagationPolicy`,
//! `orphanDependents`, `gracePeriodSeconds`, and pilot's
//! `resourceVersion`).
//!
//! - `preconditions` (`uid`, `resourceVersion`): the delete is made only
//!   if the object is still that one; a deletecollection applies them to
//!   every object it deletes, as kube-apiserver does (one that does not
//!   match fails the request with 409, after the objects before it were
//!   deleted: a deletecollection is not atomic).
//! - `dryRun: ["All"]`: every check made, nothing deleted.
//! - `propagationPolicy` (`Orphan`, `Background`, `Foreground`) and
//!   `orphanDependents`: validated as kube-apiserver validates them; pilot's
//!   objects have no dependents, so every policy deletes the object at once.
//! - `gracePeriodSeconds`: a number; objects without a graceful deletion
//!   are deleted at once whatever it says.

use std::collections::HashMap;

use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::ApiError;

/// The options of one delete or deletecollection request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DeleteOptions {
    /// `preconditions.resourceVersion` (or `?resourceVersion=`).
    pub resource_version: Option<String>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `dryRun: ["All"]` in the body (the query's is in
    /// [`crate::options::WriteOptions`]).
    pub dry_run: bool,
}

impl DeleteOptions {
    /// The options of a request with this `query` and `body` (empty or a
    /// `DeleteOptions` object): 400 when the body is not one, 422 as
    /// kube-apiserver words it when a value is not supported.
    pub(crate) fn parse(query: &HashMap<String, String>, body: &[u8]) -> Result<Self, ApiError> {
        let body = if body.iter().all(u8::is_ascii_whitespace) {
            Value::Object(Default::default())
        } else {
            serde_json::from_slice::<Value>(body)
                .ok()
                .filter(Value::is_object)
                .ok_or_else(|| ApiError::bad_request("the body of a delete must be a DeleteOptions object"))?
        };
        let text = |pointer: &str| {
            body.pointer(pointer)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        let mut errors = Vec::new();
        let dry_run = match body.get("dryRun") {
            None | Some(Value::Null) => false,
            Some(Value::Array(values)) if values.is_empty() => false,
            Some(Value::Array(values)) if values.iter().all(|v| v == "All") => true,
            Some(other) => {
                errors.push(format!(
                    "dryRun: Unsupported value: {other}: supported values: \"All\""
                ));
                false
            }
        };
        let policy = text("/propagationPolicy").or_else(|| query.get("propagationPolicy").cloned());
        if let Some(policy) = &policy
            && !matches!(policy.as_str(), "Orphan" | "Background" | "Foreground")
        {
            errors.push(format!(
                "propagationPolicy: Unsupported value: {policy:?}: supported values: \"Foreground\", \"Background\", \"Orphan\""
            ));
        }
        let orphan = match body.get("orphanDependents") {
            Some(Value::Bool(orphan)) => Some(*orphan),
            Some(Value::Null) | None => match query.get("orphanDependents").map(String::as_str) {
                None | Some("") => None,
                Some("true") => Some(true),
                Some("false") => Some(false),
                Some(other) => {
                    return Err(ApiError::bad_request(format!(
                        "orphanDependents must be true or false, not {other:?}"
                    )));
                }
            },
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "orphanDependents must be true or false, not {other}"
                )));
            }
        };
        if orphan.is_some() && policy.is_some() {
            errors.push(
                "propagationPolicy: Invalid value: \"orphanDependents\": orphanDependents and deletionPropagation cannot be both set"
                    .to_string(),
            );
        }
        let grace = body
            .get("gracePeriodSeconds")
            .filter(|v| !v.is_null())
            .map(|v| v.as_i64().is_some())
            .or_else(|| {
                query
                    .get("gracePeriodSeconds")
                    .filter(|v| !v.is_empty())
                    .map(|v| v.parse::<i64>().is_ok())
            });
        if grace == Some(false) {
            return Err(ApiError::bad_request(
                "gracePeriodSeconds must be a number of seconds",
            ));
        }
        if !errors.is_empty() {
            return Err(ApiError {
                details: json!({
                    "group": "meta.k8s.io",
                    "kind": "DeleteOptions",
                    "causes": errors.iter().map(|e| json!({"message": e})).collect::<Vec<_>>(),
                }),
                ..ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("DeleteOptions.meta.k8s.io \"\" is invalid: {}", errors.join(", ")),
                )
            });
        }
        let resource_version = query
            .get("resourceVersion")
            .filter(|v| !v.is_empty())
            .cloned()
            .or_else(|| text("/preconditions/resourceVersion"));
        Ok(DeleteOptions {
            resource_version,
            uid: text("/preconditions/uid"),
            dry_run,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &[(&str, &str)], body: &str) -> Result<DeleteOptions, ApiError> {
        let query = query
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        DeleteOptions::parse(&query, body.as_bytes())
    }

    #[test]
    fn preconditions_and_dry_run_are_read_from_the_body() {
        let options = parse(
            &[],
            r#"{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"u","resourceVersion":"7"},
                "dryRun":["All"],"propagationPolicy":"Background","gracePeriodSeconds":0}"#,
        )
        .unwrap();
        assert_eq!(
            options,
            DeleteOptions {
                resource_version: Some("7".into()),
                uid: Some("u".into()),
                dry_run: true
            }
        );
        assert_eq!(parse(&[], "").unwrap(), DeleteOptions::default());
        assert_eq!(
            parse(&[("resourceVersion", "9"), ("propagationPolicy", "Orphan")], "")
                .unwrap()
                .resource_version
                .as_deref(),
            Some("9")
        );
    }

    #[test]
    fn unsupported_values_are_refused_as_kube_apiserver_refuses_them() {
        let error = parse(&[], r#"{"propagationPolicy":"Later"}"#).unwrap_err();
        assert_eq!((error.code.as_u16(), error.reason), (422, "Invalid"));
        assert!(
            error
                .message
                .contains("propagationPolicy: Unsupported value: \"Later\""),
            "{}",
            error.message
        );
        let error = parse(
            &[("orphanDependents", "true")],
            r#"{"propagationPolicy":"Orphan"}"#,
        )
        .unwrap_err();
        assert!(error.message.contains("cannot be both set"), "{}", error.message);
        let error = parse(&[], r#"{"dryRun":["Some"]}"#).unwrap_err();
        assert_eq!(error.code.as_u16(), 422);
        assert_eq!(parse(&[], "[1]").unwrap_err().code.as_u16(), 400);
        assert_eq!(
            parse(&[("gracePeriodSeconds", "soon")], "")
                .unwrap_err()
                .code
                .as_u16(),
            400
        );
    }
}
