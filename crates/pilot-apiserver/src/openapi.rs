//! The OpenAPI 3 document served at `/openapi.json`, generated from the
//! registered kinds and describing exactly the routes `router.rs` serves,
//! and the routes an embedder serves beside them
//! ([`ApiOptions::documented_routes`]):
//!
//! - per kind, request and response schemas whose `spec` is the schema the
//!   Rust type derives (the one its CRD carries); a kind registered without
//!   a schema keeps an open `spec`;
//! - `watch=true` lists documented as an `application/x-ndjson` stream of
//!   the kind's watch events;
//! - the bearer scheme declared, and required on an operation, only when the
//!   server has tokens ([`ApiOptions::bearer_auth`]), and never on an
//!   operation documented as open (probes);
//! - every status code the server can answer for each operation.

use axum::Json;
use axum::extract::State;
use pilot_model::{KindRegistry, KindSchema};
use serde_json::{Map, Value, json};

use crate::ApiOptions;
use crate::server::ApiState;

/// The xDS types a NACK may name (`DistributionStatus.nacks[].type`):
/// pilot-ads's `TYPES` (Envoy's five, then ztunnel's WDS and WADS).
const NACK_TYPES: [&str; 7] = ["CDS", "EDS", "LDS", "SRDS", "RDS", "WDS", "WADS"];

/// A DNS-1123 subdomain (object names).
const DNS1123_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A DNS-1123 label (namespaces).
const DNS1123_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Whether an operation is open to everyone, needs a token, or needs a
/// read-write token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Open,
    Read,
    Write,
}

/// `GET /openapi.json`: the document for the served kinds, with bearer
/// security when tokens are configured.
pub(crate) async fn handler(State(state): State<ApiState>) -> Json<Value> {
    Json(document(&state.registry, &state.options))
}

/// The document for the kinds in `registry`.
pub(crate) fn document(registry: &KindRegistry, options: &ApiOptions) -> Value {
    let mut paths = Map::new();
    let mut schemas = common_schemas(options);
    for kind in registry.kinds() {
        let Some(schema) = registry.get(&kind) else {
            continue;
        };
        kind_schemas(&schema, &mut schemas);
        // The storage version's paths; the other served versions take the
        // same bodies at the same paths with their version (kube's
        // per-group-version documents, /openapi/v3, list every one).
        kind_paths(&schema, options, &mut paths);
    }
    let this = json!({"get": {"summary": "This document", "x-access": "read", "responses": {"200": {
        "description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}},
    }}}});
    let routes = options
        .documented_routes
        .iter()
        .map(|(path, item)| (path.as_str(), item.clone()));
    for (path, item) in routes.chain([("/openapi.json", this)]) {
        let item = secure_path_item(item, options);
        paths.insert(path.to_string(), item);
    }
    let mut components = json!({"schemas": schemas});
    if options.bearer_auth {
        components["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
    }
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": options.title,
            "version": env!("CARGO_PKG_VERSION"),
            "description": options.description,
        },
        "components": components,
        "paths": paths,
    })
}

/// Turns each operation's `x-access` into its `security` and its 401/403
/// responses (only when the server has tokens).
fn secure_path_item(mut item: Value, options: &ApiOptions) -> Value {
    let Some(operations) = item.as_object_mut() else {
        return item;
    };
    for (method, operation) in operations.iter_mut() {
        if method == "parameters" {
            continue;
        }
        let access = match operation.get("x-access").and_then(Value::as_str) {
            Some("open") => Access::Open,
            Some("write") => Access::Write,
            _ => Access::Read,
        };
        if let Some(map) = operation.as_object_mut() {
            map.remove("x-access");
        }
        if !options.bearer_auth || access == Access::Open {
            continue;
        }
        operation["security"] = json!([{"bearer": []}]);
        operation["responses"]["401"] = status_response("no token, or not a valid one");
        if access == Access::Write {
            operation["responses"]["403"] = status_response("the token is read-only");
        }
    }
    item
}

fn status_response(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}})
}

fn json_response(description: &str, schema: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema}")}}}})
}

