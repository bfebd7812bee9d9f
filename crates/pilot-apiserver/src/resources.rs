//! The object routes of the REST configuration API, as kube-apiserver
//! serves a custom resource:
//!
//! - `GET/PUT/PATCH/DELETE /apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`
//! - `GET/POST/DELETE /apis/{group}/{version}/namespaces/{ns}/{plural}`
//!   (list or watch, create, delete a collection)
//! - `GET /apis/{group}/{version}/{plural}` (list or watch in all namespaces)
//! - a cluster-scoped kind's (a GatewayClass) without `namespaces/{ns}`:
//!   `GET/PUT/PATCH/DELETE /apis/{group}/{version}/{plural}/{name}` and
//!   `GET/POST/DELETE /apis/{group}/{version}/{plural}`; each kind is
//!   served at its own scope's paths only (the other's are 404, as
//!   kube-apiserver answers)
//!
//! Writes take `dryRun=All` (every check made, nothing stored, nothing
//! pushed). Bodies are the document form (`apiVersion`, `kind`,
//! `metadata`, `spec`) as JSON; errors are `Status` bodies
//! ([`crate::ApiError`]) whose `details.kind` is the resource.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use pilot_model::{ConfigKey, DynConfig, KindSchema, StoreError};
use serde_json::{Value, json};

use crate::ApiError;
use crate::body;
use crate::delete_options::DeleteOptions;
use crate::list::{self, Filter};
use crate::managed_fields;
use crate::options::WriteOptions;
use crate::server::ApiState;
use crate::unchanged;

type Query_ = Query<HashMap<String, String>>;
/// The path's parameters: `group`, `version`, `plural`, and `namespace`
/// and `name` where the route has them.
pub(crate) type Params = Path<HashMap<String, String>>;

/// The kind a path names and the namespace of its objects there: empty
/// for a cluster-scoped kind, whose paths have no `namespaces/{ns}`. A
/// kind named at the other scope's path is 404, as kube-apiserver answers
/// (but a write to a namespaced kind's list across namespaces, a path
/// that takes GET only, is 405: [`at_kind`]).
pub(crate) fn scoped(
    state: &ApiState,
    params: &HashMap<String, String>,
) -> Result<(Arc<KindSchema>, String), ApiError> {
    let param = |name: &str| params.get(name).map(String::as_str).unwrap_or_default();
    let schema = resolve(state, param("group"), param("version"), param("plural"))?;
    let (scope, at) = match (params.get("namespace"), schema.cluster_scoped) {
        (Some(namespace), false) => return Ok((schema, namespace.clone())),
        (None, true) => return Ok((schema, String::new())),
        (Some(_), true) => ("cluster-scoped", ""),
        (None, false) => ("namespaced", "namespaces/{namespace}/"),
    };
    Err(ApiError::new(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!(
            "{} is {scope}: it is served at /apis/{}/{}/{at}{}",
            schema.plural,
            schema.group,
            param("version"),
            schema.plural
        ),
    ))
}

/// A namespace that is not a DNS-1123 label: 400 (where the API reads by
/// it: lists, watches, patches; a get of one is 404).
pub(crate) fn check_namespace(namespace: &str) -> Result<(), ApiError> {
    if namespace.is_empty() {
        return Ok(());
    }
    pilot_model::dns1123_label(namespace)
        .map_err(|message| ApiError::bad_request(format!("namespace {namespace:?}: {message}")))
}

/// `/apis/{group}/{version}/{plural}`: a namespaced kind's list across
/// namespaces (GET only), or a cluster-scoped kind's collection (GET,
/// POST, DELETE); another method is 405 with the kind's `Allow`.
pub(crate) async fn at_kind(
    method: Method,
    state: State<ApiState>,
    params: Params,
    headers: HeaderMap,
    query: Query_,
    body: Body,
) -> Response {
    let param = |name: &str| params.get(name).cloned().unwrap_or_default();
    let cluster_scoped = resolve(&state, &param("group"), &param("version"), &param("plural"))
        .is_ok_and(|schema| schema.cluster_scoped);
    match method {
        Method::GET | Method::HEAD => {
            let path = Path((param("group"), param("version"), param("plural")));
            list_all(state, path, headers, query).await.into_response()
        }
        Method::POST if cluster_scoped => create(state, params, headers, query, body).await.into_response(),
        Method::DELETE if cluster_scoped => delete_collection(state, params, headers, query, body)
            .await
            .into_response(),
        _ => (
            [(
                axum::http::header::ALLOW,
                if cluster_scoped {
                    "GET,HEAD,POST,DELETE"
                } else {
                    "GET,HEAD"
                },
            )],
            ApiError::method_not_allowed(),
        )
            .into_response(),
    }
}

