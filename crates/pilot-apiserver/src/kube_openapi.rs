//! The OpenAPI documents kubectl reads, as kube-apiserver serves them for
//! custom resources, built from the registered kinds' schemas at the time
//! of the request:
//!
//! - `GET /openapi/v3`: the index, one entry per group-version with a hash
//!   of its document;
//! - `GET /openapi/v3/apis/{group}/{version}`: that group-version's
//!   document: each kind's schema (`x-kubernetes-group-version-kind`, the
//!   spec schema pilot derives, `metadata` as `ObjectMeta`) and its paths,
//!   whose PATCH declares the patch types served and the `dryRun`,
//!   `fieldManager` and `fieldValidation` parameters (kubectl then
//!   leaves validation to the server and sends `--dry-run=server` here);
//! - `GET /openapi/v2`: every kind in one Swagger 2.0 document (JSON),
//!   for clients without v3.
//!
//! `kubectl explain` and `kubectl apply` read these; the REST document of
//! the whole API for other clients stays at `/openapi.json`
//! ([`crate::openapi`]).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use pilot_model::{KindRegistry, KindSchema};
use serde_json::{Map, Value, json};

use crate::ApiError;
use crate::server::ApiState;

/// The name of `ObjectMeta`'s schema, as Kubernetes names it.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
/// The name of `ListMeta`'s schema.
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

/// The patch types a kind's PATCH takes (strategic merge patch is not one,
/// as for every custom resource).
pub(crate) const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

/// `GET /openapi/v3`.
pub(crate) async fn v3_index(State(state): State<ApiState>) -> Json<Value> {
    let mut paths = Map::new();
    for (group, version) in group_versions(&state.registry) {
        let document = v3_document(&state.registry, &state.options.server_name, &group, &version);
        let url = format!("/openapi/v3/apis/{group}/{version}?hash={}", hash(&document));
        paths.insert(
            format!("apis/{group}/{version}"),
            json!({"serverRelativeURL": url}),
        );
    }
    Json(json!({"paths": paths}))
}

/// `GET /openapi/v3/apis/{group}/{version}`.
pub(crate) async fn v3_group_version(
    State(state): State<ApiState>,
    Path((group, version)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    if !group_versions(&state.registry).contains(&(group.clone(), version.clone())) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no OpenAPI document for {group}/{version}; see /openapi/v3"),
        ));
    }
    Ok(Json(v3_document(
        &state.registry,
        &state.options.server_name,
        &group,
        &version,
    )))
}