/// A write the store did not confirm in time (`StoreError::Indeterminate`).
fn indeterminate() -> Value {
    status_response(
        "the store did not confirm the write in time: it may have been applied; read before retrying",
    )
}

/// The errors every store-backed operation may answer.
fn store_errors(responses: &mut Map<String, Value>) {
    responses.insert(
        "500".into(),
        status_response("the backend failed (e.g. etcd answered an error)"),
    );
    responses.insert("503".into(), status_response("the backend is unavailable; retry"));
}

/// The query parameters of every write, as Kubernetes has them:
/// `fieldValidation` (what becomes of an unknown or duplicate field) and
/// `dryRun`.
fn write_parameters() -> Vec<Value> {
    vec![
        json!({"name": "fieldValidation", "in": "query",
               "schema": {"type": "string", "enum": ["Strict", "Warn", "Ignore"]},
               "description": "an unknown or duplicate field: Strict refuses the write (400), Warn (the default) drops it with a Warning header, Ignore drops it"}),
        json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "enum": ["All"]},
               "description": "validate and answer as the write would, storing nothing"}),
    ]
}

/// The `{Kind}`, `{Kind}List` and `{Kind}WatchEvent` schemas.
fn kind_schemas(schema: &KindSchema, schemas: &mut Map<String, Value>) {
    let kind = &schema.kind;
    // By id: two groups' kinds of one name (Istio's Gateway and the
    // Gateway API's) each have their own.
    let component = &schema.id;
    let spec = schema
        .openapi_schema()
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "description": "not described: this kind was registered without a schema"}));
    let object = json!({
        "type": "object",
        "required": ["metadata", "spec"],
        "additionalProperties": false,
        "properties": {
            "apiVersion": {"type": "string", "enum": schema.versions.iter().map(|v| format!("{}/{v}", schema.group)).collect::<Vec<_>>()},
            "kind": {"type": "string", "enum": [kind]},
            "metadata": {"$ref": "#/components/schemas/ObjectMeta"},
            "spec": spec,
            // Written by pilot alone: whatever status a create or an
            // update sends is ignored, as Kubernetes ignores it on a
            // resource with a status subresource (which writes it); what
            // pilot answers is a DistributionStatus.
            "status": {
                "description": "the distribution status pilot writes (DistributionStatus); ignored in a create or an update",
                "nullable": true,
                "anyOf": [{"$ref": "#/components/schemas/DistributionStatus"}, {}],
            },
        },
    });
    let list = json!({
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string", "enum": [format!("{kind}List")]},
            "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
            "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{component}")}},
        },
    });
    // An ERROR event carries a Status, the others the object (a DELETED
    // one for an object the watch never saw carries only kind and metadata).
    let event = json!({
        "type": "object",
        "required": ["type", "object"],
        "properties": {
            "type": {"type": "string", "enum": ["ADDED", "MODIFIED", "DELETED", "ERROR"]},
            "object": {"type": "object", "description": format!(
                "ADDED, MODIFIED, DELETED: the {kind} (see #/components/schemas/{component}); ERROR: a Status"
            )},
        },
    });
    schemas.insert(component.clone(), object);
    schemas.insert(format!("{component}List"), list);
    schemas.insert(format!("{component}WatchEvent"), event);
}