/// The path's `name`.
pub(crate) fn name_of(params: &HashMap<String, String>) -> String {
    params.get("name").cloned().unwrap_or_default()
}

/// `GET /apis/{group}/{version}/{plural}`: list or watch in every namespace.
pub(crate) async fn list_all(
    State(state): State<ApiState>,
    Path((group, version, plural)): Path<(String, String, String)>,
    headers: HeaderMap,
    Query(query): Query_,
) -> Result<Response, ApiError> {
    let schema = resolve(&state, &group, &version, &plural)?;
    list::list_or_watch(state, Arc::clone(&schema), None, &headers, query)
        .await
        .map_err(|e| e.for_resource(&schema))
}

/// `GET /apis/{group}/{version}/namespaces/{ns}/{plural}`: list or watch.
pub(crate) async fn list_namespaced(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
    Query(query): Query_,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    check_namespace(&namespace)?;
    list::list_or_watch(state, Arc::clone(&schema), Some(namespace), &headers, query)
        .await
        .map_err(|e| e.for_resource(&schema))
}

/// `GET .../{name}`.
pub(crate) async fn get_object(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    let key = ConfigKey::new(&schema.id, namespace, name_of(&params));
    let object = current(&state, &key).await.map_err(|e| e.for_resource(&schema))?;
    Ok(list::one_object(&state, &schema, &headers, object))
}

/// `POST /apis/{group}/{version}/namespaces/{ns}/{plural}`: 201 with the
/// stored object.
pub(crate) async fn create(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
    Query(query): Query_,
    body: Body,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    let mut warnings = Vec::new();
    let result = async {
        let options = WriteOptions::parse(&query, &headers)?;
        let bytes = body::read_json(&state, &headers, body).await?;
        let config = body::decode(
            &state,
            &schema,
            &namespace,
            None,
            &bytes,
            options.field_validation,
            &mut warnings,
        )?;
        write_create(&state, config, &options, Ownership::Update).await
    };
    match result.await {
        Ok(stored) => Ok(with_warnings(
            (StatusCode::CREATED, Json(&*list::at_version(&schema, stored))).into_response(),
            &warnings,
        )),
        Err(error) => Err(error.for_resource(&schema)),
    }
}

/// `PUT .../{name}`: replaces the object; the body's
/// `metadata.resourceVersion` must be the current one.
pub(crate) async fn replace(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
    Query(query): Query_,
    body: Body,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    let name = name_of(&params);
    let mut warnings = Vec::new();
    let result = async {
        let options = WriteOptions::parse(&query, &headers)?;
        let bytes = body::read_json(&state, &headers, body).await?;
        let config = body::decode(
            &state,
            &schema,
            &namespace,
            Some(&name),
            &bytes,
            options.field_validation,
            &mut warnings,
        )?;
        write_update(&state, config, &options, Ownership::Update).await
    };
    match result.await {
        Ok(stored) => Ok(with_warnings(
            Json(&*list::at_version(&schema, stored)).into_response(),
            &warnings,
        )),
        Err(error) => Err(error.for_resource(&schema)),
    }
}

/// `DELETE .../{name}`, only if still at `?resourceVersion=` (or the
/// body's `preconditions.resourceVersion`) when given.
pub(crate) async fn delete(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
    Query(query): Query_,
    body: Body,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    let key = ConfigKey::new(&schema.id, namespace, name_of(&params));
    let result = async {
        let (options, delete) = delete_options(&state, &headers, &query, body).await?;
        delete_one(&state, &key, &delete, &options).await
    };
    match result.await {
        Ok(()) => Ok(Json(json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "code": 200,
            "details": {"name": key.name, "group": schema.group, "kind": schema.plural},
        }))
        .into_response()),
        Err(error) => Err(error.for_resource(&schema)),
    }
}

