//! Server-side apply: `PATCH` with `application/apply-patch+yaml` (or its
//! JSON form), as kube-apiserver serves it for a custom resource.
//!
//! The body is the manager's whole intent for the object (YAML or JSON).
//! `fieldManager` is required. The object is created when absent. A field
//! another manager owns with a different value is a conflict: 409 naming
//! every field and its manager, unless `force=true` takes them. Fields the
//! manager applied before and leaves out now are removed when no one else
//! owns them. The result goes through the same decoding, validation,
//! `dryRun` and optimistic concurrency as a `PUT`.

use std::sync::Arc;

use axum::http::StatusCode;
use pilot_model::{ConfigKey, DynConfig, KindSchema, document};
use serde_json::{Value, json};

use crate::ApiError;
use crate::body;
use crate::managed_fields::{self, Conflict};
use crate::options::WriteOptions;
use crate::patch::ATTEMPTS;
use crate::resources::{Ownership, document_of, now, write_create, write_update};
use crate::server::ApiState;

/// Applies the configuration in `bytes` to `key` for `options`' manager:
/// 201 with the object when it was created, 200 when it was updated.
pub(crate) async fn apply(
    state: &ApiState,
    schema: &KindSchema,
    key: &ConfigKey,
    options: &WriteOptions,
    bytes: &[u8],
    warnings: &mut Vec<String>,
) -> Result<(StatusCode, Arc<DynConfig>), ApiError> {
    let Some(manager) = options.field_manager.as_deref() else {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "fieldManager: Required value: is required for apply patch",
        ));
    };
    let config = configuration(schema, key, bytes)?;
    let pinned = config
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
        .map(str::to_string);
    let mut attempt = 0;
    loop {
        attempt += 1;
        warnings.clear();
        let stored = state
            .backend
            .get(key)
            .await
            .map_err(|e| ApiError::from_store(e, None))?;
        let live = match &stored {
            Some(stored) => {
                let mut document = document_of(state, stored)?;
                if let Some(map) = document.as_object_mut() {
                    map.remove("status");
                }
                Some(document)
            }
            None => None,
        };
        let previous = stored
            .as_ref()
            .map(|s| s.meta.managed_fields.as_slice())
            .unwrap_or_default();
        let applied = managed_fields::apply(live.as_ref(), previous, &config, manager, options.force, &now())
            .map_err(|conflicts| conflict_error(key, &conflicts))?;
        let mut object = body::decode_value(
            state,
            schema,
            &key.namespace,
            Some(&key.name),
            applied.document,
            None,
            options.field_validation,
            warnings,
        )?;
        // Unknown fields dropped by the decoding are no one's.
        let decoded = document_of(state, &object)?;
        object.meta.managed_fields = managed_fields::retain_set(&applied.managed_fields, &decoded);
        if let Some(version) = &pinned {
            object.meta.resource_version = Some(version.clone());
        }
        let result = match stored {
            None if pinned.is_some() => {
                return Err(ApiError::from_store(
                    pilot_model::StoreError::NotFound { key: key.clone() },
                    None,
                ));
            }
            None => write_create(state, object, options, Ownership::Applied)
                .await
                .map(|stored| (StatusCode::CREATED, stored)),
            Some(_) => write_update(state, object, options, Ownership::Applied)
                .await
                .map(|stored| (StatusCode::OK, stored)),
        };
        match result {
            Err(error)
                if matches!(error.reason, "Conflict" | "AlreadyExists")
                    && pinned.is_none()
                    && attempt < ATTEMPTS =>
            {
                continue;
            }
            other => return other,
        }
    }
}

/// The apply configuration: one YAML or JSON object of the URL's kind,
/// named as the URL (its name and namespace filled from it when left out).
fn configuration(schema: &KindSchema, key: &ConfigKey, bytes: &[u8]) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not UTF-8: {e}")))?;
    let mut values = document::parse_values("body", text).map_err(|errors| {
        let list: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
        ApiError::bad_request(format!("the body is not YAML or JSON: {}", list.join("; ")))
    })?;
    if values.len() != 1 || !values[0].is_object() {
        return Err(ApiError::bad_request(
            "an apply configuration must be one object with apiVersion, kind and metadata.name",
        ));
    }
    let mut config = values.remove(0);
    let api_version = format!("{}/{}", schema.group, schema.version);
    match config.get("apiVersion").and_then(Value::as_str) {
        Some(sent) if sent == api_version => {}
        sent => {
            return Err(ApiError::bad_request(format!(
                "apiVersion must be {api_version:?} for {}, not {}",
                schema.plural,
                sent.map_or("missing".to_string(), |s| format!("{s:?}"))
            )));
        }
    }
    match config.get("kind").and_then(Value::as_str) {
        Some(kind) if kind == schema.kind => {}
        sent => {
            return Err(ApiError::bad_request(format!(
                "kind must be {:?}, not {}",
                schema.kind,
                sent.map_or("missing".to_string(), |s| format!("{s:?}"))
            )));
        }
    }
    if !config.get("metadata").is_some_and(Value::is_object) {
        config["metadata"] = json!({});
    }
    for (field, expected) in [("name", &key.name), ("namespace", &key.namespace)] {
        match config["metadata"].get(field).and_then(Value::as_str) {
            None | Some("") => config["metadata"][field] = json!(expected),
            Some(sent) if sent == expected => {}
            Some(sent) => {
                return Err(ApiError::bad_request(format!(
                    "metadata.{field} {sent:?} does not match the URL's {field} {expected:?}"
                )));
            }
        }
    }
    Ok(config)
}

/// 409 as kube-apiserver answers an apply conflict: the message kubectl
/// prints, and a `FieldManagerConflict` cause per field.
fn conflict_error(key: &ConfigKey, conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", c.manager()),
                "field": managed_fields::display(&c.path),
            })
        })
        .collect();
    ApiError {
        details: json!({"name": key.name, "namespace": key.namespace, "causes": causes}),
        ..ApiError::new(
            StatusCode::CONFLICT,
            "Conflict",
            managed_fields::conflict_message(conflicts),
        )
    }
}