/// The three paths of a kind.
fn kind_paths(schema: &KindSchema, options: &ApiOptions, paths: &mut Map<String, Value>) {
    let large_body = match &options.max_body_bytes_setting {
        Some(setting) => format!("the body is larger than {setting}"),
        None => "the body is larger than the server's limit".to_string(),
    };
    let late_body = match &options.body_deadline_setting {
        Some(setting) => format!("the body did not arrive within {setting}"),
        None => "the body did not arrive within the server's deadline".to_string(),
    };
    let kind = &schema.kind;
    let component = &schema.id;
    let plural = &schema.plural;
    let base = format!("/apis/{}/{}", schema.group, schema.version);
    let body = json!({"required": true, "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{component}")}}}});
    let namespace =
        json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}});
    let name = json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}});
    let list_op = |summary: String| {
        let mut responses = Map::new();
        responses.insert(
            "200".into(),
            json!({
                "description": "without watch: the list; with watch=true: a stream of watch events, one JSON object a line, \
                                every current object as ADDED first unless resourceVersion is given, then the changes",
                "content": {
                    "application/json": {"schema": {"$ref": format!("#/components/schemas/{component}List")}},
                    "application/x-ndjson": {"schema": {"$ref": format!("#/components/schemas/{component}WatchEvent")}},
                },
            }),
        );
        responses.insert(
            "400".into(),
            status_response("bad namespace (not a DNS-1123 label), labelSelector, watch or resourceVersion"),
        );
        responses.insert(
            "410".into(),
            status_response("resourceVersion is older than the history kept; list again"),
        );
        responses.insert(
            "504".into(),
            status_response(
                "resourceVersion is newer than the store's (cause ResourceVersionTooLarge, as Kubernetes answers); list again",
            ),
        );
        store_errors(&mut responses);
        json!({
            "summary": summary,
            "x-access": "read",
            "parameters": [
                {"name": "labelSelector", "in": "query", "schema": {"type": "string"}, "description": "e.g. app=reviews,version!=v1"},
                {"name": "watch", "in": "query", "schema": {"type": "boolean"}, "description": "stream watch events as newline-delimited JSON"},
                {"name": "resourceVersion", "in": "query", "schema": {"type": "string", "pattern": "^[0-9]*$"},
                 "description": "with watch: the changes after this version"},
                {"name": "timeoutSeconds", "in": "query", "schema": {"type": "integer", "minimum": 1},
                 "description": "with watch: end the stream after this many seconds"},
            ],
            "responses": responses,
        })
    };
    let write_op = |summary: String, ok_code: &str, ok: &str, not_found: bool| {
        let mut responses = Map::new();
        responses.insert(ok_code.into(), json_response(ok, component));
        for (code, description) in [
            (
                "400",
                "the body is not a JSON object, or names another kind, namespace or name than the URL, or (fieldValidation=Strict) has an unknown or duplicate field: a strict decoding error",
            ),
            (
                "409",
                "already exists (details.currentResourceVersion), or metadata.resourceVersion is not current",
            ),
            ("408", late_body.as_str()),
            ("413", large_body.as_str()),
            ("415", "the body is not application/json"),
            (
                "422",
                "invalid object: details.causes lists every field error with its path",
            ),
        ] {
            responses.insert(code.into(), status_response(description));
        }
        if not_found {
            responses.insert("404".into(), status_response("no such object"));
        }
        store_errors(&mut responses);
        responses.insert("504".into(), indeterminate());
        json!({"summary": summary, "x-access": "write", "parameters": write_parameters(), "requestBody": body, "responses": responses})
    };
    let mut get_responses = Map::new();
    get_responses.insert("200".into(), json_response("the object", component));
    get_responses.insert("404".into(), status_response("no such object"));
    store_errors(&mut get_responses);
    let mut delete_responses = Map::new();
    delete_responses.insert(
        "200".into(),
        status_response("deleted: a Status with status Success"),
    );
    delete_responses.insert("400".into(), status_response("resourceVersion is not a number"));
    delete_responses.insert("404".into(), status_response("no such object"));
    delete_responses.insert(
        "422".into(),
        status_response("the DeleteOptions body has a value not supported (propagationPolicy, dryRun)"),
    );
    delete_responses.insert(
        "409".into(),
        status_response("the object is no longer at resourceVersion"),
    );
    store_errors(&mut delete_responses);
    delete_responses.insert("504".into(), indeterminate());
    let mut collection_delete_responses = Map::new();
    collection_delete_responses.insert(
        "200".into(),
        json!({"description": "the objects deleted", "content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{component}List")}}}}),
    );
    collection_delete_responses.insert(
        "400".into(),
        status_response("bad labelSelector or fieldSelector, or the body is not DeleteOptions"),
    );
    collection_delete_responses.insert(
        "409".into(),
        status_response("an object selected does not meet the DeleteOptions preconditions (the objects before it were deleted)"),
    );
    collection_delete_responses.insert(
        "422".into(),
        status_response("the DeleteOptions body has a value not supported (propagationPolicy, dryRun)"),
    );
    store_errors(&mut collection_delete_responses);
    collection_delete_responses.insert("504".into(), indeterminate());
    let mut patch_responses = Map::new();
    patch_responses.insert(
        "200".into(),
        json_response("patched: the stored object", component),
    );
    patch_responses.insert(
        "201".into(),
        json_response("created by a server-side apply: the stored object", component),
    );
    for (code, description) in [
        (
            "400",
            "the body is not a patch of its type, or the result names another kind, namespace or name, or (fieldValidation=Strict) has an unknown field: a strict decoding error",
        ),
        ("404", "no such object"),
        (
            "409",
            "the patch sets a metadata.resourceVersion that is not current, or a server-side apply conflicts with another field manager (details.causes names each field and manager; force=true takes them)",
        ),
        ("413", large_body.as_str()),
        (
            "415",
            "not a JSON merge patch, JSON patch or server-side apply (strategic merge patch is not served)",
        ),
        (
            "422",
            "the patch cannot be applied, or the patched object is invalid: details.causes lists every field error",
        ),
    ] {
        patch_responses.insert(code.into(), status_response(description));
    }
    store_errors(&mut patch_responses);
    patch_responses.insert("504".into(), indeterminate());

    let items = [
        (
            format!("{base}/{plural}"),
            json!({"get": list_op(format!("List or watch {plural} in all namespaces"))}),
        ),
        (
            format!("{base}/namespaces/{{namespace}}/{plural}"),
            json!({
                "parameters": [namespace],
                "get": list_op(format!("List or watch {plural} in a namespace")),
                "post": write_op(format!("Create a {kind}"), "201", "created: the stored object", false),
                "delete": {
                    "summary": format!("Delete every {kind} of a namespace that the selectors select"),
                    "x-access": "write",
                    "parameters": [
                        {"name": "labelSelector", "in": "query", "schema": {"type": "string"}, "description": "e.g. app=reviews,version in (v1,v2)"},
                        {"name": "fieldSelector", "in": "query", "schema": {"type": "string"}, "description": "metadata.name or metadata.namespace, with =, == or !="},
                    ],
                    "responses": collection_delete_responses,
                },
            }),
        ),
        (
            format!("{base}/namespaces/{{namespace}}/{plural}/{{name}}"),
            json!({
                "parameters": [namespace, name],
                "get": {"summary": format!("Read a {kind}"), "x-access": "read", "responses": get_responses},
                "put": write_op(
                    format!("Replace a {kind}; metadata.resourceVersion must be current"),
                    "200", "replaced: the stored object", true,
                ),
                "patch": {
                    "summary": format!("Patch a {kind}: JSON merge patch, JSON patch or server-side apply (fieldManager required; creates when absent), validated as a replace"),
                    "x-access": "write",
                    "parameters": [
                        {"name": "fieldManager", "in": "query", "schema": {"type": "string", "maxLength": 128},
                         "description": "the manager the change is recorded under in metadata.managedFields (default: the User-Agent up to its first /)"},
                        {"name": "force", "in": "query", "schema": {"type": "boolean"},
                         "description": "server-side apply only: take the fields that conflict"},
                        write_parameters()[0].clone(),
                        write_parameters()[1].clone(),
                    ],
                    "requestBody": {"required": true, "content": {
                        "application/merge-patch+json": {"schema": {"type": "object"}},
                        "application/json-patch+json": {"schema": {"type": "array", "items": {"type": "object"}}},
                        "application/apply-patch+yaml": {"schema": {"type": "object"}},
                    }},
                    "responses": patch_responses,
                },
                "delete": {
                    "summary": format!("Delete a {kind}"),
                    "x-access": "write",
                    "parameters": [{"name": "resourceVersion", "in": "query", "schema": {"type": "string", "pattern": "^[0-9]*$"},
                                    "description": "delete only while the object is at this version"}],
                    "responses": delete_responses,
                },
            }),
        ),
    ];
    let items: Vec<(String, Value)> = if schema.cluster_scoped {
        // No namespace: the object and the collection are under the kind.
        let [_, (_, mut collection), (_, mut named)] = items;
        collection["parameters"] = json!([]);
        collection["get"]["summary"] = json!(format!("List or watch {plural}"));
        collection["delete"]["summary"] = json!(format!("Delete every {kind} that the selectors select"));
        named["parameters"] = json!([name]);
        vec![
            (format!("{base}/{plural}"), collection),
            (format!("{base}/{plural}/{{name}}"), named),
        ]
    } else {
        items.into()
    };
    for (path, item) in items {
        paths.insert(path, secure_path_item(item, options));
    }
}