/// `DELETE /apis/{group}/{version}/namespaces/{ns}/{plural}`: deletes every
/// object of the namespace the label and field selectors select, each as
/// a `DELETE` of it with the request's `DeleteOptions` (preconditions,
/// dryRun) would, as kube-apiserver does; answers the list of what was
/// deleted. An object already gone is passed over; any other refusal (a
/// precondition an object does not meet) fails the request, the objects
/// before it deleted.
pub(crate) async fn delete_collection(
    State(state): State<ApiState>,
    Path(params): Params,
    headers: HeaderMap,
    Query(query): Query_,
    body: Body,
) -> Result<Response, ApiError> {
    let (schema, namespace) = scoped(&state, &params)?;
    let result = async {
        let (options, delete) = delete_options(&state, &headers, &query, body).await?;
        let filter = Filter::parse(Some(namespace.clone()), &query)?;
        let objects = state
            .store
            .list(&schema.id, Some(&namespace))
            .await
            .map_err(|e| ApiError::from_store(e, None))?;
        let mut deleted = Vec::new();
        for object in objects.into_iter().filter(|o| filter.keep(o)) {
            match delete_one(&state, &object.key(), &delete, &options).await {
                Ok(()) => deleted.push(object),
                Err(error) if error.code == StatusCode::NOT_FOUND => {}
                Err(error) => return Err(error),
            }
        }
        Ok(deleted)
    };
    match result.await {
        Ok(deleted) => {
            let deleted: Vec<Arc<DynConfig>> = deleted
                .into_iter()
                .map(|c| list::at_version(&schema, c))
                .collect();
            let items: Vec<&DynConfig> = deleted.iter().map(|c| &**c).collect();
            Ok(Json(json!({
                "apiVersion": format!("{}/{}", schema.group, schema.version),
                "kind": format!("{}List", schema.kind),
                "metadata": {},
                "items": items,
            }))
            .into_response())
        }
        Err(error) => Err(error.for_resource(&schema)),
    }
}

/// Whose fields a write records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// An `Update` by the options' manager: the fields it changed become its.
    Update,
    /// A server-side apply, whose managed fields the object carries.
    Applied,
}

/// Creates `config`, or with `dryRun` checks everything a create checks
/// and answers the object as it would be stored.
pub(crate) async fn write_create(
    state: &ApiState,
    mut config: DynConfig,
    options: &WriteOptions,
    ownership: Ownership,
) -> Result<Arc<DynConfig>, ApiError> {
    config.meta.resource_version = None;
    config.meta.uid = Some(new_uid());
    config.meta.generation = Some(1);
    if ownership == Ownership::Update {
        config.meta.managed_fields = Vec::new();
        let document = document_of(state, &config)?;
        config.meta.managed_fields =
            managed_fields::record_update(&[], None, &document, &options.manager, &now());
    }
    let key = config.key();
    if options.dry_run {
        let mut config = state
            .registry
            .prepare(config)
            .map_err(|e| ApiError::from_store(e, None))?;
        if state
            .backend
            .get(&key)
            .await
            .map_err(|e| ApiError::from_store(e, None))?
            .is_some()
        {
            return Err(store_error(state, &key, StoreError::AlreadyExists { key: key.clone() }).await);
        }
        config.meta.creation_timestamp = Some(pilot_model::now_seconds());
        config.meta.status = None;
        return Ok(Arc::new(config));
    }
    match state.store.create(config).await {
        Ok(stored) => {
            tracing::info!(key = %key, version = ?stored.meta.resource_version, "created");
            Ok(stored)
        }
        Err(error) => Err(store_error(state, &key, error).await),
    }
}

/// Replaces the stored object with `config` (whose resource version must
/// be the current one), or with `dryRun` checks everything and answers the
/// object as it would be stored. A write that changes nothing is not made:
/// the stored object is answered as it is ([`unchanged`]).
pub(crate) async fn write_update(
    state: &ApiState,
    mut config: DynConfig,
    options: &WriteOptions,
    ownership: Ownership,
) -> Result<Arc<DynConfig>, ApiError> {
    let key = config.key();
    let stored = current_in_backend(state, &key).await;
    // uid, generation and managed fields follow the stored object; the
    // version check of the write makes sure it is the one being replaced.
    if let Ok(stored) = &stored {
        if ownership == Ownership::Update {
            config.meta.managed_fields = Vec::new();
            let old = document_of(state, stored)?;
            let new = document_of(state, &config)?;
            config.meta.managed_fields = managed_fields::record_update(
                &stored.meta.managed_fields,
                Some(&old),
                &new,
                &options.manager,
                &now(),
            );
        }
        config.meta.uid = Some(stored.meta.uid.clone().unwrap_or_else(new_uid));
        // The spec as it would be stored (defaults and normal form), so
        // that a write of the same spec in another spelling neither moves
        // the generation nor counts as a change. Invalid: the write below
        // reports it.
        let prepared = state.registry.prepare(config.clone()).ok();
        let spec_changed = prepared.as_ref().is_none_or(|p| p.spec != stored.spec);
        let generation = stored.meta.generation.unwrap_or(1);
        config.meta.generation = Some(if spec_changed { generation + 1 } else { generation });
        if let Some(mut prepared) = prepared {
            prepared.meta.generation = config.meta.generation;
            if unchanged::unchanged(&prepared, stored) {
                tracing::debug!(key = %key, "unchanged: not written");
                return Ok(Arc::clone(stored));
            }
        }
    }
    if options.dry_run {
        let mut config = state
            .registry
            .prepare(config)
            .map_err(|e| ApiError::from_store(e, None))?;
        let stored = stored?;
        check_version(&key, config.meta.resource_version.as_deref(), &stored)?;
        config.meta.creation_timestamp = stored.meta.creation_timestamp;
        config.meta.status = stored.meta.status.clone();
        return Ok(Arc::new(config));
    }
    match state.store.update(config).await {
        Ok(stored) => {
            tracing::info!(key = %key, version = ?stored.meta.resource_version, "replaced");
            Ok(stored)
        }
        Err(error) => Err(store_error(state, &key, error).await),
    }
}