/// `GET /openapi/v2`.
pub(crate) async fn v2(State(state): State<ApiState>) -> Json<Value> {
    let mut definitions = meta_schemas();
    let mut paths = Map::new();
    for schema in kinds(&state.registry) {
        definitions.extend(kind_schemas(
            &schema,
            &state.options.server_name,
            "#/definitions/",
        ));
        for (path, item) in kind_paths(&schema, "#/definitions/", false) {
            paths.insert(path, item);
        }
    }
    Json(json!({
        "swagger": "2.0",
        "info": {"title": "pilot", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "definitions": definitions,
    }))
}

/// The document of one group-version.
fn v3_document(registry: &KindRegistry, server: &str, group: &str, version: &str) -> Value {
    let mut schemas = meta_schemas();
    let mut paths = Map::new();
    for schema in kinds(registry)
        .into_iter()
        .filter(|s| s.group == group && s.version == version)
    {
        schemas.extend(kind_schemas(&schema, server, "#/components/schemas/"));
        for (path, item) in kind_paths(&schema, "#/components/schemas/", true) {
            paths.insert(path, item);
        }
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "pilot", "version": env!("CARGO_PKG_VERSION")},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// The name Kubernetes gives a custom resource's schema: the group
/// reversed, the version, the kind (`io.istio.config.v1alpha2.RouteRule`).
pub(crate) fn definition_name(schema: &KindSchema, suffix: &str) -> String {
    let reversed: Vec<&str> = schema.group.split('.').rev().collect();
    format!(
        "{}.{}.{}{suffix}",
        reversed.join("."),
        schema.version,
        schema.kind
    )
}

/// Every kind at every version it serves.
fn kinds(registry: &KindRegistry) -> Vec<Arc<KindSchema>> {
    crate::resources::every_served(registry)
}

fn group_versions(registry: &KindRegistry) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = kinds(registry)
        .iter()
        .map(|s| (s.group.clone(), s.version.clone()))
        .collect();
    pairs.sort();
    pairs.dedup();
    pairs
}

fn hash(document: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    document.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The kind's object and list schemas (`server` serves them).
fn kind_schemas(schema: &KindSchema, server: &str, prefix: &str) -> BTreeMap<String, Value> {
    let gvk = json!([{"group": schema.group, "version": schema.version, "kind": schema.kind}]);
    let spec = schema.openapi_schema().cloned().unwrap_or_else(|| {
        json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
               "description": "not described: this kind was registered without a schema"})
    });
    let mut spec = spec;
    if spec.get("description").is_none() {
        spec["description"] = json!(format!(
            "The {} spec; pilot validates it on every write.",
            schema.kind
        ));
    }
    let object = json!({
        "type": "object",
        "description": format!("{} ({}/{}), served by {server}.", schema.kind, schema.group, schema.version),
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
            "metadata": {"$ref": format!("{prefix}{OBJECT_META}"), "description": "Standard object's metadata."},
            "spec": spec,
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                       "description": format!("How far the object has reached the connected proxies, written by {server}.")},
        },
        "x-kubernetes-group-version-kind": gvk,
    });
    let list = json!({
        "type": "object",
        "description": format!("A list of {}.", schema.kind),
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"$ref": format!("{prefix}{LIST_META}")},
            "items": {"type": "array", "items": {"$ref": format!("{prefix}{}", definition_name(schema, ""))}},
        },
        "x-kubernetes-group-version-kind": [{"group": schema.group, "version": schema.version, "kind": format!("{}List", schema.kind)}],
    });
    BTreeMap::from([
        (definition_name(schema, ""), object),
        (definition_name(schema, "List"), list),
    ])
}