/// `ObjectMeta`, `DistributionStatus` and `Status`.
fn common_schemas(options: &ApiOptions) -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(
        "DistributionStatus".into(),
        json!({
            "type": "object",
            "description": format!("How far the object has reached the connected proxies, written by {} (ignored in a request body)", options.server_name),
            "required": ["observedVersion", "proxies", "acked", "nacked", "lastUpdate"],
            "additionalProperties": false,
            "properties": {
                "observedVersion": {"type": "string", "description": "the resourceVersion the counts are about"},
                "proxies": {"type": "integer", "minimum": 0, "description": "connected proxies that should have the object"},
                "acked": {"type": "integer", "minimum": 0, "description": "proxies that ACKed a push containing it"},
                "nacked": {"type": "integer", "minimum": 0, "description": "proxies that rejected a push containing it and are still sent it"},
                "withheld": {"type": "integer", "minimum": 0, "description": "proxies that rejected it and are served without it until it changes"},
                "nacks": {
                    "type": "array",
                    "maxItems": pilot_model::MAX_NACK_MESSAGES,
                    "description": "distinct messages of the proxies that rejected it, the most common first",
                    "items": {
                        "type": "object",
                        "required": ["type", "message", "proxies"],
                        "additionalProperties": false,
                        "properties": {
                            "type": {"type": "string", "enum": NACK_TYPES},
                            "message": {"type": "string"},
                            "proxies": {"type": "integer", "minimum": 1},
                        },
                    },
                },
                "lastUpdate": {"type": "string", "format": "date-time"},
                "conditions": {
                    "type": "array",
                    "description": "the object's conditions (type Reconciled: False while analysis finds an error in it)",
                    "items": {
                        "type": "object",
                        "required": ["type", "status", "lastTransitionTime"],
                        "additionalProperties": false,
                        "properties": {
                            "type": {"type": "string"},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "reason": {"type": "string"},
                            "message": {"type": "string"},
                            "observedGeneration": {"type": "integer"},
                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                        },
                    },
                },
                "validationMessages": {
                    "type": "array",
                    "description": "analysis findings about the object (pilotctl analyze's codes)",
                    "items": {
                        "type": "object",
                        "required": ["type", "level"],
                        "additionalProperties": false,
                        "properties": {
                            "type": {
                                "type": "object",
                                "required": ["code"],
                                "additionalProperties": false,
                                "properties": {"code": {"type": "string"}, "name": {"type": "string"}},
                            },
                            "level": {"type": "string", "enum": ["ERROR", "WARNING", "INFO"]},
                            "description": {"type": "string"},
                        },
                    },
                },
            },
        }),
    );
    schemas.insert(
        "ObjectMeta".into(),
        json!({
            "type": "object",
            "required": ["name"],
            "additionalProperties": false,
            "properties": {
                "name": {"type": "string", "pattern": DNS1123_SUBDOMAIN, "minLength": 1, "maxLength": 253},
                "namespace": {"type": "string", "pattern": DNS1123_LABEL, "minLength": 1, "maxLength": 63,
                              "description": "the URL's namespace when absent; must equal it when present"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                "resourceVersion": {"type": "string", "description": "ignored on create; must be current on replace"},
                "creationTimestamp": {"type": "string", "format": "date-time"},
                "uid": {"type": "string", "description": "set by the server on create; ignored in a request body"},
                "generation": {"type": "integer", "description": "moves on spec changes; set by the server, ignored in a request body"},
                "managedFields": {"type": "array", "items": {"type": "object"}, "description": "ignored in a request body (an exported object is accepted as it is)"},
            },
        }),
    );
    schemas.insert(
        "Status".into(),
        json!({
            "type": "object",
            "required": ["kind", "status", "code"],
            "properties": {
                "kind": {"type": "string", "enum": ["Status"]},
                "apiVersion": {"type": "string"},
                "status": {"type": "string", "enum": ["Success", "Failure"]},
                "message": {"type": "string"},
                "reason": {"type": "string"},
                "code": {"type": "integer"},
                "details": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string"},
                        "namespace": {"type": "string"},
                        "name": {"type": "string"},
                        "currentResourceVersion": {"type": "string"},
                        "causes": {"type": "array", "items": {"type": "object", "properties": {
                            "field": {"type": "string"},
                            "message": {"type": "string"},
                            "line": {"type": "integer", "nullable": true},
                            "column": {"type": "integer", "nullable": true},
                        }}},
                    },
                },
            },
        }),
    );
    schemas
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options of a server with tokens or without, serving probes and
    /// a read-only page beside the API.
    fn options(auth: bool) -> ApiOptions {
        let text = json!({"description": "text", "content": {"text/plain": {"schema": {"type": "string"}}}});
        let documented_routes = vec![
            (
                "/healthz".into(),
                json!({"get": {"summary": "Liveness", "x-access": "open", "responses": {"200": text}}}),
            ),
            (
                "/readyz".into(),
                json!({"get": {"summary": "Readiness", "x-access": "open", "responses": {"200": text}}}),
            ),
            (
                "/metrics".into(),
                json!({"get": {"summary": "Metrics", "x-access": "read", "responses": {"200": text}}}),
            ),
        ];
        ApiOptions {
            bearer_auth: auth,
            documented_routes,
            ..ApiOptions::default()
        }
    }

    fn operations(document: &Value) -> Vec<(String, String, Value)> {
        let mut out = Vec::new();
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                if method != "parameters" {
                    out.push((path.clone(), method.clone(), operation.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn without_tokens_nothing_declares_or_needs_security() {
        let document = document(&pilot_api::istio::registry(), &options(false));
        let text = document.to_string();
        assert!(!text.contains("securitySchemes"), "{text}");
        assert!(!text.contains("\"security\""), "{text}");
        assert!(!text.contains("x-access"), "{text}");
        for (path, method, operation) in operations(&document) {
            assert!(
                operation["responses"].get("401").is_none(),
                "{method} {path} lists 401 without tokens"
            );
        }
    }

    #[test]
    fn with_tokens_every_operation_but_the_probes_needs_the_bearer() {
        let document = document(&pilot_api::istio::registry(), &options(true));
        assert_eq!(
            document["components"]["securitySchemes"]["bearer"]["scheme"],
            "bearer"
        );
        assert!(document.get("security").is_none(), "no document-wide security");
        for (path, method, operation) in operations(&document) {
            let probe = path == "/healthz" || path == "/readyz";
            assert_eq!(operation.get("security").is_some(), !probe, "{method} {path}");
            assert_eq!(
                operation["responses"].get("401").is_some(),
                !probe,
                "{method} {path}"
            );
            let write = method != "get";
            assert_eq!(
                operation["responses"].get("403").is_some(),
                write,
                "{method} {path}"
            );
        }
    }

    #[test]
    fn bodies_carry_each_kinds_derived_schema() {
        let registry = pilot_api::istio::registry();
        let document = document(&registry, &ApiOptions::default());
        let create =
            &document["paths"]["/apis/config.istio.io/v1alpha2/namespaces/{namespace}/routerules"]["post"];
        assert_eq!(
            create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/RouteRule"
        );
        let route_rule = &document["components"]["schemas"]["RouteRule"];
        assert_eq!(route_rule["properties"]["kind"]["enum"], json!(["RouteRule"]));
        assert_eq!(
            route_rule["properties"]["apiVersion"]["enum"],
            json!(["config.istio.io/v1alpha2"])
        );
        let spec = &route_rule["properties"]["spec"];
        assert_eq!(spec, registry.get("RouteRule").unwrap().openapi_schema().unwrap());
        assert!(spec["properties"]["precedence"].is_object(), "{spec}");
        assert!(spec["properties"]["destination"].is_object(), "{spec}");
        let policy = &document["components"]["schemas"]["DestinationPolicy"]["properties"]["spec"];
        assert!(policy["properties"]["loadBalancing"].is_object(), "{policy}");
    }

    /// Istio's Gateway and the Gateway API's have one name: each body is
    /// its own kind's schema.
    #[test]
    fn two_kinds_of_one_name_each_have_their_schema() {
        let registry = pilot_api::default_registry();
        let document = document(&registry, &ApiOptions::default());
        let body = |path: &str| {
            let reference = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
                ["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("no body for {path}"))
                .to_string();
            // What a create answers is the same kind.
            let created = &document["paths"][path]["post"]["responses"]["201"]["content"]["application/json"]
                ["schema"]["$ref"];
            assert_eq!(created, &json!(reference), "{path}");
            let name = reference.trim_start_matches("#/components/schemas/").to_string();
            document["components"]["schemas"][&name].clone()
        };
        let istio = body("/apis/networking.istio.io/v1/namespaces/{namespace}/gateways");
        let gateway_api = body("/apis/gateway.networking.k8s.io/v1/namespaces/{namespace}/gateways");
        assert_eq!(
            istio["properties"]["apiVersion"]["enum"][0], "networking.istio.io/v1",
            "{istio}"
        );
        assert!(
            istio["properties"]["spec"]["properties"]["servers"].is_object(),
            "{istio}"
        );
        assert_eq!(
            gateway_api["properties"]["apiVersion"]["enum"][0], "gateway.networking.k8s.io/v1",
            "{gateway_api}"
        );
        assert!(
            gateway_api["properties"]["spec"]["properties"]["listeners"].is_object(),
            "{gateway_api}"
        );
    }

    #[test]
    fn a_kind_without_a_schema_keeps_an_open_spec() {
        let registry = KindRegistry::new();
        registry
            .register_schema(pilot_model::KindSchema::new(
                "Widget",
                "widgets",
                "example.com",
                "v1",
                |_, _| {},
            ))
            .unwrap();
        let document = document(&registry, &ApiOptions::default());
        let spec = &document["components"]["schemas"]["Widget"]["properties"]["spec"];
        assert_eq!(spec["type"], "object");
        assert!(spec.get("properties").is_none(), "{spec}");
        assert!(
            document["paths"]
                .get("/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
                .is_some()
        );
    }

    #[test]
    fn watch_is_an_ndjson_stream_of_watch_events() {
        let document = document(&pilot_api::istio::registry(), &ApiOptions::default());
        let list = &document["paths"]["/apis/config.istio.io/v1alpha2/egressrules"]["get"];
        let ok = &list["responses"]["200"]["content"];
        assert_eq!(
            ok["application/x-ndjson"]["schema"]["$ref"],
            "#/components/schemas/EgressRuleWatchEvent"
        );
        assert_eq!(
            ok["application/json"]["schema"]["$ref"],
            "#/components/schemas/EgressRuleList"
        );
        let event = &document["components"]["schemas"]["EgressRuleWatchEvent"];
        assert_eq!(
            event["properties"]["type"]["enum"],
            json!(["ADDED", "MODIFIED", "DELETED", "ERROR"])
        );
    }

    #[test]
    fn every_reference_resolves() {
        let document = document(&pilot_api::istio::registry(), &options(true));
        fn walk(value: &Value, found: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(reference)) = map.get("$ref") {
                        found.push(reference.clone());
                    }
                    map.values().for_each(|v| walk(v, found));
                }
                Value::Array(items) => items.iter().for_each(|v| walk(v, found)),
                _ => {}
            }
        }
        let mut references = Vec::new();
        walk(&document, &mut references);
        assert!(!references.is_empty());
        for reference in references {
            let pointer = reference.trim_start_matches('#');
            assert!(
                document.pointer(pointer).is_some(),
                "{reference} does not resolve"
            );
        }
    }
}