/// Deletes `key` (only at `version` when given), or with `dryRun` checks
/// that it would be.
pub(crate) async fn write_delete(
    state: &ApiState,
    key: &ConfigKey,
    version: Option<&str>,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    if let Some(text) = version
        && text.parse::<u64>().is_err()
    {
        return Err(ApiError::bad_request(format!(
            "resourceVersion must be a number, not {text:?}"
        )));
    }
    if options.dry_run {
        let stored = current_in_backend(state, key).await?;
        if version.is_some() {
            check_version(key, version, &stored)?;
        }
        return Ok(());
    }
    match state.store.delete(key, version).await {
        Ok(()) => {
            tracing::info!(key = %key, "deleted");
            Ok(())
        }
        Err(error) => Err(store_error(state, key, error).await),
    }
}

/// `config` in the document form, its `apiVersion` filled from its kind.
pub(crate) fn document_of(state: &ApiState, config: &DynConfig) -> Result<Value, ApiError> {
    let mut document = serde_json::to_value(config)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "InternalError", e.to_string()))?;
    if let Some(schema) = state.registry.get(&config.meta.kind) {
        document["apiVersion"] = json!(format!("{}/{}", schema.group, schema.version));
    }
    Ok(document)
}

/// Now, as `managedFields` times are written (RFC 3339, whole seconds).
pub(crate) fn now() -> String {
    humantime::format_rfc3339_seconds(pilot_model::now_seconds()).to_string()
}

/// `response` with a `Warning` header per warning, as kube-apiserver sends
/// them (`299 - "text"`).
pub(crate) fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let text = warning.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = axum::http::HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append(axum::http::header::WARNING, value);
        }
    }
    response
}

/// Deletes `key` only if it is still the object with this `uid` (and at
/// `version` when given): 409 as kube-apiserver words it when not. The
/// delete is made at the version the uid was checked at, again if another
/// write came between (when no version was asked for).
async fn delete_with_uid(
    state: &ApiState,
    key: &ConfigKey,
    version: Option<&str>,
    uid: &str,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let stored = current_in_backend(state, key).await?;
        let actual = stored.meta.uid.as_deref().unwrap_or_default();
        if actual != uid {
            let resource = state
                .registry
                .get(&key.kind)
                .map(|s| format!("{}.{}", s.plural, s.group))
                .unwrap_or_else(|| key.kind.clone());
            return Err(ApiError {
                details: json!({"name": key.name, "namespace": key.namespace}),
                ..ApiError::new(
                    StatusCode::CONFLICT,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {resource} {:?}: Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}",
                        key.name
                    ),
                )
            });
        }
        let at = version.or(stored.meta.resource_version.as_deref());
        match write_delete(state, key, at, options).await {
            Err(error)
                if error.reason == "Conflict" && version.is_none() && attempt < crate::patch::ATTEMPTS => {}
            other => return other,
        }
    }
}

/// The stored object at `key` as a read shows it, or 404.
pub(crate) async fn current(state: &ApiState, key: &ConfigKey) -> Result<Arc<DynConfig>, ApiError> {
    match state.store.get(key).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(ApiError::from_store(
            StoreError::NotFound { key: key.clone() },
            None,
        )),
        Err(error) => Err(ApiError::from_store(error, None)),
    }
}