/// The kind's paths, in OpenAPI v3 (`v3`) or Swagger 2.0 form.
fn kind_paths(schema: &KindSchema, prefix: &str, v3: bool) -> Vec<(String, Value)> {
    let gvk = json!({"group": schema.group, "version": schema.version, "kind": schema.kind});
    let object_ref = json!({"$ref": format!("{prefix}{}", definition_name(schema, ""))});
    let list_ref = json!({"$ref": format!("{prefix}{}", definition_name(schema, "List"))});
    let query = |name: &str, description: &str, kind: &str| {
        if v3 {
            json!({"name": name, "in": "query", "description": description, "schema": {"type": kind}, "uniqueItems": true})
        } else {
            json!({"name": name, "in": "query", "description": description, "type": kind, "uniqueItems": true})
        }
    };
    let in_path = |name: &str| {
        if v3 {
            json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}})
        } else {
            json!({"name": name, "in": "path", "required": true, "type": "string"})
        }
    };
    let dry_run = query(
        "dryRun",
        "When present (All), every check is made and nothing is stored.",
        "string",
    );
    let field_manager = query(
        "fieldManager",
        "The name of the actor making the change.",
        "string",
    );
    let field_validation = query(
        "fieldValidation",
        "Strict (an unknown or duplicate field is a 400 strict decoding error), Warn (the default: dropped, with a Warning header) or Ignore (dropped).",
        "string",
    );
    let selectors = [
        query("labelSelector", "Selects by label.", "string"),
        query(
            "fieldSelector",
            "Selects by metadata.name or metadata.namespace.",
            "string",
        ),
        query("resourceVersion", "Where a list or watch starts.", "string"),
        query("timeoutSeconds", "Ends a watch after this long.", "integer"),
        query("watch", "Streams changes.", "boolean"),
        query("allowWatchBookmarks", "Sends BOOKMARK events.", "boolean"),
    ];
    let response = |schema: &Value| {
        if v3 {
            json!({"description": "OK", "content": {"application/json": {"schema": schema}}})
        } else {
            json!({"description": "OK", "schema": schema})
        }
    };
    let body = |types: &[&str], schema: &Value| {
        if v3 {
            let content: Map<String, Value> = types
                .iter()
                .map(|t| (t.to_string(), json!({"schema": schema})))
                .collect();
            json!({"requestBody": {"required": true, "content": content}})
        } else {
            json!({"consumes": types, "parameters": [{"name": "body", "in": "body", "required": true, "schema": schema}]})
        }
    };
    let operation = |action: &str, id: &str, responses: Value, extra: Value, parameters: Vec<Value>| {
        let mut op = json!({
            "operationId": format!("{id}{}", schema.kind),
            "tags": [schema.group],
            "responses": responses,
            "parameters": parameters,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        });
        if let (Some(op), Some(extra)) = (op.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                if key == "parameters" {
                    if let Some(list) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                        list.extend(value.as_array().cloned().unwrap_or_default());
                    }
                } else {
                    op.insert(key.clone(), value.clone());
                }
            }
        }
        op
    };
    let ok = |schema: &Value| json!({"200": response(schema)});
    let patch_object = json!({"type": "object"});
    let base = format!("/apis/{}/{}", schema.group, schema.version);
    let mut named = json!({
        "get": operation("get", "read", ok(&object_ref), json!({}), vec![]),
        "put": operation("put", "replace", ok(&object_ref), body(&["application/json"], &object_ref),
            vec![dry_run.clone(), field_manager.clone(), field_validation.clone()]),
        "patch": operation("patch", "patch", ok(&object_ref), body(PATCH_TYPES, &patch_object),
            vec![dry_run.clone(), field_manager.clone(), field_validation.clone()]),
        "delete": operation("delete", "delete", ok(&json!({"type": "object"})), json!({}), vec![dry_run.clone()]),
        "parameters": [in_path("name"), in_path("namespace")],
    });
    let mut collection = json!({
        "get": operation("list", "list", ok(&list_ref), json!({}), selectors.to_vec()),
        "post": operation("post", "create", json!({"201": response(&object_ref), "200": response(&object_ref)}),
            body(&["application/json"], &object_ref),
            vec![dry_run.clone(), field_manager, field_validation]),
        "delete": operation("deletecollection", "deleteCollection", ok(&list_ref), json!({}),
            vec![dry_run, selectors[0].clone(), selectors[1].clone()]),
        "parameters": [in_path("namespace")],
    });
    if schema.cluster_scoped {
        // No namespace: the object and the collection are under the kind.
        named["parameters"] = json!([in_path("name")]);
        collection["parameters"] = json!([]);
        return vec![
            (format!("{base}/{}/{{name}}", schema.plural), named),
            (format!("{base}/{}", schema.plural), collection),
        ];
    }
    let all = json!({
        "get": operation("list", "listAllNamespaces", ok(&list_ref), json!({}), selectors.to_vec()),
    });
    vec![
        (
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", schema.plural),
            named,
        ),
        (
            format!("{base}/namespaces/{{namespace}}/{}", schema.plural),
            collection,
        ),
        (format!("{base}/{}", schema.plural), all),
    ]
}

/// `ObjectMeta` and `ListMeta`, the fields pilot keeps and those it
/// accepts and ignores.
fn meta_schemas() -> BTreeMap<String, Value> {
    let string = |description: &str| json!({"type": "string", "description": description});
    let object_meta = json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have.",
        "properties": {
            "name": string("Name must be unique within a namespace (a DNS-1123 subdomain)."),
            "namespace": string("Namespace defines the space within which each name must be unique (a DNS-1123 label)."),
            "labels": {"type": "object", "additionalProperties": {"type": "string"},
                       "description": "Map of string keys and values that can be used to organize and categorize objects."},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"},
                            "description": "Annotations is an unstructured key value map."},
            "resourceVersion": string("An opaque value that represents the internal version of this object."),
            "creationTimestamp": {"type": "string", "format": "date-time",
                                  "description": "When this object was created (set by the server)."},
            "uid": string("Accepted and ignored."),
            "generation": {"type": "integer", "format": "int64", "description": "Accepted and ignored."},
            "managedFields": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                              "description": "Accepted and ignored."},
        },
    });
    let list_meta = json!({
        "type": "object",
        "description": "ListMeta describes metadata that synthetic resources must have.",
        "properties": {
            "resourceVersion": string("The version of the store the list was read at."),
            "continue": string("Not used: lists are never split."),
        },
    });
    BTreeMap::from([
        (OBJECT_META.to_string(), object_meta),
        (LIST_META.to_string(), list_meta),
    ])
}
