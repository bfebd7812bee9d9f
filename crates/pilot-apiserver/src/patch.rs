//! `PATCH .../{name}`, as kube-apiserver patches a custom resource: JSON
//! merge patch (`application/merge-patch+json`) and JSON patch
//! (`application/json-patch+json`) and server-side apply
//! (`application/apply-patch+yaml`, see [`crate::apply`]); strategic merge
//! patch is 415, as for every custom resource.
//!
//! The patched object goes through the same decoding, validation and
//! optimistic concurrency as a PUT: a patch that sets
//! `metadata.resourceVersion` applies only to that version; one that does
//! not is applied to the current object, again if another write came
//! between the read and the write.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use pilot_model::{ConfigKey, DynConfig};
use serde_json::Value;

use crate::ApiError;
use crate::apply;
use crate::body;
use crate::options::WriteOptions;
use crate::resources::{Ownership, current, with_warnings, write_update};
use crate::server::ApiState;

/// How many times a patch without a resourceVersion is applied again when
/// another write came between its read and its write.
pub(crate) const ATTEMPTS: usize = 5;

/// `PATCH /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`.
pub(crate) async fn patch(
    State(state): State<ApiState>,
    Path(params): crate::resources::Params,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
    body: Body,
) -> Result<Response, ApiError> {
    let (schema, namespace) = crate::resources::scoped(&state, &params)?;
    crate::resources::check_namespace(&namespace)?;
    let name = crate::resources::name_of(&params);
    let key = ConfigKey::new(&schema.id, &namespace, &name);
    let mut warnings = Vec::new();
    let result = async {
        let options = WriteOptions::parse(&query, &headers)?;
        let media = body::media_type(&headers);
        let kind = match media.as_str() {
            "application/merge-patch+json" => PatchKind::Merge,
            "application/json-patch+json" => PatchKind::Json,
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                let bytes = body::read_limited(&state, &headers, body).await?;
                return apply::apply(&state, &schema, &key, &options, &bytes, &mut warnings).await;
            }
            "application/strategic-merge-patch+json" => {
                return Err(unsupported(format!(
                    "strategic merge patch is not supported for {}; use application/merge-patch+json or application/json-patch+json (kubectl patch --type merge or --type json)",
                    schema.plural
                )));
            }
            other => {
                return Err(unsupported(format!(
                    "the body must be application/merge-patch+json or application/json-patch+json, not {other:?}"
                )));
            }
        };
        if options.force {
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "force: Forbidden: may not be specified for non-apply patch",
            ));
        }
        let bytes = body::read_limited(&state, &headers, body).await?;
        let patch = body::json_value(&bytes)?;
        let pinned = match kind {
            PatchKind::Merge => patch
                .pointer("/metadata/resourceVersion")
                .is_some_and(|v| !v.is_null()),
            _ => patch
                .as_array()
                .is_some_and(|ops| ops.iter().any(|op| op["path"] == "/metadata/resourceVersion")),
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            warnings.clear();
            let stored = current(&state, &key).await?;
            let patched = apply_patch(kind, &stored, &patch)?;
            let config = body::decode_value(
                &state,
                &schema,
                &namespace,
                Some(&name),
                patched,
                None,
                options.field_validation,
                &mut warnings,
            )?;
            match write_update(&state, config, &options, Ownership::Update).await {
                Err(error) if error.reason == "Conflict" && !pinned && attempt < ATTEMPTS => continue,
                Err(error) => return Err(error),
                Ok(stored) => return Ok((StatusCode::OK, stored)),
            }
        }
    };
    match result.await {
        Ok((status, stored)) => Ok(with_warnings(
            (status, Json(&*crate::list::at_version(&schema, stored))).into_response(),
            &warnings,
        )),
        Err(error) => Err(error.for_resource(&schema)),
    }
}

/// The kinds of patch served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PatchKind {
    Merge,
    Json,
}

/// `stored` with `patch` applied, as a document (its `status` left out:
/// a user's write does not set it).
fn apply_patch(kind: PatchKind, stored: &DynConfig, patch: &Value) -> Result<Value, ApiError> {
    let mut document = serde_json::to_value(stored)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))?;
    if let Some(object) = document.as_object_mut() {
        object.remove("status");
    }
    match kind {
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            json_patch::merge(&mut document, patch);
        }
        PatchKind::Json => {
            let operations: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("the body is not a JSON patch: {e}")))?;
            json_patch::patch(&mut document, &operations).map_err(|e| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "Invalid",
                    format!("the JSON patch cannot be applied: {e}"),
                )
            })?;
        }
    }
    Ok(document)
}

pub(crate) fn unsupported(message: String) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "UnsupportedMediaType",
        message,
    )
}