/// The kind served at `group/version/plural`, or a 404 naming what is
/// served. At a version other than the kind's storage version, the schema
/// answered has that `version`, so that what the request answers (objects,
/// lists, events: [`list::at_version`]) shows the version asked for; writes
/// still go through the registry, which stores the storage version.
pub(crate) fn resolve(
    state: &ApiState,
    group: &str,
    version: &str,
    plural: &str,
) -> Result<Arc<KindSchema>, ApiError> {
    match state.registry.by_plural(Some(group), plural) {
        Some(schema) if schema.version == version => Ok(schema),
        Some(schema) if schema.serves(version) => Ok(served_at(&schema, version)),
        _ => {
            let served: Vec<String> = state
                .registry
                .kinds()
                .iter()
                .filter_map(|k| state.registry.get(k))
                .flat_map(|s| {
                    s.versions
                        .iter()
                        .map(|v| format!("/apis/{}/{v}/{}", s.group, s.plural))
                        .collect::<Vec<_>>()
                })
                .collect();
            Err(ApiError {
                details: json!({"group": group, "kind": plural}),
                ..ApiError::new(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!(
                        "the server does not serve {plural} in {group}/{version}; it serves {}",
                        served.join(", ")
                    ),
                )
            })
        }
    }
}

/// `schema` as presented at its served `version`: the same kind and
/// schema, whose `version` (the one shown in paths, `apiVersion` and
/// OpenAPI names) is `version`.
pub(crate) fn served_at(schema: &KindSchema, version: &str) -> Arc<KindSchema> {
    let mut served = schema.clone();
    served.version = version.to_string();
    Arc::new(served)
}

/// Every registered kind at every version it serves (see [`served_at`]),
/// by kind name then version.
pub(crate) fn every_served(registry: &pilot_model::KindRegistry) -> Vec<Arc<KindSchema>> {
    registry
        .kinds()
        .iter()
        .filter_map(|k| registry.get(k))
        .flat_map(|schema| {
            schema
                .versions
                .iter()
                .map(|v| served_at(&schema, v))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The backend's object at `key` (what a write would find), or 404.
async fn current_in_backend(state: &ApiState, key: &ConfigKey) -> Result<Arc<DynConfig>, ApiError> {
    match state.backend.get(key).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => Err(ApiError::from_store(
            StoreError::NotFound { key: key.clone() },
            None,
        )),
        Err(error) => Err(ApiError::from_store(error, None)),
    }
}

/// 409 unless `sent` is the stored object's version (none sent on an
/// update is a conflict, as the store's update has it).
fn check_version(key: &ConfigKey, sent: Option<&str>, stored: &DynConfig) -> Result<(), ApiError> {
    let actual = stored.meta.resource_version.clone().unwrap_or_default();
    if sent == Some(actual.as_str()) {
        return Ok(());
    }
    Err(ApiError::from_store(
        StoreError::Conflict {
            key: key.clone(),
            expected: sent.map(str::to_string),
            actual,
        },
        None,
    ))
}

/// The write options and `DeleteOptions` of a delete or deletecollection
/// (`dryRun` from the query or the body).
async fn delete_options(
    state: &ApiState,
    headers: &HeaderMap,
    query: &HashMap<String, String>,
    body: Body,
) -> Result<(WriteOptions, DeleteOptions), ApiError> {
    let mut options = WriteOptions::parse(query, headers)?;
    let bytes = body::read_limited(state, headers, body).await?;
    let delete = DeleteOptions::parse(query, &bytes)?;
    options.dry_run |= delete.dry_run;
    Ok((options, delete))
}

/// Deletes `key` under `delete`'s preconditions.
async fn delete_one(
    state: &ApiState,
    key: &ConfigKey,
    delete: &DeleteOptions,
    options: &WriteOptions,
) -> Result<(), ApiError> {
    let version = delete.resource_version.as_deref();
    match &delete.uid {
        Some(uid) => delete_with_uid(state, key, version, uid, options).await,
        None => write_delete(state, key, version, options).await,
    }
}

/// A store error as a response, with the current version for a conflict
/// on create.
async fn store_error(state: &ApiState, key: &ConfigKey, error: StoreError) -> ApiError {
    let current = match &error {
        // The backend refused the create: its version is the one to
        // report (the Controller's cache may not have caught up with it).
        StoreError::AlreadyExists { .. } => state
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
        StoreError::Invalid { .. } | StoreError::AlreadyExists { .. }
    ) {
        tracing::debug!(key = %key, %error, "write refused");
    }
    ApiError::from_store(error, current)
}

/// A new object's `uid`: 128 bits, written as a UUID (version 4 layout),
/// from the process's random hash keys, the time and a counter, so that
/// no two objects share one.
fn new_uid() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u64(count);
        hasher.write_u128(nanos);
        hasher.finish()
    };
    let (high, low) = (half(1), half(2));
    let bytes = ((u128::from(high) << 64) | u128::from(low)).to_be_bytes();
    let mut bytes = bytes;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
