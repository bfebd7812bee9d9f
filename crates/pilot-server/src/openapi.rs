//! The OpenAPI 3 document served at `/openapi.json`, generated from the
//! registered kinds and describing exactly the routes [`crate::router`]
//! serves.

use pilot_model::KindRegistry;
use serde_json::{Value, json};

/// The document for the kinds in `registry`.
pub fn document(registry: &KindRegistry) -> Value {
    let mut paths = serde_json::Map::new();
    let status = json!({"$ref": "#/components/schemas/Status"});
    let error = |description: &str| json!({"description": description, "content": {"application/json": {"schema": status}}});
    for kind in registry.kinds() {
        let Some(schema) = registry.get(&kind) else {
            continue;
        };
        let base = format!("/apis/{}/{}", schema.group, schema.version);
        let object = json!({"$ref": "#/components/schemas/Object"});
        let list = json!({"$ref": "#/components/schemas/List"});
        let ok = |description: &str, schema: &Value| json!({"description": description, "content": {"application/json": {"schema": schema}}});
        let list_params = json!([
            {"name": "labelSelector", "in": "query", "schema": {"type": "string"}, "description": "e.g. app=reviews,version!=v1"},
            {"name": "watch", "in": "query", "schema": {"type": "boolean"}, "description": "stream events as newline-delimited JSON"},
            {"name": "resourceVersion", "in": "query", "schema": {"type": "string"}, "description": "with watch: the changes after this version"},
        ]);
        let list_op = |summary: String| {
            json!({
                "summary": summary,
                "parameters": list_params,
                "responses": {
                    "200": {
                        "description": "the list, or with watch=true a stream of {type, object} lines",
                        "content": {
                            "application/json": {"schema": list},
                            "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/WatchEvent"}},
                        },
                    },
                    "400": error("bad query"),
                    "401": error("no valid token"),
                    "410": error("resourceVersion too old; list again"),
                },
            })
        };
        let body = json!({"required": true, "content": {"application/json": {"schema": object}}});
        let namespace =
            json!({"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}});
        let name = json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}});
        let write_errors = |mut responses: serde_json::Map<String, Value>| {
            for (code, description) in [
                (
                    "400",
                    "malformed body, or it names another kind, namespace or name than the URL",
                ),
                ("401", "no valid token"),
                ("403", "read-only token"),
                (
                    "409",
                    "already exists, or stale resourceVersion (details.currentResourceVersion)",
                ),
                ("413", "body too large"),
                ("415", "body is not application/json"),
                (
                    "422",
                    "invalid object; details.causes lists every field error with its path",
                ),
            ] {
                responses.insert(code.into(), error(description));
            }
            Value::Object(responses)
        };
        paths.insert(
            format!("{base}/{}", schema.plural),
            json!({"get": list_op(format!("List or watch {} in all namespaces", schema.plural))}),
        );
        let mut created = serde_json::Map::new();
        created.insert("201".into(), ok("created", &object));
        paths.insert(
            format!("{base}/namespaces/{{namespace}}/{}", schema.plural),
            json!({
                "parameters": [namespace],
                "get": list_op(format!("List or watch {} in a namespace", schema.plural)),
                "post": {"summary": format!("Create a {}", schema.kind), "requestBody": body, "responses": write_errors(created)},
            }),
        );
        let mut replaced = serde_json::Map::new();
        replaced.insert("200".into(), ok("replaced", &object));
        replaced.insert("404".into(), error("not found"));
        paths.insert(
            format!("{base}/namespaces/{{namespace}}/{}/{{name}}", schema.plural),
            json!({
                "parameters": [namespace, name],
                "get": {"summary": format!("Read a {}", schema.kind), "responses": {"200": ok("the object", &object), "401": error("no valid token"), "404": error("not found")}},
                "put": {"summary": format!("Replace a {}; metadata.resourceVersion must be current", schema.kind), "requestBody": body, "responses": write_errors(replaced)},
                "delete": {
                    "summary": format!("Delete a {}", schema.kind),
                    "parameters": [{"name": "resourceVersion", "in": "query", "schema": {"type": "string"}, "description": "delete only at this version"}],
                    "responses": {"200": error("deleted (a Success Status)"), "401": error("no valid token"), "403": error("read-only token"), "404": error("not found"), "409": error("stale resourceVersion")},
                },
            }),
        );
    }
    let text = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}});
    paths.insert(
        "/healthz".into(),
        json!({"get": {"summary": "Liveness", "responses": {"200": text("alive")}}}),
    );
    paths.insert(
        "/readyz".into(),
        json!({"get": {"summary": "Readiness: every cache has synced", "responses": {"200": text("ready"), "503": text("not ready")}}}),
    );
    paths.insert(
        "/metrics".into(),
        json!({"get": {"summary": "Prometheus metrics", "responses": {"200": text("metrics"), "401": error("no valid token")}}}),
    );
    paths.insert(
        "/debug/proxy-status".into(),
        json!({"get": {"summary": "Per connected proxy and xDS type: versions sent and ACKed, last NACK, state", "responses": {"200": {"description": "status", "content": {"application/json": {"schema": {"type": "object"}}}}, "401": error("no valid token")}}}),
    );
    paths.insert(
        "/openapi.json".into(),
        json!({"get": {"summary": "This document", "responses": {"200": {"description": "OpenAPI 3", "content": {"application/json": {"schema": {"type": "object"}}}}, "401": error("no valid token")}}}),
    );
    json!({
        "openapi": "3.0.3",
        "info": {"title": "pilot configuration API", "version": env!("CARGO_PKG_VERSION")},
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Object": {
                    "type": "object",
                    "required": ["apiVersion", "kind", "metadata", "spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {
                            "type": "object",
                            "required": ["name"],
                            "properties": {
                                "name": {"type": "string"},
                                "namespace": {"type": "string"},
                                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                "resourceVersion": {"type": "string"},
                                "creationTimestamp": {"type": "string", "format": "date-time"},
                            },
                        },
                        "spec": {"type": "object"},
                    },
                },
                "List": {
                    "type": "object",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
                        "items": {"type": "array", "items": {"$ref": "#/components/schemas/Object"}},
                    },
                },
                "WatchEvent": {
                    "type": "object",
                    "properties": {
                        "type": {"type": "string", "enum": ["ADDED", "MODIFIED", "DELETED", "ERROR"]},
                        "object": {"type": "object"},
                    },
                },
                "Status": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string"},
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
                                    "field": {"type": "string"}, "message": {"type": "string"},
                                }}},
                            },
                        },
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": paths,
    })
}
